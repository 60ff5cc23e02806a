"""Where a result was made: the git commit of the doctrans checkout, the date and the machine.

``provenance_line(command=command_line())`` is the line every experiment table ends with
(``doctrans table dp|context|rec`` write it under their ``--out``, e.g.
``runs/quickstart/quickstart_table.md``), so a table says which code and which command made it.
It never fails: outside a git checkout (an installed wheel) or without ``git`` the commit is
``unknown``.
"""
from __future__ import annotations

import os
import platform
import shlex
import subprocess
import sys
import time
from pathlib import Path

PACKAGE_DIR = Path(__file__).resolve().parents[1]        # doctrans/


def _git(args: list[str], cwd: Path) -> str | None:
    try:
        r = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return None
    return r.stdout if r.returncode == 0 else None


def git_commit(where: str | Path = PACKAGE_DIR) -> str:
    """``git rev-parse --short HEAD`` of the repository ``where`` lies in (default: the one the
    doctrans package lives in), plus `` (modified)`` when ``git status --porcelain`` lists
    anything; ``unknown`` outside a git checkout or without git."""
    cwd = Path(where)
    if not cwd.is_dir():
        cwd = cwd.parent
    head = _git(["rev-parse", "--short", "HEAD"], cwd)
    if not head or not head.strip():
        return "unknown"
    status = _git(["status", "--porcelain"], cwd)
    return head.strip() + (" (modified)" if status and status.strip() else "")


def cpu_count() -> int:
    """CPUs this process may use (its affinity), else the machine's."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def command_line(argv: list[str] | None = None) -> str:
    """The command this process runs, as a shell would take it: ``sys.argv`` (or ``argv``) with the
    program's path reduced to its name (``doctrans table dp --baseline B.pt …``; ``python -m
    doctrans …`` for ``__main__.py``)."""
    argv = list(sys.argv if argv is None else argv)
    prog = Path(argv[0]).name if argv else "doctrans"
    head = ["python", "-m", "doctrans"] if prog == "__main__.py" else [prog]
    return shlex.join(head + argv[1:])


def provenance_line(where: str | Path = PACKAGE_DIR, command: str | None = None) -> str:
    """``Made by doctrans at commit C on DATE on MACHINE (N CPUs).`` (``git_commit``, local
    time, ``platform.platform()`` and processor), followed by `` Command: `COMMAND`.`` when
    ``command`` is given (``command_line()``)."""
    machine = platform.platform()
    proc = platform.processor() or platform.machine()
    if proc and proc not in machine:
        machine += f", {proc}"
    return (f"Made by doctrans at commit {git_commit(where)} on {time.strftime('%Y-%m-%d %H:%M:%S %Z').strip()} "
            f"on {machine} ({cpu_count()} CPUs)." + (f" Command: `{command}`." if command else ""))
