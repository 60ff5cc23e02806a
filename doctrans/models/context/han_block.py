"""One Hierarchical Attention Network block (Miculicich et al. 2018, "Document-Level Neural
Machine Translation with Hierarchical Attention Networks"), the building block of the HAN
context models. Notes: ``docs/models.md`` §2.5.

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
    """The q/k/v/out projections of one multi-head attention (parameter names as in
    ``nn.MultiheadAttention``-style checkpoints: ``q_proj``, ``k_proj``, ``v_proj``,
    ``out_proj``). The attention itself is computed by ``HANBlock``, which knows the
    structure of its keys (N slots of L words; N sentence summaries) and so needs neither a
    copy of the query per slot nor a broadcast mask."""

    def __init__(self, d_model: int, heads: int, dropout: float):
        super().__init__()
        self.heads, self.dropout = heads, dropout
        self.q_proj = nn.Linear(d_model, d_model)
        self.k_proj = nn.Linear(d_model, d_model)
        self.v_proj = nn.Linear(d_model, d_model)
        self.out_proj = nn.Linear(d_model, d_model)

    def heads_of(self, x: Tensor) -> Tensor:
        """(*, H) → (*, A, D)."""
        return x.unflatten(-1, (self.heads, -1))

    def drop(self, p: Tensor) -> Tensor:
        """Dropout on attention weights (training only)."""
        return F.dropout(p, self.dropout, self.training) if self.dropout and self.training else p


@dataclass
class HANMemory:
    """The context of a HAN block, projected once: the keys and values of the word-level
    attention of every slot, and the masks (``HANBlock.prepare`` / ``gather_memory``), so a
    decoder can keep it for a whole beam search instead of re-projecting Ctx at every step.

    k, v: (B, N, A, L, D); word_keep (B, N, L) True = attend (a void slot attends to all its
    words: finite softmax, zeroed after); slot_void (B, N); slot_gone (B, N) True = missing or
    void; no_context (B,)."""

    k: Tensor
    v: Tensor
    word_keep: Tensor
    slot_void: Tensor
    slot_gone: Tensor
    no_context: Tensor


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
    """One HAN block (Miculicich et al. 2018 §2.1–2.2, eq. 3–8; docs/models.md §2.5): maps a query sequence h and N context
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
        # ``explain``: a list receiving ("word", (B,N,A,T,L)) and ("sentence", (B,T,A,N)) attention
        # weights and ("gate", (λ, h, d)) each (B,T,H) of eq. 7–8 of every call (detached), for
        # pictures (evaluation/explain_context.py) and benchmarks/context_gate.py; None = off
        self.recorder: list | None = None

    def forward(self, h: Tensor, ctx: Tensor, word_mask: Tensor, slot_missing: Tensor) -> Tensor:
        """h (B,T,H), ctx (B,N,L,H), word_mask (B,N,L) bool True = masked word,
        slot_missing (B,N) bool True = slot does not exist → h̃ (B,T,H)."""
        self._check(h, ctx, word_mask, slot_missing)
        return self.forward_memory(h, self.prepare(ctx, word_mask, slot_missing))

    def prepare(self, ctx: Tensor, word_mask: Tensor, slot_missing: Tensor) -> HANMemory:
        """Project Ctx once for the word-level attention: ctx (B,N,L,H), word_mask (B,N,L),
        slot_missing (B,N) → ``HANMemory`` (keys/values (B,N,A,L,D)). Detached under
        ``detach_context``. Raises ValueError on mismatched shapes or dtypes."""
        if ctx.dim() != 4:
            raise ValueError(f"expected ctx (B,N,L,H), got {tuple(ctx.shape)}")
        self._check(ctx.new_empty(ctx.size(0), 1, self.d_model), ctx, word_mask, slot_missing)
        if self.cfg.detach_context:
            ctx = ctx.detach()
        mha = self.attn_w
        k = mha.heads_of(mha.k_proj(ctx)).transpose(2, 3)             # (B,N,A,L,D)
        v = mha.heads_of(mha.v_proj(ctx)).transpose(2, 3)             # (B,N,A,L,D)
        return self._memory(k, v, word_mask, slot_missing)

    def project_rows(self, states: Tensor, word_mask: Tensor) -> tuple[Tensor, Tensor]:
        """Keys and values of the word-level attention for every row of a batch that may serve
        as context, computed once per row (and only at its unmasked words) rather than once per
        (row, reader): states (R,L,H), word_mask (R,L) True = masked → k, v (R,A,L,D), zeros at
        masked words — the keys/values of MultiHead_w over Ctx_j in eq. 4. Detached under
        ``detach_context``. Use with ``gather_memory``. Raises ValueError on mismatched shapes."""
        if states.dim() != 3 or states.size(-1) != self.d_model or tuple(word_mask.shape) != states.shape[:2]:
            raise ValueError(f"expected states (R,L,{self.d_model}) and word_mask (R,L), got "
                             f"{tuple(states.shape)} and {tuple(word_mask.shape)}")
        if self.cfg.detach_context:
            states = states.detach()
        keep = ~word_mask                                             # (R,L)
        real = states[keep]                                           # (W,H) unmasked words
        mha = self.attn_w
        out = []
        for proj in (mha.k_proj, mha.v_proj):
            projected = proj(real)                                    # (W,H); bf16 under autocast
            full = projected.new_zeros(states.shape)                  # (R,L,H), projected's dtype
            full[keep] = projected
            out.append(mha.heads_of(full).transpose(1, 2))            # (R,A,L,D)
        return out[0], out[1]

    def gather_memory(self, k_rows: Tensor, v_rows: Tensor, word_mask: Tensor, rows: Tensor) -> HANMemory:
        """``HANMemory`` of B readers from per-row keys/values (``project_rows``): k_rows, v_rows
        (R,A,L,D), word_mask (R,L) True = masked, rows (B,N) index of slot j's row, −1 = missing
        (before the document start) → memory (B,N,A,L,D). Same result as ``prepare`` on the
        gathered states."""
        missing = rows.lt(0)                                          # (B,N)
        safe = rows.clamp(min=0)
        wm = word_mask[safe] | missing[..., None]                     # (B,N,L)
        return self._memory(k_rows[safe], v_rows[safe], wm, missing)

    def _memory(self, k: Tensor, v: Tensor, word_mask: Tensor, slot_missing: Tensor) -> HANMemory:
        slot_void = word_mask.all(-1)                                 # (B,N) True = no word
        slot_gone = slot_missing | slot_void                          # (B,N)
        word_keep = ~word_mask | slot_void[..., None]                 # (B,N,L)
        return HANMemory(k, v, word_keep, slot_void, slot_gone, slot_gone.all(-1))

    def forward_memory(self, h: Tensor, mem: HANMemory) -> Tensor:
        """``forward`` (eq. 3–8) with a prepared context: h (B,T,H), ``mem`` of B rows → h̃
        (B,T,H). The T query positions are independent, so a beam search may pass the K
        hypotheses of a sentence as its T positions against one copy of the sentence's memory.
        Raises ValueError if h is not (B,T,d_model) with B = the memory's rows."""
        if h.dim() != 3 or h.size(0) != mem.k.size(0) or h.size(-1) != self.d_model:
            raise ValueError(f"h {tuple(h.shape)} does not match a memory of {mem.k.size(0)} rows, "
                             f"d_model {self.d_model}")
        passthrough = self.cfg.empty_context == "passthrough"
        if passthrough and bool(mem.no_context.all()):
            return h
        d = self.context_vector_memory(h, mem)                        # (B,T,H), 0 if empty
        out = self.ln_out(self.gate(h, d))                            # (B,T,H)
        if passthrough:
            out = torch.where(mem.no_context[:, None, None], h, out)  # (B,T,H)
        return out

    def gate(self, h: Tensor, d: Tensor) -> Tensor:
        """λ ⊙ h + (1 − λ) ⊙ d with λ = σ(W_h h + W_d d + b) (eq. 7–8), before LN_out.
        h, d (B,T,H) → (B,T,H)."""
        lam = torch.sigmoid(self.gate_proj(torch.cat([h, d], dim=-1)))  # (B,T,H)
        if self.recorder is not None:
            self.recorder.append(("gate", (lam.detach(), h.detach(), d.detach())))
        return lam * h + (1.0 - lam) * d                                # (B,T,H)

    def context_vector(self, h: Tensor, ctx: Tensor, word_mask: Tensor,
                       slot_missing: Tensor) -> Tensor:
        """d_t of eq. 6: (B,T,H); exactly 0 for rows without any existing, non-void slot."""
        self._check(h, ctx, word_mask, slot_missing)
        return self.context_vector_memory(h, self.prepare(ctx, word_mask, slot_missing))

    def context_vector_memory(self, h: Tensor, mem: HANMemory) -> Tensor:
        """d_t of eq. 6 from a prepared memory: h (B,T,H) → (B,T,H).

        Sentence-level attention (eq. 5–6) over the N summaries of each (b, t), written out
        (N is small: a softmax over N scores per head) [our implementation; the same function
        as a multi-head attention with one query and N keys]."""
        B, T, H = h.shape
        if bool(mem.no_context.all()):                                # also N = 0 or L = 0
            return h.new_zeros(B, T, H)
        s = self.word_summaries_memory(h, mem)                        # (B,N,T,H)
        hq = h.detach() if self.cfg.detach_context else h
        mha = self.attn_s
        a_heads, dh = mha.heads, H // mha.heads
        q = mha.heads_of(mha.q_proj(self.ln_qs(hq)))                   # (B,T,A,D)
        k = mha.heads_of(mha.k_proj(s))                               # (B,N,T,A,D)
        v = mha.heads_of(mha.v_proj(s))                               # (B,N,T,A,D)
        scores = torch.einsum("btad,bntad->btan", q, k) * dh ** -0.5  # (B,T,A,N)
        # an empty row attends to all (zero) summaries: finite, and replaced below
        slot_keep = ~mem.slot_gone | mem.no_context[:, None]          # (B,N) True = attend
        scores = scores.masked_fill(~slot_keep[:, None, None, :], float("-inf"))
        p = mha.drop(scores.softmax(-1))                              # (B,T,A,N)
        if self.recorder is not None:
            self.recorder.append(("sentence", p.detach()))
        a = torch.einsum("btan,bntad->btad", p, v).reshape(B, T, a_heads * dh)
        d = self.ffn(mha.out_proj(a))                                 # (B,T,H)
        return d.masked_fill(mem.no_context[:, None, None], 0.0)      # (B,T,H)

    def word_summaries(self, h: Tensor, ctx: Tensor, word_mask: Tensor) -> Tensor:
        """s^j_t of eq. 4 after LN_w, for every slot j: (B,N,T,H). Slot j attends only to its
        own words; a slot whose words are all masked gets exactly 0 (it counts as missing)."""
        missing = torch.zeros(word_mask.shape[:2], dtype=torch.bool, device=word_mask.device)
        self._check(h, ctx, word_mask, missing)
        return self.word_summaries_memory(h, self.prepare(ctx, word_mask, missing))

    def word_summaries_memory(self, h: Tensor, mem: HANMemory) -> Tensor:
        """``word_summaries`` from a prepared memory: h (B,T,H) → (B,N,T,H).

        One batched product per slot of the T queries with its L keys, a softmax over the
        slot's own words, and the product with its values [our implementation of eq. 4 for all
        slots at once]."""
        if self.cfg.detach_context:
            h = h.detach()
        B, T, H = h.shape
        n = mem.word_keep.size(1)
        mha = self.attn_w
        q = mha.heads_of(mha.q_proj(self.ln_qw(h))).transpose(1, 2)    # (B,A,T,D)
        q = q * (H // mha.heads) ** -0.5
        scores = q[:, None] @ mem.k.transpose(-1, -2)                 # (B,N,A,T,L)
        scores = scores.masked_fill(~mem.word_keep[:, :, None, None], float("-inf"))
        probs = mha.drop(scores.softmax(-1))                          # (B,N,A,T,L)
        if self.recorder is not None:
            self.recorder.append(("word", probs.detach()))
        out = probs @ mem.v                                           # (B,N,A,T,D)
        out = out.transpose(2, 3).reshape(B, n, T, H)                 # (B,N,T,H)
        s = self.ln_w(mha.out_proj(out))                              # (B,N,T,H)
        return s.masked_fill(mem.slot_void[:, :, None, None], 0.0)    # (B,N,T,H)

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
