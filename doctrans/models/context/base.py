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

import torch
from torch import Tensor, nn

from doctrans.models.interface import SENTENCE_MODEL, DocumentSpec, EncoderOutput, NoReconstruction
from doctrans.models.rnn_hooks import DecoderHook, RNNParts

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


def pad_stack(rows: list[Tensor], value: float = 0.0) -> Tensor:
    """Tensors (L_r, …) with equal trailing shapes → (R, max L_r, …), padded with ``value``."""
    width = max(r.size(0) for r in rows)
    out = rows[0].new_full((len(rows), width) + tuple(rows[0].shape[1:]), value)
    for i, r in enumerate(rows):
        out[i, :r.size(0)] = r
    return out


CACHE_ELEMENTS = 32 * 2**20     # tensor elements a RowCache holds at most (128 MiB of float32)


class RowCache:
    """A bounded LRU map (key → tuple of tensors) for per-sentence context computations kept
    between the batches of one translation (``ContextModel.inference_cache``): at most
    ``capacity`` sentences and ``max_elements`` tensor elements (long sentences hold many: a
    sentence count alone let 2,000 long lines fill gigabytes, issue 50), least recently used
    dropped first (the newest entry is always kept)."""

    def __init__(self, capacity: int, max_elements: int = CACHE_ELEMENTS):
        if capacity < 1:
            raise ValueError(f"cache capacity must be ≥ 1, got {capacity}")
        self.capacity, self.items = capacity, OrderedDict()
        self.max_elements, self.elements = max_elements, 0

    def __contains__(self, key) -> bool:
        return key in self.items

    def get(self, key):
        self.items.move_to_end(key)
        return self.items[key]

    @staticmethod
    def _size(value) -> int:
        items = value if isinstance(value, (tuple, list)) else (value,)
        return sum(t.numel() for t in items if isinstance(t, torch.Tensor))

    @staticmethod
    def _compact(value):
        """``value`` with every tensor that is a view into a larger storage (a row sliced out of a
        batch tensor) copied to its own: a cached view would keep its whole batch tensor alive,
        which the element count does not see (issue 50: 2,000 long lines through the HAN encoder
        grew to 1.8 GB so)."""
        def own(t):
            if isinstance(t, torch.Tensor) and t.untyped_storage().nbytes() > t.numel() * t.element_size():
                return t.clone()
            return t
        if isinstance(value, tuple) and hasattr(value, "_fields"):        # a named tuple
            return type(value)(*(own(t) for t in value))
        if isinstance(value, (tuple, list)):
            return type(value)(own(t) for t in value)
        return own(value)

    def put(self, key, value) -> None:
        value = self._compact(value)
        if key in self.items:
            self.elements -= self._size(self.items[key])
        self.items[key] = value
        self.items.move_to_end(key)
        self.elements += self._size(value)
        while len(self.items) > 1 and (len(self.items) > self.capacity or self.elements > self.max_elements):
            _, old = self.items.popitem(last=False)
            self.elements -= self._size(old)


class ContextModel(NoReconstruction, nn.Module):
    """Base of the context models: delegates the contract to ``backbone``; subclasses override
    the parts they change. ``context_sents`` = N previous sentences (``batch.ctx``);
    ``context_block`` = K > 0 for a model whose context is its sub-document of K consecutive
    sentences, preceding and following (``batch.block`` (B,): rows of one sub-document share a
    value; the data path and the translator then batch whole sub-documents); at least one of
    them is > 0. ``context_needs_target``: whether context rows must carry their (reference or
    1-best) target. Together they are the model's ``document`` (``models.interface.DocumentSpec``).
    ``empty_context``: what a row without context produces (``Seq2SeqModel.empty_context``):
    ``SENTENCE_MODEL`` unless the subclass says otherwise.

    ``backbone_parts``: the protocols (``models/interface.py``: ``BackboneParts``,
    ``EncoderParts``; ``models/rnn_hooks.py``: ``RNNParts``) the model uses of its backbone besides the contract;
    ``models/build.py`` checks them when it builds the model, naming what a backbone lacks."""

    context_needs_target = False
    backbone_parts: tuple[type, ...] = ()
    empty_context = SENTENCE_MODEL        # a model whose empty context is not the backbone's says what it is
    sentence_weights_prefix = "backbone."

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

    def _row_keys(self, *tokens: Tensor) -> list:
        """Cache keys of the rows of ``tokens`` (R, L) (one or more aligned tensors, e.g. source
        and 1-best target): per row the tuple of its ids up to its padding (a tuple of such
        tuples for several tensors)."""
        def strip(t: Tensor) -> list[tuple]:
            return [tuple(row[:n]) for row, n in zip(t.tolist(), t.ne(self.pad_id).sum(1).tolist())]
        parts = [strip(t) for t in tokens]
        return parts[0] if len(parts) == 1 else list(zip(*parts))

    def _cached_rows(self, kind: str, keys: list, compute) -> list[tuple[Tensor, ...]]:
        """Per-sentence context computations through the inference cache (``inference_cache``
        must be active: ``_active_caches()`` not None). keys: one hashable per row (``_row_keys``);
        compute: the indices (list) of the rows not yet in the ``kind`` cache → one tuple of
        tensors per such row, in that order (computed in one call, then stored). Returns the
        tuple of every row, in row order. Each distinct key is computed at most once per
        collection while it stays among the ``capacity`` most recently used of its kind."""
        caches = self._active_caches()
        cache = caches.setdefault(kind, RowCache(caches["enc"].capacity))
        miss, seen = [], set()
        for i, key in enumerate(keys):
            if key not in cache and key not in seen:
                miss.append(i)
                seen.add(key)
        found = {key: cache.get(key) for key in keys if key in cache}    # read before the puts may evict
        if miss:
            for i, value in zip(miss, compute(miss)):
                cache.put(keys[i], value)
                found[keys[i]] = value                 # kept here too: a capacity below one batch's rows
        return [found[key] for key in keys]

    def explain_blocks(self) -> list[tuple[str, nn.Module, str]]:
        """The model's context attention blocks for pictures (``translate --explain-context``):
        [(name, block with a ``recorder`` list attribute, side)], side "source" (queries:
        source words, context: previous source sentences) or "target" (queries: generated
        words, context: previous translations). [] for a model without context weights."""
        return []

    @property
    def document(self) -> DocumentSpec:
        """``DocumentSpec(context_sents, context_block, context_needs_target)``."""
        return DocumentSpec(self.context_sents, self.context_block, bool(self.context_needs_target))

    @property
    def max_target_len(self) -> int:
        return self.backbone.max_target_len

    @property
    def hidden_size(self) -> int:
        return self.backbone.hidden_size

    def _device(self) -> torch.device:
        return next(self.parameters()).device

    def encode(self, batch) -> EncoderOutput:
        return self.backbone.encode(batch)

    def decode_train(self, enc: EncoderOutput, tgt_in: Tensor, select: Tensor | None = None) -> Tensor:
        return self.backbone.decode_train(enc, tgt_in, select)

    def init_state(self, enc: EncoderOutput):
        return self.backbone.init_state(enc)

    def decode_step(self, state, prev_tokens: Tensor, vocab: Tensor | None = None):
        return self.backbone.decode_step(state, prev_tokens, vocab)

    def decode_hidden(self, enc: EncoderOutput, tgt_in: Tensor) -> Tensor:
        """The backbone's decoder states: right for a model whose context acts in the encoder
        (its ``enc`` carries it); a model that changes the decoder overrides this with
        ``decode_train`` (and ``decode_step_hidden`` with ``decode_step``)."""
        return self.backbone.decode_hidden(enc, tgt_in)

    def output_logits(self, hidden: Tensor, vocab: Tensor | None = None) -> Tensor:
        return self.backbone.output_logits(hidden, vocab)

    def decode_step_hidden(self, state, prev_tokens: Tensor):
        return self.backbone.decode_step_hidden(state, prev_tokens)

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

    def context_attention(self, batch):
        """None: no context-attention head exposed for supervision (``models.interface.ContextAttention``)."""
        return None

    def portable(self):
        """None: a context model with layers of its own is no standard Transformer (one whose
        context enters as plain source tokens overrides this)."""
        return None

    def quantizable_linears(self) -> list[nn.Module]:
        """The backbone's choice (its output layer and feed-forward layers); context layers stay float."""
        return self.backbone.quantizable_linears()


class HookedRNNContext(ContextModel):
    """Base of the context models that work inside an RNNSearch decoder (HRNN, multi-encoder,
    inter-sentence gate, continuous cache: docs/models.md §2.1–2.4): a subclass writes
    ``hook(enc)``, the ``DecoderHook`` of ``enc``'s rows (``models/rnn_hooks.py``), and this base
    hands it to the backbone's ``RNNParts`` in teacher forcing and in the decoder state (which
    reorders it with the beam and applies it in every ``decode_step``)."""

    backbone_parts = (RNNParts,)

    def hook(self, enc: EncoderOutput) -> DecoderHook:
        """The decoder hooks of ``enc``'s B rows."""
        raise NotImplementedError

    def decode_train(self, enc: EncoderOutput, tgt_in: Tensor, select: Tensor | None = None) -> Tensor:
        return self.backbone.decode_train(enc, tgt_in, select, self.hook(enc))

    def decode_hidden(self, enc: EncoderOutput, tgt_in: Tensor) -> Tensor:
        return self.backbone.decode_hidden(enc, tgt_in, self.hook(enc))

    def init_state(self, enc: EncoderOutput):
        return self.backbone.init_state(enc, self.hook(enc))
