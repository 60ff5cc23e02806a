"""Adam with linear warm-up then inverse-square-root decay (Vaswani et al. 2017, eq. 3,
in fairseq's ``inverse_sqrt`` form: lr(s) = peak·s/w for s ≤ w, peak·sqrt(w/s) after)."""
from __future__ import annotations

import math

import torch


def inverse_sqrt_lr(step: int, peak: float, warmup: int) -> float:
    """Learning rate for update number ``step`` (1-based)."""
    step = max(step, 1)
    if warmup <= 0:
        return peak
    return peak * step / warmup if step <= warmup else peak * math.sqrt(warmup / step)


def build_optimizer(params, lr: float, betas, eps: float, weight_decay: float) -> torch.optim.Adam:
    """Adam (Kingma & Ba 2015) with PyTorch's fused kernel: on a 2-core CPU the per-tensor
    loop spends ~0.9 s per update on 11M parameters, the fused kernel ~0.13 s (same maths)."""
    return torch.optim.Adam(params, lr=lr, betas=tuple(betas), eps=eps, weight_decay=weight_decay,
                            fused=True)
