"""The optimizer and learning-rate schedules of the training loop.

* ``inverse_sqrt``: linear warm-up then inverse-square-root decay (Vaswani et al. 2017, eq. 3,
  in fairseq's form: lr(s) = peak·s/w for s ≤ w, peak·sqrt(w/s) after), per update;
* ``epoch_decay``: constant ``lr`` until ``lr_decay_start`` epochs are done, then × ``lr_decay``
  per further epoch (OpenNMT's start_decay_steps/decay, counted in epochs) — the DP generators';
* ``fixed``: linear warm-up over ``warmup`` updates, then ``lr`` held (fairseq's ``fixed``
  scheduler with ``--warmup-updates``) — for continuing a trained model at the learning rate its
  own schedule had reached, without decaying it again.
"""
from __future__ import annotations

import math

import torch

SCHEDULES = ("inverse_sqrt", "epoch_decay", "fixed")


def inverse_sqrt_lr(step: int, peak: float, warmup: int) -> float:
    """Learning rate for update number ``step`` (1-based)."""
    step = max(step, 1)
    if warmup <= 0:
        return peak
    return peak * step / warmup if step <= warmup else peak * math.sqrt(warmup / step)


def fixed_lr(step: int, peak: float, warmup: int) -> float:
    """Learning rate for update number ``step`` (1-based): ``peak·step/warmup`` during the warm-up,
    ``peak`` after it."""
    return peak * min(1.0, max(step, 1) / warmup) if warmup > 0 else peak


def epoch_decay_lr(epoch: int, peak: float, decay: float, start: int) -> float:
    """Learning rate of the 0-based ``epoch``: ``peak · decay^max(0, epoch − start + 1)``."""
    return peak * decay ** max(0, epoch - start + 1)


def learning_rate(t, step: int, epoch: int) -> float:
    """The LR of update ``step`` (1-based) in ``epoch`` (0-based) under ``t.lr_schedule`` (a
    TrainConfig). Raises ValueError for an unknown schedule or a decay outside (0, 1]."""
    if t.lr_schedule == "inverse_sqrt":
        return inverse_sqrt_lr(step, t.lr, t.warmup)
    if t.lr_schedule == "fixed":
        return fixed_lr(step, t.lr, t.warmup)
    if t.lr_schedule == "epoch_decay":
        if not 0.0 < t.lr_decay <= 1.0:
            raise ValueError(f"train.lr_decay must be in (0, 1], got {t.lr_decay}")
        return epoch_decay_lr(epoch, t.lr, t.lr_decay, t.lr_decay_start)
    raise ValueError(f"train.lr_schedule must be one of {SCHEDULES}, got {t.lr_schedule!r}")


OPTIMIZERS = ("adam", "adadelta")


def build_optimizer(params, lr: float, betas, eps: float, weight_decay: float, name: str = "adam",
                    rho: float = 0.95) -> torch.optim.Optimizer:
    """``name`` adam: Adam (Kingma & Ba 2015) with PyTorch's fused kernel: on a 2-core CPU the
    per-tensor loop spends ~0.9 s per update on 11M parameters, the fused kernel ~0.13 s (same
    maths). adadelta: Adadelta (Zeiler 2012) with decay ``rho`` (``betas`` unused), the
    optimizer of the RNNSearch papers (Wang 2019 thesis, Kuang & Xiong 2018; docs/models.md §1.2). Raises ValueError for another name."""
    if name == "adam":
        return torch.optim.Adam(params, lr=lr, betas=tuple(betas), eps=eps, weight_decay=weight_decay,
                                fused=True)
    if name == "adadelta":
        return torch.optim.Adadelta(params, lr=lr, rho=rho, eps=eps, weight_decay=weight_decay, foreach=True)
    raise ValueError(f"train.optimizer must be one of {OPTIMIZERS}, got {name!r}")


def _groups(params: list, lr_scale: dict[int, float] | None) -> list:
    """Parameters as one group, or groups by LR factor (key ``lr_scale``) in first-seen order."""
    if not lr_scale:
        return params
    groups: dict[float, list] = {}
    for p in params:
        groups.setdefault(lr_scale.get(id(p), 1.0), []).append(p)
    return [{"params": ps, "lr_scale": s} for s, ps in groups.items()]


class MixedAdam:
    """Adam for a module whose embedding tables may have sparse gradients: fused Adam (or
    Adadelta, ``optimizer``, when there are no sparse tables) on the dense parameters,
    ``torch.optim.SparseAdam`` (lazy Adam: moments of a row move only when the row is in the
    batch) on the sparse tables (``nn.Embedding(sparse=True)``). Updating a
    50k-row table densely costs more than the rest of a DP-detector step (benchmarks/RESULTS.md).
    Without sparse tables this is exactly ``build_optimizer`` + ``clip_grad_norm_``.

    ``step(max_norm)`` clips the global gradient norm (dense and sparse together) first;
    ``max_norm`` ≤ 0 disables clipping."""

    def __init__(self, module: torch.nn.Module, lr: float, betas=(0.9, 0.999), eps: float = 1e-8,
                 weight_decay: float = 0.0, lr_scale: dict[int, float] | None = None,
                 optimizer: str = "adam", rho: float = 0.95):
        """``lr_scale``: id(parameter) → factor on the LR (e.g. parameters loaded by ``init_from``);
        parameters with ``requires_grad`` False (frozen) are left out. ``optimizer``/``rho``:
        the dense parameters' optimizer (``build_optimizer``); sparse tables need adam."""
        self.sparse = [m.weight for m in module.modules()
                       if isinstance(m, torch.nn.Embedding) and m.sparse and m.weight.requires_grad]
        ids = {id(p) for p in self.sparse}
        self.dense = [p for p in module.parameters() if id(p) not in ids and p.requires_grad]
        if self.sparse and optimizer != "adam":
            raise ValueError(f"sparse embedding gradients need train.optimizer adam, got {optimizer!r}")
        self.opts = [build_optimizer(_groups(self.dense, lr_scale), lr, betas, eps, weight_decay, optimizer, rho)]
        if self.sparse:
            self.opts.append(torch.optim.SparseAdam(_groups(self.sparse, lr_scale), lr, tuple(betas), eps))

    @classmethod
    def from_config(cls, module: torch.nn.Module, t, lr_scale: dict[int, float] | None = None) -> "MixedAdam":
        """The optimizer ``t.optimizer`` of a TrainConfig ``t`` (its eps, betas or rho)."""
        eps = t.adadelta_eps if t.optimizer == "adadelta" else t.adam_eps
        return cls(module, t.lr, t.adam_betas, eps, t.weight_decay, lr_scale, t.optimizer, t.adadelta_rho)

    def set_lr(self, lr: float) -> None:
        for o in self.opts:
            for g in o.param_groups:
                g["lr"] = lr * g.get("lr_scale", 1.0)

    def zero_grad(self) -> None:
        for o in self.opts:
            o.zero_grad(set_to_none=True)

    def _clip(self, max_norm: float) -> float:
        """The global gradient norm; the gradients scaled to ``max_norm`` when it is finite and
        above (``max_norm`` ≤ 0: the norm only)."""
        if not self.sparse:
            limit = max_norm if max_norm > 0 else float("inf")
            return float(torch.nn.utils.clip_grad_norm_(self.dense, limit)) if self.dense else 0.0
        sq = [p.grad.pow(2).sum() for p in self.dense if p.grad is not None]
        for p in self.sparse:
            if p.grad is not None:
                p.grad = p.grad.coalesce()
                sq.append(p.grad.values().pow(2).sum())
        total = torch.stack(sq).sum().sqrt() if sq else torch.tensor(0.0)
        scale = float(max_norm / (total + 1e-6)) if max_norm > 0 else 1.0
        if scale < 1.0 and math.isfinite(scale):
            for p in self.dense + self.sparse:
                if p.grad is not None:
                    p.grad.mul_(scale)
        return float(total)

    def step(self, max_norm: float = 0.0) -> bool:
        """Clip the global gradient norm to ``max_norm`` (≤ 0: no clipping) and step; returns
        False, without a step, when the gradient norm is NaN or inf (the caller skips the update)."""
        if not math.isfinite(self._clip(max_norm)):
            return False
        for o in self.opts:
            o.step()
        return True

    def state_dict(self) -> list[dict]:
        return [o.state_dict() for o in self.opts]

    def load_state_dict(self, states: list[dict] | dict) -> None:
        """Accepts this class' list, or one Adam state dict (checkpoints before MixedAdam).
        Raises ValueError if the number of parts does not match (sparse_embeddings changed)."""
        if isinstance(states, dict):
            states = [states]
        if len(states) != len(self.opts):
            raise ValueError(f"optimizer state has {len(states)} parts, expected {len(self.opts)} "
                             "(sparse_embeddings changed since the checkpoint?)")
        for o, st in zip(self.opts, states):
            o.load_state_dict(st)
