"""One Hierarchical Attention Network block (Miculicich et al. 2018, "Document-Level Neural
Machine Translation with Hierarchical Attention Networks"), the building block of the HAN
context models. Spec: ``shared/design/models.md`` §2.5.

The block is self-contained on purpose (its own small multi-head attention on top of
``F.scaled_dot_product_attention``): it does not import the backbone.

Shape legend: B batch, T query length, N context sentences (slots), L context length,
H d_model, A attention heads, D = H / A.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor, nn

EMPTY_CONTEXT = ("passthrough", "zero")


@dataclass(frozen=True)
class HANBlockConfig:
    heads: int = 8                      # A, for both the word- and the sentence-level attention
    d_ff: int = 2048                    # inner size of the FFN of eq. 6
    dropout: float = 0.1                # on attention weights and inside the FFN
    detach_context: bool = True         # stop-gradient on Ctx and on the query copy of h
    empty_context: str = "passthrough"  # "passthrough" | "zero" (rows without any context)

    def __post_init__(self) -> None:
        if not isinstance(self.heads, int) or self.heads < 1:
            raise ValueError(f"heads must be a positive int, got {self.heads!r}")
        if not isinstance(self.d_ff, int) or self.d_ff < 1:
            raise ValueError(f"d_ff must be a positive int, got {self.d_ff!r}")
        if not 0.0 <= self.dropout < 1.0:
            raise ValueError(f"dropout must be in [0, 1), got {self.dropout!r}")
        if self.empty_context not in EMPTY_CONTEXT:
            raise ValueError(f"empty_context must be one of {EMPTY_CONTEXT}, "
                             f"got {self.empty_context!r}")


class _MultiHeadAttention(nn.Module):
    """Multi-head attention with separate q/k/v/out projections. The batch dimensions of the
    query and of the keys/values broadcast against each other, so one query sequence can attend
    to N key sequences without being copied. The caller guarantees that every query row keeps
    at least one key (no all-False row in ``keep``)."""

    def __init__(self, d_model: int, heads: int, dropout: float):
        super().__init__()
        self.heads, self.dropout = heads, dropout
        self.q_proj = nn.Linear(d_model, d_model)
        self.k_proj = nn.Linear(d_model, d_model)
        self.v_proj = nn.Linear(d_model, d_model)
        self.out_proj = nn.Linear(d_model, d_model)

    def _split(self, x: Tensor) -> Tensor:
        """(*, S, H) → (*, A, S, D)."""
        return x.unflatten(-1, (self.heads, -1)).transpose(-3, -2)

    def forward(self, query: Tensor, kv: Tensor, keep: Tensor) -> Tensor:
        """query (*q, Tq, H), kv (*k, Lk, H) with *q and *k broadcastable, keep: bool, True =
        attend, broadcastable to (*, A, Tq, Lk) → (*, Tq, H)."""
        q = self._split(self.q_proj(query))                            # (*q, A, Tq, D)
        k = self._split(self.k_proj(kv))                               # (*k, A, Lk, D)
        v = self._split(self.v_proj(kv))                               # (*k, A, Lk, D)
        batch = torch.broadcast_shapes(q.shape[:-3], k.shape[:-3])
        q = q.expand(*batch, *q.shape[-3:])                            # (*, A, Tq, D), a view
        k = k.expand(*batch, *k.shape[-3:])                            # (*, A, Lk, D)
        v = v.expand(*batch, *v.shape[-3:])                            # (*, A, Lk, D)
        p = self.dropout if self.training else 0.0
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=keep, dropout_p=p)
        return self.out_proj(out.transpose(-3, -2).flatten(-2))       # (*, Tq, H)


class _FeedForward(nn.Module):
    """Pre-LN two-layer ReLU FFN with a residual: x + W2·drop(ReLU(W1·LN(x))), dropped."""

    def __init__(self, d_model: int, d_ff: int, dropout: float):
        super().__init__()
        self.norm = nn.LayerNorm(d_model)
        self.w1 = nn.Linear(d_model, d_ff)
        self.w2 = nn.Linear(d_ff, d_model)
        self.drop_inner = nn.Dropout(dropout)
        self.drop_out = nn.Dropout(dropout)

    def forward(self, x: Tensor) -> Tensor:
        inner = self.drop_inner(F.relu(self.w1(self.norm(x))))        # (*, d_ff)
        return x + self.drop_out(self.w2(inner))                       # (*, H)


class HANBlock(nn.Module):
    """One HAN block (models.md §2.5; HAN paper eq. 3–8): maps a query sequence h and N context
    sentences Ctx to context-aware states of the same shape as h::

        q^w_t = LN_qw(h_t)                                   (B,T,H)    eq. 3, f_w = LN
        s^j_t = LN_w(MultiHead_w(q^w_t, K=V=Ctx_j))          (B,N,T,H)  eq. 4, per slot j
        q^s_t = LN_qs(h_t)                                   (B,T,H)    eq. 5, f_s = LN
        d_t   = FFN(MultiHead_s(q^s_t, K=V=(s^1_t..s^N_t)))  (B,T,H)    eq. 6
        λ_t   = σ(W_h h_t + W_d d_t + b)                     (B,T,H)    eq. 7, Linear(2H→H)
        h̃_t   = LN_out(λ_t ⊙ h_t + (1 − λ_t) ⊙ d_t)          (B,T,H)    eq. 8, then LN_out

    The word-level attention runs over all N slots in one call (N folded into the batch of the
    keys/values only; the projected query is broadcast, not copied); the sentence-level
    attention runs over the N summaries of each (b, t). FFN is pre-LN ReLU H→d_ff→H with a
    residual. Dropout (``cfg.dropout``) acts on both attentions' weights and inside the FFN.

    Masks: ``word_mask`` (B,N,L), True = masked word (PAD, and UNK/BOS/EOS of the context's own
    vocabulary; built by the caller); ``slot_missing`` (B,N), True = the slot does not exist
    (before the document start). A slot whose words are all masked counts as missing.

    Stop-gradient (``cfg.detach_context``, default True as in the reference code): Ctx and the
    copy of h used for the attention queries are detached, so d_t is a constant for autograd
    and gradients reach h only through the gate (h_t in λ_t and in λ_t ⊙ h_t) and LN_out.

    Rows without any context (all N slots missing): ``cfg.empty_context == "passthrough"``
    (default) returns h̃_t = h_t exactly for them (the block is skipped, LN_out included: the
    sentence-level behaviour); ``"zero"`` sets d_t = 0 and still applies the gate and LN_out.
    No softmax ever sees an all-masked row, so no NaN arises (the reference code's −1e18 fill
    would average the padding uniformly instead).

    Raises ValueError: bad ``d_model``/``heads`` at construction; in ``forward``, inputs whose
    ranks, sizes (B, N, L, H) or mask dtypes do not match.
    """

    def __init__(self, d_model: int, cfg: HANBlockConfig):
        super().__init__()
        if d_model < 1 or d_model % cfg.heads:
            raise ValueError(f"d_model={d_model} must be a positive multiple of "
                             f"heads={cfg.heads}")
        self.d_model, self.cfg = d_model, cfg
        self.ln_qw = nn.LayerNorm(d_model)
        self.attn_w = _MultiHeadAttention(d_model, cfg.heads, cfg.dropout)
        self.ln_w = nn.LayerNorm(d_model)
        self.ln_qs = nn.LayerNorm(d_model)
        self.attn_s = _MultiHeadAttention(d_model, cfg.heads, cfg.dropout)
        self.ffn = _FeedForward(d_model, cfg.d_ff, cfg.dropout)
        self.gate_proj = nn.Linear(2 * d_model, d_model)     # [W_h ; W_d], b of eq. 7
        self.ln_out = nn.LayerNorm(d_model)

    def forward(self, h: Tensor, ctx: Tensor, word_mask: Tensor, slot_missing: Tensor) -> Tensor:
        """h (B,T,H), ctx (B,N,L,H), word_mask (B,N,L) bool True = masked word,
        slot_missing (B,N) bool True = slot does not exist → h̃ (B,T,H)."""
        self._check(h, ctx, word_mask, slot_missing)
        no_context = (slot_missing | word_mask.all(-1)).all(-1)       # (B,) True = empty row
        passthrough = self.cfg.empty_context == "passthrough"
        if passthrough and bool(no_context.all()):
            return h
        d = self.context_vector(h, ctx, word_mask, slot_missing)      # (B,T,H), 0 if empty
        out = self.ln_out(self.gate(h, d))                            # (B,T,H)
        if passthrough:
            out = torch.where(no_context[:, None, None], h, out)      # (B,T,H)
        return out

    def gate(self, h: Tensor, d: Tensor) -> Tensor:
        """λ ⊙ h + (1 − λ) ⊙ d with λ = σ(W_h h + W_d d + b) (eq. 7–8), before LN_out.
        h, d (B,T,H) → (B,T,H)."""
        lam = torch.sigmoid(self.gate_proj(torch.cat([h, d], dim=-1)))  # (B,T,H)
        return lam * h + (1.0 - lam) * d                                # (B,T,H)

    def context_vector(self, h: Tensor, ctx: Tensor, word_mask: Tensor,
                       slot_missing: Tensor) -> Tensor:
        """d_t of eq. 6: (B,T,H); exactly 0 for rows without any existing, non-void slot."""
        self._check(h, ctx, word_mask, slot_missing)
        B, T, H = h.shape
        slot_gone = slot_missing | word_mask.all(-1)                  # (B,N) True = no slot
        no_context = slot_gone.all(-1)                                # (B,)
        if bool(no_context.all()):                                    # also N = 0 or L = 0
            return h.new_zeros(B, T, H)
        s = self.word_summaries(h, ctx, word_mask)                    # (B,N,T,H)
        hq = h.detach() if self.cfg.detach_context else h
        q = self.ln_qs(hq).unsqueeze(-2)                              # (B,T,1,H)
        # an empty row attends to all (zero) summaries: finite, and replaced below
        slot_keep = ~slot_gone | no_context[:, None]                  # (B,N) True = attend
        keep = slot_keep[:, None, None, None, :]                      # (B,1,1,1,N)
        a = self.attn_s(q, s.transpose(1, 2), keep).squeeze(-2)       # (B,T,H)
        d = self.ffn(a)                                               # (B,T,H)
        return d.masked_fill(no_context[:, None, None], 0.0)          # (B,T,H)

    def word_summaries(self, h: Tensor, ctx: Tensor, word_mask: Tensor) -> Tensor:
        """s^j_t of eq. 4 after LN_w, for every slot j: (B,N,T,H). Slot j attends only to its
        own words; a slot whose words are all masked gets exactly 0 (it counts as missing)."""
        if self.cfg.detach_context:
            h, ctx = h.detach(), ctx.detach()
        slot_void = word_mask.all(-1)                                 # (B,N) True = no word
        # a void slot attends to all its words (finite softmax); its summary is zeroed below
        word_keep = ~word_mask | slot_void[..., None]                 # (B,N,L) True = attend
        q = self.ln_qw(h).unsqueeze(1)                                # (B,1,T,H)
        keep = word_keep[:, :, None, None, :]                         # (B,N,1,1,L)
        s = self.ln_w(self.attn_w(q, ctx, keep))                      # (B,N,T,H)
        return s.masked_fill(slot_void[:, :, None, None], 0.0)        # (B,N,T,H)

    def _check(self, h: Tensor, ctx: Tensor, word_mask: Tensor, slot_missing: Tensor) -> None:
        if h.dim() != 3 or ctx.dim() != 4:
            raise ValueError(f"expected h (B,T,H) and ctx (B,N,L,H), got {tuple(h.shape)} "
                             f"and {tuple(ctx.shape)}")
        B, _, H = h.shape
        Bc, N, L, Hc = ctx.shape
        if H != self.d_model or Hc != self.d_model or Bc != B:
            raise ValueError(f"h {tuple(h.shape)} and ctx {tuple(ctx.shape)} must share B and "
                             f"H = d_model = {self.d_model}")
        if tuple(word_mask.shape) != (B, N, L) or word_mask.dtype != torch.bool:
            raise ValueError(f"word_mask must be bool {(B, N, L)}, got "
                             f"{word_mask.dtype} {tuple(word_mask.shape)}")
        if tuple(slot_missing.shape) != (B, N) or slot_missing.dtype != torch.bool:
            raise ValueError(f"slot_missing must be bool {(B, N)}, got "
                             f"{slot_missing.dtype} {tuple(slot_missing.shape)}")
