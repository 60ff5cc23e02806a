"""``doctrans train pipelines/dp/*.yaml``: train a DP generator on ``annotate-dp`` output.

Two models (``model:`` in the YAML; see ``doctrans.dp.models.labeler``):

* ``thesis`` — the thesis' two-stage generator (§4.3.2): an Elman-RNN DPP detector over
  windowed embeddings, then an MLP over the Table 4.6 features that picks the pronoun at each
  detected position. The detector trains on every position, the MLP on the DP positions only.
* ``labeler`` — ours: a BiGRU labeler over ``N`` + 30 pronouns with the previous sentence(s) of
  the document attended to (``context_sents``). With ``pseudo_dp`` > 0 it also learns the
  pronoun choice from overt pronouns: per epoch, a sentence is picked with that probability and
  one of its overt pronouns (not next to an annotated DP) is deleted; at the merged position the
  loss is the cross-entropy of P(pronoun | DP) = softmax over the pronoun logits only, so these
  pseudo-DPs never teach *where* pronouns are dropped (our addition, not in the thesis). The
  logged ``train_xent_nats`` then averages over both kinds of targets.

Both write ``RUN_DIR/best.pt`` (the epoch with the best dev pronoun F, see ``tune_on`` below),
``last.pt`` (for ``--resume``, epoch granularity), ``metrics.jsonl`` and
``config.yaml``. A checkpoint holds tensors and primitive types only (``weights_only`` loads).
After each epoch the DP decision threshold (a DP where P(N) < τ) is tuned on dev and the
epoch is scored there (``tune_on``): ``oracle`` (default) scores against the hand-annotated DPs
of TVsub dev (``dev.oracle-dp.seg.zh``, matched by character offset as in ``doctrans score
--dp``), the data the thesis tunes on; ``annotated`` scores against our own ``annotate-dp``
labels of dev. ``oracle`` falls back to ``annotated`` (with a warning) where no oracle exists.
"""
from __future__ import annotations

import dataclasses
import json
import logging
import random
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
import yaml
from tqdm import tqdm

from doctrans.config import ConfigError, load_yaml_tree, merge_trees, from_dict, parse_overrides
from doctrans.dp.corpus import oracle_paths
from doctrans.dp.annotate import NO_DP_LABEL
from doctrans.dp.data import (
    DPSentence, build_vocab, context_of, encode, label_inventory, load_sentences, n_feature_slots,
    pad, pseudo_dp, surface_features)
from doctrans.data.vocab import Vocab
from doctrans.dp.agreement import _prf, dp_agreement
from doctrans.dp.apply import one_best
from doctrans.dp.models.labeler import DPLabeler, ElmanDetector, SurfaceMLP
from doctrans.training.optim import build_optimizer
from doctrans.utils.io import atomic_torch_save, atomic_write_text, read_lines

logger = logging.getLogger(__name__)

MODELS = ("labeler", "thesis")
TUNE_ON = ("oracle", "annotated")
THRESHOLDS = tuple(round(float(t), 3) for t in np.arange(0.3, 0.976, 0.025))   # τ grid (P(N) < τ → DP)
SURFACE_BATCH = 1024     # thesis MLP: instances per update (its embedding table is large and dense)
SURFACE_MIN_P = 0.05     # thesis model: P(DP) below this is spread uniformly over the pronouns


@dataclass(frozen=True)
class DPGenConfig:
    """A DP-generator experiment (YAML keys = these fields; ``task: dp_generator``)."""

    task: str = "dp_generator"
    model: str = "labeler"               # labeler | thesis
    prepared: str = "data/quickstart"    # prepared dataset (tokens, docs)
    annotated: str = ""                  # annotate-dp output dir [default: PREPARED/dp]
    run_dir: str = "runs/dp"
    train_split: str = "train"
    dev_split: str = "dev"
    max_train_sentences: int = 0         # 0 = all
    min_freq: int = 2                    # word vocabulary
    max_vocab: int = 50_000
    # labeler (ours)
    emb: int = 192
    hidden: int = 192
    layers: int = 1
    dropout: float = 0.2
    context_sents: int = 1               # previous sentences of the document (0 = none)
    context_next: int = 0                # following sentences of the document (after a <s> marker)
    context_max_tokens: int = 60
    pseudo_dp: float = 0.0               # per sentence and epoch: P(an overt pronoun is deleted and
                                         # its surface trained as P(pronoun | DP), dp_data.pseudo_dp)
    pseudo_weight: float = 1.0           # weight of those pronoun-choice terms in the loss
    # thesis detector (Eqs. 4.1-4.3) and surface MLP (Table 4.6)
    det_emb: int = 200
    det_hidden: int = 200
    window: int = 5                      # "context window = 5" → k = 2 each side
    feat_emb: int = 100
    feat_hidden: int = 200
    word_window: int = 2                 # M_w
    sent_window: int = 2                 # N_s
    feat_min_freq: int = 2
    surface_epochs: int = 20
    # training
    epochs: int = 10
    batch_sentences: int = 64
    lr: float = 1e-3
    lr_decay: float = 1.0                # LR × lr_decay after every epoch from lr_decay_start on
    lr_decay_start: int = 1              # (OpenNMT's start_decay_steps/decay, per epoch)
    sparse_embeddings: bool = True       # sparse embedding gradients + lazy Adam (SparseAdam) on them
    seed: int = 1
    threads: int = 0
    max_time_min: float = 0.0            # wall-clock budget for the whole run; 0 = none
    log_every: int = 200
    # dev scoring: τ tuning and best-epoch selection (see module doc)
    tune_on: str = "oracle"              # oracle | annotated
    oracle_dir: str = ""                 # TVsub root [default: from PREPARED/meta.json]

    def __post_init__(self):
        if self.model not in MODELS:
            raise ConfigError(f"model must be one of {MODELS}, got {self.model!r}")
        if self.tune_on not in TUNE_ON:
            raise ConfigError(f"tune_on must be one of {TUNE_ON}, got {self.tune_on!r}")
        if not 0.0 <= self.pseudo_dp <= 1.0:
            raise ConfigError(f"pseudo_dp must be in [0, 1], got {self.pseudo_dp}")
        if self.pseudo_dp and self.model != "labeler":
            raise ConfigError("pseudo_dp is implemented for model: labeler only")
        if self.pseudo_weight < 0:
            raise ConfigError(f"pseudo_weight must be ≥ 0, got {self.pseudo_weight}")
        if not 0.0 < self.lr_decay <= 1.0:
            raise ConfigError(f"lr_decay must be in (0, 1], got {self.lr_decay}")

    def lr_at(self, epoch: int) -> float:
        """Learning rate of the 0-based ``epoch``: ``lr`` until ``lr_decay_start`` epochs are
        done, then × ``lr_decay`` per further epoch (a function of the epoch, so ``--resume`` and
        an uninterrupted run train alike)."""
        return self.lr * self.lr_decay ** max(0, epoch - self.lr_decay_start + 1)

    @property
    def annotated_dir(self) -> Path:
        return Path(self.annotated) if self.annotated else Path(self.prepared) / "dp"


def load_dp_config(path: str | Path, overrides=()) -> DPGenConfig:
    tree = merge_trees(load_yaml_tree(Path(path)), parse_overrides(overrides))
    return from_dict(DPGenConfig, tree, source=str(path))


def is_dp_config(path: str | Path) -> bool:
    """True if the YAML (following ``extends``) says ``task: dp_generator``."""
    return load_yaml_tree(Path(path)).get("task") == "dp_generator"


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
    return {"detection": _prf(pos, n_sys, n_ref), "prediction": _prf(word, n_sys, n_ref)}


def decide(probs: np.ndarray, labels: list[str], threshold: float) -> list[str]:
    """Per position: ``N`` if P(N) ≥ threshold, else the most probable pronoun. probs (T, L)."""
    best_dp = probs[:, 1:].argmax(1) + 1
    return [NO_DP_LABEL if probs[t, 0] >= threshold else labels[best_dp[t]] for t in range(len(probs))]


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
        if cfg.tune_on == "oracle":
            meta_path = prep / "meta.json"
            meta = json.loads(meta_path.read_text(encoding="utf-8")) if meta_path.is_file() else {}
            paths = oracle_paths(meta, cfg.dev_split, cfg.oracle_dir or None)
            if paths is None:
                logger.warning("tune_on=oracle: no hand-annotated oracle for %s (from %s or oracle_dir); "
                               "tuning on the annotate-dp labels instead", cfg.dev_split, meta_path)
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


# --- the generator bundle (what annotate-dp --generator loads) ---------------------------------


class DPGenerator:
    """A trained generator: ``distributions(sents)`` → per sentence (S + 1, L) probabilities,
    column 0 = P(N); ``labels`` names the columns."""

    def __init__(self, cfg: DPGenConfig, vocab: Vocab, labels: list[str], model: torch.nn.Module,
                 surface: SurfaceMLP | None = None, feat_vocab: dict[str, int] | None = None,
                 threshold: float = 0.5):
        self.cfg, self.vocab, self.labels, self.model = cfg, vocab, labels, model
        self.surface, self.feat_vocab, self.threshold = surface, feat_vocab, threshold

    @torch.no_grad()
    def distributions(self, sents: list[DPSentence], batch: int = 128) -> list[np.ndarray]:
        self.model.eval()
        if self.surface is not None:
            self.surface.eval()
        out: list[np.ndarray | None] = [None] * len(sents)
        order = sorted(range(len(sents)), key=lambda k: len(sents[k].tokens))
        for b in range(0, len(order), batch):
            idx = order[b:b + batch]
            for k, probs in zip(idx, self._batch_probs(sents, idx)):
                out[k] = probs
        return out

    def _batch_probs(self, sents: list[DPSentence], idx: list[int]) -> list[np.ndarray]:
        toks = pad([encode(self.vocab, sents[k].tokens) for k in idx], self.vocab.pad_id)
        lengths = [len(sents[k].tokens) + 1 for k in idx]
        if self.cfg.model == "labeler":
            ctx = _context_batch(self.cfg, self.vocab, sents, idx)
            probs = torch.softmax(self.model(toks, ctx), -1).numpy()
            return [probs[i, :n] for i, n in enumerate(lengths)]
        p_dp = torch.softmax(self.model(toks), -1)[..., 1].numpy()            # (B, T)
        feats, where = [], []
        for i, k in enumerate(idx):
            for t in range(lengths[i]):
                if p_dp[i, t] >= SURFACE_MIN_P:       # the MLP runs where a DP is at all plausible
                    feats.append(_feature_ids(self.feat_vocab, surface_features(
                        sents, k, t, self.cfg.word_window, self.cfg.sent_window)))
                    where.append((i, t))
        surf = (torch.softmax(self.surface(torch.tensor(feats, dtype=torch.long)), -1).numpy()
                if feats else np.zeros((0, len(self.labels) - 1)))
        out = []
        for i, n in enumerate(lengths):
            probs = np.empty((n, len(self.labels)), dtype=np.float32)
            probs[:, 0] = 1.0 - p_dp[i, :n]
            probs[:, 1:] = (p_dp[i, :n] / (len(self.labels) - 1))[:, None]   # replaced where scored
            out.append(probs)
        for (i, t), sp in zip(where, surf):
            out[i][t, 1:] = p_dp[i, t] * sp
        return out

    def to_checkpoint(self, extra: dict | None = None) -> dict:
        ck = {"kind": "dp_generator", "cfg": dataclasses.asdict(self.cfg), "vocab": self.vocab.tokens,
              "labels": self.labels, "model": self.model.state_dict(), "threshold": self.threshold}
        if self.surface is not None:
            ck["surface"] = self.surface.state_dict()
            ck["feat_vocab"] = sorted(self.feat_vocab, key=self.feat_vocab.get)
        ck.update(extra or {})
        return ck

    @classmethod
    def load(cls, path: str | Path) -> "DPGenerator":
        """Load ``best.pt``/``last.pt`` (weights_only). Raises ``ValueError`` if it is not a DP
        generator checkpoint."""
        ck = torch.load(path, map_location="cpu", weights_only=True)
        if ck.get("kind") != "dp_generator":
            raise ValueError(f"{path} is not a DP generator checkpoint (doctrans train pipelines/dp/…)")
        cfg = DPGenConfig(**ck["cfg"])
        vocab = Vocab(ck["vocab"])
        model, surface, feat_vocab = _build(cfg, vocab, ck["labels"], ck.get("feat_vocab"))
        model.load_state_dict(ck["model"])
        if surface is not None:
            surface.load_state_dict(ck["surface"])
        return cls(cfg, vocab, ck["labels"], model, surface, feat_vocab, ck["threshold"])


class DPEnsemble:
    """Several trained generators used as one: the per-position distributions of the members
    are averaged (checkpoint ensembling, as fairseq's ``--path a.pt:b.pt``). Same interface as
    ``DPGenerator`` for ``complete_lines`` / ``annotate-dp --generator`` / ``translate
    --dp-generator``: ``labels``, ``threshold``, ``distributions(sents)`` → per sentence (S + 1, L).

    ``threshold`` is the mean of the members' dev-tuned τ [choice: an ensemble has no τ of its
    own; pass ``--threshold`` to override]. Raises ``ValueError`` if the members' label
    inventories differ (``paths`` name them in the message)."""

    def __init__(self, members: list[DPGenerator], paths: Sequence[str | Path] = ()):
        if not members:
            raise ValueError("an ensemble needs at least one generator")
        names = [str(p) for p in paths] or [f"member {k}" for k in range(len(members))]
        for m, name in zip(members[1:], names[1:]):
            if m.labels != members[0].labels:
                raise ValueError(f"{name}: label inventory differs from {names[0]}; cannot ensemble")
        self.members, self.labels = members, members[0].labels
        self.threshold = float(np.mean([m.threshold for m in members]))

    def distributions(self, sents: list[DPSentence], batch: int = 128) -> list[np.ndarray]:
        per_member = [m.distributions(sents, batch) for m in self.members]
        return [np.mean(np.stack(ps), axis=0) for ps in zip(*per_member)]


def load_generator(spec: str | Path | Sequence[str | Path]) -> DPGenerator | DPEnsemble:
    """A generator from one checkpoint path, or an ensemble (``DPEnsemble``) from several: a
    sequence of paths, or one string joining them with ``:``. Raises ``FileNotFoundError``
    naming a missing checkpoint, ``ValueError`` for a non-generator checkpoint or mismatched
    label inventories."""
    if isinstance(spec, (str, Path)):
        spec = [spec] if Path(spec).is_file() else [p for p in str(spec).split(":") if p]
    paths = [Path(p) for p in spec]
    for p in paths:
        if not p.is_file():
            raise FileNotFoundError(f"DP generator checkpoint {p} not found")
    if len(paths) == 1:
        return DPGenerator.load(paths[0])
    return DPEnsemble([DPGenerator.load(p) for p in paths], paths)


def _build(cfg: DPGenConfig, vocab: Vocab, labels: list[str], feat_tokens: list[str] | None):
    if cfg.model == "labeler":
        use_context = cfg.context_sents > 0 or cfg.context_next > 0
        return DPLabeler(len(vocab), len(labels), cfg.emb, cfg.hidden, cfg.layers, cfg.dropout, vocab.pad_id,
                         use_context=use_context, sparse=cfg.sparse_embeddings), None, None
    det = ElmanDetector(len(vocab), cfg.det_emb, cfg.det_hidden, cfg.window, vocab.pad_id,
                        sparse=cfg.sparse_embeddings)
    feat_vocab = {t: i for i, t in enumerate(feat_tokens or ["<pad>", "<unk>"])}
    surf = SurfaceMLP(len(feat_vocab), n_feature_slots(cfg.word_window), len(labels) - 1,
                      cfg.feat_emb, cfg.feat_hidden, pad_id=0, sparse=cfg.sparse_embeddings)
    return det, surf, feat_vocab


def _feature_ids(feat_vocab: dict[str, int], feats: list[str]) -> list[int]:
    return [feat_vocab.get(f, 1) for f in feats]


def _context_batch(cfg: DPGenConfig, vocab: Vocab, sents: list[DPSentence], idx: list[int]) -> torch.Tensor:
    if cfg.context_sents <= 0 and cfg.context_next <= 0:
        return torch.zeros((len(idx), 0), dtype=torch.long)
    rows = [[vocab.index.get(t, vocab.unk_id)
             for t in context_of(sents, k, cfg.context_sents, cfg.context_max_tokens, cfg.context_next)]
            for k in idx]
    return pad(rows, vocab.pad_id, min_len=1)


# --- training ---------------------------------------------------------------------------------


class MixedAdam:
    """Adam for a module whose embedding tables may have sparse gradients: fused Adam on the
    dense parameters, ``torch.optim.SparseAdam`` (lazy Adam: moments of a row move only when
    the row is in the batch) on the sparse tables. Updating a 50k-row table densely costs more
    than the rest of a thesis-detector step (profile in benchmarks/RESULTS.md).

    ``step(max_norm)`` clips the global gradient norm (dense and sparse together) first."""

    def __init__(self, module: torch.nn.Module, lr: float):
        self.sparse = [m.weight for m in module.modules() if isinstance(m, torch.nn.Embedding) and m.sparse]
        ids = {id(p) for p in self.sparse}
        self.dense = [p for p in module.parameters() if id(p) not in ids]
        self.opts = [build_optimizer(self.dense, lr, (0.9, 0.999), 1e-8, 0.0)]
        if self.sparse:
            self.opts.append(torch.optim.SparseAdam(self.sparse, lr, (0.9, 0.999), 1e-8))

    def set_lr(self, lr: float) -> None:
        for o in self.opts:
            for g in o.param_groups:
                g["lr"] = lr

    def zero_grad(self) -> None:
        for o in self.opts:
            o.zero_grad(set_to_none=True)

    def step(self, max_norm: float = 0.0) -> None:
        if max_norm:
            sq = [p.grad.pow(2).sum() for p in self.dense if p.grad is not None]
            for p in self.sparse:
                if p.grad is not None:
                    p.grad = p.grad.coalesce()
                    sq.append(p.grad.values().pow(2).sum())
            total = torch.stack(sq).sum().sqrt() if sq else torch.tensor(0.0)
            scale = float(max_norm / (total + 1e-6))
            if scale < 1.0:
                for p in self.dense + self.sparse:
                    if p.grad is not None:
                        p.grad.mul_(scale)
        for o in self.opts:
            o.step()

    def state_dict(self) -> list[dict]:
        return [o.state_dict() for o in self.opts]

    def load_state_dict(self, states: list[dict] | dict) -> None:
        if isinstance(states, dict):        # a checkpoint from before sparse embeddings
            states = [states]
        if len(states) != len(self.opts):
            raise ValueError(f"optimizer state has {len(states)} parts, expected {len(self.opts)} "
                             "(sparse_embeddings changed since the checkpoint?)")
        for o, st in zip(self.opts, states):
            o.load_state_dict(st)


def _batches(sents: list[DPSentence], size: int, rng: random.Random) -> list[list[int]]:
    order = sorted(range(len(sents)), key=lambda k: (len(sents[k].tokens), rng.random()))
    batches = [order[b:b + size] for b in range(0, len(order), size)]
    rng.shuffle(batches)
    return batches


def run(cfg: DPGenConfig, resume: bool = False) -> Path:
    """Train (see module doc); returns the run directory. Raises ``FileNotFoundError`` if the
    annotated corpus is missing, ``ValueError`` for malformed label files."""
    torch.manual_seed(cfg.seed)
    if cfg.threads:
        torch.set_num_threads(cfg.threads)
    run_dir = Path(cfg.run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    atomic_write_text(run_dir / "config.yaml", yaml.safe_dump(dataclasses.asdict(cfg), sort_keys=False))
    prep, ann = Path(cfg.prepared), cfg.annotated_dir
    for split in (cfg.train_split, cfg.dev_split):
        if not (ann / f"{split}.dplabel").is_file():
            raise FileNotFoundError(f"{ann / f'{split}.dplabel'} missing: run `doctrans annotate-dp -p {prep}` first")
    train = load_sentences(prep / f"{cfg.train_split}.tok.zh", ann / f"{cfg.train_split}.dplabel",
                           prep / f"{cfg.train_split}.docs")
    if cfg.max_train_sentences:
        train = train[:cfg.max_train_sentences]
    dev = load_sentences(prep / f"{cfg.dev_split}.tok.zh", ann / f"{cfg.dev_split}.dplabel",
                         prep / f"{cfg.dev_split}.docs")
    vocab = build_vocab(train, cfg.min_freq, cfg.max_vocab)
    labels = label_inventory()
    lab_id = {l: i for i, l in enumerate(labels)}
    feat_tokens = None
    if cfg.model == "thesis":
        feat_tokens = _feature_vocab(cfg, train)
    model, surface, feat_vocab = _build(cfg, vocab, labels, feat_tokens)
    gen = DPGenerator(cfg, vocab, labels, model, surface, feat_vocab)
    params = list(model.parameters())
    opt = MixedAdam(model, cfg.lr)
    state = {"epoch": 0, "best_f": -1.0, "surface_done": False}
    if resume and (run_dir / "last.pt").is_file():
        ck = torch.load(run_dir / "last.pt", map_location="cpu", weights_only=True)
        model.load_state_dict(ck["model"])
        opt.load_state_dict(ck["optimizer"])
        if surface is not None and "surface" in ck:
            surface.load_state_dict(ck["surface"])
        state = ck["state"]
        logger.info("resumed from %s at epoch %d", run_dir / "last.pt", state["epoch"])
    n_params = sum(p.numel() for p in params) + (sum(p.numel() for p in surface.parameters()) if surface else 0)
    logger.info("DP generator %s: %s train sentences, %s dev, vocab %d, %s parameters", cfg.model,
                f"{len(train):,}", f"{len(dev):,}", len(vocab), f"{n_params:,}")
    scorer = DevScorer(cfg, dev, prep)
    t_start = time.time()
    metrics = open(run_dir / "metrics.jsonl", "a", encoding="utf-8")
    out_of_time = False
    try:
        if cfg.model == "thesis" and not state["surface_done"]:
            _train_surface(cfg, gen, train, dev, lab_id, metrics)
            state["surface_done"] = True
        rng = random.Random(cfg.seed + state["epoch"])
        while state["epoch"] < cfg.epochs and not out_of_time:
            model.train()
            opt.set_lr(cfg.lr_at(state["epoch"]))
            epoch_loss, n_tok = 0.0, 0
            batches = _batches(train, cfg.batch_sentences, rng)
            bar = tqdm(batches, desc=f"epoch {state['epoch'] + 1}/{cfg.epochs}", unit="batch", mininterval=5)
            for bi, idx in enumerate(bar):
                rows = [(train[k].tokens, train[k].labels, None) for k in idx]
                if cfg.pseudo_dp:
                    rows = [(pseudo_dp(t, lab, rng) or (t, lab, None)) if rng.random() < cfg.pseudo_dp
                            else (t, lab, None) for t, lab, _ in rows]
                toks = pad([encode(vocab, t) for t, _, _ in rows], vocab.pad_id)
                gold_rows = [[lab_id.get(l, 0) for l in lab] for _, lab, _ in rows]
                pseudo = [(r, pos, gold_rows[r][pos]) for r, (_, _, pos) in enumerate(rows) if pos is not None]
                for r, pos, _ in pseudo:
                    gold_rows[r][pos] = -100          # no detection target at a pseudo DP
                if cfg.model == "labeler":
                    gold = pad(gold_rows, -100)
                    logits = model(toks, _context_batch(cfg, vocab, train, idx))
                else:
                    gold = pad([[int(g != 0) for g in r] for r in gold_rows], -100)
                    logits = model(toks)
                loss = F.cross_entropy(logits.flatten(0, 1), gold.flatten(), ignore_index=-100, reduction="sum")
                n = int((gold != -100).sum())
                if pseudo:
                    r_i, p_i, y = (torch.tensor(v) for v in zip(*pseudo))
                    loss = loss + cfg.pseudo_weight * F.cross_entropy(
                        logits[r_i, p_i, 1:], y - 1, reduction="sum")     # P(pronoun | DP)
                    n += len(pseudo)
                opt.zero_grad()
                (loss / n).backward()
                opt.step(max_norm=1.0)
                epoch_loss, n_tok = epoch_loss + loss.item(), n_tok + n
                if bi % cfg.log_every == 0:
                    bar.set_postfix(xent=f"{epoch_loss / max(n_tok, 1):.4f}")
                if cfg.max_time_min and time.time() - t_start > 60 * cfg.max_time_min:
                    out_of_time = True
                    logger.info("max_time_min reached during epoch %d", state["epoch"] + 1)
                    break
            bar.close()
            state["epoch"] += 1
            dev_probs = gen.distributions(dev)
            tau, sc = scorer(dev_probs, labels)
            rec = {"epoch": state["epoch"], "lr": cfg.lr_at(state["epoch"] - 1),
                   "train_xent_nats": epoch_loss / max(n_tok, 1), "dev_threshold": tau,
                   "dev_against": sc["against"], "dev_detection_f1": sc["detection"]["f1"],
                   "dev_prediction_f1": sc["prediction"]["f1"], "elapsed_s": round(time.time() - t_start, 1)}
            metrics.write(json.dumps(rec) + "\n")
            metrics.flush()
            logger.info("epoch %d: train xent %.4f, dev (%s, τ=%.3f) detection F %.4f, prediction F %.4f",
                        state["epoch"], rec["train_xent_nats"], sc["against"], tau,
                        rec["dev_detection_f1"], rec["dev_prediction_f1"])
            if sc["prediction"]["f1"] > state["best_f"]:
                state["best_f"] = sc["prediction"]["f1"]
                gen.threshold = tau
                atomic_torch_save(gen.to_checkpoint({"dev": sc, "epoch": state["epoch"]}), run_dir / "best.pt")
            last = gen.to_checkpoint({"optimizer": opt.state_dict(), "state": state})
            atomic_torch_save(last, run_dir / "last.pt")
    finally:
        metrics.close()
    return run_dir


def _feature_vocab(cfg: DPGenConfig, train: list[DPSentence]) -> list[str]:
    counts: Counter[str] = Counter()
    for k, s in enumerate(train):
        for t, lab in enumerate(s.labels):
            if lab != NO_DP_LABEL:
                counts.update(surface_features(train, k, t, cfg.word_window, cfg.sent_window))
    return ["<pad>", "<unk>"] + [f for f, c in counts.most_common() if c >= cfg.feat_min_freq]


def _surface_instances(cfg: DPGenConfig, gen: DPGenerator, sents: list[DPSentence],
                       lab_id: dict[str, int]) -> tuple[torch.Tensor, torch.Tensor]:
    feats, ys = [], []
    for k, s in enumerate(sents):
        for t, lab in enumerate(s.labels):
            if lab != NO_DP_LABEL and lab in lab_id:
                feats.append(_feature_ids(gen.feat_vocab, surface_features(sents, k, t, cfg.word_window,
                                                                           cfg.sent_window)))
                ys.append(lab_id[lab] - 1)
    return (torch.tensor(feats, dtype=torch.long).reshape(len(ys), -1),
            torch.tensor(ys, dtype=torch.long))


def _train_surface(cfg: DPGenConfig, gen: DPGenerator, train, dev, lab_id, metrics) -> None:
    """The MLP on gold DP positions (Adam, ``surface_epochs``, best dev accuracy kept)."""
    xs, ys = _surface_instances(cfg, gen, train, lab_id)
    xd, yd = _surface_instances(cfg, gen, dev, lab_id)
    logger.info("surface MLP: %s training instances (DP positions), %s dev", f"{len(ys):,}", f"{len(yd):,}")
    mlp = gen.surface
    opt = MixedAdam(mlp, cfg.lr)
    g = torch.Generator().manual_seed(cfg.seed)
    best, best_state = -1.0, None
    for ep in range(cfg.surface_epochs):
        mlp.train()
        perm = torch.randperm(len(ys), generator=g)
        for b in range(0, len(ys), SURFACE_BATCH):
            idx = perm[b:b + SURFACE_BATCH]
            loss = F.cross_entropy(mlp(xs[idx]), ys[idx])
            opt.zero_grad()
            loss.backward()
            opt.step()
        mlp.eval()
        with torch.no_grad():
            acc = float((mlp(xd).argmax(1) == yd).float().mean()) if len(yd) else 0.0
        metrics.write(json.dumps({"surface_epoch": ep + 1, "dev_accuracy": acc}) + "\n")
        if acc > best:
            best, best_state = acc, {k: v.clone() for k, v in mlp.state_dict().items()}
    logger.info("surface MLP: best dev accuracy at gold DP positions %.4f", best)
    mlp.load_state_dict(best_state)
