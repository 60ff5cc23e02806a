"""Target-side concatenation: the previous N sentences of the document as a prefix on *both*
sides (Tiedemann & Scherrer 2017 "2-to-2"; the contextual-mt setting of Fernandes et al. 2021,
"Measuring and Increasing Context Usage in Context-Aware Machine Translation", ACL, §4).

Source: ``[X_{m−N} … X_{m−1} X_m]``, each sentence ending in ``</s>``, as the source-side
concatenation model (``concat.py``; ``max_context_tokens`` keeps the newest context tokens).
Target: the decoder reads ``<s> Y_{m−N} </s> … <s> Y_{m−1} </s> <s> Y_m </s>`` — every
sentence exactly as the sentence model reads one — and the loss covers the current sentence
``Y_m </s>`` only: the prefix ``<s> Y_{m−N} </s> … <s> Y_{m−1} </s>`` is teacher-forced, its
positions predict nothing. The break between sentences is the pair ``</s> <s>`` [I: Tiedemann &
Scherrer use a dedicated _BREAK_ token and contextual-mt a ``<brk>``; ``</s>``/``<s>`` need no
vocabulary change, so a sentence-level checkpoint (``train.init_from``) fits unchanged and a row
without context is exactly the sentence model's input (segment embeddings would add parameters and
rule out a CTranslate2 export)]. Context dropout (``train.context_dropout``, ``data/context_usage``)
sets a row's ``ctx`` to −1: both prefixes vanish together and the row reads the lone sentence.

In training, ``Y_{m−k}`` are the references (the context rows' ``tgt_in``); at test time the
document path (``inference/documents.py``, ``document.needs_target``) translates sentence k of
every document in one batch after sentence k − 1 of all of them, and the context rows carry the
model's **own** 1-best translations: a rolling history, never the reference. Search force-
decodes the prefix (``TargetPrefixParts.init_state_with_prefix``: one causal pass over the
prefixes, ragged per row) and generation starts after the last ``<s>``. ``max_target_context_tokens``
keeps the newest prefix tokens (after a leading ``<s>``); the prefix is never longer than half the
backbone's positions, so a prefix and an output always fit. Positions run over ``prefix · Y_m``
as over the source concatenation, unless ``context_position_offset`` = K > 0 (``concat.py``'s
module doc): then ``<s> Y_m </s>`` sits at 0, 1, … as in the sentence model, and the prefix (and
the source context) at K, K+1, …; the prefix keeps at most ``max_positions`` − K tokens and the
output fewer than K.

Context attention (``context_attention``, for attention supervision: ``training/attention_supervision.py``):
the self-attention weights of one decoder head from the current sentence's positions to the
target prefix (and the cross-attention weights to the source context), recomputed on demand.

Shape legend: B rows, S source length (with context), T current target length, P target prefix
length, D decoder size.
"""
from __future__ import annotations

from dataclasses import dataclass, replace

import torch
from torch import Tensor

from doctrans.models.context.base import context_rows
from doctrans.models.context.concat import ConcatContext
from doctrans.models.interface import ContextAttention, EncoderOutput, TargetPrefixParts
from doctrans.models.portable import PortableTransformer
from doctrans.models.rows import offset_positions, ragged_concat

BOS_ID, EOS_ID = 1, 2          # <s>, </s> of every doctrans vocabulary (data/vocab.py)


@dataclass(frozen=True)
class TgtConcatConfig:
    type: str = "tgt_concat"                # the row of models/build.py:CONTEXT_MODELS
    context_sents: int = 1                  # N previous sentences on both sides
    max_context_tokens: int = 0             # source context: keep at most this many (newest); 0 = all
    max_target_context_tokens: int = 0      # target prefix: keep at most this many (newest); 0 = all
    context_position_offset: int = 0        # > 0: context (both sides) at positions K…, the sentence at 0…
    supervised_layer: int = -1              # the decoder layer whose head attention supervision trains
    supervised_head: int = 0                #   and its head (train.context_attention_supervision)


class TargetConcat(ConcatContext):
    """Concatenation on both sides (module doc): ``encode`` → the source concatenation's
    states plus ``extra["tgt_prefix"]`` (B, P) (each row's target prefix, right-padded);
    ``decode_train`` / ``decode_hidden`` teacher-force ``prefix · tgt_in`` and return the
    current sentence's positions only; ``init_state`` force-decodes the prefix."""

    context_needs_target = True
    backbone_parts = (TargetPrefixParts,)

    def __init__(self, backbone, cfg: TgtConcatConfig):
        super().__init__(backbone, cfg)
        if cfg.max_target_context_tokens < 0:
            raise ValueError(f"context.max_target_context_tokens must be ≥ 0, got {cfg.max_target_context_tokens}")
        k = self.position_offset
        cap = backbone.max_target_len - k if k else backbone.max_target_len // 2
        self.prefix_cap = min(cfg.max_target_context_tokens, cap) if cfg.max_target_context_tokens else cap

    @property
    def max_target_len(self) -> int:
        """The backbone's positions less the longest prefix (with ``context_position_offset``
        K: K, the positions below the prefix's)."""
        return self.position_offset or self.backbone.max_target_len - self.prefix_cap

    # -- the target prefix -------------------------------------------------------------------
    def target_prefix(self, batch) -> Tensor:
        """(B, P) ids: for each row, its existing context rows' targets (``tgt_in`` = ``<s> y``,
        padding removed, oldest first) each followed by ``</s>``, cut to the newest
        ``prefix_cap`` tokens after a leading ``<s>``; right-padded; P = 0 when no row has
        context. Raises ValueError for a batch without ``tgt_in`` while some row has context."""
        src = batch.src
        rows = context_rows(batch, self.context_sents, src.device)
        if not bool(rows.ge(0).any()):
            return src.new_zeros((src.size(0), 0))
        tgt_in = getattr(batch, "tgt_in", None)
        if tgt_in is None:
            raise ValueError("the target-side concatenation model needs the context rows' targets (batch.tgt_in)")
        lengths = tgt_in.ne(self.pad_id).sum(1)                                      # (R,) <s> y
        ended = torch.cat([tgt_in, tgt_in.new_full((tgt_in.size(0), 1), self.pad_id)], 1)
        ended.scatter_(1, lengths[:, None], EOS_ID)                                   # <s> y </s>
        seg_len = torch.where(rows.ge(0), lengths[rows.clamp(min=0)] + 1, 0)          # (B, N)
        drop = (seg_len.sum(1) - self.prefix_cap).clamp(min=0)                        # (B,)
        prefix = ragged_concat(ended, rows, seg_len, drop, self.pad_id)
        if prefix.size(1):                                     # a cut prefix starts with <s> again
            prefix[:, 0] = torch.where(drop.gt(0), BOS_ID, prefix[:, 0])
        return prefix

    def encode(self, batch) -> EncoderOutput:
        """The source concatenation's encoding (``ConcatContext.encode``) with each row's target
        prefix in ``extra["tgt_prefix"]`` (B, P) (kept aligned by ``select``)."""
        enc = super().encode(batch)
        extra = dict(enc.extra or {})
        extra["tgt_prefix"] = self.target_prefix(batch).to(enc.states.device)
        return EncoderOutput(enc.states, enc.src_pad_mask, extra, enc.shared)

    def _prefix(self, enc: EncoderOutput) -> Tensor:
        """``extra["tgt_prefix"]`` cut to its longest row (rows selected from a batch may need
        fewer columns)."""
        extra = enc.extra or {}
        if "tgt_prefix" not in extra:
            raise ValueError("EncoderOutput lacks the target prefix: encode with the target-side concatenation model")
        prefix = extra["tgt_prefix"]
        width = int(prefix.ne(self.pad_id).sum(1).max()) if prefix.numel() else 0
        return prefix[:, :width]

    def _packed(self, enc: EncoderOutput, tgt_in: Tensor) -> tuple[Tensor, Tensor, Tensor | None]:
        """(prefix_b · tgt_in_b right-padded (B, P+T), index (B, T) of tgt_in's positions in it,
        position ids (B, P+T) with ``context_position_offset``, else None). Raises ValueError when
        T reaches the offset (the sentence would share positions with its prefix)."""
        prefix = self._prefix(enc)
        b, t = tgt_in.shape
        if self.position_offset and t > self.position_offset:
            raise ValueError(f"a target of {t} tokens reaches context.context_position_offset={self.position_offset}")
        lengths = prefix.ne(self.pad_id).sum(1)                                       # (B,)
        full = torch.cat([prefix, prefix.new_full((b, t), self.pad_id)], 1)
        index = lengths[:, None] + torch.arange(t, device=tgt_in.device)[None, :]
        pos = offset_positions(lengths, full.size(1), self.position_offset) if self.position_offset else None
        return full.scatter(1, index, tgt_in), index, pos

    def decode_hidden(self, enc: EncoderOutput, tgt_in: Tensor) -> Tensor:
        """Teacher forcing of ``prefix · tgt_in`` → the decoder states of tgt_in's positions
        (B, T, D) (the prefix's own states are computed and dropped)."""
        full, index, pos = self._packed(enc, tgt_in)
        hidden = (self.backbone.decode_hidden(self._plain(enc), full) if pos is None
                  else self.backbone.decode_hidden(self._plain(enc), full, positions=pos))  # (B, P+T, D)
        return hidden.gather(1, index[:, :, None].expand(-1, -1, hidden.size(-1)))

    def decode_train(self, enc: EncoderOutput, tgt_in: Tensor, select: Tensor | None = None) -> Tensor:
        """Logits (B, T, V) of the current sentence only (or (N, V) at ``select``): the loss
        never sees the prefix."""
        hidden = self.decode_hidden(enc, tgt_in)
        return self.backbone.output_logits(hidden if select is None else hidden[select])

    def init_state(self, enc: EncoderOutput):
        """The backbone's state after force-decoding each row's prefix."""
        return self.backbone.init_state_with_prefix(self._plain(enc), self._prefix(enc), self.position_offset)

    def decode_step(self, state, prev_tokens: Tensor, vocab: Tensor | None = None):
        return self.backbone.decode_step(state, prev_tokens, vocab)

    def decode_step_hidden(self, state, prev_tokens: Tensor):
        return self.backbone.decode_step_hidden(state, prev_tokens)

    def context_attention(self, batch) -> ContextAttention:
        """The self-attention weights of decoder layer ``supervised_layer``, head ``supervised_head``,
        from the target rows' current positions over their target prefix (``ContextAttention``:
        weights (B', T, P), key_row / key_pos: the context row and its ``tgt_in`` position of each
        prefix token, −1 at the ``</s>`` breaks and padding). Re-encodes ``batch``, teacher-forced."""
        enc = self.encode(batch)
        is_target = getattr(batch, "is_target", None)
        rows = (torch.arange(batch.src.size(0), device=batch.src.device) if is_target is None
                else is_target.to(batch.src.device).nonzero().squeeze(1))
        enc = enc.select(rows)
        tgt_in = batch.tgt_in.index_select(0, rows)
        full, index, pos = self._packed(enc, tgt_in)
        att = self.backbone.self_attention_weights(self._plain(enc), full, self.cfg.supervised_layer,
                                                   self.cfg.supervised_head, positions=pos)   # (B', P+T, P+T)
        p = full.size(1) - tgt_in.size(1)
        weights = att.gather(1, index[:, :, None].expand(-1, -1, att.size(-1)))[:, :, :p]   # (B', T, P)
        key_row, key_pos = self.prefix_origin(batch, rows, p)
        return ContextAttention(weights, key_row, key_pos, "target")

    def prefix_origin(self, batch, rows: Tensor, width: int) -> tuple[Tensor, Tensor]:
        """For the prefix tokens of ``rows`` (``target_prefix``'s layout, ``width`` columns): the
        context row (B', width) each comes from and its position in that row's ``tgt_in``; −1 at
        the ``</s>`` breaks, at the prefix cut's leading ``<s>`` and at padding."""
        ctx = context_rows(batch, self.context_sents, batch.src.device).index_select(0, rows)
        lengths = batch.tgt_in.ne(self.pad_id).sum(1).tolist()
        key_row = torch.full((rows.numel(), width), -1, dtype=torch.long, device=batch.src.device)
        key_pos = key_row.clone()
        for b, ctx_b in enumerate(ctx.tolist()):
            origin = [(r, j) for r in ctx_b if r >= 0 for j in [*range(lengths[r]), -1]]
            if len(origin) > self.prefix_cap:
                origin = [(-1, -1)] + origin[len(origin) - self.prefix_cap + 1:]
            for k, (r, j) in enumerate(origin[:width]):
                if j >= 0:
                    key_row[b, k], key_pos[b, k] = r, j
        return key_row, key_pos

    @staticmethod
    def _plain(enc: EncoderOutput) -> EncoderOutput:
        """``enc`` without this model's extra (the backbone's own encoding)."""
        extra = {k: v for k, v in (enc.extra or {}).items() if k != "tgt_prefix"}
        return EncoderOutput(enc.states, enc.src_pad_mask, extra or None, enc.shared)

    def portable(self) -> PortableTransformer | None:
        """The backbone's portable form with this model's context on both sides (the target
        prefix is forced decoding, ``PortableTransformer``'s target context); None when the
        backbone is not portable."""
        base = super().portable()
        if base is None:
            return None
        return replace(base, target_context=self.context_sents, max_target_context_tokens=self.prefix_cap)
