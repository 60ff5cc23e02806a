"""HRNN cross-sentence context (Wang et al. 2017; Wang 2019 thesis ch.3; docs/models.md §2.1) on the RNNSearch backbone.

Summariser over the N previous *source* sentences X_{m−N..m−1}, oldest first [P S2 eq. 3.1–3.2]::

    g_{n,k} = GRU_sent(g_{n-1,k}, E_src[x_{n,k}]),  g_{0,k} = 0,  r_k = g_{L_k,k}       (B, N, H)
    z_k     = GRU_doc(z_{k-1}, r_k),  z_0 = 0, over the history sentences that exist
    D       = z_{last existing k}                                                      (B, H)

Strategies, each a flag; they combine freely [P S2 §3.2.2]:

* ``init_enc``: →h_0 = ←h_{S+1} = D, both encoder directions [C]; no parameters (H_D = H).
* ``init_dec``: s_0 = tanh(W_init mean_i h_i + b + W_D D) [S2 eq. 3.4; mean pooling as the
  backbone's ``init``]; W_D: H × H.
* ``auxi``: s_t = GRU_2(s̃_t, [c_t ; D]) [S2 eq. 3.5–3.6; GRU_2 per C]: D enters GRU_2's r, z
  and n blocks through one more input matrix W^D (H → 3H).
* ``gating`` (with ``auxi``: Gating Auxi): the input D becomes z_t ⊙ D [S2 eq. 3.7–3.8], by
  ``gate_variant``: ``thesis`` z_t = σ(U_z s_{t-1} + W_z E[y_{t-1}] + C_z c_t + b_z) ∈ R^H;
  ``csnmt`` [C] z_t = σ(W_1 s̃_t + W_2 c_t + W_3 D + b) ∈ R^H multiplies each gate's W^D_g D;
  ``lcnmt`` [C] the same inputs, z_t ∈ R^{3H} interpolates GRU_2's pre-activations,
  (1 − z_t) ⊙ (W_ih c_t; W_hh s̃_t) + z_t ⊙ W^D D + biases (Tu et al. 2017's context gate).
* Combination = init_enc + init_dec + Gating Auxi (``pipelines/context/hrnn_combination.yaml``).

Choices: a row without history reads one NULL sentence [C], here ``<unk> </s>`` (the reference
code's literal ``NULL`` is out of vocabulary) — so, unlike the HAN, a first sentence does not get
the backbone's output; history sentences of more than ``history_max_len`` words are dropped from
the history, not truncated [C]; E_src is shared with the backbone by default
(``share_src_embeddings``, [I] from the +18.8M of S2 Table 3.9). The history sentences are rows of
the batch (``batch.ctx``, ``models/context/base.py``): each distinct one is summarised once per
batch, and only the target rows are encoded. Every added parameter is this module's (not the
backbone's), so ``train.freeze: ["backbone.*"]`` is S2 §3.6's frozen-baseline setting, and with
them zeroed the model computes the backbone (``tests/unit/test_hier_rnn.py``; not with ``lcnmt``,
whose zero gate z = ½ halves GRU_2's pre-activations).

Parameters added at E 620, H 1000 (shared embeddings): GRU_sent 4.87M, GRU_doc 6.01M, W_D 1.0M,
W^D 3.0M, thesis gate 3.62M = 18.49M vs the +18.8M of S2 Table 3.9.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor, nn

from doctrans.layers.init import init_rnn_weights
from doctrans.models.context.base import HookedRNNContext, context_rows
from doctrans.models.interface import EncoderOutput, SearchBatch
from doctrans.models.rnn_hooks import DecoderHook, RNNParts, StepExtra, StepInputs
from doctrans.models.rows import scatter_rows

GATE_VARIANTS = ("thesis", "csnmt", "lcnmt")
NULL_SENTENCE = (3, 2)          # <unk> </s>: the history of a document's first sentence [C]


@dataclass(frozen=True)
class HRNNConfig:
    type: str = "hrnn"                  # the row of models/build.py:CONTEXT_MODELS
    context_sents: int = 3              # N previous source sentences (S2: 3)
    init_enc: bool = False              # D initialises both encoder directions
    init_dec: bool = False              # W_D D in s_0 (eq. 3.4)
    auxi: bool = False                  # D as an extra GRU_2 input (eq. 3.6)
    gating: bool = False                # z_t ⊙ D instead of D (eq. 3.7–3.8); needs auxi
    gate_variant: str = "thesis"        # thesis | csnmt | lcnmt (docs/models.md §2.1)
    share_src_embeddings: bool = True   # GRU_sent reads the backbone's E_src [I]
    history_max_len: int = 80           # longer history sentences (words) are dropped [C]; 0 = keep all


class HRNN(HookedRNNContext):
    """Hierarchical-RNN summary D of the previous N source sentences, fed to an RNNSearch
    backbone (``models.rnn_hooks.RNNParts``) by the configured strategies (module doc)."""

    empty_context = "a NULL sentence's summary D (docs/models.md §2.1)"

    def __init__(self, backbone, cfg: HRNNConfig):
        super().__init__(backbone, cfg.context_sents)
        if not isinstance(backbone, RNNParts):
            raise ValueError(f"context type 'hrnn' needs an RNN backbone (rnnsearch), got {type(backbone).__name__}")
        if not (cfg.init_enc or cfg.init_dec or cfg.auxi):
            raise ValueError("context hrnn: set at least one of init_enc, init_dec, auxi")
        if cfg.gating and not cfg.auxi:
            raise ValueError("context.gating gates the auxiliary input: it needs auxi: true")
        if cfg.gate_variant not in GATE_VARIANTS:
            raise ValueError(f"context.gate_variant must be one of {GATE_VARIANTS}, got {cfg.gate_variant!r}")
        if cfg.history_max_len < 0:
            raise ValueError(f"context.history_max_len must be ≥ 0, got {cfg.history_max_len}")
        self.cfg = cfg
        e, h = backbone.emb_size, backbone.rnn_size
        vocab = backbone.source_embedding.num_embeddings
        self.hist_embed = None if cfg.share_src_embeddings else nn.Embedding(vocab, e, padding_idx=self.pad_id)
        self.gru_sent = nn.GRU(e, h, batch_first=True)                      # eq. 3.1
        self.gru_doc = nn.GRUCell(h, h)                                      # eq. 3.2
        self.init_dec_proj = nn.Linear(h, h, bias=False) if cfg.init_dec else None      # W_D
        self.auxi_proj = nn.Linear(h, 3 * h, bias=False) if cfg.auxi else None          # W^D
        gate_in, gate_out = {"thesis": (h + e + 2 * h, h), "csnmt": (4 * h, h), "lcnmt": (4 * h, 3 * h)}[cfg.gate_variant]
        self.gate = nn.Linear(gate_in, gate_out) if cfg.gating else None
        init_rnn_weights(((n, p) for n, p in self.named_parameters() if not n.startswith("backbone.")), self.pad_id)

    # -- the summariser ------------------------------------------------------------------------
    def history(self, batch) -> Tensor:
        """``batch.ctx`` (B, N), with history sentences of more than ``history_max_len`` words
        (their ``</s>`` not counted) set to −1 (missing)."""
        rows = context_rows(batch, self.context_sents, batch.src.device)
        if self.cfg.history_max_len:
            too_long = batch.src.ne(self.pad_id).sum(1).sub(1).gt(self.cfg.history_max_len)     # (B,)
            rows = rows.masked_fill(rows.ge(0) & too_long[rows.clamp(min=0)], -1)
        return rows

    def summarise(self, tokens: Tensor) -> Tensor:
        """r = the last state of GRU_sent over each row (eq. 3.1). tokens: (R, L) → (R, H)."""
        embed = self.backbone.source_embedding if self.hist_embed is None else self.hist_embed
        lengths = tokens.ne(self.pad_id).sum(1).clamp(min=1).cpu()
        packed = nn.utils.rnn.pack_padded_sequence(embed(tokens), lengths, batch_first=True, enforce_sorted=False)
        return self.gru_sent(packed)[1][0]                                   # (R, H)

    def global_context(self, src: Tensor, rows: Tensor) -> Tensor:
        """D for each row of ``rows`` (B', N) (indices into src (B, S), oldest first, −1 missing;
        a row with none reads one NULL sentence) → (B', H). Each distinct sentence is summarised
        once (eq. 3.1) — within ``inference_cache`` once per collection (its r kept, keyed by its
        tokens: a sentence is history of the next N, which may sit in other batches); GRU_doc runs
        over the slots, skipping missing ones (eq. 3.2)."""
        b = src.size(0)
        null = src.new_full((1, max(src.size(1), len(NULL_SENTENCE))), self.pad_id)
        null[0, :len(NULL_SENTENCE)] = src.new_tensor(NULL_SENTENCE)
        table = torch.cat([nn.functional.pad(src, (0, null.size(1) - src.size(1)), value=self.pad_id), null])
        exists = rows.ge(0)                                                  # (B', N)
        exists[:, -1] |= ~exists.any(1)                                      # no history: the NULL row
        needed, slot = torch.unique(rows.masked_fill(rows.lt(0), b), return_inverse=True)   # (R,), (B', N)
        tokens = table[needed]                                               # (R, L)
        if self._active_caches() is None:
            r = self.summarise(tokens)
        else:                                                                # inference cache: once per sentence
            r = torch.stack([e[0] for e in self._cached_rows(
                "hrnn_r", self._row_keys(tokens), lambda miss: [(x,) for x in self.summarise(tokens[miss])])])
        r = r[slot]                                                          # (B', N, H)
        z = r.new_zeros(r.size(0), r.size(2))
        for k in range(rows.size(1)):                                        # z_k = GRU_doc(z_{k-1}, r_k)
            z = torch.where(exists[:, k, None], self.gru_doc(r[:, k], z), z)
        return z                                                             # (B', H)

    # -- the model contract ----------------------------------------------------------------------
    def encode(self, batch) -> EncoderOutput:
        """batch.src (B, S), ctx (B, N), is_target (B,) → the target rows' annotations (B, S, 2H)
        (encoder started from D with ``init_enc``; context-only rows: zeros, masked, never
        decoded) and ``extra`` hrnn_d (B, H): D (zeros at context-only rows)."""
        src = batch.src
        is_target = getattr(batch, "is_target", None)
        targets = (torch.arange(src.size(0), device=src.device) if is_target is None
                   else is_target.to(src.device).nonzero().squeeze(1))
        d_t = self.global_context(src, self.history(batch).index_select(0, targets))     # (B_t, H)
        h0 = d_t.unsqueeze(0).expand(2, -1, -1).contiguous() if self.cfg.init_enc else None
        enc = self.backbone.encode(SearchBatch(src.index_select(0, targets)), h0)
        if targets.numel() < src.size(0):
            enc = scatter_rows([(targets, enc)], src.size(0), src.size(1))
        d = d_t.new_zeros(src.size(0), d_t.size(1)).index_copy(0, targets, d_t)
        return EncoderOutput(enc.states, enc.src_pad_mask, {"hrnn_d": d})

    def hook(self, enc: EncoderOutput) -> DecoderHook:
        """The decoder hooks of ``enc``'s rows: s_0 term W_D D (eq. 3.4) and the GRU_2 input."""
        d = enc.extra["hrnn_d"]                                              # (B, H)
        rows = {"d": d}
        if self.cfg.auxi and not (self.cfg.gating and self.cfg.gate_variant == "thesis"):
            rows["d_proj"] = self.auxi_proj(d)                               # W^D D, time-constant
        return DecoderHook(rows, None if self.init_dec_proj is None else self.init_dec_proj(d),
                           self.step if self.cfg.auxi else None)

    def step(self, x: StepInputs) -> StepExtra:
        """GRU_2's extra input at one step: W^D D (eq. 3.6) or W^D (z_t ⊙ D) (eq. 3.7–3.8), by
        ``gate_variant``. Shapes: ``StepInputs`` → gru2 (B, 3H) [, keep (B, 3H)]."""
        d = x.rows["d"]
        if not self.cfg.gating:
            return StepExtra(gru2=x.rows["d_proj"])
        if self.cfg.gate_variant == "thesis":
            z = torch.sigmoid(self.gate(torch.cat([x.s_prev, x.emb, x.c], -1)))          # (B, H)
            return StepExtra(gru2=self.auxi_proj(z * d))
        z = torch.sigmoid(self.gate(torch.cat([x.s_tilde, x.c, d], -1)))                # (B, H | 3H)
        if self.cfg.gate_variant == "csnmt":
            return StepExtra(gru2=z.repeat(1, 3) * x.rows["d_proj"])
        return StepExtra(gru2=z * x.rows["d_proj"], keep=1.0 - z)
