"""A training says at once that it runs and how long it will take (issue 50 item 18): the first
update of a session is logged right away, with an ETA when train.max_steps (or max_time_min)
bounds the run, and every periodic line is followed by the estimate."""
from __future__ import annotations

import logging
from pathlib import Path

import torch

from doctrans.training.progress import eta_s, format_duration, pace_note
from doctrans.training.trainer import Trainer
from test_trainer_loop import RegressionTask, _cfg


def test_first_update_is_logged_at_once_with_an_eta(tmp_path: Path, caplog):
    tr = Trainer(RegressionTask(), _cfg(max_steps=4, log_every=100, eval_every_epochs=0, save_every_epochs=0, plot=False,
                                        tensorboard=False),
                 tmp_path, torch.device("cpu"))
    with caplog.at_level(logging.INFO, logger="doctrans.training.trainer"):
        tr.fit()
    msgs = [r.getMessage() for r in caplog.records]
    first = [m for m in msgs if m.startswith("update 1 done in")]
    assert len(first) == 1 and "update 1/4, ETA" in first[0] and "the next log line at update 100" in first[0]
    assert msgs.index(first[0]) < next(i for i, m in enumerate(msgs) if m.startswith("stopping after"))


def test_periodic_lines_carry_the_eta_and_resumed_sessions_their_own_pace(tmp_path: Path, caplog):
    tr = Trainer(RegressionTask(), _cfg(max_steps=4, log_every=2, eval_every_epochs=0, save_every_epochs=0, plot=False,
                                        tensorboard=False),
                 tmp_path, torch.device("cpu"))
    with caplog.at_level(logging.INFO, logger="doctrans.training.trainer"):
        tr.fit()
    assert sum("update 2/4, ETA" in r.getMessage() or "update 4/4, ETA 0 s" in r.getMessage()
               for r in caplog.records) == 2
    # pace of this session only: 10 updates done after resuming at 100, in 20 s → 890 left ≈ 1780 s
    assert eta_s(110, 100, 20.0, max_steps=1000) == 1780.0
    assert eta_s(110, 100, 20.0, max_steps=1000, max_time_min=10, wall_time_s=300) == 300.0   # budget first
    assert eta_s(100, 100, 0.0, max_steps=1000) is None and eta_s(5, 0, 1.0) is None
    assert format_duration(45) == "45 s" and format_duration(1780) == "30 min" and format_duration(7500) == "2 h 05 min"
    assert pace_note(110, 100, 20.0, 1000, now=0.0).startswith("update 110/1000, ETA 30 min (")
    assert pace_note(5, 0, 1.0) == ""
