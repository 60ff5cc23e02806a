"""Our DP generator (model ``labeler``): one softmax over ``N`` + pronouns per position.

The end-to-end labeler of thesis §6.2.2 with a BiGRU over the sentence and, as in §6.2.3, the
previous (``context_sents``) and following (``context_next``) sentences of the document encoded
by the same BiGRU and attended to from every position (docs/models.md §2.11, §3.3). With
``pseudo_dp`` > 0 it also learns the pronoun choice from overt pronouns: per epoch, a sentence is
picked with that probability and one of its overt pronouns (not next to an annotated DP) is
deleted (``doctrans.dp.data.pseudo_dp``); at the merged position the loss is the cross-entropy of
P(pronoun | DP) = softmax over the pronoun logits only, weighted by ``pseudo_weight``, so these
pseudo-DPs never teach *where* pronouns are dropped (our addition, not in the thesis).
"""
from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

from doctrans.config import ConfigError
from doctrans.dp.data import DPSentence, context_of, pad, pseudo_dp
from doctrans.dp.models.base import DPModel


@dataclass(frozen=True)
class LabelerConfig:
    """``model:`` section of ``pipelines/dp/labeler.yaml`` (``name: labeler``)."""

    name: str = "labeler"                # its row in DP_MODELS (checked by DPGenConfig)
    emb: int = 192
    hidden: int = 192
    layers: int = 1
    dropout: float = 0.2
    context_sents: int = 1               # previous sentences of the document (0 = none)
    context_next: int = 0                # following sentences of the document (after a <s> marker)
    context_max_tokens: int = 60
    pseudo_dp: float = 0.0               # per sentence and epoch: P(an overt pronoun is deleted and
                                         # its surface trained as P(pronoun | DP))
    pseudo_weight: float = 1.0           # weight of those pronoun-choice terms in the loss
    sparse_embeddings: bool = True       # sparse embedding gradients + lazy Adam on them

    def __post_init__(self):
        if not 0.0 <= self.pseudo_dp <= 1.0:
            raise ConfigError(f"model.pseudo_dp must be in [0, 1], got {self.pseudo_dp}")
        if self.pseudo_weight < 0:
            raise ConfigError(f"model.pseudo_weight must be ≥ 0, got {self.pseudo_weight}")


class DPLabeler(nn.Module):
    """End-to-end DP labeler with document context (ours; cf. thesis §6.2.2–6.2.3).

    ``forward(tokens, context=None)``: tokens (B, T) with ``</s>`` at each sentence end and
    ``pad_id`` padding; context (B, C) ids of the previous sentence(s) of the document (each
    sentence followed by ``</s>``; all-pad rows = no context) → logits (B, T, n_labels).

    h = BiGRU(embed(tokens)) (B, T, 2H); c = BiGRU(embed(context)) (B, C, 2H);
    a_t = Σ_c softmax_c(h_t W_a c_c) c_c (attention over context tokens, masked; zero when there
    is no context); logits_t = W_o tanh(W_h [h_t; a_t]).
    """

    def __init__(self, vocab_size: int, n_labels: int, emb: int = 256, hidden: int = 256,
                 layers: int = 2, dropout: float = 0.2, pad_id: int = 0, use_context: bool = True,
                 sparse: bool = False):
        super().__init__()
        self.pad_id, self.use_context = pad_id, use_context
        self.embed = nn.Embedding(vocab_size, emb, padding_idx=pad_id, sparse=sparse)
        self.rnn = nn.GRU(emb, hidden, num_layers=layers, batch_first=True, bidirectional=True,
                          dropout=dropout if layers > 1 else 0.0)
        self.drop = nn.Dropout(dropout)
        d = 2 * hidden
        self.att = nn.Linear(d, d, bias=False)
        self.combine = nn.Linear(2 * d if use_context else d, d)
        self.out = nn.Linear(d, n_labels)

    def _encode(self, ids: torch.Tensor) -> torch.Tensor:
        lengths = (ids != self.pad_id).sum(1).clamp(min=1).cpu()
        packed = nn.utils.rnn.pack_padded_sequence(self.drop(self.embed(ids)), lengths,
                                                   batch_first=True, enforce_sorted=False)
        out, _ = self.rnn(packed)
        out, _ = nn.utils.rnn.pad_packed_sequence(out, batch_first=True, total_length=ids.shape[1])
        return self.drop(out)

    def forward(self, tokens: torch.Tensor, context: torch.Tensor | None = None) -> torch.Tensor:
        h = self._encode(tokens)                                     # (B, T, 2H)
        if self.use_context:
            if context is None or context.shape[1] == 0:
                a = torch.zeros_like(h)
            else:
                c = self._encode(context)                            # (B, C, 2H)
                cmask = context != self.pad_id                       # (B, C)
                scores = torch.einsum("btd,bcd->btc", self.att(h), c)
                scores = scores.masked_fill(~cmask[:, None, :], float("-inf"))
                w = torch.softmax(scores, -1).nan_to_num(0.0)        # rows with no context → 0
                a = torch.einsum("btc,bcd->btd", w, c)
            h = torch.cat([h, a], -1)
        return self.out(self.drop(torch.tanh(self.combine(h))))


class LabelerModel(DPModel):
    """``DPModel`` adapter of ``DPLabeler`` (checkpoint module name ``labeler``)."""

    name = "labeler"

    def __init__(self, cfg: LabelerConfig, vocab, labels: list[str], extra: dict | None = None):
        super().__init__(cfg, vocab, labels, extra)
        use_context = cfg.context_sents > 0 or cfg.context_next > 0
        self.network = DPLabeler(len(vocab), len(labels), cfg.emb, cfg.hidden, cfg.layers, cfg.dropout,
                                 vocab.pad_id, use_context=use_context, sparse=cfg.sparse_embeddings)
        self.modules = {"labeler": self.network}

    def context(self, sents: Sequence[DPSentence], idx: list[int]) -> torch.Tensor:
        """(B, C) ids of the document context of each ``sents[k]`` (``context_of``); (B, 0)
        when the config uses none."""
        c = self.cfg
        if c.context_sents <= 0 and c.context_next <= 0:
            return torch.zeros((len(idx), 0), dtype=torch.long)
        rows = [[self.vocab.index.get(t, self.vocab.unk_id)
                 for t in context_of(sents, k, c.context_sents, c.context_max_tokens, c.context_next)]
                for k in idx]
        return pad(rows, self.vocab.pad_id, min_len=1)

    def batch_probs(self, sents: Sequence[DPSentence], idx: list[int]) -> list[np.ndarray]:
        toks = self.tokens([sents[k].tokens for k in idx])
        probs = torch.softmax(self.network(toks, self.context(sents, idx)), -1).numpy()
        return [probs[i, :len(sents[k].tokens) + 1] for i, k in enumerate(idx)]

    def batch_loss(self, sents: Sequence[DPSentence], idx: list[int], rng: random.Random
                   ) -> tuple[torch.Tensor, int]:
        """Cross-entropy over ``N`` + pronouns at every position, plus ``pseudo_weight`` × the
        pronoun-choice cross-entropy at each pseudo-DP (which has no detection target there)."""
        c = self.cfg
        rows = [(sents[k].tokens, sents[k].labels, None) for k in idx]
        if c.pseudo_dp:
            rows = [(pseudo_dp(t, lab, rng) or (t, lab, None)) if rng.random() < c.pseudo_dp
                    else (t, lab, None) for t, lab, _ in rows]
        toks = self.tokens([t for t, _, _ in rows])
        gold_rows = self.gold([lab for _, lab, _ in rows])
        pseudo = [(r, pos, gold_rows[r][pos]) for r, (_, _, pos) in enumerate(rows) if pos is not None]
        for r, pos, _ in pseudo:
            gold_rows[r][pos] = -100          # no detection target at a pseudo DP
        gold = pad(gold_rows, -100)
        logits = self.network(toks, self.context(sents, idx))
        loss = F.cross_entropy(logits.flatten(0, 1), gold.flatten(), ignore_index=-100, reduction="sum")
        n = int((gold != -100).sum())
        if pseudo:
            r_i, p_i, y = (torch.tensor(v) for v in zip(*pseudo))
            loss = loss + c.pseudo_weight * F.cross_entropy(
                logits[r_i, p_i, 1:], y - 1, reduction="sum")     # P(pronoun | DP)
            n += len(pseudo)
        return loss, n
