"""Hierarchical Attention Network context (Miculicich et al. 2018, HAN; models.md §2.5):
HAN encoder, HAN decoder and the joint model, on a Transformer backbone.

* ``attach: encoder`` — a HAN block over the top encoder outputs of X_{m−N..m−1} (queries: the
  top encoder outputs of x); the decoder cross-attends to the gated result.
* ``attach: decoder`` — a HAN block over the top decoder outputs of the previous N target
  sentences (queries: the top decoder output at t), applied before the output layer. The
  context's decoder states come from teacher-forcing the backbone decoder on those sentences:
  the references in training, the model's own 1-best at test time [C].
* ``attach: both`` — the joint model ("HAN enc+dec"): two separate blocks.

Context rows come from the batch (``models/context/base.py``), so every sentence is encoded
once per batch. Word masks come from each side's own vocabulary (PAD, UNK, BOS, EOS, not the
reference code's target ids on the source side). Choices [I], as config options of the block
(``HANBlockConfig``): ``detach_context`` (stop-gradient, default as the reference code),
``empty_context: passthrough|zero``. One more [I]: the decoder-side context states are computed
with the backbone's plain encoder output (not the HAN-encoded one), so they are the same
whether the context sentence was itself in the batch with its own context or not.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor

from doctrans.models.context.base import (ContextModel, context_rows, gather_context, length_buckets, special_mask,
                                          split_encode)
from doctrans.models.context.han_block import HANBlock, HANBlockConfig
from doctrans.models.interface import EncoderOutput

ATTACH = ("encoder", "decoder", "both")


@dataclass(frozen=True)
class HANConfig:
    type: str = "han"                   # the row of models/build.py:CONTEXT_MODELS
    context_sents: int = 3              # N (S1: 3)
    attach: str = "encoder"             # encoder | decoder | both (HAN enc / dec / enc+dec)
    heads: int = 8
    d_ff: int = 2048
    dropout: float = 0.1
    detach_context: bool = True         # stop-gradient on the context and the query copy [C]
    empty_context: str = "passthrough"  # passthrough (h̃ = h) | zero (d = 0) at document start


@dataclass
class HANDecoderState:
    """The backbone's decoder state plus the decoder-side context of every row:
    ctx (B, N, L, H), word_mask (B, N, L), missing (B, N)."""

    inner: object
    ctx: Tensor
    word_mask: Tensor
    missing: Tensor

    def reorder(self, index: Tensor) -> "HANDecoderState":
        return HANDecoderState(self.inner.reorder(index), self.ctx.index_select(0, index),
                               self.word_mask.index_select(0, index), self.missing.index_select(0, index))


class HAN(ContextModel):
    """HAN encoder / decoder / joint around a backbone with ``BackboneParts`` (see module doc)."""

    def __init__(self, backbone, cfg: HANConfig):
        super().__init__(backbone, cfg.context_sents)
        if cfg.attach not in ATTACH:
            raise ValueError(f"context.attach must be one of {ATTACH}, got {cfg.attach!r}")
        self.cfg = cfg
        block = HANBlockConfig(cfg.heads, cfg.d_ff, cfg.dropout, cfg.detach_context, cfg.empty_context)
        h = backbone.hidden_size
        self.han_enc = HANBlock(h, block) if cfg.attach in ("encoder", "both") else None
        self.han_dec = HANBlock(h, block) if cfg.attach in ("decoder", "both") else None
        self.context_needs_target = self.han_dec is not None

    def encode(self, batch) -> EncoderOutput:
        """All rows of ``batch`` (src (B, S), ctx (B, N), tgt_in (B, T) for the decoder side) →
        states (B, S, H) (HAN-encoded with ``attach`` encoder/both) and, for the decoder side,
        ``extra`` dec_ctx (B, N, T, H), dec_ctx_mask (B, N, T), dec_ctx_missing (B, N). In
        training with ``detach_context`` the context-only rows are encoded without gradient
        (they only serve as detached context: ``split_encode``)."""
        plain = split_encode(self.backbone, batch, context_grad=not self.cfg.detach_context)
        rows = context_rows(batch, self.context_sents, plain.states.device)
        states, extra = plain.states, dict(plain.extra or {})
        if self.han_enc is not None:
            ctx, word_mask, missing = gather_context(plain.states, special_mask(batch.src), rows)
            states = self.han_enc(plain.states, ctx, word_mask, missing)            # (B, S, H)
        if self.han_dec is not None:
            extra.update(self._decoder_context(plain, batch, rows))
        return EncoderOutput(states, plain.src_pad_mask, extra or None)

    def _decoder_context(self, plain: EncoderOutput, batch, rows: Tensor) -> dict[str, Tensor]:
        b, n, h = rows.size(0), rows.size(1), self.backbone.hidden_size
        tgt_in = getattr(batch, "tgt_in", None)
        if tgt_in is None or not bool(rows.ge(0).any()):                        # no context anywhere
            z = plain.states.new_zeros((b, n, 1, h))
            full = torch.ones((b, n, 1), dtype=torch.bool, device=z.device)
            return {"dec_ctx": z, "dec_ctx_mask": full, "dec_ctx_missing": full[:, :, 0]}
        # teacher-force only the rows some row reads as context (not, e.g., the sentences being translated)
        needed = rows[rows.ge(0)].unique()                                         # (R,)
        remap = torch.full((b,), -1, dtype=torch.long, device=rows.device)
        remap[needed] = torch.arange(needed.numel(), device=rows.device)
        sub_rows = torch.where(rows.ge(0), remap[rows.clamp(min=0)], rows)       # (B, N) into the R rows
        sub_tgt = tgt_in.index_select(0, needed)                                   # (R, T)
        with torch.set_grad_enabled(torch.is_grad_enabled() and not self.cfg.detach_context):
            dec = self._teacher_forced(plain.select(needed), sub_tgt)             # (R, T, H)
        ctx, word_mask, missing = gather_context(dec, special_mask(sub_tgt), sub_rows)
        return {"dec_ctx": ctx, "dec_ctx_mask": word_mask, "dec_ctx_missing": missing}

    def _teacher_forced(self, enc: EncoderOutput, tgt_in: Tensor) -> Tensor:
        """Top decoder states (R, T, H) of ``tgt_in`` (R, T) given ``enc`` (R rows), computed in
        length buckets (``base.length_buckets``), zeros at padding (masked by the word mask)."""
        lengths = tgt_in.ne(self.pad_id).sum(1)
        groups = length_buckets(lengths)
        if len(groups) == 1 or enc.extra:
            return self.backbone.decode_hidden(enc, tgt_in)
        out = None
        for g in groups:
            part = enc.select(g)
            s = int((~part.src_pad_mask).sum(1).max())
            part = EncoderOutput(part.states[:, :s], part.src_pad_mask[:, :s])
            t = int(lengths[g].max())
            dec = self.backbone.decode_hidden(part, tgt_in[g, :t])                 # (R_g, t, H)
            if out is None:
                out = dec.new_zeros((tgt_in.size(0), tgt_in.size(1), dec.size(-1)))
            out = out.index_copy(0, g, F.pad(dec, (0, 0, 0, tgt_in.size(1) - t)))
        return out

    def _decoder_han(self, hidden: Tensor, extra: dict) -> Tensor:
        # hidden: (B, T, H) top decoder states → context-aware states (B, T, H)
        return self.han_dec(hidden, extra["dec_ctx"], extra["dec_ctx_mask"], extra["dec_ctx_missing"])

    def decode_train(self, enc: EncoderOutput, tgt_in: Tensor, select: Tensor | None = None) -> Tensor:
        hidden = self.backbone.decode_hidden(enc, tgt_in)                          # (B, T, H)
        if self.han_dec is not None:
            hidden = self._decoder_han(hidden, enc.extra)
        return self.backbone.output_logits(hidden if select is None else hidden[select])

    def init_state(self, enc: EncoderOutput):
        inner = self.backbone.init_state(enc)
        if self.han_dec is None:
            return inner
        e = enc.extra
        return HANDecoderState(inner, e["dec_ctx"], e["dec_ctx_mask"], e["dec_ctx_missing"])

    def decode_step(self, state, prev_tokens: Tensor):
        if self.han_dec is None:
            return self.backbone.decode_step(state, prev_tokens)
        hidden, state.inner = self.backbone.decode_step_hidden(state.inner, prev_tokens)   # (B, H)
        hidden = self.han_dec(hidden[:, None], state.ctx, state.word_mask, state.missing)[:, 0]
        return F.log_softmax(self.backbone.output_logits(hidden).float(), dim=-1), state
