"""``doctrans preprocess``: raw document-level corpus → prepared dataset directory.

Output layout (the trainer and translator depend on it)::

    OUT/meta.json                  written last; its presence means the dataset is complete
    OUT/bpe.codes.{src,tgt}        subword-nmt codes (or OUT/bpe.codes.joint with joint_bpe)
    OUT/vocab.{src,tgt}.txt        "token<TAB>count", train split, BPE units, most frequent first
    OUT/{split}.tok.{src,tgt}      tokenized/segmented, one sentence per line
    OUT/{split}.bpe.{src,tgt}      after BPE
    OUT/{split}.docs               "doc_id<TAB>position", line-aligned with the text files
    OUT/train.target               "1" (a training target) or "0" (filtered: context only) per line
    OUT/recaser.{tgt}.json         with lowercasing (the default) and an English target: the table that
                                   restores case in translations (``data/casing.py``), learnt from the
                                   cased tokenized train targets (the training lines, before the filter)

Splits are ``train`` (required), ``dev`` and ``test`` (optional). Every split keeps every
sentence of every document, in document order, so line k+1 is the next sentence of line k's
document and positions go 0, 1, 2… (document context is never shifted). Only ``train`` is
*filtered* (empty side, more than ``max_len`` tokens on a side, token-count ratio above
``max_len_ratio``; counted after tokenization, before BPE): a filtered line stays in every
train file (an empty side stays an empty line) and is marked ``0`` in ``train.target``, so it
serves as document context but is never a training target. Sentence-level training reads only
the ``1`` lines (``batching.load_parallel(target_path=…)``), exactly the pairs the filter kept.
Datasets of format version 1 (before ``train.target``) held only the kept lines.

BPE codes and vocabularies are learnt on the target lines only (an evenly spaced sample of at
most ``bpe_sample_lines`` of them, 0 = all): the learning cost grows with the number of
distinct words, and 500k of TVsub's 2.15M lines already give the frequent pairs that 8000
merges use. Codes are then applied to every line.

Every file is written to a temporary name in OUT and moved into place with ``os.replace``; a
``meta.json`` left from an earlier run is deleted first. Tokenization and BPE application run
in chunks on ``workers`` processes.
"""
from __future__ import annotations

import contextlib
import io
import json
import logging
import multiprocessing
import os
import shutil
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path

from tqdm import tqdm

from doctrans.data.casing import Recaser
from doctrans.data.corpus import Sentence, read_doc_dir, read_sgml_aligned
from doctrans.data.heldout import TVSUB_HELD_OUT
from doctrans.data.text import LANGUAGES, TextProcessor, codes_path, recaser_path
from doctrans.utils import bars_off
from doctrans.utils.io import atomic_write_lines, atomic_write_text, remove_stale_temps, temp_name_prefix

logger = logging.getLogger(__name__)

FORMAT_VERSION = 2                 # 2: filtered train lines kept, marked in train.target
TVSUB_CLONE = "git clone https://github.com/longyuewangdcu/tvsub"


def _default_workers() -> int:
    """CPUs this process may use (``os.cpu_count()`` where affinity is unknown)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:
        return os.cpu_count() or 1


@dataclass(frozen=True)
class PreprocessConfig:
    """Where the corpus is, where the prepared dataset goes, and how text is processed."""

    out: str                           # prepared dataset directory (created)
    train_dir: str                     # directory of per-document pairs N.{src} / N.{tgt}
    train_docs: str = "0:300"          # "all", a count "300", or a slice "0:300" of sorted ids
    dev_prefix: str | None = None      # "{dev_prefix}.{src}" / "{dev_prefix}.{tgt}", raw text
    dev_sgm: str | None = None         # SGML whose <DOC> blocks give dev document boundaries
    test_prefix: str | None = None
    test_sgm: str | None = None
    src: str = "zh"
    tgt: str = "en"
    bpe_merges: int = 8000             # merge operations (per language, or joint)
    joint_bpe: bool = False            # one set of codes learnt on both sides
    bpe_sample_lines: int = 500_000    # learn BPE on at most this many train lines; 0 = all
    lowercase: bool = True             # lowercase both sides after tokenization
    recaser_min_count: int = 2         # lowercase + English target: learn recaser.en.json from the train
                                       # targets (words seen at least this often); 0 = no recaser
    max_len: int = 80                  # train only: max tokens per side (before BPE)
    max_len_ratio: float = 3.0         # train only: max longer/shorter token-count ratio
    workers: int = field(default_factory=_default_workers)  # processes
    chunk_lines: int = 5000            # lines per work item sent to a worker
    held_out: tuple[str, ...] = ()     # document ids never read into train (TVsub: data/heldout.py)

    def __post_init__(self) -> None:
        if self.src == self.tgt or {self.src, self.tgt} - set(LANGUAGES):
            raise ValueError(f"src/tgt must be two different languages of {LANGUAGES}, got {self.src}/{self.tgt}")
        for split in ("dev", "test"):
            if (getattr(self, f"{split}_prefix") is None) != (getattr(self, f"{split}_sgm") is None):
                raise ValueError(f"{split}_prefix and {split}_sgm must be given together")
        if self.recaser_min_count < 0:
            raise ValueError(f"recaser_min_count must be >= 0, got {self.recaser_min_count}")
        for name in ("bpe_merges", "max_len", "workers", "chunk_lines"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")
        if self.max_len_ratio < 1.0:
            raise ValueError(f"max_len_ratio must be >= 1.0, got {self.max_len_ratio}")
        if self.bpe_sample_lines < 0:
            raise ValueError(f"bpe_sample_lines must be >= 0, got {self.bpe_sample_lines}")

    @classmethod
    def from_dict(cls, d: dict) -> PreprocessConfig:
        """Build from a YAML/JSON mapping whose keys are the field names; unknown keys raise ValueError."""
        unknown = set(d) - {f.name for f in fields(cls)}
        if unknown:
            raise ValueError(f"unknown preprocess config keys: {', '.join(sorted(unknown))}")
        d = dict(d)
        if "held_out" in d:
            d["held_out"] = tuple(str(x) for x in d["held_out"])
        return cls(**d)


def _tvsub_layout(root: Path) -> dict[str, Path] | None:
    """TVsub paths under ``root``: this project's shared layout or a clone of the public repo."""
    shared = {
        "train_dir": root / "train",
        "dev_prefix": root / "dev" / "dev", "dev_sgm": root / "dev" / "dev.ref.sgm",
        "test_prefix": root / "test" / "test", "test_sgm": root / "test" / "test.ref.sgm",
    }
    clone = {
        "train_dir": root / "data" / "orignal" / "train" / "separated",
        "dev_prefix": root / "data" / "orignal" / "dev" / "dev.orignal",
        "dev_sgm": root / "data" / "processed" / "dev" / "dev_trg.sgm",
        "test_prefix": root / "data" / "orignal" / "test" / "test.orignal",
        "test_sgm": root / "data" / "processed" / "test" / "test_trg.sgm",
    }
    for layout in (shared, clone):
        if layout["train_dir"].is_dir() and layout["dev_sgm"].is_file():
            return layout
    return None


def tvsub_config(data_dir: str | Path, out: str | Path, **overrides) -> PreprocessConfig:
    """Config for TVsub at ``data_dir`` (train, dev and test paths filled in).

    ``data_dir`` is either the shared copy (``train/``, ``dev/dev.zh``, ``dev/dev.ref.sgm``…)
    or a clone of the public repository (``data/orignal/…``, ``data/processed/…``).
    ``overrides`` are PreprocessConfig fields. The held-out episodes of
    ``doctrans.data.heldout.TVSUB_HELD_OUT`` are kept out of train unless ``held_out`` is
    overridden. Raises FileNotFoundError, with the
    ``git clone`` command as the fix, when neither layout is found.
    """
    root = Path(data_dir)
    layout = _tvsub_layout(root)
    if layout is None:
        raise FileNotFoundError(
            f"TVsub corpus not found at {root} (expected train/ + dev/dev.ref.sgm, or a clone "
            f"of the public repository with data/orignal/). Fix: {TVSUB_CLONE} {root}"
        )
    paths = {k: str(v) for k, v in layout.items()}
    return PreprocessConfig(out=str(out), **{**paths, "held_out": TVSUB_HELD_OUT, **overrides})


# --- reading --------------------------------------------------------------------------------


@dataclass
class Split:
    """One split in columns: document id, position and text per side, line-aligned."""

    name: str
    source: str
    doc_ids: list[str] = field(default_factory=list)
    positions: list[int] = field(default_factory=list)
    src: list[str] = field(default_factory=list)
    tgt: list[str] = field(default_factory=list)

    def extend(self, sentences: Iterable[Sentence]) -> Split:
        for s in sentences:
            self.doc_ids.append(s.doc_id)
            self.positions.append(s.position)
            self.src.append(s.src)
            self.tgt.append(s.tgt)
        return self

    def subset(self, keep: list[int]) -> Split:
        pick = lambda xs: [xs[i] for i in keep]  # noqa: E731
        return Split(self.name, self.source, pick(self.doc_ids), pick(self.positions),
                     pick(self.src), pick(self.tgt))

    def n_documents(self) -> int:
        return len(set(self.doc_ids))


def read_splits(cfg: PreprocessConfig) -> list[Split]:
    """Raw train (selected documents) and, where configured, dev and test."""
    train_source = f"{cfg.train_dir} documents {cfg.train_docs}"
    held_out = set(cfg.held_out)
    if held_out:
        train_source += f" less {len(held_out)} held-out"
    splits = [Split("train", train_source).extend(
        s for s in read_doc_dir(cfg.train_dir, cfg.src, cfg.tgt, cfg.train_docs) if s.doc_id not in held_out)]
    if not splits[0].src:
        raise ValueError(f"no training documents left in {train_source}")
    for name in ("dev", "test"):
        prefix, sgm = getattr(cfg, f"{name}_prefix"), getattr(cfg, f"{name}_sgm")
        if prefix is not None:
            source = f"{prefix}.{{{cfg.src},{cfg.tgt}}} + {sgm}"
            splits.append(Split(name, source).extend(read_sgml_aligned(prefix, sgm, cfg.src, cfg.tgt)))
    for s in splits:
        logger.info("read %s: %d sentences in %d documents", s.name, len(s.src), s.n_documents())
    return splits


# --- parallel work --------------------------------------------------------------------------


def _tokenize_job(job: tuple[str, bool, list[str]]) -> list[str]:
    lang, lowercase, lines = job
    return TextProcessor(lang, lowercase).tokenize(lines)


def _bpe_job(job: tuple[str, str, list[str]]) -> list[str]:
    lang, codes, lines = job
    return TextProcessor(lang, bpe_codes=codes).apply_bpe(lines)


def _learn_bpe_job(job: tuple[dict[str, int], int]) -> tuple[str, str]:
    """Learn codes from a word → count table; returns (codes text, subword-nmt's messages)."""
    from subword_nmt.learn_bpe import learn_bpe

    counts, merges = job
    vocab = io.StringIO("".join(f"{w} {c}\n" for w, c in counts.items()))
    codes, messages = io.StringIO(), io.StringIO()
    with contextlib.redirect_stderr(messages):  # its own tqdm bar and "Stopping" notes
        learn_bpe(vocab, codes, merges, is_dict=True)
    return codes.getvalue(), messages.getvalue()


class Workers:
    """A process pool (or plain in-process calls when ``n == 1``) mapping jobs in order."""

    def __init__(self, n: int):
        self.n = n
        self._pool = multiprocessing.get_context().Pool(n) if n > 1 else None

    def imap(self, fn: Callable, jobs: Iterable) -> Iterator:
        return self._pool.imap(fn, jobs) if self._pool else map(fn, jobs)

    def __enter__(self) -> Workers:
        return self

    def __exit__(self, *exc) -> None:
        if self._pool is None:
            return
        if exc[0] is None:
            self._pool.close()
        else:
            self._pool.terminate()
        self._pool.join()


def map_lines(workers: Workers, fn: Callable, columns: dict, chunk_lines: int, desc: str) -> dict:
    """Apply ``fn((arg1, arg2, chunk))`` to every column in chunks, all columns in one stream.

    ``columns``: key → (arg1, arg2, lines). Returns key → output lines, in input order. Each
    distinct line of a column is processed once (subtitles repeat: a quarter of TVsub's lines
    are duplicates), which is exact because every step works line by line. All columns go
    through one job stream so both cores stay busy across split and language boundaries.
    """
    uniq = {key: list(dict.fromkeys(lines)) for key, (_, _, lines) in columns.items()}
    jobs, owners = [], []
    for key, (a, b, _) in columns.items():
        for i in range(0, len(uniq[key]), chunk_lines):
            jobs.append((a, b, uniq[key][i:i + chunk_lines]))
            owners.append(key)
    done: dict = {key: [] for key in columns}
    n_uniq = sum(len(u) for u in uniq.values())
    t0 = time.monotonic()
    with tqdm(total=n_uniq, desc=desc, unit="line", mininterval=2.0, disable=bars_off()) as bar:
        for key, job, result in zip(owners, jobs, workers.imap(fn, jobs)):
            done[key].extend(result)
            bar.update(len(job[2]))
    out = {}
    for key, (_, _, lines) in columns.items():
        table = dict(zip(uniq[key], done[key]))
        out[key] = [table[line] for line in lines]
    total = sum(len(lines) for _, _, lines in columns.values())
    logger.info("%s: %d lines (%d distinct) in %.1f s on %d worker(s)", desc, total, n_uniq,
                time.monotonic() - t0, workers.n)
    return out


# --- steps ----------------------------------------------------------------------------------


def filter_train(train: Split, cfg: PreprocessConfig) -> tuple[list[int], dict]:
    """Find the train pairs that are training targets: not an empty side, no side over
    ``max_len`` tokens, no ratio over ``max_len_ratio`` (token counts of the tokenized text).
    Returns (indices of the target lines, in order; statistics). Nothing is removed."""
    removed = Counter()
    keep = []
    for i, (s, t) in enumerate(zip(train.src, train.tgt)):
        ls, lt = len(s.split()), len(t.split())
        if ls == 0 or lt == 0:
            removed["empty"] += 1
        elif max(ls, lt) > cfg.max_len:
            removed["too_long"] += 1
        elif max(ls, lt) / min(ls, lt) > cfg.max_len_ratio:
            removed["ratio"] += 1
        else:
            keep.append(i)
    stats = {
        "max_len": cfg.max_len, "max_len_ratio": cfg.max_len_ratio, "drop_empty": True,
        "applies_to": ["train"], "unit": "tokens after tokenization, before BPE",
        "kept": len(keep), "removed": sum(removed.values()),
        "removed_by_reason": {r: removed[r] for r in ("empty", "too_long", "ratio")},
    }
    logger.info("train filter: kept %d, removed %d %s", len(keep), stats["removed"],
                stats["removed_by_reason"])
    return keep, stats


def word_counts(lines: list[str], sample_lines: int) -> Counter:
    """Word counts of an evenly spaced sample of at most ``sample_lines`` lines (0 = all)."""
    n = len(lines)
    if 0 < sample_lines < n:
        lines = [lines[i * n // sample_lines] for i in range(sample_lines)]
    counts = Counter()
    for line in lines:
        counts.update(line.split())
    return counts


def learn_codes(workers: Workers, train: Split, cfg: PreprocessConfig, out: Path) -> dict[str, Path]:
    """Learn BPE codes on train (per language in parallel, or joint); write them atomically.

    Returns language → codes path.
    """
    counts = {cfg.src: word_counts(train.src, cfg.bpe_sample_lines),
              cfg.tgt: word_counts(train.tgt, cfg.bpe_sample_lines)}
    if cfg.joint_bpe:
        counts = {"joint": counts[cfg.src] + counts[cfg.tgt]}
    t0 = time.monotonic()
    jobs = [(dict(c), cfg.bpe_merges) for c in counts.values()]
    for key, (codes, messages) in zip(counts, workers.imap(_learn_bpe_job, jobs)):
        path = out / f"bpe.codes.{key}"
        atomic_write_text(path, codes)
        n_codes = codes.count("\n") - 1
        logger.info("learnt %d BPE merges for %s from %d word types", n_codes, key, len(counts[key]))
        if n_codes < cfg.bpe_merges:
            logger.warning("only %d of %d merges for %s: %s", n_codes, cfg.bpe_merges, key,
                           messages.strip().splitlines()[-1] if messages.strip() else "")
    logger.info("BPE learnt in %.1f s", time.monotonic() - t0)
    return {lang: codes_path(out, lang, cfg.joint_bpe) for lang in (cfg.src, cfg.tgt)}


def token_vocab(lines: list[str]) -> list[tuple[str, int]]:
    """(token, count) over lines, most frequent first, ties by token (deterministic)."""
    counts = Counter()
    for line in lines:
        counts.update(line.split())
    return sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))


# --- writing --------------------------------------------------------------------------------


def write_split(out: Path, tok: Split, bpe: Split, src: str, tgt: str) -> None:
    """``{split}.tok.*``, ``{split}.bpe.*`` and ``{split}.docs`` of one split (every line)."""
    atomic_write_lines(out / f"{tok.name}.tok.{src}", tok.src)
    atomic_write_lines(out / f"{tok.name}.tok.{tgt}", tok.tgt)
    atomic_write_lines(out / f"{tok.name}.bpe.{src}", bpe.src)
    atomic_write_lines(out / f"{tok.name}.bpe.{tgt}", bpe.tgt)
    atomic_write_lines(out / f"{tok.name}.docs",
                       (f"{d}\t{p}" for d, p in zip(tok.doc_ids, tok.positions)))


def write_targets(out: Path, n_lines: int, targets: list[int]) -> None:
    """``train.target``: ``1`` on the ``targets`` lines, ``0`` on the others (``n_lines`` lines)."""
    flags = ["0"] * n_lines
    for i in targets:
        flags[i] = "1"
    atomic_write_lines(out / "train.target", flags)


def write_vocab(out: Path, lang: str, lines: list[str]) -> None:
    atomic_write_lines(out / f"vocab.{lang}.txt", (f"{t}\t{c}" for t, c in token_vocab(lines)))


# --- stage ----------------------------------------------------------------------------------


def wants_recaser(cfg: PreprocessConfig) -> bool:
    """Whether preprocess learns a recaser: lowercased data, an English target, min count ≥ 1."""
    return cfg.lowercase and cfg.tgt == "en" and cfg.recaser_min_count > 0


def _tokenize_splits(workers: Workers, raw: list[Split], cfg: PreprocessConfig) -> tuple[list[Split], Recaser | None]:
    """Tokenized splits, and the recaser learnt from the train targets (``wants_recaser``). The
    train targets are then tokenized cased and lowercased here: ``tokenize_en`` lowercases after
    tokenizing, so the lines are the same as tokenizing them lowercased."""
    recase = wants_recaser(cfg)
    columns = {(s.name, side): (lang, cfg.lowercase and not (recase and (s.name, side) == ("train", "tgt")),
                                getattr(s, side))
               for s in raw for side, lang in (("src", cfg.src), ("tgt", cfg.tgt))}
    out = map_lines(workers, _tokenize_job, columns, cfg.chunk_lines, "tokenize")
    recaser = None
    if recase:
        t0 = time.monotonic()
        recaser = Recaser.learn(out["train", "tgt"], cfg.tgt, cfg.recaser_min_count)
        logger.info("recaser: %d words with a capital (seen >= %d times) from %d train targets in %.1f s",
                    len(recaser), cfg.recaser_min_count, recaser.lines, time.monotonic() - t0)
        out["train", "tgt"] = [line.lower() for line in out["train", "tgt"]]
    return [Split(s.name, s.source, s.doc_ids, s.positions, out[s.name, "src"], out[s.name, "tgt"])
            for s in raw], recaser


def _bpe_splits(workers: Workers, tok: list[Split], codes: dict[str, Path], cfg: PreprocessConfig) -> list[Split]:
    columns = {(s.name, side): (lang, str(codes[lang]), getattr(s, side))
               for s in tok for side, lang in (("src", cfg.src), ("tgt", cfg.tgt))}
    out = map_lines(workers, _bpe_job, columns, cfg.chunk_lines, "apply BPE")
    return [Split(s.name, s.source, s.doc_ids, s.positions, out[s.name, "src"], out[s.name, "tgt"])
            for s in tok]


def _meta(cfg: PreprocessConfig, splits: list[Split], filter_stats: dict) -> dict:
    """``meta.json``: ``splits.{name}.sentences`` counts the lines of the split's files (train:
    targets + filtered context-only lines)."""
    info = {s.name: {"sentences": len(s.src), "documents": s.n_documents(), "source": s.source}
            for s in splits}
    info["train"]["documents_selected"] = splits[0].n_documents()
    info["train"]["held_out_documents"] = len(cfg.held_out)
    info["train"]["targets"] = filter_stats["kept"]
    info["train"]["filtered"] = filter_stats["removed"]
    return {
        "version": FORMAT_VERSION, "src": cfg.src, "tgt": cfg.tgt, "lowercase": cfg.lowercase,
        "bpe": {"merges": cfg.bpe_merges, "joint": cfg.joint_bpe, "separator": "@@ ",
                "sample_lines": cfg.bpe_sample_lines},
        "filter": filter_stats, "splits": info, "config": asdict(cfg),
    }


def prepare_dataset(cfg: PreprocessConfig) -> Path:
    """Build the prepared dataset described in the module docstring; returns ``cfg.out``.

    Raises FileNotFoundError for missing corpus files and ValueError for misaligned ones
    (the message names the files).

    The new dataset is written beside ``cfg.out``, in a temporary directory
    (``.OUT.PID.XXXXXXXX.tmp``), and moved in when complete, ``meta.json`` last: a failed or
    killed run leaves a finished dataset at ``cfg.out`` as it was (other files there, e.g.
    ``dp/``, are kept), and a rerun removes what a killed one left (``remove_stale_temps``).
    """
    t0 = time.monotonic()
    final = Path(cfg.out)
    final.parent.mkdir(parents=True, exist_ok=True)
    remove_stale_temps(final.parent)
    if final.is_dir():
        remove_stale_temps(final)
    out = Path(tempfile.mkdtemp(dir=final.parent, prefix=temp_name_prefix(final.name), suffix=".tmp"))
    try:
        _build(cfg, out, t0)
        _move_in(out, final)
    finally:
        shutil.rmtree(out, ignore_errors=True)
    return final


def _move_in(staging: Path, out: Path) -> None:
    """Move the files of ``staging`` into ``out`` (created), each with ``os.replace``; ``out``'s
    ``meta.json`` goes first (its dataset is being replaced) and the new one comes last."""
    out.mkdir(parents=True, exist_ok=True)
    (out / "meta.json").unlink(missing_ok=True)  # a stale meta would bless a half-replaced dir
    for f in sorted(staging.iterdir(), key=lambda f: f.name == "meta.json"):
        os.replace(f, out / f.name)


def _build(cfg: PreprocessConfig, out: Path, t0: float) -> None:
    with Workers(cfg.workers) as workers:
        tok, recaser = _tokenize_splits(workers, read_splits(cfg), cfg)  # raw text freed afterwards
        targets, filter_stats = filter_train(tok[0], cfg)
        codes = learn_codes(workers, tok[0].subset(targets), cfg, out)
        bpe = _bpe_splits(workers, tok, codes, cfg)
    for t, b in zip(tok, bpe):
        write_split(out, t, b, cfg.src, cfg.tgt)
    write_targets(out, len(tok[0].src), targets)
    train_bpe = bpe[0].subset(targets)
    write_vocab(out, cfg.src, train_bpe.src)
    write_vocab(out, cfg.tgt, train_bpe.tgt)
    if recaser is not None:
        atomic_write_text(out / recaser_path("", cfg.tgt),
                          json.dumps(recaser.to_dict(), indent=0, ensure_ascii=False) + "\n")
    meta = _meta(cfg, tok, filter_stats)
    atomic_write_text(out / "meta.json", json.dumps(meta, indent=2, ensure_ascii=False, default=str) + "\n")
    logger.info("prepared dataset %s in %.1f s (%s)", cfg.out, time.monotonic() - t0,
                ", ".join(f"{s.name} {len(s.src)}" for s in tok))
