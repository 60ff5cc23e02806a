"""``doctrans train pipelines/dp/*.yaml``: train a DP generator on ``annotate-dp`` output.

Two models (``model:`` in the YAML; see ``doctrans.dp.models.labeler``):

* ``thesis`` — the thesis' two-stage generator (§4.3.2): an Elman-RNN DPP detector over
  windowed embeddings, then an MLP over the Table 4.6 features that picks the pronoun at each
  detected position. The detector trains on every position, the MLP on the DP positions only.
* ``labeler`` — ours: a BiGRU labeler over ``N`` + 30 pronouns with the previous sentence(s) of
  the document attended to (``context_sents``); with ``pseudo_dp`` > 0 it also learns the
  pronoun choice from overt pronouns deleted at random (``doctrans.dp.models.labeler``). The
  logged ``train_xent_nats`` then averages over both kinds of targets.

Both write ``RUN_DIR/best.pt`` (the epoch with the best dev pronoun F, see ``data.tune_on`` below),
``last.pt`` (for ``--resume``, epoch granularity), ``metrics.jsonl`` and
``config.yaml``. A checkpoint holds tensors and primitive types only (``weights_only`` loads).
After each epoch the DP decision threshold (a DP where P(N) < τ) is tuned on dev and the
epoch is scored there (``data.tune_on``): ``oracle`` (default) scores against the hand-annotated DPs
of TVsub dev (``dev.oracle-dp.seg.zh``, matched by character offset as in ``doctrans score
--dp``), the data the thesis tunes on; ``annotated`` scores against our own ``annotate-dp``
labels of dev. ``oracle`` falls back to ``annotated`` (with a warning) where no oracle exists.

The loop is one function per step: ``train_epoch`` (batches → ``DPModel.batch_loss`` → MixedAdam
with the per-epoch LR) and ``score_epoch`` (dev distributions → τ and P/R/F → best/last
checkpoints); the model's ``prepare`` pre-stage runs once before the first epoch.
"""
from __future__ import annotations

import json
import logging
import random
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TextIO

import numpy as np
import torch
import yaml
from tqdm import tqdm

from doctrans.config import to_dict
from doctrans.dp.agreement import dp_agreement, prf
from doctrans.dp.annotate import NO_DP_LABEL
from doctrans.dp.config import DPGenConfig
from doctrans.dp.corpus import oracle_paths
from doctrans.dp.data import DPSentence, build_vocab, label_inventory, load_sentences
from doctrans.dp.generator import DPGenerator, build_model, decide, one_best
from doctrans.training.optim import MixedAdam
from doctrans.utils.io import atomic_torch_save, atomic_write_text, read_lines

logger = logging.getLogger(__name__)

THRESHOLDS = tuple(round(float(t), 3) for t in np.arange(0.3, 0.976, 0.025))   # τ grid (P(N) < τ → DP)


# --- metrics --------------------------------------------------------------------------------


def label_scores(pred: list[list[str]], gold: list[list[str]]) -> dict:
    """Position (detection) and pronoun (prediction) P/R/F over per-position labels."""
    n_sys = n_ref = pos = word = 0
    for p_row, g_row in zip(pred, gold):
        for p, g in zip(p_row, g_row):
            n_sys += p != NO_DP_LABEL
            n_ref += g != NO_DP_LABEL
            if p != NO_DP_LABEL and g != NO_DP_LABEL:
                pos += 1
                word += p == g
    return {"detection": prf(pos, n_sys, n_ref), "prediction": prf(word, n_sys, n_ref)}


def tune_threshold(probs: list[np.ndarray], gold: list[list[str]], labels: list[str]) -> tuple[float, dict]:
    """The τ of ``THRESHOLDS`` with the best prediction F against per-position ``gold`` labels
    (ties: detection F) → (τ, ``label_scores`` at τ)."""
    best = None
    for tau in THRESHOLDS:
        sc = label_scores([decide(p, labels, tau) for p in probs], gold)
        key = (sc["prediction"]["f1"], sc["detection"]["f1"])
        if best is None or key > best[0]:
            best = (key, tau, sc)
    return best[1], best[2]


class DevScorer:
    """Scores a generator's dev distributions and tunes τ (``tune_on``, see module doc).

    ``__call__(probs, labels)`` → (τ, {"detection": prf, "prediction": prf, "against": "oracle" |
    "annotated"}); detection = DP position, prediction = position and pronoun (DP-level P/R/F).
    """

    def __init__(self, cfg: DPGenConfig, dev: list[DPSentence], prep: Path):
        self.dev, self.against, self.oracle = dev, "annotated", None
        d = cfg.data
        if d.tune_on == "oracle":
            meta_path = prep / "meta.json"
            meta = json.loads(meta_path.read_text(encoding="utf-8")) if meta_path.is_file() else {}
            paths = oracle_paths(meta, d.dev_split, d.oracle_dir or None)
            if paths is None:
                logger.warning("tune_on=oracle: no hand-annotated oracle for %s (from %s or oracle_dir); "
                               "tuning on the annotate-dp labels instead", d.dev_split, meta_path)
            else:
                base, oracle = read_lines(paths[0]), read_lines(paths[1])
                if len(base) != len(dev) or len(oracle) != len(dev):
                    raise ValueError(f"oracle {paths[1]} has {len(oracle)} lines, base {paths[0]} "
                                     f"{len(base)}, dev split {len(dev)}")
                self.oracle, self.against = (base, oracle), "oracle"
                logger.info("dev scored against the hand-annotated oracle %s", paths[1])

    def __call__(self, probs: list[np.ndarray], labels: list[str]) -> tuple[float, dict]:
        if self.oracle is None:
            tau, sc = tune_threshold(probs, [s.labels for s in self.dev], labels)
            return tau, {**sc, "against": "annotated"}
        best = None
        for tau, r in oracle_sweep(self.dev, probs, labels, *self.oracle):
            key = (r["pronoun"]["f1"], r["position"]["f1"])
            if best is None or key > best[0]:
                best = (key, tau, {"detection": r["position"], "prediction": r["pronoun"], "against": "oracle"})
        return best[1], best[2]


def oracle_sweep(sents: list[DPSentence], probs: list[np.ndarray], labels: list[str],
                 oracle_base: list[str], oracle_lines: list[str],
                 thresholds: tuple[float, ...] = THRESHOLDS) -> list[tuple[float, dict]]:
    """Per threshold τ: the 1-best DP lines of ``sents`` (a DP where P(N) < τ; ``probs`` per
    sentence (S + 1, L)) scored by ``dp_agreement`` against a hand oracle (line-aligned with
    ``sents``) → [(τ, result)] in ``thresholds`` order."""
    base = [" ".join(s.tokens) for s in sents]
    out = []
    for tau in thresholds:
        sys_lines = [" ".join(one_best(s.tokens, p, labels, tau)[0]) if s.tokens else ""
                     for s, p in zip(sents, probs)]
        out.append((tau, dp_agreement(base, sys_lines, oracle_base, oracle_lines)))
    return out


# --- training ---------------------------------------------------------------------------------


@dataclass
class DPRun:
    """One training run: config, data, the generator being trained, its optimiser, the dev
    scorer and the loop state (``epoch`` done, ``best_f``, ``prepared``: pre-stage done)."""

    cfg: DPGenConfig
    run_dir: Path
    train: list[DPSentence]
    dev: list[DPSentence]
    gen: DPGenerator
    opt: MixedAdam
    scorer: DevScorer
    state: dict = field(default_factory=lambda: {"epoch": 0, "best_f": -1.0, "prepared": False})
    t_start: float = field(default_factory=time.time)


def load_data(cfg: DPGenConfig) -> tuple[list[DPSentence], list[DPSentence]]:
    """(train, dev) labelled sentences of ``cfg.data``. Raises ``FileNotFoundError`` if the
    annotated corpus is missing, ``ValueError`` for malformed label files."""
    d = cfg.data
    prep, ann = Path(d.prepared), d.annotated_dir
    for split in (d.train_split, d.dev_split):
        if not (ann / f"{split}.dplabel").is_file():
            raise FileNotFoundError(f"{ann / f'{split}.dplabel'} missing: run `doctrans annotate-dp -p {prep}` first")
    train = load_sentences(prep / f"{d.train_split}.tok.zh", ann / f"{d.train_split}.dplabel",
                           prep / f"{d.train_split}.docs", prep / f"{d.train_split}.target")
    if d.max_train_sentences:
        train = train[:d.max_train_sentences]
    dev = load_sentences(prep / f"{d.dev_split}.tok.zh", ann / f"{d.dev_split}.dplabel",
                         prep / f"{d.dev_split}.docs")
    return train, dev


def setup(cfg: DPGenConfig, resume: bool = False) -> DPRun:
    """Seed, write ``RUN_DIR/config.yaml``, load the data, build the model and optimiser, and
    with ``resume`` restore them and the loop state from ``RUN_DIR/last.pt``."""
    torch.manual_seed(cfg.train.seed)
    if cfg.train.threads:
        torch.set_num_threads(cfg.train.threads)
    run_dir = Path(cfg.run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    atomic_write_text(run_dir / "config.yaml", yaml.safe_dump(to_dict(cfg), sort_keys=False))
    train, dev = load_data(cfg)
    vocab = build_vocab(train, cfg.data.min_freq, cfg.data.max_vocab)
    labels = label_inventory()
    model = build_model(cfg, vocab, labels, train)
    gen = DPGenerator(cfg, vocab, labels, model)
    opt = MixedAdam(model.network, cfg.train.lr, cfg.train.adam_betas, cfg.train.adam_eps)
    r = DPRun(cfg, run_dir, train, dev, gen, opt, DevScorer(cfg, dev, Path(cfg.data.prepared)))
    if resume and (run_dir / "last.pt").is_file():
        ck = torch.load(run_dir / "last.pt", map_location="cpu", weights_only=True)
        model.load_state_dict(ck["model"])
        opt.load_state_dict(ck["optimizer"])
        r.state = ck["state"]
        logger.info("resumed from %s at epoch %d", run_dir / "last.pt", r.state["epoch"])
    logger.info("DP generator %s: %s train sentences, %s dev, vocab %d, %s parameters", cfg.model.name,
                f"{len(train):,}", f"{len(dev):,}", len(vocab), f"{model.n_parameters():,}")
    r.t_start = time.time()
    return r


def _batches(sents: list[DPSentence], size: int, rng: random.Random) -> list[list[int]]:
    order = sorted(range(len(sents)), key=lambda k: (len(sents[k].tokens), rng.random()))
    batches = [order[b:b + size] for b in range(0, len(order), size)]
    rng.shuffle(batches)
    return batches


def train_epoch(r: DPRun, rng: random.Random) -> tuple[float, int, bool]:
    """One pass over ``r.train`` in shuffled length-sorted batches of ``data.batch_sentences``:
    per batch ``DPModel.batch_loss``, mean over its targets, backward, MixedAdam step (global
    norm clipped to ``train.clip_norm``) at ``cfg.lr_at(epoch)``. Stops early when
    ``train.max_time_min`` is spent. → (summed loss in nats, targets, out of time)."""
    t, model = r.cfg.train, r.gen.model
    model.network.train()
    r.opt.set_lr(r.cfg.lr_at(r.state["epoch"]))
    epoch_loss, n_tok, out_of_time = 0.0, 0, False
    batches = _batches(r.train, r.cfg.data.batch_sentences, rng)
    total = f"/{t.max_epochs}" if t.max_epochs else ""
    bar = tqdm(batches, desc=f"epoch {r.state['epoch'] + 1}{total}", unit="batch", mininterval=5)
    for bi, idx in enumerate(bar):
        loss, n = model.batch_loss(r.train, idx, rng)
        r.opt.zero_grad()
        (loss / n).backward()
        r.opt.step(max_norm=t.clip_norm)
        epoch_loss, n_tok = epoch_loss + loss.item(), n_tok + n
        if bi % t.log_every == 0:
            bar.set_postfix(xent=f"{epoch_loss / max(n_tok, 1):.4f}")
        if t.max_time_min and time.time() - r.t_start > 60 * t.max_time_min:
            out_of_time = True
            logger.info("max_time_min reached during epoch %d", r.state["epoch"] + 1)
            break
    bar.close()
    return epoch_loss, n_tok, out_of_time


def score_epoch(r: DPRun, epoch_loss: float, n_tok: int, metrics: TextIO) -> dict:
    """After epoch ``r.state["epoch"]``: tune τ and score dev (``DevScorer``), write and log the
    metrics record, save ``best.pt`` if the dev prediction F improved, always ``last.pt``."""
    tau, sc = r.scorer(r.gen.distributions(r.dev), r.gen.labels)
    rec = {"epoch": r.state["epoch"], "lr": r.cfg.lr_at(r.state["epoch"] - 1),
           "train_xent_nats": epoch_loss / max(n_tok, 1), "dev_threshold": tau,
           "dev_against": sc["against"], "dev_detection_f1": sc["detection"]["f1"],
           "dev_prediction_f1": sc["prediction"]["f1"], "elapsed_s": round(time.time() - r.t_start, 1)}
    _write_record(metrics, rec)
    logger.info("epoch %d: train xent %.4f, dev (%s, τ=%.3f) detection F %.4f, prediction F %.4f",
                r.state["epoch"], rec["train_xent_nats"], sc["against"], tau,
                rec["dev_detection_f1"], rec["dev_prediction_f1"])
    if sc["prediction"]["f1"] > r.state["best_f"]:
        r.state["best_f"] = sc["prediction"]["f1"]
        r.gen.threshold = tau
        atomic_torch_save(r.gen.to_checkpoint({"dev": sc, "epoch": r.state["epoch"]}), r.run_dir / "best.pt")
    atomic_torch_save(r.gen.to_checkpoint({"optimizer": r.opt.state_dict(), "state": r.state}),
                      r.run_dir / "last.pt")
    return rec


def _write_record(metrics: TextIO, rec: dict) -> None:
    metrics.write(json.dumps(rec) + "\n")
    metrics.flush()


def run(cfg: DPGenConfig, resume: bool = False) -> Path:
    """Train (see module doc); returns the run directory. Raises ``FileNotFoundError`` if the
    annotated corpus is missing, ``ValueError`` for malformed label files."""
    r = setup(cfg, resume)
    t = cfg.train
    metrics = open(r.run_dir / "metrics.jsonl", "a", encoding="utf-8")
    try:
        if not r.state.get("prepared"):
            r.gen.model.prepare(r.train, r.dev, t, lambda rec: _write_record(metrics, rec))
            r.state["prepared"] = True
        rng = random.Random(t.seed + r.state["epoch"])
        out_of_time = False
        while not out_of_time and (not t.max_epochs or r.state["epoch"] < t.max_epochs):
            epoch_loss, n_tok, out_of_time = train_epoch(r, rng)
            r.state["epoch"] += 1
            score_epoch(r, epoch_loss, n_tok, metrics)
    finally:
        metrics.close()
    return r.run_dir
