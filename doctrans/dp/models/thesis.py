"""The thesis' two-stage DP generator (model ``thesis``, §4.3.2, Table 4.6).

* ``ElmanDetector`` — the **DPP detector** (Eqs. 4.1–4.3): windowed embeddings
  ``x_t = v_{t-k} ⊕ … ⊕ v_{t+k}`` (k = 2, "context window = 5"), an Elman RNN with a sigmoid
  hidden layer ``h_t = σ(U x_t + V h_{t-1})`` (hidden 200), and a 2-class softmax (NA / DP).
  Trained by the epoch loop on every position.
* ``SurfaceMLP`` — the **DP surface predictor**: embeddings (100) of the Table 4.6 feature slots
  (rows 1–8; ``doctrans.dp.data.surface_features``), concatenated, two ReLU layers of 200, a
  softmax over the DP vocabulary. Trained first (``prepare``) on the DP positions only.

P(pronoun p at t) = P(DP at t) · P_MLP(p); where P(DP) < ``SURFACE_MIN_P`` the MLP is not run and
P(DP) is spread uniformly over the pronouns.
"""
from __future__ import annotations

import logging
import random
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

from doctrans.config import TrainConfig
from doctrans.dp.annotate import NO_DP_LABEL
from doctrans.dp.data import DPSentence, n_feature_slots, pad, surface_features
from doctrans.dp.models.base import DPModel

logger = logging.getLogger(__name__)

SURFACE_BATCH = 1024     # MLP: instances per update (its embedding table is large and dense)
SURFACE_MIN_P = 0.05     # P(DP) below this is spread uniformly over the pronouns


@dataclass(frozen=True)
class ThesisConfig:
    """``model:`` section of ``pipelines/dp/thesis.yaml`` (``name: thesis``)."""

    name: str = "thesis"                 # its row in DP_MODELS (checked by DPGenConfig)
    det_emb: int = 200                   # detector (Eqs. 4.1-4.3)
    det_hidden: int = 200
    window: int = 5                      # "context window = 5" → k = 2 each side
    feat_emb: int = 100                  # surface MLP (Table 4.6)
    feat_hidden: int = 200
    word_window: int = 2                 # M_w
    sent_window: int = 2                 # N_s
    feat_min_freq: int = 2
    surface_epochs: int = 20
    sparse_embeddings: bool = True       # sparse embedding gradients + lazy Adam on them


class ElmanDetector(nn.Module):
    """DPP detector (thesis Eqs. 4.1–4.3).

    ``forward(tokens)``: tokens (B, T) int64 with ``pad_id`` padding, T = S + 1 (``</s>``
    included) → logits (B, T, 2) (class 1 = a DP before the token). The window is padded with
    ``pad_id`` at the sentence edges. The recurrence runs left to right over T steps.
    ``sparse``: the embedding table gets sparse gradients (train it with a sparse optimiser).
    """

    def __init__(self, vocab_size: int, emb: int = 200, hidden: int = 200, window: int = 5,
                 pad_id: int = 0, dropout: float = 0.0, sparse: bool = False):
        super().__init__()
        if window % 2 != 1:
            raise ValueError(f"window must be odd (2k+1), got {window}")
        self.k, self.pad_id = window // 2, pad_id
        self.embed = nn.Embedding(vocab_size, emb, padding_idx=pad_id, sparse=sparse)
        self.U = nn.Linear(window * emb, hidden)
        self.V = nn.Linear(hidden, hidden, bias=False)
        self.out = nn.Linear(hidden, 2)
        self.drop = nn.Dropout(dropout)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        B, T = tokens.shape
        padded = F.pad(tokens, (self.k, self.k), value=self.pad_id)
        windows = padded.unfold(1, 2 * self.k + 1, 1)               # (B, T, 2k+1)
        x = self.drop(self.embed(windows).flatten(2))                # (B, T, (2k+1)E)   Eq. 4.1
        ux = self.U(x)
        h = ux.new_zeros(B, self.V.in_features)
        states = []
        for t in range(T):                                           # Eq. 4.2 (sigmoid Elman)
            h = torch.sigmoid(ux[:, t] + self.V(h))
            states.append(h)
        return self.out(self.drop(torch.stack(states, 1)))          # Eq. 4.3 (softmax in the loss)


class SurfaceMLP(nn.Module):
    """DP surface predictor: ``forward(features)``, features (N, F) int64 ids of the F slots
    (``pad_id`` = an empty slot) → logits (N, n_pronouns)."""

    def __init__(self, feat_vocab: int, n_slots: int, n_pronouns: int, emb: int = 100,
                 hidden: int = 200, pad_id: int = 0, dropout: float = 0.0, sparse: bool = False):
        super().__init__()
        self.embed = nn.Embedding(feat_vocab, emb, padding_idx=pad_id, sparse=sparse)
        self.mlp = nn.Sequential(
            nn.Dropout(dropout), nn.Linear(n_slots * emb, hidden), nn.ReLU(),
            nn.Dropout(dropout), nn.Linear(hidden, hidden), nn.ReLU(),
            nn.Linear(hidden, n_pronouns))

    def forward(self, features: torch.Tensor) -> torch.Tensor:
        return self.mlp(self.embed(features).flatten(1))


class ThesisModel(DPModel):
    """``DPModel`` adapter of the detector + surface MLP (checkpoint modules ``detector`` and
    ``surface``; extra state ``feat_vocab``, the feature strings in id order)."""

    name = "thesis"

    def __init__(self, cfg: ThesisConfig, vocab, labels: list[str], extra: dict | None = None):
        super().__init__(cfg, vocab, labels, extra)
        feat_tokens = (extra or {}).get("feat_vocab") or ["<pad>", "<unk>"]
        self.feat_vocab = {t: i for i, t in enumerate(feat_tokens)}
        self.network = ElmanDetector(len(vocab), cfg.det_emb, cfg.det_hidden, cfg.window, vocab.pad_id,
                                     sparse=cfg.sparse_embeddings)
        self.surface = SurfaceMLP(len(self.feat_vocab), n_feature_slots(cfg.word_window), len(labels) - 1,
                                  cfg.feat_emb, cfg.feat_hidden, pad_id=0, sparse=cfg.sparse_embeddings)
        self.modules = {"detector": self.network, "surface": self.surface}

    @classmethod
    def build(cls, cfg: ThesisConfig, vocab, labels: list[str], train_sents: Sequence[DPSentence]) -> "ThesisModel":
        """The feature vocabulary: features of the gold DP positions of ``train_sents`` seen at
        least ``feat_min_freq`` times, most frequent first, after ``<pad>``, ``<unk>``."""
        counts: Counter[str] = Counter()
        for k, s in enumerate(train_sents):
            for t, lab in enumerate(s.labels):
                if lab != NO_DP_LABEL:
                    counts.update(surface_features(train_sents, k, t, cfg.word_window, cfg.sent_window))
        tokens = ["<pad>", "<unk>"] + [f for f, c in counts.most_common() if c >= cfg.feat_min_freq]
        return cls(cfg, vocab, labels, {"feat_vocab": tokens})

    def extra_state(self) -> dict:
        return {"feat_vocab": sorted(self.feat_vocab, key=self.feat_vocab.get)}

    def features(self, sents: Sequence[DPSentence], k: int, t: int) -> list[int]:
        """Feature ids (unknown → 1) of position ``t`` of ``sents[k]``."""
        feats = surface_features(sents, k, t, self.cfg.word_window, self.cfg.sent_window)
        return [self.feat_vocab.get(f, 1) for f in feats]

    def batch_probs(self, sents: Sequence[DPSentence], idx: list[int]) -> list[np.ndarray]:
        toks = self.tokens([sents[k].tokens for k in idx])
        lengths = [len(sents[k].tokens) + 1 for k in idx]
        n_lab = len(self.labels)
        p_dp = torch.softmax(self.network(toks), -1)[..., 1].numpy()            # (B, T)
        feats, where = [], []
        for i, k in enumerate(idx):
            for t in range(lengths[i]):
                if p_dp[i, t] >= SURFACE_MIN_P:       # the MLP runs where a DP is at all plausible
                    feats.append(self.features(sents, k, t))
                    where.append((i, t))
        surf = (torch.softmax(self.surface(torch.tensor(feats, dtype=torch.long)), -1).numpy()
                if feats else np.zeros((0, n_lab - 1)))
        out = []
        for i, n in enumerate(lengths):
            probs = np.empty((n, n_lab), dtype=np.float32)
            probs[:, 0] = 1.0 - p_dp[i, :n]
            probs[:, 1:] = (p_dp[i, :n] / (n_lab - 1))[:, None]   # replaced where scored
            out.append(probs)
        for (i, t), sp in zip(where, surf):
            out[i][t, 1:] = p_dp[i, t] * sp
        return out

    def batch_loss(self, sents: Sequence[DPSentence], idx: list[int], rng: random.Random
                   ) -> tuple[torch.Tensor, int]:
        """Detector cross-entropy (DP / no DP) at every position; ``rng`` is not used."""
        toks = self.tokens([sents[k].tokens for k in idx])
        gold = pad([[int(g != 0) for g in r] for r in self.gold([sents[k].labels for k in idx])], -100)
        logits = self.network(toks)
        loss = F.cross_entropy(logits.flatten(0, 1), gold.flatten(), ignore_index=-100, reduction="sum")
        return loss, int((gold != -100).sum())

    def prepare(self, train: Sequence[DPSentence], dev: Sequence[DPSentence], train_cfg: TrainConfig,
                log: Callable[[dict], None]) -> None:
        """The surface MLP on gold DP positions: Adam (``train.lr``, ``train.adam_*``), batches of
        ``SURFACE_BATCH``, ``surface_epochs`` epochs, the epoch with the best dev accuracy kept;
        logs ``{"surface_epoch", "dev_accuracy"}`` per epoch."""
        from doctrans.training.optim import MixedAdam     # training only: translating imports no trainer

        xs, ys = self._instances(train)
        xd, yd = self._instances(dev)
        logger.info("surface MLP: %s training instances (DP positions), %s dev", f"{len(ys):,}", f"{len(yd):,}")
        mlp = self.surface
        opt = MixedAdam(mlp, train_cfg.lr, train_cfg.adam_betas, train_cfg.adam_eps)
        g = torch.Generator().manual_seed(train_cfg.seed)
        best, best_state = -1.0, None
        for ep in range(self.cfg.surface_epochs):
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
            log({"surface_epoch": ep + 1, "dev_accuracy": acc})
            if acc > best:
                best, best_state = acc, {k: v.clone() for k, v in mlp.state_dict().items()}
        logger.info("surface MLP: best dev accuracy at gold DP positions %.4f", best)
        mlp.load_state_dict(best_state)

    def _instances(self, sents: Sequence[DPSentence]) -> tuple[torch.Tensor, torch.Tensor]:
        """(N, F) feature ids and (N,) pronoun ids (label id − 1) of the gold DP positions."""
        feats, ys = [], []
        for k, s in enumerate(sents):
            for t, lab in enumerate(s.labels):
                if lab != NO_DP_LABEL and lab in self.lab_id:
                    feats.append(self.features(sents, k, t))
                    ys.append(self.lab_id[lab] - 1)
        return (torch.tensor(feats, dtype=torch.long).reshape(len(ys), -1),
                torch.tensor(ys, dtype=torch.long))
