"""Continuous cache (Tu et al. 2018, as summarised by Wang 2019 thesis §3.3.2 and Miculicich et al. 2018 §1; docs/models.md §2.3, §5 A12) on
the RNNSearch backbone.

A key–value memory of the translation history: one cell per target word of the previous
sentences, key = the attention context c_t (2H), value = the decoder state s_t (H) of the step
that produced it. Read at every step of the current sentence with dot-product matching [P S2],
combined by a gate [I, the +4.0M of S2], and read by the readout only [P S2: the cache "updates
the output distribution"; the recurrence keeps s_t]::

    a_t = softmax_i(c_t · k_i)            over the cells i                       (B, n_cells)
    m_t = Σ_i a_ti v_i                                                           (B, H)
    λ_t = σ(W_s s_t + W_m m_t + W_c c_t + b)      (``gate_inputs``: [s, m, c])    (B, H)
    ŝ_t = (1 − λ_t) ⊙ s_t + λ_t ⊙ m_t
    o_t = tanh(W_o ŝ_t + C_o c_t + V_o E[y_{t-1}] + b_o)                          (B, E)

Writing [I, A12]: after each sentence, (c_t, s_t) of every target position whose word is not a
special token (``<pad> <s> </s> <unk>``), teacher-forced on the reference in training and on the
1-best at test (``context_needs_target``: ``inference/documents.py`` translates the documents in
order and gives the previous sentences' 1-best as their ``tgt_in``). A word already in the cache
keeps one cell: ``on_repeat: overwrite`` (its latest occurrence, which counts as its write time
for the FIFO) or ``average`` (the mean key and value of its occurrences). ``exclude_stopwords`` (default off)
writes no cell for English stop words and punctuation (``bind_vocab``). Capacity ``size``
cells (25: S1; 500: S2), the oldest evicted first; the cache starts empty at every document.

In-batch formulation [I: the project's choice, instead of S2's sequential document-order
training and its slowdown]: the cache of sentence m is *computed*, not carried — the batch's
``ctx`` rows are its N = ``context_sents`` previous sentences (``data/documents.py``,
``models/context/base.py``), the backbone decoder is teacher-forced on their targets
(``RNNParts.decode_states``) and the cells are built from their steps with the rules above,
for all rows at once (no loop over rows). Because the cache touches only the readout, the
previous sentences' s_t and c_t do not depend on their own caches, so this equals the
sequential cache whenever the N sentences hold the ``size`` newest cells (choose N so that N
sentences cover ``size`` words: N = 3 for 25, about 20 for 500); length-sorted batches stay
possible. With ``detach_memory`` (default) the memory carries no gradient (S2 trains the gate
only, the backbone frozen: ``train.freeze: ["backbone.*"]``). An empty cache (a document's first
sentence) reads nothing: ŝ_t = s_t, the backbone.

Parameters at H 1000 with gate_inputs [s, m, c]: (1000 + 1000 + 2000) × 1000 + 1000 = 4.0M, S2's
reported overhead (``tests/unit/test_cache.py``).

Shape legend: B rows, T target length, N previous sentences, M = N·T candidate cells, K cells
kept, H GRU size.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor, nn

from doctrans.layers.init import init_rnn_weights
from doctrans.models.context.base import HookedRNNContext, context_rows, pad_stack, special_mask
from doctrans.models.interface import EncoderOutput, SearchBatch
from doctrans.models.rnn_hooks import DecoderHook, RNNParts
from doctrans.models.rows import encode_bucketed, scatter_rows

GATE_INPUTS = ("s", "m", "c")
ON_REPEAT = ("overwrite", "average")


@dataclass(frozen=True)
class CacheConfig:
    type: str = "cache"                 # the row of models/build.py:CONTEXT_MODELS
    context_sents: int = 3              # N previous sentences whose target words fill the cache [I]
    size: int = 25                      # cells: 25 (S1) | 500 (S2)
    gate_inputs: tuple[str, ...] = ("s", "m", "c")   # inputs of λ_t (A12: [s, m, c] gives S2's +4.0M)
    on_repeat: str = "overwrite"        # a repeated word: its latest cell | the average of its cells
    detach_memory: bool = True          # no gradient through the cells' keys and values [I]
    exclude_stopwords: bool = False     # write no cell for an English stop word or punctuation [I, §2.3]


class ContinuousCache(HookedRNNContext):
    """A cache of the previous sentences' (c_t, s_t) per target word, read into the readout of an
    RNNSearch backbone (``models.rnn_hooks.RNNParts``; module doc)."""

    context_needs_target = True

    def __init__(self, backbone, cfg: CacheConfig):
        super().__init__(backbone, cfg.context_sents)
        if not isinstance(backbone, RNNParts):
            raise ValueError(f"context type 'cache' needs an RNN backbone (rnnsearch), got {type(backbone).__name__}")
        if cfg.size < 1:
            raise ValueError(f"context.size must be ≥ 1, got {cfg.size}")
        if not cfg.gate_inputs or len(set(cfg.gate_inputs)) < len(cfg.gate_inputs) or \
                not set(cfg.gate_inputs) <= set(GATE_INPUTS):
            raise ValueError(f"context.gate_inputs must be distinct items of {GATE_INPUTS}, got {cfg.gate_inputs}")
        if cfg.on_repeat not in ON_REPEAT:
            raise ValueError(f"context.on_repeat must be one of {ON_REPEAT}, got {cfg.on_repeat!r}")
        self.cfg = cfg
        h = backbone.rnn_size
        width = {"s": h, "m": h, "c": 2 * h}
        self.gate = nn.Linear(sum(width[k] for k in cfg.gate_inputs), h)     # W_s, W_m, W_c, b
        init_rnn_weights(((n, p) for n, p in self.named_parameters() if not n.startswith("backbone.")), self.pad_id)
        if cfg.exclude_stopwords:               # (V_tgt,) True at a target token never written; bind_vocab fills it
            self.register_buffer("no_write", torch.zeros(backbone.target_embedding.num_embeddings, dtype=torch.bool))

    def bind_vocab(self, src_vocab, tgt_vocab) -> None:
        """With ``exclude_stopwords``: mark the target tokens that get no cell — a whole word (a BPE
        piece not ending in ``@@``) in scikit-learn's English stop-word list, or a token without a
        letter or digit (punctuation) [I: S2 does not say which words the cache skips].
        ``models.interface.bind_vocabularies`` calls it at training; checkpoints carry the buffer.
        Raises ValueError if the vocabulary's size is not the model's."""
        if not self.cfg.exclude_stopwords:
            return
        from sklearn.feature_extraction.text import ENGLISH_STOP_WORDS
        if len(tgt_vocab) != self.no_write.numel():
            raise ValueError(f"target vocabulary of {len(tgt_vocab)} tokens for a model of {self.no_write.numel()}")
        stop = [(not t.endswith("@@") and t.lower() in ENGLISH_STOP_WORDS) or not any(ch.isalnum() for ch in t)
                for t in tgt_vocab.tokens]
        self.no_write.copy_(torch.tensor(stop, dtype=torch.bool))

    # -- writing -------------------------------------------------------------------------------------
    def _encode_rows(self, src: Tensor, rows: Tensor) -> EncoderOutput:
        """The backbone's annotations of rows ``rows`` (R,) of src (B, S), in length buckets;
        zeros and masked at the other rows."""
        parts = encode_bucketed(self.backbone, src, rows)
        if parts is None:
            parts = [(rows, self.backbone.encode(SearchBatch(src.index_select(0, rows))))]
        return scatter_rows(parts, src.size(0), src.size(1))

    def history(self, enc: EncoderOutput, tgt_in: Tensor, needed: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """Teacher-forced steps of the sentences ``needed`` (R,): keys c_t (R, T, 2H), values s_t
        (R, T, H) and the word y_t each step produced (R, T), −1 where no cell may be written
        (special tokens, padding, the final ``</s>`` step; with ``exclude_stopwords`` stop words
        and punctuation)."""
        tgt = tgt_in.index_select(0, needed)
        width = max(int(tgt.ne(self.pad_id).sum(1).max()) if needed.numel() else 1, 1)
        tgt = tgt[:, :width]
        with torch.set_grad_enabled(torch.is_grad_enabled() and not self.cfg.detach_memory):
            values, keys = self.backbone.decode_states(enc.select(needed), tgt)    # (R, T, H), (R, T, 2H)
        words = torch.cat([tgt[:, 1:], tgt.new_full((tgt.size(0), 1), self.pad_id)], 1)   # y_t of step t
        skip = special_mask(words)
        if self.cfg.exclude_stopwords:
            skip |= self.no_write[words]
        return keys, values, words.masked_fill(skip, -1)

    def _cached_history(self, src: Tensor, tgt_in: Tensor, needed: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """``history`` of the rows ``needed`` (R,) through the inference cache (keyed by a row's
        source and 1-best tokens): only the rows not there are encoded and teacher-forced; each
        row's steps are kept cut to its own target length and padded again here (keys, values
        with zeros, words with −1: never written, so the cells are the same as ``history``'s)."""
        def compute(miss: list[int]) -> list[tuple[Tensor, Tensor, Tensor]]:
            rows = needed[torch.tensor(miss, device=needed.device)]
            k, v, w = self.history(self._encode_rows(src, rows), tgt_in, rows)
            lengths = tgt_in.index_select(0, rows).ne(self.pad_id).sum(1).clamp(min=1).tolist()
            return [(k[j, :n], v[j, :n], w[j, :n]) for j, n in enumerate(lengths)]

        entries = self._cached_rows("cache_history", self._row_keys(src.index_select(0, needed),
                                                                      tgt_in.index_select(0, needed)), compute)
        return (pad_stack([e[0] for e in entries]), pad_stack([e[1] for e in entries]),
                pad_stack([e[2] for e in entries], -1))

    def cells(self, keys: Tensor, values: Tensor, words: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """The cache of each row from its history in write order (oldest first): keys (B, M, 2H),
        values (B, M, H), words (B, M) (−1: nothing to write) → at most ``size`` cells, one per
        word, newest kept (module doc): keys (B, K, 2H), values (B, K, H), mask (B, K) True at
        a cell, K = the largest cell count of a row (≥ 1)."""
        valid = words.ge(0)                                                         # (B, M)
        same = words.unsqueeze(2).eq(words.unsqueeze(1)) & valid.unsqueeze(2)       # (B, M, M)
        later = torch.ones(same.shape[1:], dtype=torch.bool, device=same.device).triu(1)
        last = valid & ~(same & later).any(-1)                                      # a word's latest step
        if self.cfg.on_repeat == "average":
            weight = same.to(keys.dtype) / same.sum(-1, keepdim=True).clamp(min=1)
            keys, values = torch.bmm(weight, keys), torch.bmm(weight, values)
        newer = last.flip(1).long().cumsum(1).flip(1)                               # cells at or after j
        keep = last & newer.le(self.cfg.size)                                       # FIFO: the newest `size`
        k = max(int(keep.sum(1).max()) if keep.numel() else 0, 1)
        order = torch.argsort((~keep).to(torch.int8), dim=1, stable=True)[:, :k]    # cells first, in order
        pick = order.unsqueeze(-1)
        return (keys.gather(1, pick.expand(-1, -1, keys.size(-1))),
                values.gather(1, pick.expand(-1, -1, values.size(-1))), keep.gather(1, order))

    def encode(self, batch) -> EncoderOutput:
        """batch.src (B, S), tgt_in (B, T), ctx (B, N), is_target (B,) → the backbone's annotations
        (B, S, 2H) of the target rows and their context rows, and ``extra`` cache_keys (B, K, 2H),
        cache_values (B, K, H), cache_mask (B, K): each row's cache, built from its ``ctx`` rows'
        teacher-forced steps (context-only rows: empty). Within ``inference_cache`` a context
        row's steps are computed once per collection (``_cached_history``: a sentence is context
        of the next N, translated in later batches) and its annotations only then."""
        src = batch.src
        is_target = getattr(batch, "is_target", None)
        targets = (torch.arange(src.size(0), device=src.device) if is_target is None
                   else is_target.to(src.device).nonzero().squeeze(1))
        rows = context_rows(batch, self.context_sents, src.device).index_select(0, targets)   # (B_t, N)
        needed, sub = torch.unique(rows.masked_fill(rows.lt(0), src.size(0)), return_inverse=True)
        needed = needed[needed.lt(src.size(0))]                                     # (R,), sorted
        tgt_in = getattr(batch, "tgt_in", None)
        if needed.numel() and tgt_in is None:
            raise ValueError("the continuous cache reads the previous sentences' targets: the batch has ctx "
                             "rows but no tgt_in")
        h = self.backbone.rnn_size
        if needed.numel() and self._active_caches() is not None:
            keys, values, words = self._cached_history(src, tgt_in.to(src.device), needed)
            enc = self._encode_rows(src, targets)
        elif needed.numel():
            enc = self._encode_rows(src, torch.unique(torch.cat([targets, needed])))
            keys, values, words = self.history(enc, tgt_in.to(src.device), needed)
        else:
            enc = self._encode_rows(src, targets)
            keys, values = enc.states.new_zeros((0, 1, 2 * h)), enc.states.new_zeros((0, 1, h))
            words = torch.full((0, 1), -1, dtype=torch.long, device=src.device)
        keys = torch.cat([keys, keys.new_zeros((1,) + keys.shape[1:])])            # row R: a missing sentence
        values = torch.cat([values, values.new_zeros((1,) + values.shape[1:])])
        words = torch.cat([words, words.new_full((1,) + words.shape[1:], -1)])
        sub = sub.masked_fill(rows.lt(0), keys.size(0) - 1)                         # (B_t, N) into the history
        k_t, v_t, m_t = self.cells(keys[sub].flatten(1, 2), values[sub].flatten(1, 2), words[sub].flatten(1, 2))
        b = src.size(0)
        extra = {"cache_keys": k_t.new_zeros((b,) + k_t.shape[1:]).index_copy(0, targets, k_t),
                 "cache_values": v_t.new_zeros((b,) + v_t.shape[1:]).index_copy(0, targets, v_t),
                 "cache_mask": m_t.new_zeros((b,) + m_t.shape[1:]).index_copy(0, targets, m_t)}
        return EncoderOutput(enc.states, enc.src_pad_mask, extra)

    # -- reading -------------------------------------------------------------------------------------
    def hook(self, enc: EncoderOutput) -> DecoderHook:
        """The rows' caches as ``DecoderHook.rows`` and the readout-state callback ``read``."""
        rows = {k: enc.extra[f"cache_{k}"] for k in ("keys", "values", "mask")}
        return DecoderHook(rows, None, None, self.read)

    def read(self, s: Tensor, c: Tensor, rows: dict[str, Tensor]) -> Tensor:
        """ŝ_t = (1 − λ_t) ⊙ s_t + λ_t ⊙ m_t (module doc); s_t where the cache is empty.
        s: (B, T, H), c: (B, T, 2H), rows: keys (B, K, 2H), values (B, K, H), mask (B, K)
        → (B, T, H)."""
        mask = rows["mask"]
        has = mask.any(1)                                                           # (B,)
        bias = torch.zeros_like(mask, dtype=s.dtype).masked_fill(~mask & has[:, None], float("-inf"))
        a = torch.softmax(torch.bmm(c, rows["keys"].transpose(1, 2)) + bias.unsqueeze(1), -1)    # (B, T, K)
        m = torch.bmm(a, rows["values"])                                            # (B, T, H)
        parts = {"s": s, "m": m, "c": c}
        lam = torch.sigmoid(self.gate(torch.cat([parts[k] for k in self.cfg.gate_inputs], -1)))
        return torch.where(has[:, None, None], s + lam * (m - s), s)
