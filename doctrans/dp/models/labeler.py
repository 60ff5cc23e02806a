"""Dropped-pronoun (DP) generators: predict, for every position of a Chinese sentence, whether
and which pronoun was dropped before it (thesis §4.3.2, §6.2.2–6.2.3; models.md §3.3, §2.11).

Positions: the S source tokens plus a final ``</s>`` (a DP at the end of the sentence is
labelled on ``</s>``). Label 0 is always ``N`` (no DP); labels 1… are Chinese pronouns.

* ``ElmanDetector`` — the thesis' **DPP detector** (Eqs. 4.1–4.3): windowed embeddings
  ``x_t = v_{t-k} ⊕ … ⊕ v_{t+k}`` (k = 2, "context window = 5"), an Elman RNN with a sigmoid
  hidden layer ``h_t = σ(U x_t + V h_{t-1})`` (hidden 200), and a 2-class softmax (NA / DP).
* ``SurfaceMLP`` — the thesis' **DP surface predictor**: embeddings (100) of the Table 4.6
  feature slots, concatenated, two ReLU layers of 200, a softmax over the DP vocabulary.
* ``DPLabeler`` — our stronger generator: the end-to-end labeler of thesis §6.2.2 (one
  softmax over ``N`` + pronouns per position) with a BiGRU over the sentence and, as in
  §6.2.3, the previous sentences of the document encoded by the same BiGRU and attended to
  from every position.
"""
from __future__ import annotations

import torch
import torch.nn as nn
import torch.nn.functional as F


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
