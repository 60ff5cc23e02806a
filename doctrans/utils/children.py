"""Child processes die with their parent: a killed ``translate --workers N`` or ``annotate-dp``
must not leave ~330 MB workers, the multiprocessing resource tracker or ``eflomal`` running
under PID 1.

On Linux a child asks the kernel for a signal when its parent dies (``prctl(PR_SET_PDEATHSIG)``,
set through ctypes): ``die_with_parent`` in a pool worker's initializer, ``preexec`` in a
``subprocess.Popen`` (``preexec_fn``), and ``children_die_with_us`` for the processes a library
starts itself (eflomal's Python wrapper runs its binary with ``subprocess``). The resource
tracker of a spawn pool exits by itself once every process holding its pipe is gone. Elsewhere
(macOS, Windows) these do nothing.
"""
from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import subprocess
import sys

PR_SET_PDEATHSIG = 1


def die_with_parent(parent: int | None = None, sig: int = signal.SIGKILL) -> bool:
    """Have the kernel send ``sig`` to this process when its parent dies (Linux); with ``parent``
    (the parent's pid as the parent saw it), exit at once if it already died before the call.
    Returns whether the request was made."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(None, use_errno=True)   # this process' symbols (libc's); no ldconfig in a preexec_fn
        if libc.prctl(PR_SET_PDEATHSIG, int(sig), 0, 0, 0) != 0:
            return False
    except (OSError, AttributeError):
        return False
    if parent is not None and os.getppid() != parent:    # the parent died before the prctl
        os._exit(1)
    return True


def preexec() -> None:
    """``subprocess.Popen(preexec_fn=preexec)``: the child gets SIGKILL when its parent dies."""
    die_with_parent()


@contextlib.contextmanager
def children_die_with_us():
    """Within the block, every ``subprocess.Popen`` started without a ``preexec_fn`` (by this
    code or a library it calls) gets ``preexec``, so it dies with this process. Restored after."""
    if not sys.platform.startswith("linux"):
        yield
        return
    real = subprocess.Popen

    class _Popen(real):
        def __init__(self, *args, **kwargs):
            if kwargs.get("preexec_fn") is None:
                kwargs["preexec_fn"] = preexec
            super().__init__(*args, **kwargs)

    subprocess.Popen = _Popen
    try:
        yield
    finally:
        subprocess.Popen = real
