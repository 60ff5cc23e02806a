"""Best-checkpoint tracking and early stopping with patience on a named metric."""
from __future__ import annotations

from doctrans.training.state import TrainState


class EarlyStopping:
    """``update(state, value)`` → True if ``value`` is a new best. Patience counts evaluations
    without improvement; ``should_stop`` once it is exhausted (patience 0 = never)."""

    def __init__(self, metric: str, mode: str, patience: int):
        if mode not in ("min", "max"):
            raise ValueError(f"train.metric_mode must be 'min' or 'max', got {mode!r}")
        self.metric, self.mode, self.patience = metric, mode, patience

    def _better(self, value: float, best: float | None) -> bool:
        if best is None:
            return True
        return value > best if self.mode == "max" else value < best

    def update(self, state: TrainState, value: float) -> bool:
        if self._better(value, state.best_metric):
            state.best_metric, state.best_step, state.bad_evals = value, state.step, 0
            return True
        state.bad_evals += 1
        return False

    def should_stop(self, state: TrainState) -> bool:
        return self.patience > 0 and state.bad_evals >= self.patience
