"""Multi-encoder context (Jean et al. 2017, as re-implemented in Wang 2019 thesis §3.3.1 / §3.6; docs/models.md §2.2)
on the RNNSearch backbone.

A second bidirectional GRU encoder Enc' reads the previous source sentence X_{m-1} (N = 1) and
a second attention ATT', with its own parameters, is queried by the same s̃_t::

    h'_j  = [GRU'_f(→h'_{j-1}, E_src[x'_j]) ; GRU'_b(←h'_{j+1}, E_src[x'_j])]       (B, L, 2H)
    α'_t  = masked_softmax_j(v'^T tanh(W' s̃_t + U' h'_j + b'))                   (B, L)
    c'_t  = Σ_j α'_tj h'_j                                                        (B, 2H)
    s_t   = GRU_2(s̃_t, [c_t ; c'_t])                                  [S2 eq. 3.9] (B, H)
    o_t   = tanh(W_o s_t + C_o c_t + V_o E[y_{t-1}] + C'_o c'_t + b_o)              (B, E)

[I, from the +20.0M of S2 Table 3.9] Enc' shares E_src (``share_src_embeddings``) and c'_t also
feeds the readout: Enc' 9.73M + ATT' 3.0M + GRU_2's input 2H → 3H 6.0M + C'_o 1.24M = 19.97M at
E 620, H 1000. A first sentence has no X_{m-1}: its context is a fully masked NULL sentence, i.e.
c'_t = 0, and the model computes the backbone there (zero states with a zero score bias: the
attention weights sum to 1 over zeros). The previous sentences are rows of the batch
(``batch.ctx``): each is encoded by Enc' and its keys U' h'_j projected once per batch. Every
added parameter is this module's, so ``train.freeze: ["backbone.*"]`` is S2 §3.6's setting.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor, nn

from doctrans.layers.init import init_rnn_weights
from doctrans.models.context.base import HookedRNNContext, context_rows, pad_stack
from doctrans.models.interface import EncoderOutput, SearchBatch
from doctrans.models.rnn_hooks import DecoderHook, RNNParts, StepExtra, StepInputs
from doctrans.models.rows import scatter_rows


@dataclass(frozen=True)
class MultiEncoderConfig:
    type: str = "multi_encoder"         # the row of models/build.py:CONTEXT_MODELS
    context_sents: int = 1              # N: the previous source sentence only [P]
    share_src_embeddings: bool = True   # Enc' reads the backbone's E_src [I]


class MultiEncoder(HookedRNNContext):
    """A second encoder and attention over X_{m-1}, its context c'_t fed to GRU_2 and the readout
    of an RNNSearch backbone (``models.rnn_hooks.RNNParts``; module doc)."""

    def __init__(self, backbone, cfg: MultiEncoderConfig):
        super().__init__(backbone, cfg.context_sents)
        if not isinstance(backbone, RNNParts):
            raise ValueError(f"context type 'multi_encoder' needs an RNN backbone (rnnsearch), "
                             f"got {type(backbone).__name__}")
        if cfg.context_sents != 1:
            raise ValueError(f"context.context_sents of multi_encoder is 1 (X_(m-1)), got {cfg.context_sents}")
        self.cfg = cfg
        e, h = backbone.emb_size, backbone.rnn_size
        vocab = backbone.source_embedding.num_embeddings
        self.ctx_embed = None if cfg.share_src_embeddings else nn.Embedding(vocab, e, padding_idx=self.pad_id)
        self.ctx_encoder = nn.GRU(e, h, batch_first=True, bidirectional=True)      # Enc'
        self.ctx_query = nn.Linear(h, h)                                           # W', b'
        self.ctx_key = nn.Linear(2 * h, h, bias=False)                             # U'
        self.ctx_v = nn.Linear(h, 1, bias=False)                                   # v'
        self.ctx_gru2 = nn.Linear(2 * h, 3 * h, bias=False)                        # c'_t into GRU_2
        self.ctx_readout = nn.Linear(2 * h, backbone.readout_size, bias=False)     # C'_o
        init_rnn_weights(((n, p) for n, p in self.named_parameters() if not n.startswith("backbone.")), self.pad_id)

    def encode_context(self, tokens: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """Enc' over tokens (R, L) plus one NULL row → h' (R+1, L, 2H), keys U' h' (R+1, L, H)
        and score bias (R+1, L) (−inf at padding; the NULL row: zero states, zero bias)."""
        embed = self.backbone.source_embedding if self.ctx_embed is None else self.ctx_embed
        pad = tokens.eq(self.pad_id)                                                # (R, L)
        w = self.ctx_key.weight
        states = w.new_zeros((tokens.size(0) + 1, tokens.size(1), w.size(1)))      # (R+1, L, 2H)
        if tokens.size(0):
            lengths = (~pad).sum(1).clamp(min=1).cpu()
            packed = nn.utils.rnn.pack_padded_sequence(embed(tokens), lengths, batch_first=True,
                                                       enforce_sorted=False)
            out = nn.utils.rnn.pad_packed_sequence(self.ctx_encoder(packed)[0], batch_first=True,
                                                   total_length=tokens.size(1))[0]
            states = torch.cat([out, states[-1:]])
        bias = w.new_zeros(states.shape[:2]).masked_fill(torch.cat([pad, pad.new_zeros(1, pad.size(1))]),
                                                         float("-inf"))
        return states, self.ctx_key(states), bias

    def _encode_context_cached(self, tokens: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """``encode_context`` through the inference cache: Enc' states and keys of a sentence
        (keyed by its tokens) computed once per collection (N = 1: a sentence is the context of
        one next sentence, so this saves the repeated sentences of a collection), padded again
        here with zeros (what Enc' and U' give at padding) and the NULL row appended."""
        lengths = tokens.ne(self.pad_id).sum(1).clamp(min=1)

        def compute(miss: list[int]) -> list[tuple[Tensor, Tensor]]:
            t = tokens[miss]
            states, keys, _ = self.encode_context(t[:, :max(int(lengths[miss].max()), 1)])
            return [(states[j, :n], keys[j, :n]) for j, n in enumerate(lengths[miss].tolist())]

        entries = self._cached_rows("me_context", self._row_keys(tokens), compute)
        null = entries[0][0].new_zeros((1,) + tuple(entries[0][0].shape[1:]))
        states = pad_stack([e[0] for e in entries] + [null])
        keys = pad_stack([e[1] for e in entries] + [null.new_zeros((1, entries[0][1].size(-1)))])
        pad = torch.arange(states.size(1), device=tokens.device)[None] >= lengths[:, None]     # (R, L)
        pad = torch.cat([pad, pad.new_zeros((1, pad.size(1)))])                     # NULL: zero bias
        bias = states.new_zeros(pad.shape).masked_fill(pad, float("-inf"))
        return states, keys, bias

    def encode(self, batch) -> EncoderOutput:
        """batch.src (B, S), ctx (B, 1), is_target (B,) → the backbone's annotations of the target
        rows (B, S, 2H) (context-only rows: zeros, masked), ``shared`` me_states / me_keys /
        me_bias (R+1, L, ·): Enc' of the R previous sentences the target rows read and the NULL
        row R, and ``extra`` me_row (B,): each row's index into them."""
        src = batch.src
        is_target = getattr(batch, "is_target", None)
        targets = (torch.arange(src.size(0), device=src.device) if is_target is None
                   else is_target.to(src.device).nonzero().squeeze(1))
        prev = context_rows(batch, 1, src.device)[:, 0]                             # (B,)
        needed, slot = torch.unique(prev.index_select(0, targets), return_inverse=True)
        keep = needed.ge(0)
        tokens = src.index_select(0, needed[keep])                                  # (R, S)
        width = max(int(tokens.ne(self.pad_id).sum(1).max()) if tokens.size(0) else 1, 1)
        if self._active_caches() is None or not tokens.size(0):
            states, keys, bias = self.encode_context(tokens[:, :width])
        else:
            states, keys, bias = self._encode_context_cached(tokens)
        remap = torch.cumsum(keep.long(), 0) - 1                                    # needed → row of states
        remap = torch.where(keep, remap, torch.full_like(remap, tokens.size(0)))    # missing → NULL row
        row = torch.full_like(prev, tokens.size(0)).index_copy(0, targets, remap[slot])
        enc = self.backbone.encode(SearchBatch(src.index_select(0, targets)))
        if targets.numel() < src.size(0):
            enc = scatter_rows([(targets, enc)], src.size(0), src.size(1))
        return EncoderOutput(enc.states, enc.src_pad_mask, {"me_row": row},
                             {"me_states": states, "me_keys": keys, "me_bias": bias})

    def hook(self, enc: EncoderOutput) -> DecoderHook:
        """Each row's Enc' states, keys and bias (B, L, ·), gathered from ``enc.shared``."""
        row = enc.extra["me_row"]
        return DecoderHook({k: enc.shared[f"me_{k}"].index_select(0, row) for k in ("states", "keys", "bias")},
                           None, self.step)

    def step(self, x: StepInputs) -> StepExtra:
        """c'_t = ATT'(s̃_t, h') (B, 2H) → GRU_2's extra input W'_c c'_t (B, 3H) [eq. 3.9] and the
        readout term C'_o c'_t (B, k·E)."""
        q = self.ctx_query(x.s_tilde).unsqueeze(1)                                  # (B, 1, H)
        scores = self.ctx_v(torch.tanh(x.rows["keys"] + q)).squeeze(-1) + x.rows["bias"]    # (B, L)
        c = torch.bmm(torch.softmax(scores, -1).unsqueeze(1), x.rows["states"]).squeeze(1)  # (B, 2H)
        return StepExtra(gru2=self.ctx_gru2(c), readout=self.ctx_readout(c))
