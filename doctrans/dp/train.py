"""``doctrans train pipelines/dp/*.yaml``: train a DP generator on ``annotate-dp`` output.

Two models (``model:`` in the YAML; see ``doctrans.dp.models.labeler``):

* ``thesis`` — the thesis' two-stage generator (§4.3.2): an Elman-RNN DPP detector over
  windowed embeddings, then an MLP over the Table 4.6 features that picks the pronoun at each
  detected position. The detector trains on every position, the MLP on the DP positions only.
* ``labeler`` — ours: a BiGRU labeler over ``N`` + 30 pronouns with the previous sentence(s) of
  the document attended to (``context_sents``); with ``pseudo_dp`` > 0 it also learns the
  pronoun choice from overt pronouns deleted at random (``doctrans.dp.models.labeler``). The
  logged train ``xent_nats`` then averages over both kinds of targets.

Both write ``RUN_DIR/best.pt`` (the epoch with the best dev pronoun F, see ``data.tune_on`` below),
``last.pt`` (for ``--resume``), ``metrics.jsonl``, ``tensorboard/``, ``learning_curves.png``
and ``config.yaml``. A checkpoint holds tensors and primitive types only (``weights_only`` loads).
After each epoch the DP decision threshold (a DP where P(N) < τ) is tuned on dev and the
epoch is scored there (``data.tune_on``): ``oracle`` (default) scores against the hand-annotated DPs
of TVsub dev (``dev.oracle-dp.seg.zh``, matched by character offset as in ``doctrans score
--dp``), the data the thesis tunes on; ``annotated`` scores against our own ``annotate-dp``
labels of dev. ``oracle`` falls back to ``annotated`` (with a warning) where no oracle exists.

Training runs on the shared loop (``doctrans.training.trainer``) as a ``DPTask``: MixedAdam
(sparse embedding rows, global-norm clipping), the ``train.lr_schedule`` (``epoch_decay`` by
default), ``TrainState`` / ``EarlyStopping`` on ``train.metric`` (``prediction_f1``),
``metrics.jsonl`` + TensorBoard + ``learning_curves.png``, and exact ``--resume`` from
``last.pt`` with the config check. The model's ``prepare`` pre-stage (the thesis' surface MLP)
runs once before the first update of a fresh run; its records are ``kind: prepare``.
"""
from __future__ import annotations

import json
import logging
import random
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
import yaml

from doctrans.config import to_dict
from doctrans.data.vocab import Vocab
from doctrans.dp.agreement import dp_agreement, prf
from doctrans.dp.annotate import NO_DP_LABEL
from doctrans.dp.config import DPGenConfig, dp_config_from_dict
from doctrans.dp.corpus import oracle_paths
from doctrans.dp.data import DPSentence, build_vocab, fold_of_docs, label_inventory, load_sentences
from doctrans.dp.generator import DPGenerator, build_model, decide, one_best
from doctrans.dp.models import DP_MODELS
from doctrans.runtime import distributed as dist
from doctrans.training.checkpoint import check_resume_compatible
from doctrans.training.run_dir import check_run_dir
from doctrans.runtime.checkpoint import load_checkpoint
from doctrans.training.train import add_file_log
from doctrans.training.trainer import StepLoss, Trainer
from doctrans.runtime.device import resolve_device
from doctrans.utils.io import atomic_write_text, read_lines

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


def load_data(cfg: DPGenConfig) -> tuple[list[DPSentence], list[DPSentence]]:
    """(train, dev) labelled sentences of ``cfg.data``. Raises ``FileNotFoundError`` if the
    annotated corpus is missing, ``ValueError`` for malformed label files."""
    d = cfg.data
    prep, ann = Path(d.prepared), d.annotated_dir
    for split in (d.train_split, d.dev_split):
        if not (ann / f"{split}.dplabel").is_file():
            raise FileNotFoundError(f"{ann / f'{split}.dplabel'} missing: run `doctrans annotate-dp corpus -p {prep}` first")
    train = load_sentences(prep / f"{d.train_split}.tok.zh", ann / f"{d.train_split}.dplabel",
                           prep / f"{d.train_split}.docs", prep / f"{d.train_split}.target")
    if d.folds:
        fold = fold_of_docs([s.doc for s in train], d.folds)
        train = [s for s in train if fold[s.doc] != d.fold]
    if d.max_train_sentences:
        train = train[:d.max_train_sentences]
    dev = load_sentences(prep / f"{d.dev_split}.tok.zh", ann / f"{d.dev_split}.dplabel",
                         prep / f"{d.dev_split}.docs")
    return train, dev


def _batches(sents: list[DPSentence], size: int, rng: random.Random) -> list[list[int]]:
    order = sorted(range(len(sents)), key=lambda k: (len(sents[k].tokens), rng.random()))
    batches = [order[b:b + size] for b in range(0, len(order), size)]
    rng.shuffle(batches)
    return batches


@dataclass
class DPBatch:
    """Sentence indices of one batch and the RNG of its sampling (pseudo-DPs). ``n_targets`` is
    None: the number of labelled positions is known only after the sampling (``DPModel.batch_loss``)."""

    idx: list[int]
    rng: random.Random
    n_targets: int | None = None


class DPTask:
    """A DP generator as a ``Task`` of the shared training loop (``doctrans.training.trainer``):
    batches of ``data.batch_sentences`` length-sorted sentences in shuffled order, the model's
    ``batch_loss``, and per evaluation the dev distributions → τ tuned and P/R/F (``DevScorer``).

    The batch order of epoch e is the one the pre-loop DP trainer drew from ``Random(seed)``
    in its e-th epoch (replayed, so runs without pseudo-DPs reproduce it exactly and a resumed
    run is exact); the pseudo-DP draws of batch i use ``Random((seed, e, i))``."""

    kind = "dp_generator"

    def __init__(self, cfg: DPGenConfig, gen: DPGenerator, train: list[DPSentence], dev: list[DPSentence],
                 scorer: DevScorer):
        self.config, self.gen, self.train, self.dev, self.scorer = cfg, gen, train, dev, scorer
        self.model = torch.nn.ModuleDict(gen.model.modules)
        self._epochs: tuple[random.Random, int, list[list[int]]] | None = None

    def epoch_batches(self, epoch: int) -> list[list[int]]:
        if self._epochs is None or self._epochs[1] > epoch:
            self._epochs = (random.Random(self.config.train.seed), -1, [])
        rng, done, batches = self._epochs
        for _ in range(epoch - done):
            batches = _batches(self.train, self.config.data.batch_sentences, rng)
        self._epochs = (rng, epoch, batches)
        return batches

    def collate(self, key: list[int], epoch: int, index: int) -> DPBatch:
        return DPBatch(key, random.Random(f"{self.config.train.seed}/{epoch}/{index}"))

    def loss(self, batch: DPBatch) -> StepLoss:
        total, n = self.gen.model.batch_loss(self.train, batch.idx, batch.rng)
        return StepLoss(total, {"nll_nats": float(total.detach())}, n)

    def evaluate(self) -> dict:
        """Dev τ and P/R/F; τ becomes the generator's threshold, so the checkpoint the loop
        writes next (best.pt when this is the best epoch, last.pt) carries its own τ."""
        tau, sc = self.scorer(self.gen.distributions(self.dev), self.gen.labels)
        self.gen.threshold = tau
        return {"detection_f1": sc["detection"]["f1"], "prediction_f1": sc["prediction"]["f1"],
                "threshold": tau, "against": sc["against"]}

    def checkpoint_extra(self) -> dict:
        return self.gen.checkpoint_extra()


def train_generator(cfg: DPGenConfig, resume: bool = False, overwrite: bool = False) -> Path:
    """Train (see module doc) on the shared loop; returns the run directory. Raises
    ``FileNotFoundError`` if the annotated corpus (or, with ``resume``, ``last.pt``) is missing,
    ``ValueError`` for malformed label files or a changed config on resume, RunDirExists (a
    ValueError) for a run directory holding a model without ``resume`` or ``overwrite``
    (``training.run_dir.check_run_dir``)."""
    if dist.is_main():
        check_run_dir(cfg.run_dir, resume, overwrite)
    torch.manual_seed(cfg.train.seed)
    if cfg.train.threads:
        torch.set_num_threads(cfg.train.threads)
    device = dist.setup(resolve_device(cfg.train.device))      # torchrun: data-parallel (see trainer)
    run_dir = Path(cfg.run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    if dist.is_main():
        add_file_log(run_dir)
    ckpt = None
    if resume:
        ckpt = load_checkpoint(run_dir / "last.pt")
        check_resume_compatible(dp_config_from_dict(ckpt["config"], source=str(run_dir / "last.pt")), cfg)
    if dist.is_main():
        atomic_write_text(run_dir / "config.yaml", yaml.safe_dump(to_dict(cfg), sort_keys=False))
    train, dev = load_data(cfg)
    labels = label_inventory()
    if ckpt is None:
        vocab = build_vocab(train, cfg.data.min_freq, cfg.data.max_vocab)
        model = build_model(cfg, vocab, labels, train)
    else:
        vocab = Vocab(ckpt["vocab"])
        model = DP_MODELS[cfg.model.name][1](cfg.model, vocab, labels, ckpt.get("model_extra"))
    gen = DPGenerator(cfg, vocab, labels, model)
    task = DPTask(cfg, gen, train, dev, DevScorer(cfg, dev, Path(cfg.data.prepared)))
    trainer = Trainer(task, cfg.train, run_dir, device)
    logger.info("DP generator %s: %s train sentences, %s dev, vocab %d, %s parameters", cfg.model.name,
                f"{len(train):,}", f"{len(dev):,}", len(vocab), f"{model.n_parameters():,}")
    if ckpt is None:
        model.prepare(train, dev, cfg.train, lambda rec: trainer.metrics.write("prepare", **rec))
        trainer.opt.zero_grad()          # the pre-stage's last gradients must not reach the loop's Adam
    else:
        trainer.restore(ckpt)
        gen.threshold = float(ckpt["threshold"])
    trainer.fit()
    return run_dir
