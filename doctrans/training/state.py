"""Training progress, saved in every checkpoint so a resumed run continues exactly."""
from __future__ import annotations

from dataclasses import asdict, dataclass


@dataclass
class TrainState:
    step: int = 0                 # optimizer updates done
    epoch: int = 0                # current epoch, 0-based
    batch_in_epoch: int = 0       # batches of the current epoch already consumed
    tgt_tokens: int = 0           # target tokens trained on (incl. </s>)
    train_time_s: float = 0.0     # wall seconds spent in training updates, all runs together
    wall_time_s: float = 0.0      # wall seconds of training incl. evaluation and saving, all runs
    cpu_time_s: float = 0.0       # CPU seconds of this process (all its threads) over the same span
    best_metric: float | None = None
    best_step: int = 0
    bad_evals: int = 0            # evaluations since the best one (early stopping)
    stop_reason: str = ""

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> "TrainState":
        return cls(**d)   # a checkpoint from before cpu_time_s gets 0.0 for it
