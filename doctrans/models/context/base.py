"""What every context model shares: the backbone it wraps, the in-batch context, gathering.

A context model is a ``Seq2SeqModel`` (``models/interface.py``) wrapping a backbone. Its batches
may carry, besides ``src`` (B, S) and ``tgt_in`` (B, T):

* ``ctx`` (B, N) long — for each row, the batch row holding the n-th previous sentence of the
  same document, oldest → newest (column N−1 is sentence m−1); −1 where that sentence does not
  exist (before the document start). A batch without ``ctx`` (a sentence-level batch) means
  "no context" for every row.
* ``is_target`` (B,) bool — the rows to train on / translate; the others are context-only rows
  (the N sentences before a run of a document, docs/models.md §1.1, §2.5 "Batching" [I]).

Training batches (``data/documents.py``) and document translation (``inference/documents.py``)
build such batches the same way (at translation time the context rows carry the model's own
1-best outputs as ``tgt_in``), so every sentence is encoded once per batch and a context model
has one code path for training and search. ``context_sents`` (N) and ``context_needs_target``
tell the data path and the translator what to provide, and ``context_filter`` which training
tuples to skip; nothing outside ``models/`` names a context model.
"""
from __future__ import annotations

from collections import OrderedDict
from contextlib import contextmanager

import numpy as np
import torch
from torch import Tensor, nn

from doctrans.models.interface import EncoderOutput, SearchBatch

SPECIAL_IDS = (0, 1, 2, 3)     # <pad> <s> </s> <unk> of every doctrans vocabulary (data/vocab.py)


def context_rows(batch, n: int, device: torch.device) -> Tensor:
    """The batch's ``ctx`` (B, N) rows, or all −1 when the batch has none. Raises ValueError if
    ``ctx`` has another width than the model's N."""
    ctx = getattr(batch, "ctx", None)
    b = batch.src.size(0)
    if ctx is None:
        return torch.full((b, n), -1, dtype=torch.long, device=device)
    if ctx.dim() != 2 or ctx.size(0) != b or ctx.size(1) != n:
        raise ValueError(f"batch.ctx has shape {tuple(ctx.shape)}, the model reads ({b}, {n}) context rows")
    return ctx.to(device)


def special_mask(tokens: Tensor, specials: tuple[int, ...] = SPECIAL_IDS) -> Tensor:
    """True at ``<pad>``/``<s>``/``</s>``/``<unk>`` (the HAN word mask, docs/models.md §2.5: from each
    side's own vocabulary). tokens: (…, L) → bool (…, L)."""
    mask = torch.zeros_like(tokens, dtype=torch.bool)
    for s in specials:
        mask |= tokens.eq(s)
    return mask


def _cut_rows(src: Tensor, rows: Tensor, pad_id: int) -> Tensor:
    """src (B, S) → rows ``rows`` (B',), columns cut to their longest non-padding length."""
    part = src.index_select(0, rows)
    width = int(part.ne(pad_id).sum(1).max())
    return part[:, :width]


def scatter_rows(parts: list[tuple[Tensor, EncoderOutput]], b: int, s: int) -> EncoderOutput:
    """Encodings of disjoint row subsets [(rows (B_k,), EncoderOutput (B_k, S_k, H))] → one
    EncoderOutput of ``b`` rows padded to ``s``: states (b, s, H) (zeros at padding and at rows
    in no part), src_pad_mask (b, s) True there. Differentiable in the parts' states."""
    ref = parts[0][1].states
    states = ref.new_zeros((b, s, ref.size(-1)))
    mask = torch.ones((b, s), dtype=torch.bool, device=ref.device)
    for rows, enc in parts:
        pad = s - enc.states.size(1)
        states = states.index_copy(0, rows, torch.nn.functional.pad(enc.states, (0, 0, 0, pad)))
        mask = mask.index_copy(0, rows, torch.nn.functional.pad(enc.src_pad_mask, (0, pad), value=True))
    return EncoderOutput(states, mask)


LENGTH_BUCKETS = 8     # at most this many sub-batches per document batch (see length_buckets; 8 vs 4, and grid-minimising
                       # cuts vs equal-count groups: measured in benchmarks/RESULTS.md, "Document batches in 8 length
                       # buckets instead of 4" and "QCN + regularisation reaches the training-speed goal; …")


def length_buckets(lengths: Tensor, max_buckets: int | None = None, min_rows: int = 8) -> list[Tensor]:
    """Indices into ``lengths`` (R,) sorted by length and cut into at most ``max_buckets``
    (default ``LENGTH_BUCKETS``) groups of consecutive lengths, each of at least ``min_rows``
    rows (so one group for small batches), that minimise the padded grid Σ_g rows_g × longest_g
    (exact dynamic programme over the cuts between distinct lengths; of equal grids, the fewest
    groups). Returns [(R_g,) long] in increasing length; every index exactly once.

    A document batch holds runs of consecutive sentences, which cannot be length-sorted: padded
    to its longest row, half of its grid is padding (``benchmarks/RESULTS.md``). Rows never
    attend to each other inside the backbone, so encoding / decoding them in length buckets,
    each cut to its own longest row, computes the same states at real positions for a fraction
    of the padding. Equal-count groups leave the long tail in one group padded to its longest:
    13% of a TVsub batch's 8-group grid is padding, 5% with these cuts (``benchmarks/RESULTS.md``)
    [I: our batching choice, not from a paper]."""
    order = lengths.argsort(stable=True)
    k = max(1, min(max_buckets or LENGTH_BUCKETS, order.numel() // min_rows))
    if k == 1:
        return [order]
    srt = lengths.index_select(0, order).cpu().numpy().astype(np.int64)
    r = srt.size
    cut = np.concatenate([[0], np.flatnonzero(np.diff(srt)) + 1, [r]])           # (M+1,) cut candidates
    rows = cut[None, :] - cut[:, None]                                           # rows of group cut i → cut j
    infeasible = np.iinfo(np.int64).max // 4                                     # + another stays < int64 max
    grid = np.where(rows >= min_rows, rows * srt[np.maximum(cut - 1, 0)][None, :], infeasible)
    best, back = np.full(cut.size, infeasible), []                               # best[j]: rows [0, cut j) in g groups
    best[0] = 0
    totals = []
    for _ in range(k):
        total = best[:, None] + grid                                             # (M+1, M+1)
        back.append(total.argmin(0))
        best = np.minimum(total[back[-1], np.arange(cut.size)], infeasible)
        totals.append(best[-1])
    if min(totals) >= infeasible:                                                # no cut satisfies min_rows
        return [order]
    j, bounds = cut.size - 1, [r]
    for g in range(int(np.argmin(totals)), -1, -1):                              # argmin: the fewest on ties
        j = int(back[g][j])
        bounds.append(int(cut[j]))
    bounds.reverse()
    return [order[a:b] for a, b in zip(bounds[:-1], bounds[1:])]


def encode_bucketed(backbone: nn.Module, src: Tensor, rows: Tensor) -> list[tuple[Tensor, EncoderOutput]] | None:
    """``backbone.encode`` of rows ``rows`` (R,) of ``src`` (B, S) in length buckets → parts for
    ``scatter_rows`` [(rows_k, EncoderOutput (R_k, S_k, H))], or None if the backbone returns
    ``extra`` (its encoding may not be split)."""
    lengths = src.index_select(0, rows).ne(backbone.pad_id).sum(1)
    parts = []
    for group in length_buckets(lengths):
        r = rows[group]
        enc = backbone.encode(SearchBatch(_cut_rows(src, r, backbone.pad_id)))
        if enc.extra:
            return None
        parts.append((r, enc))
    return parts


def split_encode(backbone: nn.Module, batch, context_grad: bool) -> EncoderOutput:
    """``backbone.encode`` of every row of a document batch, target rows and context-only rows
    (``is_target`` False) as two sub-batches, each cut to its own longest source, the
    context-only ones without gradient unless ``context_grad``. Same states at real positions
    as one call (zeros at padding); a plain call when gradients are off, the batch has no
    ``is_target`` or one kind of row only, or the backbone returns ``extra``. The target rows
    are encoded in length buckets (``length_buckets``). batch.src: (B, S) → states (B, S, H)."""
    is_target = getattr(batch, "is_target", None)
    src = batch.src
    if is_target is None or not torch.is_grad_enabled() or bool(is_target.all()) or not bool(is_target.any()):
        return backbone.encode(batch)
    is_target = is_target.to(src.device)
    t_rows, c_rows = is_target.nonzero().squeeze(1), (~is_target).nonzero().squeeze(1)
    parts = encode_bucketed(backbone, src, t_rows)
    with torch.set_grad_enabled(context_grad):
        enc_c = backbone.encode(SearchBatch(_cut_rows(src, c_rows, backbone.pad_id)))
    if parts is None or enc_c.extra:
        return backbone.encode(batch)
    return scatter_rows(parts + [(c_rows, enc_c)], src.size(0), src.size(1))


class RowCache:
    """A bounded LRU map (key → tuple of tensors) for per-sentence context computations kept
    between the batches of one translation (``ContextModel.inference_cache``)."""

    def __init__(self, capacity: int):
        if capacity < 1:
            raise ValueError(f"cache capacity must be ≥ 1, got {capacity}")
        self.capacity, self.items = capacity, OrderedDict()

    def __contains__(self, key) -> bool:
        return key in self.items

    def get(self, key):
        self.items.move_to_end(key)
        return self.items[key]

    def put(self, key, value) -> None:
        self.items[key] = value
        self.items.move_to_end(key)
        while len(self.items) > self.capacity:
            self.items.popitem(last=False)


class ContextModel(nn.Module):
    """Base of the context models: delegates the contract to ``backbone``; subclasses override
    the parts they change. ``context_sents`` = N previous sentences (``batch.ctx``);
    ``context_block`` = K > 0 for a model whose context is its sub-document of K consecutive
    sentences, preceding and following (``batch.block`` (B,): rows of one sub-document share a
    value; the data path and the translator then batch whole sub-documents); at least one of
    them is > 0. ``context_needs_target``: whether context rows must carry their (reference or
    1-best) target."""

    context_needs_target = False

    def __init__(self, backbone: nn.Module, context_sents: int, context_block: int = 0):
        super().__init__()
        if context_sents < 0 or context_block < 0 or not (context_sents or context_block):
            raise ValueError(f"a context model reads N ≥ 1 previous sentences or sub-documents of K ≥ 1 "
                             f"sentences, got context_sents={context_sents}, context_block={context_block}")
        self.backbone, self.context_sents, self.context_block = backbone, context_sents, context_block
        self.pad_id = backbone.pad_id
        self._caches: dict[str, RowCache] | None = None

    @contextmanager
    def inference_cache(self, capacity: int = 4096):
        """Within the block, the model may keep per-sentence context computations (e.g. a
        context sentence's projected states) between ``encode`` calls, keyed by the sentence's
        tokens, at most ``capacity`` sentences per kind (least recently used dropped). For
        translating a document collection, where sentence m is context of sentences m+1…m+N
        in later batches; ignored while gradients are on. Yields the dict of caches."""
        self._caches = {"enc": RowCache(capacity), "dec": RowCache(capacity)}
        try:
            yield self._caches
        finally:
            self._caches = None

    def _active_caches(self) -> dict[str, RowCache] | None:
        return None if self._caches is None or torch.is_grad_enabled() or self.training else self._caches

    def explain_blocks(self) -> list[tuple[str, nn.Module, str]]:
        """The model's context attention blocks for pictures (``translate --explain-context``):
        [(name, block with a ``recorder`` list attribute, side)], side "source" (queries:
        source words, context: previous source sentences) or "target" (queries: generated
        words, context: previous translations). [] for a model without context weights."""
        return []

    @property
    def max_target_len(self) -> int:
        return self.backbone.max_target_len

    def _device(self) -> torch.device:
        return next(self.parameters()).device

    def encode(self, batch) -> EncoderOutput:
        return self.backbone.encode(batch)

    def decode_train(self, enc: EncoderOutput, tgt_in: Tensor, select: Tensor | None = None) -> Tensor:
        return self.backbone.decode_train(enc, tgt_in, select)

    def init_state(self, enc: EncoderOutput):
        return self.backbone.init_state(enc)

    def decode_step(self, state, prev_tokens: Tensor):
        return self.backbone.decode_step(state, prev_tokens)

    def context_filter(self, src_len, tgt_len, ctx_len) -> dict:
        """Training tuples the model refuses (e.g. S3's length filter, Kuang & Xiong 2018 footnote 1, docs/models.md §2.4), applied
        to the train split by the data path (``data.documents.filter_context_tuples``): src_len,
        tgt_len (n,) int arrays of the tokens of x and y (``</s>`` not counted); ctx_len (n, N)
        tokens of each previous sentence, −1 where it does not exist → {rule name: (n,) bool
        array, True = not a training target}. None by default."""
        return {}

    def auxiliary_losses(self, enc: EncoderOutput, batch) -> dict[str, Tensor]:
        """Training-only loss terms (``models.interface.AuxiliaryLosses``): {name: scalar per-sentence
        mean}; none by default."""
        return {}
