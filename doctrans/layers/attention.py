"""The scaled dot-product attention core, softmax(Q Kᵀ / √d_k) V (Vaswani et al. 2017, eq. 1),
with the kernel chosen per dtype and device.

``torch.nn.functional.scaled_dot_product_attention`` (SDPA) is the fastest kernel for fp32
on CPU and for every dtype on GPU, but its CPU flash kernel is slow in bf16 on the short,
many-row shapes of subtitle batches (B ≈ 250–850 rows of 4–14 tokens): measured on this
project's CPU (torch 2.13, 2 threads, B 400, 4 heads, L 10, d_k 64, forward + backward):
SDPA bf16 60 ms, SDPA math backend bf16 12 ms, the explicit form below 5 ms (fp32: SDPA 16 ms,
explicit 38 ms) — under ``train.autocast: bf16`` the flash backward alone was 24% of a
quickstart training step (``benchmarks/train_kernels.py``; ``benchmarks/RESULTS.md``, "the attention
kernel under bf16, a fused chunked loss"). So reduced-precision
tensors on CPU take the explicit form; everything else takes SDPA.

The explicit form matches SDPA's semantics: a boolean ``keep`` mask (True = attend,
broadcastable to (B, heads, Lq, Lk)), ``causal`` (query i sees keys ≤ i), dropout on the
attention weights, and a query row whose keys are all masked gets a zero output (as SDPA's
CPU kernels give). The scores and the softmax are computed in fp32 [I: SDPA's flash kernel
accumulates in fp32 too]; the weights are cast back to the input dtype for the product with V.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor

_REDUCED = (torch.bfloat16, torch.float16)


def attention(q: Tensor, k: Tensor, v: Tensor, keep: Tensor | None = None, dropout_p: float = 0.0,
              causal: bool = False, explicit: bool | None = None) -> Tensor:
    """Multi-head attention core. q: (B, heads, Lq, d_k); k, v: (B, heads, Lk, d_k); keep:
    bool, broadcastable to (B, heads, Lq, Lk), True = attend, or None; ``causal``: query i
    attends keys 0…i (``keep`` must then be None, as for SDPA); ``dropout_p``: dropout on the
    weights (pass 0 outside training). ``explicit``: force the explicit form (True) or SDPA
    (False); None = the choice of the module doc (explicit for bf16/fp16 on CPU). → (B, heads,
    Lq, d_k) in q's dtype. Raises ValueError for ``causal`` with a ``keep`` mask."""
    if causal and keep is not None:
        raise ValueError("attention: causal=True takes no keep mask")
    if explicit is None:
        explicit = q.device.type == "cpu" and q.dtype in _REDUCED
    if not explicit:
        return F.scaled_dot_product_attention(q, k, v, attn_mask=keep, dropout_p=dropout_p, is_causal=causal)
    scores = torch.matmul(q, k.transpose(-1, -2))                                 # (B, heads, Lq, Lk)
    if scores.dtype in _REDUCED:
        scores = scores.float()
    scores = scores * (q.size(-1) ** -0.5)
    if causal:
        lq, lk = scores.shape[-2:]
        keep = torch.ones(lq, lk, dtype=torch.bool, device=q.device).tril()        # SDPA's top-left alignment
    if keep is not None:
        scores = scores.masked_fill(~keep, torch.finfo(scores.dtype).min)         # finite: no NaN gradient
    weights = torch.softmax(scores, dim=-1)
    if keep is not None and not causal:
        void = ~keep.any(dim=-1, keepdim=True)                                    # rows with no key
        if bool(void.any()):
            weights = weights.masked_fill(void, 0.0)
    if dropout_p > 0.0:
        weights = F.dropout(weights, dropout_p, training=True)
    return torch.matmul(weights.to(v.dtype), v)
