"""Line reading with useful decode errors; atomic file writes (a temporary file in the target's
directory, then ``os.replace``)."""
from __future__ import annotations

import errno
import logging
import os
import re
import sys
import tempfile
from pathlib import Path
from typing import Iterable

import torch

log = logging.getLogger(__name__)


ENCODING_ERRORS = ("strict", "replace")


class TextDecodeError(ValueError):
    """A file (or stdin) that is not valid UTF-8; the message names it, the line and the byte."""


_NOT_UTF8_HINT = ("convert it (e.g. iconv -f GB18030 -t UTF-8) or replace undecodable bytes (doctrans translate "
                  "--encoding-errors replace)")


def decode_line(raw: bytes, name: str, n: int, errors: str = "strict") -> str:
    """One line's bytes (line ``n``, 1-based, of ``name``; a stream read line by line) as UTF-8
    under ``errors`` (``ENCODING_ERRORS``), as ``decode_lines`` decodes a file: strict raises
    TextDecodeError naming ``name:n`` and the byte; replace gives U+FFFD for each undecodable
    sequence and logs a warning naming the line."""
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as e:
        if errors == "strict":
            raise TextDecodeError(f"{name}:{n}: not valid UTF-8 (byte 0x{raw[e.start]:02x} at byte {e.start} of "
                                  f"the line); {_NOT_UTF8_HINT}") from None
    line = raw.decode("utf-8", errors="replace")
    log.warning("%s:%d: %d undecodable byte sequence(s) replaced by U+FFFD", name, n,
                line.count("\ufffd") - raw.count("\ufffd".encode("utf-8")))
    return line


def decode_lines(data: bytes, name: str, errors: str = "strict") -> list[str]:
    """UTF-8 ``data`` → its lines without ``\n`` (and a trailing ``\r``); ``name`` labels messages.

    Only ``\n`` ends a line, so a stray ``\r`` or U+2028 inside a line never changes the line
    count (``wc -l`` semantics). A UTF-8 byte order mark (U+FEFF at the start of the data or of
    a line, as Windows editors write and ``cat`` joins) is dropped: it is not text.
    ``errors="replace"`` turns each undecodable byte sequence into
    U+FFFD and logs one warning with their count. Raises TextDecodeError (a ValueError) naming
    ``name``, the 1-based line and the byte offset when ``errors="strict"``; ValueError for an
    unknown ``errors``.
    """
    if errors not in ENCODING_ERRORS:
        raise ValueError(f"encoding errors must be one of {', '.join(ENCODING_ERRORS)}, got {errors!r}")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        line = data.count(b"\n", 0, e.start) + 1
        col = e.start - (data.rfind(b"\n", 0, e.start) + 1)
        if errors == "strict":
            raise TextDecodeError(f"{name}:{line}: not valid UTF-8 (byte 0x{data[e.start]:02x} at byte {col} of "
                                  f"the line, offset {e.start} of the file); {_NOT_UTF8_HINT}") from None
        text = data.decode("utf-8", errors="replace")
        n_bad = text.count("\ufffd") - data.count("\ufffd".encode("utf-8"))
        log.warning("%s: %d undecodable byte sequence(s) replaced by U+FFFD (the first on line %d)",
                    name, n_bad, line)
    lines = text.split("\n")
    if lines[-1] == "":
        lines.pop()
    if "\ufeff" in text:                   # (files joined with cat keep each one's mark at a line start)
        lines = [line[1:] if line.startswith("\ufeff") else line for line in lines]
    return [line.rstrip("\r") for line in lines]


def read_lines(path: str | Path, errors: str = "strict") -> list[str]:
    """All lines of a UTF-8 text file without their ``\n`` (and a trailing ``\r``).

    See ``decode_lines`` (line semantics, ``errors``). Raises FileNotFoundError, TextDecodeError
    naming the file, line and byte offset of the first undecodable byte. ``-`` reads stdin.
    """
    if str(path) == "-":
        return decode_lines(sys.stdin.buffer.read(), "<stdin>", errors)
    with open(path, "rb") as f:
        return decode_lines(f.read(), str(path), errors)


def umask() -> int:
    """The process' umask (read from ``/proc/self/status`` where it is there, so that no other
    thread ever sees a changed umask; else set and restored)."""
    try:
        with open("/proc/self/status", encoding="ascii") as f:
            for line in f:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def new_file_mode() -> int:
    """The mode ``open(path, "w")`` gives a new file: ``0o666`` less the umask."""
    return 0o666 & ~umask()


def temp_name_prefix(name: str) -> str:
    """The prefix of this process' temporary files for ``name``: ``.NAME.PID.`` (``mkstemp`` /
    ``mkdtemp`` add 8 random characters, then ``.tmp``), so that ``remove_stale_temps`` can tell
    a killed writer's leftover from a live one's file."""
    return f".{name}.{os.getpid()}."


# .NAME.PID.XXXXXXXX.tmp: a temporary file or directory of temp_name_prefix (mkstemp's 8 characters)
_STALE = re.compile(r"^\.(?P<name>.+)\.(?P<pid>\d+)\.[a-z0-9_]{8}\.tmp$")


def _alive(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def remove_stale_temps(directory: str | Path, recursive: bool = False) -> list[Path]:
    """Remove the temporary files (and directories) that writers killed before their rename left
    in ``directory`` (and its subdirectories with ``recursive``): only names of
    ``temp_name_prefix`` (``.NAME.PID.XXXXXXXX.tmp``) whose process PID is no longer running, so a
    live writer's file is never touched. Returns what was removed (logged)."""
    import shutil

    directory = Path(directory)
    if not directory.is_dir():
        return []
    found = directory.rglob(".*.tmp") if recursive else directory.glob(".*.tmp")
    removed = []
    for p in sorted(found):
        m = _STALE.match(p.name)
        if m is None or _alive(int(m.group("pid"))):
            continue
        try:
            shutil.rmtree(p) if p.is_dir() and not p.is_symlink() else p.unlink()
            removed.append(p)
        except FileNotFoundError:
            pass
    if removed:
        log.info("removed %d temporary file(s) left by a killed run in %s (%s)", len(removed), directory,
                 ", ".join(p.name for p in removed[:3]) + (" …" if len(removed) > 3 else ""))
    return removed


def temp_file_next_to(path: str | Path) -> tuple[int, str]:
    """``tempfile.mkstemp`` in ``path``'s directory, named ``temp_name_prefix`` (so that
    ``remove_stale_temps`` can remove it once its writer is dead), but with the mode a plain
    ``open()`` gives under the umask (mkstemp's 0600 would otherwise survive the rename).
    Returns (fd, name)."""
    path = Path(path)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=temp_name_prefix(path.name), suffix=".tmp")
    try:
        os.fchmod(fd, new_file_mode())
    except BaseException:
        os.close(fd)
        os.unlink(tmp)
        raise
    return fd, tmp


def atomic_write_text(path: str | Path, text: str) -> None:
    """Write ``text`` (UTF-8, ``\\n`` line ends as given) to ``path`` so that a reader (or a kill)
    never sees a partial file."""
    atomic_write_bytes(path, text.encode("utf-8"))


def atomic_write_bytes(path: str | Path, data: bytes) -> None:
    """Write ``data`` to ``path`` through a temporary file in the same directory, fsync'd and
    renamed, so that a reader (or a kill) never sees a partial file. Raises OSError; a write
    past the file size limit (``ulimit -f``: CPython ignores SIGXFSZ, so the write fails with
    EFBIG) names ``path``, the limit and the output's size; the previous file stays."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = temp_file_next_to(path)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException as e:
        if os.path.exists(tmp):
            os.unlink(tmp)
        if isinstance(e, OSError) and e.errno == errno.EFBIG:
            raise OSError(errno.EFBIG, f"cannot write {path}: file too large: {_size_limit()} and the output is "
                                       f"{len(data):,} bytes; raise it (ulimit -f unlimited)", str(path)) from e
        raise


def _size_limit() -> str:
    """'the file size limit (ulimit -f) is N bytes' (or 'the file system's file size limit')."""
    import resource

    soft = resource.getrlimit(resource.RLIMIT_FSIZE)[0]
    return ("the file system's file size limit was reached" if soft == resource.RLIM_INFINITY
            else f"the file size limit (ulimit -f) is {soft:,} bytes")


def atomic_write_lines(path: str | Path, lines: Iterable[str]) -> None:
    """Write one line per item (each gets a trailing newline)."""
    atomic_write_text(path, "".join(f"{line}\n" for line in lines))


def atomic_torch_save(obj, path: str | Path) -> None:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = temp_file_next_to(path)
    os.close(fd)
    try:
        torch.save(obj, tmp)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
