"""What a training says about its pace: the first update's time and an estimate of the time
left, so a user sees within seconds that it runs and how long it will take (issue 50: the
first log line used to come after ``train.log_every`` updates, 73 s into the quickstart).

``eta_s`` extrapolates the updates of this session (not of earlier, resumed ones, which may have
run on another machine) to ``train.max_steps``, capped by what is left of ``train.max_time_min``;
``pace_note`` renders it for the log lines (``trainer.Trainer``: after the first update of a
session, and at every ``log_every`` line).
"""
from __future__ import annotations

import time


def format_duration(seconds: float) -> str:
    """``45 s``, ``12 min``, ``2 h 05 min``."""
    seconds = max(0.0, seconds)
    if seconds < 90:
        return f"{seconds:.0f} s"
    minutes = round(seconds / 60)
    if minutes < 60:
        return f"{minutes} min"
    return f"{minutes // 60} h {minutes % 60:02d} min"


def eta_s(step: int, start_step: int, elapsed_s: float, max_steps: int = 0, max_time_min: float = 0.0,
          wall_time_s: float = 0.0) -> float | None:
    """Seconds left: the updates still to do up to ``max_steps`` at this session's pace
    (``elapsed_s`` for the updates since ``start_step``), at most what is left of
    ``max_time_min`` (``wall_time_s`` spent of it); None when neither bounds the run or no
    update of this session is done yet."""
    done = step - start_step
    left = []
    if max_steps and done > 0:
        left.append(max(0, max_steps - step) * elapsed_s / done)
    if max_time_min:
        left.append(max(0.0, max_time_min * 60 - wall_time_s))
    return min(left) if left else None


def pace_note(step: int, start_step: int, elapsed_s: float, max_steps: int = 0, max_time_min: float = 0.0,
              wall_time_s: float = 0.0, now: float | None = None) -> str:
    """``ETA 12 min (11:45)``, with ``max_steps`` N: ``update 40/800, ETA …``; ``""`` when
    ``eta_s`` is None."""
    left = eta_s(step, start_step, elapsed_s, max_steps, max_time_min, wall_time_s)
    if left is None:
        return ""
    at = time.strftime("%H:%M", time.localtime((now if now is not None else time.time()) + left))
    where = f"update {step}/{max_steps}, " if max_steps else ""
    return f"{where}ETA {format_duration(left)} ({at})"
