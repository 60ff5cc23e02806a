"""Atomic file writes: write a temporary file in the target's directory, then ``os.replace``."""
from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Iterable

import torch


def read_lines(path: str | Path) -> list[str]:
    """All lines of a UTF-8 text file without their ``\n`` (and a trailing ``\r``).

    Only ``\n`` ends a line, so a stray ``\r`` or U+2028 inside a line never changes the line
    count (``wc -l`` semantics). Raises FileNotFoundError.
    """
    with open(path, encoding="utf-8", newline="\n") as f:
        return [line.rstrip("\n").rstrip("\r") for line in f]


def atomic_write_text(path: str | Path, text: str) -> None:
    """Write ``text`` to ``path`` so that a reader (or a kill) never sees a partial file."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def atomic_write_lines(path: str | Path, lines: Iterable[str]) -> None:
    """Write one line per item (each gets a trailing newline)."""
    atomic_write_text(path, "".join(f"{line}\n" for line in lines))


def atomic_torch_save(obj, path: str | Path) -> None:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    os.close(fd)
    try:
        torch.save(obj, tmp)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
