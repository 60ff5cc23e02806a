"""Hierarchical Attention Network context (Miculicich et al. 2018, HAN, §2; docs/models.md §2.5):
HAN encoder, HAN decoder and the joint model, on a Transformer backbone.

* ``attach: encoder`` — a HAN block over the top encoder outputs of X_{m−N..m−1} (queries: the
  top encoder outputs of x); the decoder cross-attends to the gated result.
* ``attach: decoder`` — a HAN block over the top decoder outputs of the previous N target
  sentences (queries: the top decoder output at t), applied before the output layer. The
  context's decoder states come from teacher-forcing the backbone decoder on those sentences:
  the references in training, the model's own 1-best at test time [C].
* ``attach: both`` — the joint model ("HAN enc+dec"): two separate blocks.

Context rows come from the batch (``models/context/base.py``), so every sentence is encoded
once per batch. Cost, without changing the function [our implementation]: the word-level keys and
values of a context sentence are projected once (``HANBlock.project_rows``), not once per
sentence that reads it; the blocks run on the target rows only, in length buckets; in beam search
the K hypotheses of a sentence read one decoder-side memory; and when translating a collection
(``inference_cache``) a sentence's context memory is kept for the batches of the next N sentences.
Word masks come from each side's own vocabulary (PAD, UNK, BOS, EOS, not the
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

from doctrans.models.context.base import ContextModel, RowCache, context_rows, special_mask
from doctrans.models.context.han_block import HANBlock, HANBlockConfig
from doctrans.models.interface import BackboneParts, EncoderOutput, SearchBatch
from doctrans.models.rows import encode_bucketed, length_buckets, rows_per_group, scatter_rows, split_encode

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
    """The backbone's decoder state plus, per live row, its sentence (``sent`` (B',), the batch
    row of the sentence it translates) and its decoder-side context rows (``rows`` (B', N), indices
    into ``pool``: the per-context-sentence keys/values of ``HANBlock.project_rows``). ``group``
    = rows per sentence once the beam has widened (the beam size; set at the widening reorder): while every sentence still has ``group``
    consecutive rows (beam search keeps K per live sentence), the K hypotheses of a sentence
    read one memory as K query positions (``HANBlock.forward_memory``), gathered again only
    when the set of live sentences changes."""

    inner: object
    sent: Tensor
    rows: Tensor
    pool: dict
    group: int
    memory: object = None
    memory_key: Tensor | None = None

    def reorder(self, index: Tensor) -> "HANDecoderState":
        sent = self.sent.index_select(0, index)
        group = self.group if sent.numel() == self.sent.numel() else rows_per_group(sent)   # widened: the beam
        return HANDecoderState(self.inner.reorder(index), sent, self.rows.index_select(0, index), self.pool,
                               group, self.memory, self.memory_key)


def _needed(rows: Tensor) -> tuple[Tensor, Tensor]:
    """rows (B, N) batch-row indices of each row's context (−1 = missing) → (needed (R,) the
    distinct rows read as context, sorted; sub (B, N) the same pointers into ``needed``)."""
    needed = rows[rows.ge(0)].unique()                                           # (R,)
    remap = torch.full((max(int(rows.max()) + 1, 1),), -1, dtype=torch.long, device=rows.device)
    remap[needed] = torch.arange(needed.numel(), device=rows.device)
    return needed, torch.where(rows.ge(0), remap[rows.clamp(min=0)], rows)


class HAN(ContextModel):
    """HAN encoder / decoder / joint around a backbone with ``BackboneParts`` (see module doc)."""

    backbone_parts = (BackboneParts,)

    def __init__(self, backbone, cfg: HANConfig):
        super().__init__(backbone, cfg.context_sents)
        if cfg.attach not in ATTACH:
            raise ValueError(f"context.attach must be one of {ATTACH}, got {cfg.attach!r}")
        self.cfg = cfg
        block = HANBlockConfig(cfg.heads, cfg.d_ff, cfg.dropout, cfg.detach_context, cfg.empty_context)
        h_enc, h_dec = backbone.encoder_size, backbone.hidden_size
        self.han_enc = HANBlock(h_enc, block) if cfg.attach in ("encoder", "both") else None
        self.han_dec = HANBlock(h_dec, block) if cfg.attach in ("decoder", "both") else None
        self.context_needs_target = self.han_dec is not None

    def explain_blocks(self):
        """The HAN encoder block (source side) and/or the HAN decoder block (target side)."""
        return [(name, block, side) for name, block, side in
                (("HAN encoder", self.han_enc, "source"), ("HAN decoder", self.han_dec, "target")) if block is not None]

    def encode(self, batch) -> EncoderOutput:
        """All rows of ``batch`` (src (B, S), ctx (B, N), tgt_in (B, T) for the decoder side,
        is_target (B,)) → states (B, S, H): HAN-encoded for the target rows with ``attach``
        encoder/both (context-only rows keep their plain states: they are never decoded), and
        for the decoder side ``extra`` han_dec_rows (B, N) / han_dec_sent (B,) pointing into
        ``shared`` han_dec_k, han_dec_v (R, A, T, D), han_dec_mask (R, T): the context memory,
        projected once per context sentence. In training with ``detach_context`` the
        context-only rows are encoded without gradient (``split_encode``). Every sentence's
        encoder states are computed once; the HAN blocks run in length buckets of the target
        rows, each cut to its longest source (``models.rows.length_buckets``).

        Inside ``inference_cache()`` (translation of a collection, no gradient) the context
        memory of a sentence (its keys/values, keyed by its source — and for the decoder side
        its 1-best — tokens) is kept between batches: a context-only row found there is neither
        encoded nor teacher-forced again, and its states in the output are zeros (it is never
        decoded)."""
        src, tgt_in = batch.src, getattr(batch, "tgt_in", None)
        rows = context_rows(batch, self.context_sents, src.device)
        is_target = getattr(batch, "is_target", None)
        targets = (is_target.to(rows.device).nonzero().squeeze(1) if is_target is not None
                   else torch.arange(rows.size(0), device=rows.device))
        enc_need = _needed(rows.index_select(0, targets)) if self.han_enc is not None else None
        dec_need = _needed(rows) if self.han_dec is not None and tgt_in is not None else None
        caches = self._active_caches()
        enc_keys = dec_keys = None
        if caches is None:
            plain = split_encode(self.backbone, batch, context_grad=not self.cfg.detach_context)
        else:
            enc_keys = None if enc_need is None else self._keys(enc_need[0], src)
            dec_keys = None if dec_need is None else self._keys(dec_need[0], src, tgt_in)
            plain = self._encode_cached(src, targets, caches, enc_need, enc_keys, dec_need, dec_keys)
        states, extra, shared = plain.states, dict(plain.extra or {}), dict(plain.shared or {})
        if self.han_enc is not None:
            states = self._encoder_han(plain, src, targets, enc_need, enc_keys)
        if self.han_dec is not None:
            self._decoder_context(plain, tgt_in, rows, targets, dec_need, dec_keys, extra, shared)
        return EncoderOutput(states, plain.src_pad_mask, extra or None, shared or None)

    def _encode_rows(self, src: Tensor, rows: Tensor) -> EncoderOutput:
        """Plain encoder states of rows ``rows`` (R,) of ``src`` (B, S) in length buckets; zeros
        and a full padding mask at the other rows (a plain call if the backbone has ``extra``)."""
        parts = encode_bucketed(self.backbone, src, rows)
        if parts is None:
            return self.backbone.encode(SearchBatch(src))
        return scatter_rows(parts, src.size(0), src.size(1))

    def _encode_cached(self, src: Tensor, targets: Tensor, caches: dict, enc_need, enc_keys, dec_need,
                       dec_keys) -> EncoderOutput:
        """Plain states of the target rows and of the context rows whose memory is not cached
        (inference cache on). Every sentence's plain states are computed once per collection —
        in the first batch that needs them, as a target or as context — and kept (keyed by its
        tokens: a sentence is context of the next N, which sit in other batches, and in a
        length-sorted schedule its readers may come before it); target rows' encoder-side
        keys/values (they are the context of later sentences) go into the cache too."""
        plain_cache = caches.setdefault("plain", RowCache(caches["enc"].capacity))
        wanted = [targets]
        if enc_keys is not None:
            wanted += [enc_need[0][i:i + 1] for i, key in enumerate(enc_keys) if key not in caches["enc"]]
        if dec_keys is not None:
            wanted += [dec_need[0][i:i + 1] for i, key in enumerate(dec_keys) if key not in caches["dec"]]
        rows = torch.cat(wanted).unique()
        keys = self._keys(rows, src)
        miss = [i for i, key in enumerate(keys) if key not in plain_cache]
        if miss:
            plain = self._encode_rows(src, rows[torch.tensor(miss, device=rows.device)])
        else:
            ref = next(self.backbone.parameters())
            plain = EncoderOutput(ref.new_zeros((src.size(0), src.size(1), self.backbone.encoder_size)),
                                  torch.ones(src.shape, dtype=torch.bool, device=src.device))
        computed = set(miss)
        lengths = src.index_select(0, rows).ne(self.pad_id).sum(1).tolist()
        items = list(enumerate(zip(rows.tolist(), keys, lengths)))
        for i, (r, key, n) in items:                   # reads first: the puts below may evict
            if i not in computed:
                states = plain_cache.get(key)
                plain.states[r, :states.size(0)] = states
                plain.src_pad_mask[r, :states.size(0)] = False
        for i, (r, key, n) in items:
            if i in computed:
                plain_cache.put(key, plain.states[r, :n].clone())
        if self.han_enc is not None:
            target_keys = self._keys(targets, src)
            fresh = [i for i, key in enumerate(target_keys) if key not in caches["enc"]]
            if fresh:
                self._row_memory(self.han_enc, "enc", targets[fresh], src, [target_keys[i] for i in fresh],
                                 lambda r: plain.states.index_select(0, r))
        return plain

    def _keys(self, needed: Tensor, src: Tensor, tgt: Tensor | None = None) -> list:
        """Cache keys of rows ``needed``: their source tokens (and target tokens), no (trailing)
        padding."""
        def strip(t: Tensor) -> list[tuple]:
            part = t.index_select(0, needed)
            return [tuple(row[:n]) for row, n in zip(part.tolist(), part.ne(self.pad_id).sum(1).tolist())]
        keys = strip(src)
        return keys if tgt is None else list(zip(keys, strip(tgt)))

    def _row_memory(self, block, kind: str, needed: Tensor, tokens: Tensor, keys: list | None, states_of):
        """Keys/values (R, A, L, D) and word mask (R, L) of the context rows ``needed`` (R,),
        whose tokens are rows of ``tokens`` and whose states ``states_of(rows)`` gives, cut to
        their longest; one void row when ``needed`` is empty. With ``keys`` (inference cache)
        only the rows not in the cache are computed, and stored there."""
        if not needed.numel():
            heads = block.attn_w.heads
            z = tokens.new_zeros((1, heads, 1, block.d_model // heads), dtype=block.ln_w.weight.dtype)
            return z, z, torch.ones((1, 1), dtype=torch.bool, device=tokens.device)
        if keys is None:
            return self._project(block, needed, tokens, states_of)
        cache = self._caches[kind]
        miss = [i for i, key in enumerate(keys) if key not in cache]
        fresh = {key: cache.get(key) for key in keys if key in cache}    # read before the puts may evict
        if miss:
            m = needed[torch.tensor(miss, device=needed.device)]
            k, v, mask = self._project(block, m, tokens, states_of)
            lengths = tokens.index_select(0, m).ne(self.pad_id).sum(1).clamp(min=1).tolist()
            for j, (i, n) in enumerate(zip(miss, lengths)):
                fresh[keys[i]] = (k[j, :, :n], v[j, :, :n], mask[j, :n])
                cache.put(keys[i], fresh[keys[i]])
        entries = [fresh[key] for key in keys]
        width = max(e[2].numel() for e in entries)
        k = entries[0][0].new_zeros((len(entries), entries[0][0].size(0), width, entries[0][0].size(-1)))
        v = k.clone()
        mask = torch.ones((len(entries), width), dtype=torch.bool, device=k.device)
        for i, (ke, ve, me) in enumerate(entries):
            n = me.numel()
            k[i, :, :n], v[i, :, :n], mask[i, :n] = ke, ve, me
        return k, v, mask

    def _project(self, block, rows: Tensor, tokens: Tensor, states_of):
        tok = tokens.index_select(0, rows)
        width = max(int(tok.ne(self.pad_id).sum(1).max()), 1)
        mask = special_mask(tok[:, :width])
        k, v = block.project_rows(states_of(rows)[:, :width], mask)
        return k, v, mask

    def _encoder_han(self, plain: EncoderOutput, src: Tensor, targets: Tensor, need, keys) -> Tensor:
        """HAN encoder (eq. 3–8 over X_{m−N..m−1}) on the target rows, in length buckets."""
        needed, sub = need
        if not needed.numel() and self.cfg.empty_context == "passthrough":
            return plain.states                                                  # no context anywhere
        k, v, mask = self._row_memory(self.han_enc, "enc", needed, src, keys,
                                      lambda r: plain.states.index_select(0, r))
        lengths = src.index_select(0, targets).ne(self.pad_id).sum(1)
        out, s = plain.states, plain.states.size(1)
        for g in length_buckets(lengths):
            r, t = targets[g], max(int(lengths[g].max()), 1)
            mem = self.han_enc.gather_memory(k, v, mask, sub[g])
            h = self.han_enc.forward_memory(plain.states.index_select(0, r)[:, :t], mem)   # (R_g, t, H)
            out = out.index_copy(0, r, F.pad(h, (0, 0, 0, s - t)))
        return out

    def _decoder_context(self, plain: EncoderOutput, tgt_in: Tensor | None, rows: Tensor, targets: Tensor, need,
                         keys, extra: dict, shared: dict) -> None:
        """The decoder-side memory: top decoder states of the context rows' targets (teacher-
        forced: references in training, 1-best at translation), projected once per row.

        Training HAN decoder (``attach: decoder``: the loss's decoder reads the same plain
        encoder states): one teacher-forced pass, with gradient, over the target rows and the
        context rows together; the context reads its rows' states (detached under
        ``detach_context``) and ``decode_train`` reuses the target rows' states
        (``extra`` han_dec_hidden, han_dec_tgt, han_dec_stashed) instead of decoding them again [our
        implementation: the same function, one decoder pass fewer]."""
        if need is None:                                                         # no target context
            needed, sub = rows.new_zeros((0,)), torch.full_like(rows, -1)
        else:
            needed, sub = need

        shared_pass: list[Tensor] = []                                           # [both rows, their states]

        def states_of(r: Tensor) -> Tensor:
            if shared_pass:
                return shared_pass[1].index_select(0, torch.searchsorted(shared_pass[0], r))
            t = tgt_in.index_select(0, r)
            t = t[:, :max(int(t.ne(self.pad_id).sum(1).max()), 1)]
            with torch.set_grad_enabled(torch.is_grad_enabled() and not self.cfg.detach_context):
                return self._teacher_forced(plain.select(r), t)                   # (R, T, H)

        if (self.han_enc is None and torch.is_grad_enabled() and tgt_in is not None and keys is None
                and targets.numel()):
            both = torch.cat([needed, targets]).unique()                          # (Q,) sorted
            t = tgt_in.index_select(0, both)
            width = max(int(t.ne(self.pad_id).sum(1).max()), 1)
            hidden = self._teacher_forced(plain.select(both), t[:, :width])       # (Q, T, H), with grad
            stash = hidden.new_zeros((rows.size(0), width, hidden.size(-1)))
            stash = stash.index_copy(0, targets, hidden.index_select(0, torch.searchsorted(both, targets)))
            stashed = torch.zeros(rows.size(0), dtype=torch.bool, device=rows.device).index_fill(0, targets, True)
            extra.update(han_dec_hidden=stash, han_dec_tgt=tgt_in[:, :width], han_dec_stashed=stashed)
            shared_pass += [both, hidden]

        k, v, mask = self._row_memory(self.han_dec, "dec", needed, tgt_in if tgt_in is not None else rows,
                                      keys, states_of)
        shared.update(han_dec_k=k, han_dec_v=v, han_dec_mask=mask)
        extra.update(han_dec_rows=sub, han_dec_sent=torch.arange(rows.size(0), device=rows.device))

    def _teacher_forced(self, enc: EncoderOutput, tgt_in: Tensor) -> Tensor:
        """Top decoder states (R, T, H) of ``tgt_in`` (R, T) given ``enc`` (R rows), computed in
        length buckets (``models.rows.length_buckets``), zeros at padding (masked by the word mask)."""
        lengths = tgt_in.ne(self.pad_id).sum(1)
        groups = length_buckets(lengths)
        if len(groups) == 1 or enc.extra:
            return self.backbone.decode_hidden(enc, tgt_in)
        out = None
        for g in groups:
            part = enc.select(g)
            part = part.narrow(int((~part.src_pad_mask).sum(1).max()))
            t = int(lengths[g].max())
            dec = self.backbone.decode_hidden(part, tgt_in[g, :t])                 # (R_g, t, H)
            if out is None:
                out = dec.new_zeros((tgt_in.size(0), tgt_in.size(1), dec.size(-1)))
            out = out.index_copy(0, g, F.pad(dec, (0, 0, 0, tgt_in.size(1) - t)))
        return out

    def _decoder_memory(self, pool: dict, rows: Tensor):
        """``HANMemory`` of the decoder-side block for context pointers rows (B', N)."""
        return self.han_dec.gather_memory(pool["han_dec_k"], pool["han_dec_v"], pool["han_dec_mask"], rows)

    def decode_hidden(self, enc: EncoderOutput, tgt_in: Tensor) -> Tensor:
        """The backbone's top decoder states (B, T, H), with the decoder-side HAN's context
        added (HAN decoder / joint)."""
        hidden = self._stashed_hidden(enc, tgt_in)
        if hidden is None:
            hidden = self.backbone.decode_hidden(enc, tgt_in)                      # (B, T, H)
        if self.han_dec is not None:
            hidden = self.han_dec.forward_memory(hidden, self._decoder_memory(enc.shared, enc.extra["han_dec_rows"]))
        return hidden

    def decode_train(self, enc: EncoderOutput, tgt_in: Tensor, select: Tensor | None = None) -> Tensor:
        hidden = self.decode_hidden(enc, tgt_in)
        return self.backbone.output_logits(hidden if select is None else hidden[select])

    def _stashed_hidden(self, enc: EncoderOutput, tgt_in: Tensor) -> Tensor | None:
        """The backbone's decoder states of ``tgt_in`` (B, T) computed by ``encode`` (training
        HAN decoder, see ``_decoder_context``), or None if ``encode`` made none for exactly
        these rows and tokens."""
        extra = enc.extra or {}
        stash, tokens = extra.get("han_dec_hidden"), extra.get("han_dec_tgt")
        w = tgt_in.size(1)
        if (stash is None or not torch.is_grad_enabled() or tokens.size(0) != tgt_in.size(0)
                or not bool(extra["han_dec_stashed"].all())
                or tokens.size(1) < w or not torch.equal(tokens[:, :w], tgt_in)
                or bool(tokens[:, w:].ne(self.pad_id).any())):
            return None
        return stash[:, :w]

    def init_state(self, enc: EncoderOutput):
        inner = self.backbone.init_state(enc)
        if self.han_dec is None:
            return inner
        sent = enc.extra["han_dec_sent"]                                           # (B',) one row per sentence
        return HANDecoderState(inner, sent, enc.extra["han_dec_rows"], enc.shared, rows_per_group(sent))

    def decode_step(self, state, prev_tokens: Tensor, vocab: Tensor | None = None):
        if self.han_dec is None:
            return self.backbone.decode_step(state, prev_tokens, vocab)
        hidden, state = self.decode_step_hidden(state, prev_tokens)
        return F.log_softmax(self.backbone.output_logits(hidden, vocab).float(), dim=-1), state

    def decode_step_hidden(self, state, prev_tokens: Tensor):
        """One step's top decoder state (B', H), the decoder-side HAN's context added."""
        if self.han_dec is None:
            return self.backbone.decode_step_hidden(state, prev_tokens)
        hidden, state.inner = self.backbone.decode_step_hidden(state.inner, prev_tokens)   # (B', H)
        k = state.group
        by_sent = state.sent.view(-1, k) if k > 1 and state.sent.numel() % k == 0 else None
        if by_sent is not None and bool(by_sent.eq(by_sent[:, :1]).all()):
            heads = by_sent[:, 0]                                                  # (nS,) live sentences
            if state.memory_key is None or not torch.equal(heads, state.memory_key):
                state.memory = self._decoder_memory(state.pool, state.rows.view(-1, k, state.rows.size(1))[:, 0])
                state.memory_key = heads
            hidden = self.han_dec.forward_memory(hidden.view(-1, k, hidden.size(-1)), state.memory).flatten(0, 1)
        else:
            hidden = self.han_dec.forward_memory(hidden[:, None], self._decoder_memory(state.pool, state.rows))[:, 0]
        return hidden, state
