"""Concatenation context (Tiedemann & Scherrer 2017 "2-to-1"; the contextual-mt baseline).

The previous N source sentences of the document are prepended to the current one and the
backbone translates the concatenation; the target is the current sentence only. Each context
sentence keeps its ``</s>``, which serves as the break token between sentences [I: Tiedemann &
Scherrer use a dedicated _BREAK_ token; ``</s>`` needs no vocabulary change and is already a
sentence boundary to the model]. Context sentences that do not exist (document start) are
simply absent (the "empty context" of this model is the sentence-level input). With
``max_context_tokens`` the concatenation keeps the newest context tokens that fit.

Positions run over the whole concatenation, so the backbone's ``max_positions`` bounds it.
"""
from __future__ import annotations

from dataclasses import dataclass, replace

import torch
from torch import Tensor

from doctrans.models.context.base import ContextModel, context_rows
from doctrans.models.interface import EncoderOutput, SearchBatch
from doctrans.models.portable import PortableTransformer
from doctrans.models.rows import encode_bucketed, ragged_concat, scatter_rows


@dataclass(frozen=True)
class ConcatConfig:
    type: str = "concat"                # the row of models/build.py:CONTEXT_MODELS
    context_sents: int = 1              # N previous source sentences prepended
    max_context_tokens: int = 0         # keep at most this many context tokens (newest); 0 = all


class ConcatContext(ContextModel):
    """Source-side concatenation: encode ``[X_{m−N} … X_{m−1} X_m]`` (B, C+S) → the backbone."""

    def __init__(self, backbone, cfg: ConcatConfig):
        super().__init__(backbone, cfg.context_sents)
        if cfg.max_context_tokens < 0:
            raise ValueError(f"context.max_context_tokens must be ≥ 0, got {cfg.max_context_tokens}")
        self.cfg = cfg

    def concatenated_source(self, batch) -> Tensor:
        """(B, C+S) ids: each row's existing context sentences (oldest first, padding removed)
        followed by its own sentence, right-padded."""
        src = batch.src                                                     # (B, S)
        ctx = context_rows(batch, self.context_sents, src.device)           # (B, N)
        lengths = src.ne(self.pad_id).sum(1)                                # (B,)
        ctx_len = torch.where(ctx.ge(0), lengths[ctx.clamp(min=0)], 0)      # (B, N)
        own = torch.arange(src.size(0), device=src.device)[:, None]
        drop = ctx_len.sum(1)
        drop = (drop - self.cfg.max_context_tokens).clamp(min=0) if self.cfg.max_context_tokens else drop.zero_()
        return ragged_concat(src, torch.cat([ctx, own], 1), torch.cat([ctx_len, lengths[:, None]], 1), drop,
                             self.pad_id)

    def encode(self, batch) -> EncoderOutput:
        """batch.src (B, S) and batch.ctx (B, N) → the backbone's encoding of the concatenation,
        states (B, C+S, H); the decoder attends to context and current words alike. With
        ``is_target`` (B,) only the target rows are encoded (context-only rows are context
        through their tokens, never decoded: ``forward_loss`` and ``beam_search`` select the
        target rows): context-only rows are all padding (zeros, masked). The target rows are
        encoded in length buckets (``models.rows.length_buckets``)."""
        src = self.concatenated_source(batch)                               # (B, C+S)
        is_target = getattr(batch, "is_target", None)
        if is_target is None or bool(is_target.all()) or not bool(is_target.any()):
            return self.backbone.encode(SearchBatch(src))
        rows = is_target.to(src.device).nonzero().squeeze(1)
        parts = encode_bucketed(self.backbone, src, rows)                   # length buckets
        if parts is None:
            return self.backbone.encode(SearchBatch(src))
        width = max(enc.states.size(1) for _, enc in parts)
        return scatter_rows(parts, src.size(0), width)

    def portable(self) -> PortableTransformer | None:
        """The backbone's portable form with this model's source context (N previous sentences,
        ``max_context_tokens``): the concatenation is one source sequence, so an engine that
        runs the backbone runs this model; None when the backbone is not portable."""
        base = self.backbone.portable()
        if base is None:
            return None
        return replace(base, source_context=self.context_sents, max_context_tokens=self.cfg.max_context_tokens)
