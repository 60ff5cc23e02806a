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


class MixedAdam:
    """Adam for a module whose embedding tables may have sparse gradients: fused Adam on the
    dense parameters, ``torch.optim.SparseAdam`` (lazy Adam: moments of a row move only when
    the row is in the batch) on the sparse tables. Updating a 50k-row table densely costs more
    than the rest of a thesis-detector step (profile in benchmarks/RESULTS.md). Used by the DP
    generators (``doctrans.dp``).

    ``step(max_norm)`` clips the global gradient norm (dense and sparse together) first."""

    def __init__(self, module: torch.nn.Module, lr: float, betas: tuple[float, float] = (0.9, 0.999),
                 eps: float = 1e-8):
        self.sparse = [m.weight for m in module.modules() if isinstance(m, torch.nn.Embedding) and m.sparse]
        ids = {id(p) for p in self.sparse}
        self.dense = [p for p in module.parameters() if id(p) not in ids]
        self.opts = [build_optimizer(self.dense, lr, betas, eps, 0.0)]
        if self.sparse:
            self.opts.append(torch.optim.SparseAdam(self.sparse, lr, tuple(betas), eps))

    def set_lr(self, lr: float) -> None:
        for o in self.opts:
            for g in o.param_groups:
                g["lr"] = lr

    def zero_grad(self) -> None:
        for o in self.opts:
            o.zero_grad(set_to_none=True)

    def step(self, max_norm: float = 0.0) -> None:
        if max_norm:
            sq = [p.grad.pow(2).sum() for p in self.dense if p.grad is not None]
            for p in self.sparse:
                if p.grad is not None:
                    p.grad = p.grad.coalesce()
                    sq.append(p.grad.values().pow(2).sum())
            total = torch.stack(sq).sum().sqrt() if sq else torch.tensor(0.0)
            scale = float(max_norm / (total + 1e-6))
            if scale < 1.0:
                for p in self.dense + self.sparse:
                    if p.grad is not None:
                        p.grad.mul_(scale)
        for o in self.opts:
            o.step()

    def state_dict(self) -> list[dict]:
        return [o.state_dict() for o in self.opts]

    def load_state_dict(self, states: list[dict] | dict) -> None:
        if isinstance(states, dict):        # a checkpoint from before sparse embeddings
            states = [states]
        if len(states) != len(self.opts):
            raise ValueError(f"optimizer state has {len(states)} parts, expected {len(self.opts)} "
                             "(sparse_embeddings changed since the checkpoint?)")
        for o, st in zip(self.opts, states):
            o.load_state_dict(st)
