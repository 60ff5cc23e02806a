"""Stop signals for long jobs: SIGTERM / SIGINT end the current unit of work, which is saved, and
the process then exits with the signal's conventional status (128 + signal number: 143 for
SIGTERM, 130 for SIGINT), as a shell reports a process the signal killed.

``StopSignals`` turns the first SIGTERM or SIGINT into a flag the job polls between units (the
training loop between updates: ``training/trainer.py``); a second one of either acts as the
signal's default (SIGINT: KeyboardInterrupt, SIGTERM: killed), so a stuck save can still be
stopped. The job raises ``Interrupted`` after saving; ``doctrans.cli.main`` prints its message
and exits with ``exit_code``.
"""
from __future__ import annotations

import shlex
import signal
import sys
import threading
from pathlib import Path

STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)


class Interrupted(Exception):
    """A job stopped by a signal after saving its work; ``exit_code`` = 128 + ``signum``.

    Not a ValueError/RuntimeError/OSError: the CLI's error path (exit 1) must not take it."""

    def __init__(self, signum: int, message: str):
        super().__init__(message)
        self.signum = signum
        self.exit_code = 128 + signum


class StopSignals:
    """Context manager: while active (in the main thread; elsewhere it does nothing), the first
    SIGTERM or SIGINT sets ``received`` (the signal number) instead of stopping the process; the
    earlier handlers are restored on exit."""

    def __init__(self) -> None:
        self.received: int | None = None
        self._old: dict[int, object] = {}

    def _handle(self, signum: int, frame) -> None:
        if self.received is not None:                     # the second one: as if we were not here
            self._restore()
            signal.raise_signal(signum)
            return
        self.received = signum

    def _restore(self) -> None:
        for sig, old in self._old.items():
            signal.signal(sig, old)
        self._old = {}

    def __enter__(self) -> "StopSignals":
        if threading.current_thread() is threading.main_thread():
            for sig in STOP_SIGNALS:
                self._old[sig] = signal.signal(sig, self._handle)
        return self

    def __exit__(self, *exc) -> None:
        self._restore()

    @property
    def name(self) -> str:
        return signal.Signals(self.received).name if self.received is not None else ""


def resume_command(run_dir: str | Path) -> str:
    """The command that continues a training run in ``run_dir``: this process' ``doctrans train``
    command line with ``--resume`` (``--overwrite`` dropped), or, when this process is not that
    command (the Python API), ``doctrans.stages.train(cfg, resume=True)`` with its run_dir."""
    args = sys.argv[1:]
    if "train" in args:
        args = [a for a in args if a != "--overwrite"]
        if "--resume" not in args:
            args.append("--resume")
        return "doctrans " + shlex.join(args)
    return f"doctrans.stages.train(cfg, resume=True) with run_dir={run_dir}"
