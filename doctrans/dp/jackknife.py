"""``doctrans annotate-dp jackknife --folds K``: the training sources completed with PREDICTED DPs.

The +DPs pipeline (``pipelines/dp/nmt_dp.yaml``) trains on sources whose DPs ``annotate-dp``
found with the reference (alignment + LM, thesis §4.3.1) and translates sources completed by a
DP generator, which finds about a quarter of them (issue 28, thesis ch. 6): train and test DPs
differ, and the model learns "an English pronoun only where the Chinese has one". Here every
training sentence is completed by a generator that did NOT see it in training, so train and
test DPs carry the same kind of errors (jackknifing, as for the POS tags of a parser's
training data):

1. The documents of the training split (``PREPARED/train.docs``; context-only lines of
   ``train.target`` left out, as the generators do) are dealt round-robin into K folds
   (``fold_of_docs``: document k, in order of first appearance, goes to fold k mod K), so a
   document and its context stay in one fold.
2. For each fold k a DP generator (``doctrans train pipelines/dp/labeler.yaml`` by default,
   ``data.folds=K data.fold=k``) is trained on the other K − 1 folds: ``OUT/folds/k/best.pt``
   (τ tuned on dev as usual).
3. Fold k's sentences are completed by generator k (1-best, ``dp.apply.complete_lines``):
   ``OUT/folds/k/train.{dp,dpp}.zh`` / ``.dplabel`` (the fold's lines only, in order).
4. The folds are merged back into ``OUT/train.{dp,dpp}.zh``, ``train.dplabel`` line-aligned with
   ``PREPARED/train.tok.zh`` (context-only lines: the source as it is, labels all ``N``); dev and
   test are completed by the ensemble of the K fold generators (``DPEnsemble``, distributions
   averaged; ``OUT/generator.txt`` holds its ``A.pt:B.pt:…`` spec for ``translate
   --dp-generator``), then ``{split}.{dp,dpp}.bpe.zh`` and ``vocab.{dp,dpp}.zh.txt`` exactly as
   ``annotate-dp`` writes them (``corpus.bpe_variants``), and ``{split}.docs``.

[Choice: dev/test by the K-fold ensemble, not by a (K+1)-th generator on all folds: no extra
training, and every generator involved saw (K − 1)/K of the data.]

Every step is resumable: a fold whose ``.done`` stamp exists is skipped, a fold with
``last.pt`` but no stamp resumes its training (``--resume``), a fold whose completion files
exist is not re-annotated. All files are written atomically; ``OUT/meta.json`` is written last
and marks a complete output.
"""
from __future__ import annotations

import fcntl
import json
import logging
import os
from collections.abc import Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from tqdm import tqdm

from doctrans.dp.annotate import NO_DP_LABEL
from doctrans.dp.data import fold_of_docs
from doctrans.utils import bars_off
from doctrans.utils.io import atomic_write_lines, atomic_write_text, read_lines

logger = logging.getLogger(__name__)

DEFAULT_CONFIG = "pipelines/dp/labeler.yaml"


@dataclass(frozen=True)
class JackknifeConfig:
    """Options of ``doctrans annotate-dp jackknife --folds K`` (same names)."""

    prepared: str                      # prepared dataset with its annotate-dp output in PREPARED/dp
    folds: int = 3
    out: str = ""                      # [default: PREPARED/dp_jk{folds}]
    config: str = DEFAULT_CONFIG       # the DP generator's YAML
    overrides: tuple[str, ...] = ()    # key=value for every fold's training (e.g. train.max_epochs=1)
    splits: tuple[str, ...] = field(default=("dev", "test"))   # completed by the fold ensemble

    @property
    def out_dir(self) -> Path:
        return Path(self.out) if self.out else Path(self.prepared) / f"dp_jk{self.folds}"


def _labels_of(n_tokens: int, dp_tokens: Sequence[str], slots: Sequence[int]) -> str:
    """The ``.dplabel`` line of a 1-best completion: per token and ``</s>``, the pronoun inserted
    before it (``dp_tokens`` holds it just before the token) or ``N``."""
    lab = [NO_DP_LABEL] * (n_tokens + 1)
    for j, t in enumerate(slots):
        lab[t] = dp_tokens[t + j]           # j pronouns were inserted before slot t
    return " ".join(lab)


def _complete(gen, tokens: list[str], docs: list[str]) -> tuple[list[str], list[str], list[str]]:
    """(dp lines, dpp lines, label lines) of ``gen``'s 1-best completion of ``tokens``."""
    from doctrans.dp.apply import complete_lines

    dp, dpp, lab = [], [], []
    for t, r in zip(tokens, complete_lines(gen, tokens, docs, nbest=1)):
        dp.append(" ".join(r.dp))
        dpp.append(" ".join(r.dpp))
        lab.append(_labels_of(len(t.split()), r.dp, r.slots))
    return dp, dpp, lab


def annotate_in_folds(cfg: JackknifeConfig) -> dict:
    """Train the K fold generators and write the jackknifed corpus (module doc). Returns
    ``{"out": OUT, "generators": [paths], "dps": {split: inserted DPs}}``.

    Raises ``FileNotFoundError`` when the prepared dataset or its annotate-dp labels are missing,
    ``ValueError`` for fewer documents than folds, misaligned files or another run writing OUT
    (``OUT/.lock``), ``ConfigError`` for a bad generator config or override."""
    if cfg.folds < 2:
        raise ValueError(f"--jackknife needs K ≥ 2 folds, got {cfg.folds}")
    prep, out = Path(cfg.prepared), cfg.out_dir
    for f in (prep / "meta.json", prep / "train.tok.zh", prep / "dp" / "train.dplabel"):
        if not f.is_file():
            raise FileNotFoundError(f"{f} missing: run `doctrans preprocess` and `doctrans annotate-dp corpus -p {prep}` first")
    out.mkdir(parents=True, exist_ok=True)
    with _exclusive(out):
        return _run(cfg, prep, out)


@contextmanager
def _exclusive(out: Path):
    """Hold ``OUT/.lock`` (``flock``, released when the process ends, however it ends) so two runs
    never write one output directory. Raises ``ValueError`` when another process holds it."""
    with open(out / ".lock", "a+", encoding="utf-8") as f:
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            f.seek(0)
            raise ValueError(f"{out} is being written by another annotate-dp jackknife (pid {f.read().strip() or '?'}); "
                             "wait for it or stop it") from None
        f.truncate(0)
        f.write(f"{os.getpid()}\n")
        f.flush()
        yield


def _run(cfg: JackknifeConfig, prep: Path, out: Path) -> dict:
    from doctrans.dp.config import load_dp_config
    from doctrans.dp.corpus import bpe_variants, target_lines
    from doctrans.dp.data import load_sentences, read_docs
    from doctrans.dp.generator import load_generator
    from doctrans.dp.train import train_generator

    (out / "meta.json").unlink(missing_ok=True)                 # incomplete until rewritten
    tok = read_lines(prep / "train.tok.zh")
    sents = load_sentences(prep / "train.tok.zh", None, prep / "train.docs", prep / "train.target")
    fold = fold_of_docs([s.doc for s in sents], cfg.folds)
    gens = []
    bar = tqdm(range(cfg.folds), desc="jackknife folds", unit="fold", disable=bars_off())
    for k in bar:
        fdir = out / "folds" / str(k)
        gen_cfg = load_dp_config(cfg.config, [*cfg.overrides, f"data.prepared={prep}", f"run_dir={fdir}",
                                              f"data.folds={cfg.folds}", f"data.fold={k}"])
        if not (fdir / ".done").is_file():
            bar.set_postfix_str(f"training generator {k}")
            train_generator(gen_cfg, resume=(fdir / "last.pt").is_file())
            atomic_write_text(fdir / ".done", "trained\n")
        gens.append(fdir / "best.pt")
        if not (fdir / "train.dplabel").is_file():
            bar.set_postfix_str(f"completing fold {k}")
            mine = [s for s in sents if fold[s.doc] == k]
            dp, dpp, lab = _complete(load_generator(fdir / "best.pt"), [" ".join(s.tokens) for s in mine],
                                     [s.doc for s in mine])
            atomic_write_lines(fdir / "train.lines", [str(s.index) for s in mine])
            atomic_write_lines(fdir / "train.dp.zh", dp)
            atomic_write_lines(fdir / "train.dpp.zh", dpp)
            atomic_write_lines(fdir / "train.dplabel", lab)   # written last: marks the fold complete
    # merge the folds back onto the training split's lines
    merged = {"dp": list(tok), "dpp": list(tok), "dplabel": [" ".join([NO_DP_LABEL] * (len(x.split()) + 1))
                                                             for x in tok]}
    dps: dict[str, int] = {}
    for k in range(cfg.folds):
        fdir = out / "folds" / str(k)
        index = [int(x) for x in read_lines(fdir / "train.lines")]
        for kind in merged:
            lines = read_lines(fdir / f"train.{kind}" if kind == "dplabel" else fdir / f"train.{kind}.zh")
            if len(lines) != len(index):
                raise ValueError(f"{fdir}: {len(lines)} completed lines for {len(index)} fold lines; delete the "
                                 "fold directory's train.* files to redo it")
            for i, line in zip(index, lines):
                merged[kind][i] = line
    for kind, lines in merged.items():
        atomic_write_lines(out / (f"train.{kind}" if kind == "dplabel" else f"train.{kind}.zh"), lines)
    dps["train"] = sum(sum(t != NO_DP_LABEL for t in x.split()) for x in merged["dplabel"])
    spec = ":".join(str(g) for g in gens)
    ensemble = load_generator(gens)
    splits = ["train"]
    for split in cfg.splits:
        if not (prep / f"{split}.tok.zh").is_file():
            logger.warning("split %s not in %s: skipped", split, prep)
            continue
        lines = read_lines(prep / f"{split}.tok.zh")
        docs_path = prep / f"{split}.docs"
        dp, dpp, lab = _complete(ensemble, lines, read_docs(docs_path if docs_path.is_file() else None, len(lines)))
        atomic_write_lines(out / f"{split}.dp.zh", dp)
        atomic_write_lines(out / f"{split}.dpp.zh", dpp)
        atomic_write_lines(out / f"{split}.dplabel", lab)
        dps[split] = sum(sum(t != NO_DP_LABEL for t in x.split()) for x in lab)
        splits.append(split)
    for split in splits:
        if (prep / f"{split}.docs").is_file():
            atomic_write_text(out / f"{split}.docs", (prep / f"{split}.docs").read_text(encoding="utf-8"))
    bpe_variants(prep, out, splits)
    atomic_write_text(out / "generator.txt", spec + "\n")
    n_target = len(target_lines(prep, "train", len(tok)))
    atomic_write_text(out / "meta.json", json.dumps(
        {"version": 1, "jackknife": {"folds": cfg.folds, "config": cfg.config, "overrides": list(cfg.overrides),
                                     "fold_of": "document i (first appearance) → fold i mod K"},
         "generators": [str(g) for g in gens], "dev_test_generator": "ensemble of the fold generators",
         "splits": splits, "train_target_lines": n_target, "dps_inserted": dps,
         "outputs": ["{split}.dp.zh", "{split}.dpp.zh", "{split}.dplabel", "{split}.docs", "{split}.dp.bpe.zh",
                     "{split}.dpp.bpe.zh", "vocab.dp.zh.txt", "vocab.dpp.zh.txt", "generator.txt"]},
        ensure_ascii=False, indent=1) + "\n")
    logger.info("jackknifed DPs: %s", ", ".join(f"{s} {n:,}" for s, n in dps.items()))
    return {"out": out, "generators": gens, "dps": dps}
