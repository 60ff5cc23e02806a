"""Concatenation context (Tiedemann & Scherrer 2017 "2-to-1"; the contextual-mt baseline).

The previous N source sentences of the document are prepended to the current one and the
backbone translates the concatenation; the target is the current sentence only. Each context
sentence keeps its ``</s>``, which serves as the break token between sentences [I: Tiedemann &
Scherrer use a dedicated _BREAK_ token; ``</s>`` needs no vocabulary change and is already a
sentence boundary to the model]. Context sentences that do not exist (document start) are
simply absent (the "empty context" of this model is the sentence-level input). With
``max_context_tokens`` the concatenation keeps the newest context tokens that fit.

Positions run over the whole concatenation, so the backbone's ``max_positions`` bounds it —
unless ``context_position_offset`` = K > 0: then the current sentence keeps the positions a
sentence model reads it at (0, 1, …) and the context tokens take K, K+1, … (``models.rows.
offset_positions``) [I: not in the papers (Tiedemann & Scherrer's RNN has no positions; the
contextual-mt Transformer numbers the whole concatenation); for a model started from a sentence
model, whose current sentence then sits where it always did. Transformer backbones only; no
CTranslate2 export]. K must be at least the longest current sentence, and K plus the context
tokens stay within ``max_positions``.
"""
from __future__ import annotations

from dataclasses import dataclass, replace

import torch
from torch import Tensor

from doctrans.models.context.base import ContextModel, context_rows
from doctrans.models.interface import EncoderOutput, SearchBatch, TargetPrefixParts
from doctrans.models.portable import PortableTransformer
from doctrans.models.rows import encode_bucketed, offset_positions, ragged_concat, scatter_rows


@dataclass(frozen=True)
class ConcatConfig:
    type: str = "concat"                # the row of models/build.py:CONTEXT_MODELS
    context_sents: int = 1              # N previous source sentences prepended
    max_context_tokens: int = 0         # keep at most this many context tokens (newest); 0 = all
    context_position_offset: int = 0    # > 0: context tokens at positions K…, the sentence at 0… (module doc)


class ConcatContext(ContextModel):
    """Source-side concatenation: encode ``[X_{m−N} … X_{m−1} X_m]`` (B, C+S) → the backbone."""

    def __init__(self, backbone, cfg: ConcatConfig):
        super().__init__(backbone, cfg.context_sents)
        if cfg.max_context_tokens < 0:
            raise ValueError(f"context.max_context_tokens must be ≥ 0, got {cfg.max_context_tokens}")
        offset = cfg.context_position_offset
        if offset < 0:
            raise ValueError(f"context.context_position_offset must be ≥ 0, got {offset}")
        if offset and not isinstance(backbone, TargetPrefixParts):
            raise ValueError(f"context.context_position_offset={offset} needs a backbone that reads tokens at given "
                             f"positions (a Transformer), not {type(backbone).__name__}")
        if offset and offset >= backbone.max_target_len:
            raise ValueError(f"context.context_position_offset={offset} must be below the backbone's "
                             f"{backbone.max_target_len} positions")
        self.cfg = cfg
        self.position_offset = offset

    def concatenated_source(self, batch) -> Tensor:
        """(B, C+S) ids: each row's existing context sentences (oldest first, padding removed)
        followed by its own sentence, right-padded."""
        return self._concatenated(batch)[0]

    def source_positions(self, batch, src: Tensor, split: Tensor) -> Tensor | None:
        """Position ids (B, C+S) of ``concatenated_source`` with ``split`` (B,) context tokens per
        row: None (0 … C+S−1) unless ``context_position_offset`` (module doc). Raises ValueError
        when a current sentence reaches the offset."""
        k = self.position_offset
        if not k:
            return None
        longest = int(batch.src.ne(self.pad_id).sum(1).max()) if batch.src.numel() else 0
        if longest > k:
            raise ValueError(f"a source sentence of {longest} tokens reaches context.context_position_offset={k}")
        return offset_positions(split, src.size(1), k)

    def _concatenated(self, batch) -> tuple[Tensor, Tensor]:
        """(``concatenated_source`` (B, C+S), context tokens per row (B,))."""
        src = batch.src                                                     # (B, S)
        ctx = context_rows(batch, self.context_sents, src.device)           # (B, N)
        lengths = src.ne(self.pad_id).sum(1)                                # (B,)
        ctx_len = torch.where(ctx.ge(0), lengths[ctx.clamp(min=0)], 0)      # (B, N)
        own = torch.arange(src.size(0), device=src.device)[:, None]
        total = ctx_len.sum(1)
        cap = self.cfg.max_context_tokens
        drop = (total - cap).clamp(min=0) if cap else torch.zeros_like(total)
        return ragged_concat(src, torch.cat([ctx, own], 1), torch.cat([ctx_len, lengths[:, None]], 1), drop,
                             self.pad_id), total - drop

    def encode(self, batch) -> EncoderOutput:
        """batch.src (B, S) and batch.ctx (B, N) → the backbone's encoding of the concatenation,
        states (B, C+S, H); the decoder attends to context and current words alike. With
        ``is_target`` (B,) only the target rows are encoded (context-only rows are context
        through their tokens, never decoded: ``forward_loss`` and ``beam_search`` select the
        target rows): context-only rows are all padding (zeros, masked). The target rows are
        encoded in length buckets (``models.rows.length_buckets``)."""
        src, split = self._concatenated(batch)                              # (B, C+S), (B,)
        pos = self.source_positions(batch, src, split)                      # (B, C+S) or None
        is_target = getattr(batch, "is_target", None)
        if is_target is None or bool(is_target.all()) or not bool(is_target.any()):
            return self._encode_all(src, pos)
        rows = is_target.to(src.device).nonzero().squeeze(1)
        parts = encode_bucketed(self.backbone, src, rows, pos)              # length buckets
        if parts is None:
            return self._encode_all(src, pos)
        width = max(enc.states.size(1) for _, enc in parts)
        return scatter_rows(parts, src.size(0), width)

    def _encode_all(self, src: Tensor, pos: Tensor | None) -> EncoderOutput:
        return self.backbone.encode(SearchBatch(src)) if pos is None else self.backbone.encode_with(src, positions=pos)

    def portable(self) -> PortableTransformer | None:
        """The backbone's portable form with this model's source context (N previous sentences,
        ``max_context_tokens``): the concatenation is one source sequence, so an engine that
        runs the backbone runs this model; None when the backbone is not portable or with
        ``context_position_offset`` (an engine numbers a sequence's positions 0, 1, …)."""
        base = self.backbone.portable()
        if base is None or self.position_offset:
            return None
        return replace(base, source_context=self.context_sents, max_context_tokens=self.cfg.max_context_tokens)
