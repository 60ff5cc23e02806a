"""A run directory's guard: a finished model is never overwritten without being asked.

``doctrans train`` into a directory that already holds ``best.pt`` or ``last.pt`` either
continues it (``--resume``), or replaces it when asked (``--overwrite``: the earlier run's
checkpoints, ``metrics.jsonl``, TensorBoard events and learning curves are removed first, so
the new run's records are not mixed with the old ones), or stops with an error naming the
directory and the three ways on, before anything is loaded or written.
"""
from __future__ import annotations

import logging
import shutil
from pathlib import Path

from doctrans.training.checkpoint import step_checkpoints

log = logging.getLogger(__name__)

FINISHED = ("best.pt", "last.pt")            # a model that training would replace
RUN_RECORDS = ("metrics.jsonl", "learning_curves.png")


class RunDirExists(ValueError):
    """``train`` into a run directory holding a model, without ``resume`` or ``overwrite``."""


def check_run_dir(run_dir: str | Path, resume: bool = False, overwrite: bool = False) -> None:
    """Raise RunDirExists when ``run_dir`` holds ``best.pt`` / ``last.pt`` and neither
    ``resume`` nor ``overwrite`` is set (the message names the directory and offers
    ``--resume``, another ``run_dir=…`` and ``--overwrite``); ValueError for both set. With
    ``overwrite`` the earlier run's outputs are removed (``clear_run_dir``)."""
    run_dir = Path(run_dir)
    if resume and overwrite:
        raise ValueError("--resume continues the run in the run directory and --overwrite replaces it: give one")
    found = [name for name in FINISHED if (run_dir / name).exists()]
    if not found or resume:
        return
    if not overwrite:
        raise RunDirExists(
            f"run directory {run_dir} already holds a trained model ({', '.join(found)}): continue it with "
            f"--resume, train into another directory (run_dir=NEW_DIR), or replace it with --overwrite")
    clear_run_dir(run_dir)


def clear_run_dir(run_dir: str | Path) -> None:
    """Remove an earlier run's checkpoints (``best.pt``, ``last.pt``, ``checkpoint{STEP}.pt``),
    ``metrics.jsonl``, ``learning_curves.png`` and ``tensorboard/`` from ``run_dir`` (``train.log``
    and ``config.yaml`` stay: the log appends, the config is rewritten)."""
    run_dir = Path(run_dir)
    gone = [run_dir / n for n in FINISHED + RUN_RECORDS] + step_checkpoints(run_dir)
    removed = [p.name for p in gone if p.exists()]
    for p in gone:
        p.unlink(missing_ok=True)
    if (run_dir / "tensorboard").is_dir():
        shutil.rmtree(run_dir / "tensorboard")
        removed.append("tensorboard/")
    log.warning("--overwrite: removed the earlier run's %s from %s", ", ".join(removed) or "nothing", run_dir)
