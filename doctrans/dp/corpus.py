"""``doctrans annotate-dp``: DP-annotate a prepared parallel corpus (thesis §4.3.1).

Stages (each skipped when its output already exists, so an interrupted run resumes):

1. **Align** every split of the prepared dataset (``{split}.tok.{zh,en}``: segmented and
   tokenized, *not* BPE) in one eflomal run — dev/test are aligned together with the training
   data, as small sets align poorly on their own — and symmetrise (``intersect`` by default,
   the thesis' high-precision choice): ``{split}.align.fwd``, ``{split}.align.rev``,
   ``{split}.align``.
2. **LM**: a modified-Kneser-Ney n-gram LM (KenLM ``lmplz``, default order 5) on the Chinese
   side of the training split: ``lm.zh.o{N}.bin``.
3. **Search** (``annotate.find_dps``) on every sentence pair, in parallel worker processes:
   ``{split}.dp.zh`` (x̂_DP: pronouns inserted as single tokens), ``{split}.dpp.zh`` (x̂_DPP:
   ``#DP#`` at each insertion), ``{split}.dplabel`` (for each source token and a final
   ``</s>``: the pronoun dropped immediately before it, or ``N``), ``{split}.docs`` (copied:
   same document ids and positions), all line-aligned with the prepared split.
4. **Report**: ``stats.json``/``stats.md`` (English pronouns, how many dropped, by pronoun and
   by type), and for dev/test of TVsub ``agreement.json`` — position and pronoun P/R/F against
   the hand-annotated oracle (``*.oracle-dp.seg.zh``, thesis Table 4.8), scored by
   ``agreement`` (character offsets, so jieba vs the corpus' segmentation does not
   matter). ``--explain N`` adds ``explain/{split}-{line}.png`` and ``.txt`` for N sampled
   sentences with at least one DP.

**Context-only lines.** Training lines marked ``0`` in ``PREPARED/train.target`` (filtered by
``doctrans preprocess``, kept only as document context) are not annotated: every output stays
line-aligned with ``PREPARED/train.tok.zh``, and on those lines ``.dp.zh``/``.dpp.zh`` are the
source as it is, ``.dplabel`` is all ``N``, the ``.align*`` lines are empty. Alignment, the LM,
the search, the statistics and ``vocab.{dp,dpp}.zh.txt`` use the target lines only, exactly the
lines a dataset without ``train.target`` (format 1) held, so their results do not change.

``meta.json`` is written last; its presence marks a complete annotation.
"""
from __future__ import annotations

import dataclasses
import json
import logging
import multiprocessing as mp
import os
import random
import shutil
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from tqdm import tqdm

from doctrans.dp import align as align_mod
from doctrans.dp.annotate import (
    DPP_TOKEN, EOS, MODES, NO_DP_LABEL, DPStats, explain_text, find_dps, parse_alignment)
from doctrans.utils import bars_off
from doctrans.utils.io import atomic_write_lines, atomic_write_text, read_lines

logger = logging.getLogger(__name__)

SPLITS = ("train", "dev", "test")


@dataclass
class AnnotateConfig:
    """Settings of ``annotate_corpus`` (the ``doctrans annotate-dp`` options)."""

    prepared: Path                       # prepared dataset (doctrans preprocess output)
    out: Path | None = None              # default: PREPARED/dp
    splits: tuple[str, ...] = SPLITS     # those present are annotated; train is required for the LM
    symmetrize: str = "intersect"        # align.SYMMETRIZATIONS
    mode: str = "strict_unaligned"       # annotate.MODES
    link_inserted: bool = True           # link the English pronoun to its DP (anchors later DPs)
    overt_match: bool = True             # find_dps overt_match: unlinked pronoun + overt Chinese one
    lm_order: int = 5
    lm_memory: str = "2G"                # lmplz -S
    lm: Path | None = None               # an existing KenLM model instead of estimating one
    align_samplers: int = 2              # eflomal parallel samplers (threads)
    align_rel_iterations: float = 1.0
    workers: int = 2                     # search processes (1 = in this process)
    chunk_lines: int = 5000
    explain: int = 0                     # sentences to explain (PNG + text)
    explain_split: str = "train"
    seed: int = 1
    oracle_dir: Path | None = None       # TVsub root for the oracles; default from meta.json

    def __post_init__(self):
        self.prepared = Path(self.prepared)
        self.out = Path(self.out) if self.out else self.prepared / "dp"
        if self.symmetrize not in align_mod.SYMMETRIZATIONS:
            raise ValueError(f"unknown symmetrization {self.symmetrize!r}; "
                             f"expected one of {align_mod.SYMMETRIZATIONS}")
        if self.mode not in MODES:
            raise ValueError(f"unknown mode {self.mode!r}; expected one of {MODES}")
        if self.lm_order < 2:
            raise ValueError(f"lm_order must be at least 2, got {self.lm_order}")


# --- corpus statistics (counts: annotate.DPStats) ----------------------------------------------


def render_stats(stats: dict[str, dict]) -> str:
    """Markdown tables of ``stats.json``: per split totals, then by type and by pronoun."""
    out = ["| split | sentences | with DP | EN pronouns | dropped | dropped % | label conflicts |",
           "| --- | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for split, s in stats.items():
        out.append(f"| {split} | {s['sentences']:,} | {s['sentences_with_dp']:,} | {s['pronouns']:,} | "
                   f"{s['dropped']:,} | {s['dropped_pct']:.1f} | {s['label_conflicts']:,} |")
    for split, s in stats.items():
        out += ["", f"**{split}** by type and by pronoun (English form: pronouns, dropped, %)", "",
                "| type | pronouns | dropped | % |", "| --- | ---: | ---: | ---: |"]
        out += [f"| {t} | {r['pronouns']:,} | {r['dropped']:,} | {r['dropped_pct']:.1f} |"
                for t, r in s["by_type"].items()]
        out += ["", "| pronoun | pronouns | dropped | % |", "| --- | ---: | ---: | ---: |"]
        rows = sorted(s["by_pronoun"].items(), key=lambda kv: -kv[1]["pronouns"])
        out += [f"| {f} | {r['pronouns']:,} | {r['dropped']:,} | {r['dropped_pct']:.1f} |" for f, r in rows]
    return "\n".join(out) + "\n"


# --- the search, in worker processes -----------------------------------------------------------

_WORKER: dict = {}


def _init_worker(lm_path: str, options: dict, parent: int | None = None) -> None:
    from doctrans.dp.ngram_lm import KenLMScorer
    from doctrans.utils.children import die_with_parent

    if parent is not None:
        die_with_parent(parent)                  # a killed annotate-dp leaves no search process
    _WORKER.update(lm=KenLMScorer(lm_path), options=options)


def _annotate_chunk(job: tuple[list[int], list[str], list[str], list[str], str]) -> tuple[list[int], list, DPStats]:
    """Annotate the lines ``numbers`` (0-based) of one split: returns (numbers, [(dp, dpp, labels)], stats)."""
    numbers, srcs, tgts, aligns, split = job
    lm, options = _WORKER["lm"], _WORKER["options"]
    rows, stats = [], DPStats()
    for k, (s, t, a) in enumerate(zip(srcs, tgts, aligns)):
        src, tgt = s.split(), t.split()
        try:
            links = parse_alignment(a)
            res = find_dps(src, tgt, links, lm, **options)
        except ValueError as e:
            raise ValueError(f"{split} line {numbers[k] + 1}: {e}") from None
        rows.append((" ".join(res.dp_tokens), " ".join(res.dpp_tokens), " ".join(res.labels)))
        stats.add(res, tgt)
    return numbers, rows, stats


def _search_options(cfg: AnnotateConfig) -> dict:
    return {"mode": cfg.mode, "link_inserted": cfg.link_inserted, "overt_match": cfg.overt_match}


def _chunks(n: int, size: int) -> list[tuple[int, int]]:
    return [(i, min(i + size, n)) for i in range(0, n, size)]


# --- stages ------------------------------------------------------------------------------------


def _split_files(cfg: AnnotateConfig, meta: dict) -> dict[str, tuple[Path, Path]]:
    src, tgt = meta.get("src", "zh"), meta.get("tgt", "en")
    found = {}
    for split in cfg.splits:
        s, t = cfg.prepared / f"{split}.tok.{src}", cfg.prepared / f"{split}.tok.{tgt}"
        if s.is_file() and t.is_file():
            found[split] = (s, t)
        elif split == "train":
            raise FileNotFoundError(f"{s} or {t} missing: annotate-dp needs the prepared training split")
        else:
            logger.warning("split %s not in %s: skipped", split, cfg.prepared)
    return found


def target_lines(prepared: Path, split: str, n_lines: int) -> list[int]:
    """0-based numbers of the lines to annotate: the ``1`` lines of ``PREPARED/{split}.target``
    (written for train by ``doctrans preprocess``), or all ``n_lines`` lines without one."""
    path = Path(prepared) / f"{split}.target"
    if not path.is_file():
        return list(range(n_lines))
    flags = read_lines(path)
    if len(flags) != n_lines:
        raise ValueError(f"{path} has {len(flags):,} lines, {split}.tok.* have {n_lines:,}: not line-aligned")
    return [k for k, f in enumerate(flags) if f == "1"]


def _expand(lines: Sequence[str], numbers: Sequence[int], n_lines: int, fill: str = "") -> list[str]:
    """``lines[j]`` placed at line ``numbers[j]`` of ``n_lines``, ``fill`` elsewhere."""
    out = [fill] * n_lines
    for k, line in zip(numbers, lines):
        out[k] = line
    return out


def _read_pair(src: Path, tgt: Path) -> tuple[list[str], list[str]]:
    s, t = read_lines(src), read_lines(tgt)
    if len(s) != len(t):
        raise ValueError(f"{src} has {len(s):,} lines but {tgt} has {len(t):,}: not line-aligned")
    return s, t


def align_splits(cfg: AnnotateConfig, files: dict[str, tuple[Path, Path]]) -> None:
    """Stage 1: one eflomal run over all splits, then per split fwd/rev/symmetrised files."""
    out = cfg.out
    if all((out / f"{sp}.align.fwd").is_file() and (out / f"{sp}.align.rev").is_file() for sp in files):
        logger.info("alignment: reusing %s/*.align.{fwd,rev}", out)
    else:
        sizes, all_src, all_tgt = {}, out / ".all.tok.src", out / ".all.tok.tgt"
        numbers, n_lines = {}, {}
        with open(all_src, "w", encoding="utf-8") as fs, open(all_tgt, "w", encoding="utf-8") as ft:
            for sp, (s, t) in files.items():
                src_lines, tgt_lines = _read_pair(s, t)
                n_lines[sp], numbers[sp] = len(src_lines), target_lines(cfg.prepared, sp, len(src_lines))
                sizes[sp] = len(numbers[sp])
                fs.writelines(src_lines[k] + "\n" for k in numbers[sp])
                ft.writelines(tgt_lines[k] + "\n" for k in numbers[sp])
        total = sum(sizes.values())
        logger.info("alignment: eflomal on %s sentence pairs (%s)", f"{total:,}",
                    ", ".join(f"{k} {v:,}" for k, v in sizes.items()))
        t0 = time.time()
        fwd_all, rev_all = out / ".all.align.fwd", out / ".all.align.rev"
        align_mod.eflomal_align(all_src, all_tgt, fwd_all, rev_all, n_samplers=cfg.align_samplers,
                                rel_iterations=cfg.align_rel_iterations)
        logger.info("alignment: eflomal took %.1f s", time.time() - t0)
        fwd, rev = read_lines(fwd_all), read_lines(rev_all)
        if len(fwd) != total or len(rev) != total:
            raise RuntimeError(f"eflomal wrote {len(fwd)}/{len(rev)} lines for {total} sentence pairs")
        pos = 0
        for sp, n in sizes.items():     # context-only lines: empty alignments
            atomic_write_lines(out / f"{sp}.align.fwd", _expand(fwd[pos:pos + n], numbers[sp], n_lines[sp]))
            atomic_write_lines(out / f"{sp}.align.rev", _expand(rev[pos:pos + n], numbers[sp], n_lines[sp]))
            pos += n
        for p in (all_src, all_tgt, fwd_all, rev_all):
            p.unlink()
    for sp in files:
        fwd, rev = read_lines(out / f"{sp}.align.fwd"), read_lines(out / f"{sp}.align.rev")
        atomic_write_lines(out / f"{sp}.align", align_mod.symmetrize_lines(fwd, rev, cfg.symmetrize))


def build_lm(cfg: AnnotateConfig, train_src: Path) -> Path:
    """Stage 2: the Chinese n-gram LM (or ``cfg.lm`` if given)."""
    from doctrans.dp.ngram_lm import estimate_lm

    if cfg.lm is not None:
        return Path(cfg.lm)
    path = cfg.out / f"lm.zh.o{cfg.lm_order}.bin"
    if path.is_file():
        logger.info("LM: reusing %s", path)
        return path
    t0 = time.time()
    lines = read_lines(train_src)
    numbers = target_lines(cfg.prepared, "train", len(lines))
    text = train_src
    if len(numbers) < len(lines):                       # the target lines only
        text = cfg.out / ".lm.train.zh"
        atomic_write_lines(text, [lines[k] for k in numbers])
    logger.info("LM: lmplz order %d on %s (%s lines)", cfg.lm_order, train_src, f"{len(numbers):,}")
    estimate_lm(text, path, order=cfg.lm_order, memory=cfg.lm_memory)
    if text != train_src:
        text.unlink()
    logger.info("LM: %s (%.1f MB) in %.1f s", path, path.stat().st_size / 1e6, time.time() - t0)
    return path


def annotate_split(cfg: AnnotateConfig, split: str, src: Path, tgt: Path, lm_path: Path) -> DPStats:
    """Stage 3 for one split: write dp/dpp/dplabel files, return the statistics."""
    src_lines, tgt_lines = _read_pair(src, tgt)
    aligns = read_lines(cfg.out / f"{split}.align")
    if len(aligns) != len(src_lines):
        raise ValueError(f"{cfg.out / f'{split}.align'} has {len(aligns):,} lines, "
                         f"{src} has {len(src_lines):,}: delete the .align files and rerun")
    numbers = target_lines(cfg.prepared, split, len(src_lines))
    jobs = [(nums, [src_lines[k] for k in nums], [tgt_lines[k] for k in nums], [aligns[k] for k in nums], split)
            for nums in (numbers[a:b] for a, b in _chunks(len(numbers), cfg.chunk_lines))]
    dp, dpp = list(src_lines), list(src_lines)          # context-only lines: the source as it is,
    lab = [" ".join([NO_DP_LABEL] * (len(x.split()) + 1)) for x in src_lines]  # no DP
    stats = DPStats()
    bar = tqdm(total=len(numbers), desc=f"annotate-dp {split}", unit="sent", unit_scale=True, mininterval=2,
               disable=bars_off())
    init_args = (str(lm_path), _search_options(cfg))
    if cfg.workers <= 1 or len(jobs) == 1:
        _init_worker(*init_args)
        results = map(_annotate_chunk, jobs)
        pool = None
    else:
        pool = mp.get_context("fork").Pool(cfg.workers, initializer=_init_worker,
                                           initargs=(*init_args, os.getpid()))
        results = pool.imap_unordered(_annotate_chunk, jobs)
    try:
        for nums, rows, part in results:
            for k, (a, b, c) in zip(nums, rows):
                dp[k], dpp[k], lab[k] = a, b, c
            stats.merge(part)
            bar.update(len(rows))
    finally:
        bar.close()
        if pool is not None:
            pool.close()
            pool.join()
    atomic_write_lines(cfg.out / f"{split}.dp.zh", dp)
    atomic_write_lines(cfg.out / f"{split}.dpp.zh", dpp)
    atomic_write_lines(cfg.out / f"{split}.dplabel", lab)
    docs = cfg.prepared / f"{split}.docs"
    if docs.is_file():
        shutil.copyfile(docs, cfg.out / f"{split}.docs")
    return stats


def write_bpe_variants(cfg: AnnotateConfig, splits: Sequence[str]) -> None:
    """``{split}.dp.bpe.zh`` / ``{split}.dpp.bpe.zh``: the +DP / +DPP sources BPE-encoded with
    the prepared dataset's codes, inserted pronouns and ``#DP#`` kept whole; and
    ``vocab.dp.zh.txt`` / ``vocab.dpp.zh.txt`` (BPE unit counts of the training split), the
    source vocabularies of the +DP / +DPP NMT configs (pipelines/dp/nmt_*.yaml)."""
    bpe_variants(cfg.prepared, cfg.out, splits)


SRC_BPE_SUFFIX = "dp.srcbpe.zh"


def bpe_variants(prepared: str | Path, out: str | Path, splits: Sequence[str]) -> None:
    """``write_bpe_variants`` for ``OUT/{split}.{dp,dpp}.zh`` of any DP-completed corpus of the
    prepared dataset ``prepared`` (``annotate-dp``, ``annotate-dp jackknife``); also
    ``OUT/{split}.dp.srcbpe.zh`` (``source_bpe``)."""
    from doctrans.dp.pronouns import CHINESE_PRONOUNS
    from doctrans.data.text import TextProcessor

    prepared, out = Path(prepared), Path(out)
    source_bpe(prepared, out, out, splits)
    proc = TextProcessor.from_prepared(prepared, "zh")
    protect = frozenset(CHINESE_PRONOUNS) | {DPP_TOKEN}
    for variant in ("dp", "dpp"):
        for split in splits:
            lines = read_lines(out / f"{split}.{variant}.zh")
            bpe = proc.apply_bpe(lines, protect=protect)
            atomic_write_lines(out / f"{split}.{variant}.bpe.zh", bpe)
            if split == "train":               # BPE units of the target lines
                numbers = target_lines(prepared, split, len(bpe))
                counts = Counter(t for k in numbers for t in bpe[k].split())
                atomic_write_lines(out / f"vocab.{variant}.zh.txt",
                                   [f"{t}\t{c}" for t, c in counts.most_common()])


def source_bpe(prepared: str | Path, dp_dir: str | Path, out: str | Path, splits: Sequence[str]) -> list[Path]:
    """``OUT/{split}.dp.srcbpe.zh`` (and ``.dpp.srcbpe.zh`` where ``{split}.dpp.zh`` exists):
    ``DP_DIR/{split}.dp.zh`` BPE-encoded exactly as the prepared source (no token kept whole; ``#DP#``
    becomes a few BPE units), so every unit is in ``PREPARED/vocab.zh.txt`` — the +DPs source
    of a model continued from a stage-1 checkpoint of ``prepared`` (``train.init_from`` needs its
    vocabulary; the pronoun-protected ``.dp.bpe.zh`` would turn 我的, 你的 … into <unk> there).
    Returns the paths written."""
    from doctrans.data.text import TextProcessor

    proc = TextProcessor.from_prepared(prepared, "zh")
    Path(out).mkdir(parents=True, exist_ok=True)
    written = []
    for split in splits:
        for variant in ("dp", "dpp"):
            src = Path(dp_dir) / f"{split}.{variant}.zh"
            if variant == "dp" or src.is_file():
                path = Path(out) / f"{split}.{variant}.srcbpe.zh"
                atomic_write_lines(path, proc.apply_bpe(read_lines(src)))
                written.append(path)
    return written


def oracle_paths(meta: dict, split: str, oracle_dir: str | Path | None = None) -> tuple[Path, Path] | None:
    """(oracle base = *.seg.zh, oracle DP file) of a TVsub dev/test split, if both exist.

    ``oracle_dir`` is a TVsub root (``ROOT/dev/dev.oracle-dp.seg.zh``); without it the split's
    prefix comes from the prepared dataset's ``meta`` (``config.{split}_prefix``)."""
    if oracle_dir:
        prefix = Path(oracle_dir) / split / split
    else:
        p = meta.get("config", {}).get(f"{split}_prefix")
        if not p:
            return None
        prefix = Path(p)
    base, oracle = Path(f"{prefix}.seg.zh"), Path(f"{prefix}.oracle-dp.seg.zh")
    return (base, oracle) if base.is_file() and oracle.is_file() else None


def agreement(cfg: AnnotateConfig, meta: dict, splits: Sequence[str]) -> dict:
    """Stage 4: agreement of our dev/test annotation with the hand oracle (Table 4.8)."""
    from doctrans.dp.agreement import dp_agreement_files

    src = meta.get("src", "zh")
    out = {}
    for split in splits:
        paths = oracle_paths(meta, split, cfg.oracle_dir)
        if paths is None:
            continue
        oracle_base, oracle = paths
        res = dp_agreement_files(cfg.prepared / f"{split}.tok.{src}", cfg.out / f"{split}.dp.zh",
                                 oracle_base, oracle)
        res["oracle"] = str(oracle)
        out[split] = res
    return out


def render_agreement_table(agr: dict) -> str:
    rows = ["| split | position P | R | F | pronoun P | R | F | ours | oracle | tag acc. det. | tag acc. pred. |",
            "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for split, r in agr.items():
        p, w = r["position"], r["pronoun"]
        rows.append(f"| {split} | {p['precision']:.3f} | {p['recall']:.3f} | {p['f1']:.3f} | "
                    f"{w['precision']:.3f} | {w['recall']:.3f} | {w['f1']:.3f} | "
                    f"{r['sys_dps']} | {r['oracle_dps']} | {r['tag_accuracy']['detection']:.3f} | "
                    f"{r['tag_accuracy']['prediction']:.3f} |")
    return "\n".join(rows) + "\n"


def explain(cfg: AnnotateConfig, split: str, src: Path, tgt: Path, lm_path: Path) -> list[Path]:
    """``--explain``: PNG + text trace for ``cfg.explain`` sampled sentences with a DP."""
    from doctrans.dp.explain import plot_annotation
    from doctrans.dp.ngram_lm import KenLMScorer

    src_lines, tgt_lines = _read_pair(src, tgt)
    aligns = read_lines(cfg.out / f"{split}.align")
    labels = read_lines(cfg.out / f"{split}.dplabel")
    with_dp = [i for i, lab in enumerate(labels) if any(x != "N" for x in lab.split())]
    rng = random.Random(cfg.seed)
    picked = sorted(rng.sample(with_dp, min(cfg.explain, len(with_dp))))
    lm = KenLMScorer(lm_path)
    out_dir = cfg.out / "explain"
    out_dir.mkdir(exist_ok=True)
    written = []
    for i in picked:
        s, t, links = src_lines[i].split(), tgt_lines[i].split(), parse_alignment(aligns[i])
        res = find_dps(s, t, links, lm, **_search_options(cfg))
        stem = out_dir / f"{split}-{i + 1}"
        atomic_write_text(stem.with_suffix(".txt"), f"{split} line {i + 1}\n" + explain_text(res, s, t, links))
        plot_annotation(res, s, t, links, stem.with_suffix(".png"), title=f"{split} line {i + 1}")
        written.append(stem.with_suffix(".png"))
    return written


def annotate_corpus(cfg: AnnotateConfig) -> dict:
    """Run all stages; returns ``{"stats": …, "agreement": …, "out": …}`` (see module doc).

    Raises ``FileNotFoundError`` if the prepared dataset or its training split is missing,
    ``ValueError`` (naming file and line) for misaligned or malformed input, and
    ``ngram_lm.KenLMToolNotFound`` if lmplz is not installed.
    """
    meta_path = cfg.prepared / "meta.json"
    if not meta_path.is_file():
        raise FileNotFoundError(f"{meta_path} missing: {cfg.prepared} is not a prepared dataset "
                                "(run `doctrans preprocess` first)")
    meta = json.loads(meta_path.read_text(encoding="utf-8"))
    cfg.out.mkdir(parents=True, exist_ok=True)
    (cfg.out / "meta.json").unlink(missing_ok=True)       # incomplete until rewritten
    files = _split_files(cfg, meta)
    timings = {}
    t0 = time.time()
    align_splits(cfg, files)
    timings["align_s"] = round(time.time() - t0, 1)
    t0 = time.time()
    lm_path = build_lm(cfg, files["train"][0])
    timings["lm_s"] = round(time.time() - t0, 1)
    stats = {}
    t0 = time.time()
    for split, (s, t) in files.items():
        stats[split] = annotate_split(cfg, split, s, t, lm_path).to_dict()
    timings["search_s"] = round(time.time() - t0, 1)
    t0 = time.time()
    write_bpe_variants(cfg, list(files))
    timings["bpe_s"] = round(time.time() - t0, 1)
    atomic_write_text(cfg.out / "stats.json", json.dumps(stats, ensure_ascii=False, indent=1) + "\n")
    atomic_write_text(cfg.out / "stats.md", render_stats(stats))
    agr = agreement(cfg, meta, [sp for sp in files if sp != "train"])
    if agr:
        atomic_write_text(cfg.out / "agreement.json", json.dumps(agr, ensure_ascii=False, indent=1) + "\n")
        atomic_write_text(cfg.out / "agreement.md", render_agreement_table(agr))
    pngs = []
    if cfg.explain > 0 and cfg.explain_split in files:
        pngs = explain(cfg, cfg.explain_split, *files[cfg.explain_split], lm_path)
    settings = {k: (str(v) if isinstance(v, Path) else v) for k, v in dataclasses.asdict(cfg).items()}
    atomic_write_text(cfg.out / "meta.json", json.dumps(
        {"version": 1, "config": settings, "lm": str(lm_path), "splits": list(files), "timings": timings,
         "outputs": ["{split}.dp.zh", "{split}.dpp.zh", "{split}.dplabel", "{split}.align",
                     "{split}.docs", "{split}.dp.bpe.zh", "{split}.dpp.bpe.zh", "vocab.dp.zh.txt",
                     "vocab.dpp.zh.txt", "stats.json"], "labels_end_with": EOS,
         "context_only_lines": "PREPARED/{split}.target 0 lines: not annotated (dp/dpp = the source, "
                               "labels all N, empty alignments), not in the statistics"},
        ensure_ascii=False, indent=1) + "\n")
    return {"out": cfg.out, "stats": stats, "agreement": agr, "explain": pngs, "timings": timings}
