"""LibreTranslate's ``/translate_file``: an uploaded ``.txt`` / ``.srt`` / ``.vtt`` / ``.ass`` /
``.ssa`` file translated as ``doctrans translate`` translates that file, kept for download.

``plan_file(name, data, script)`` decodes and parses the upload as the CLI reads a file of that
suffix — a subtitle file by ``data.encoding.decode_text`` (detected encoding) and
``inference.subtitle_files.parse``, its cues' sentences by ``subtitles.split_cue``; a text file
by ``data.encoding.text_lines`` (UTF-8, or a file wholly GB18030 / Big5), one line a sentence —
and returns the sentences (Traditional script converted by ``to_simplified``) with the function
that renders the translated file from their translations (``subtitles.render_cue`` and the
document's ``render``: the cue count, timings, styles and line ends of the input; a text file:
one line per input line, ``\\n`` ends). The whole file is one document, translated in one call
(a context model reads the previous cues), so the output is the CLI's.

``FileStore``: the translated files, in a private temporary directory made at start-up and
removed at shutdown, each under a fresh name ``<32 hex digits>.<safe name>`` (LibreTranslate's
``uuid.filename``); at most ``max_files`` files and ``max_age_s`` seconds old (the oldest removed
first when a new one is stored); ``path(name)`` gives a file only for a name of that form that
is in the directory, so a download never reads outside it.
"""
from __future__ import annotations

import os
import re
import shutil
import tempfile
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

SUFFIXES = (".txt", ".srt", ".vtt", ".ass", ".ssa")
_STORED = re.compile(r"^[0-9a-f]{32}\.[A-Za-z0-9][A-Za-z0-9._-]{0,120}$")


@dataclass
class FilePlan:
    """An uploaded file read for translation: ``units`` (the sentences, in order), ``render``
    (their translations → the translated file's text), ``cues`` (its cues, or lines for a text
    file)."""

    units: list[str]
    render: Callable[[list[str]], str]
    cues: int
    pairs: Callable[[list[str]], list[list[str]]]     # translations → per cue (line) [source, translation]


def safe_name(name: str) -> str:
    """``name``'s last path component with every character but letters, digits, ``.``, ``_``,
    ``-`` replaced by ``_`` (``file.txt`` when nothing is left)."""
    base = re.split(r"[\\/]", name or "")[-1]
    s = re.sub(r"[^A-Za-z0-9._-]", "_", base).lstrip(".")
    return s[-120:] or "file.txt"


def plan_file(name: str, data: bytes, script: str = "auto") -> FilePlan:
    """The upload ``name`` (its suffix decides how it is read) with bytes ``data`` → its
    ``FilePlan`` (module doc). Raises ValueError (EncodingError, TextDecodeError, SubtitleError)
    naming the file and line for a file the CLI would refuse, and for another suffix."""
    from doctrans.data.encoding import decode_text, text_lines, to_simplified
    from doctrans.inference.subtitle_files import FORMATS, parse
    from doctrans.inference.subtitles import render_cue, split_cue

    suffix = Path(name).suffix.lower()
    if suffix not in SUFFIXES:
        raise ValueError(f"{name}: file format not supported (one of {', '.join(SUFFIXES)})")
    if suffix == ".txt":
        lines = text_lines(data, name)
        units, _ = to_simplified(lines, name, script)
        return FilePlan(units, lambda out: "".join(f"{x}\n" for x in out), len(lines),
                        lambda out: [[a, b] for a, b in zip(lines, out)])
    text, enc = decode_text(data, name)
    doc = parse(text, name, FORMATS[suffix])
    doc.encoding = enc
    plans = [split_cue(c.text) for c in doc.cues]
    units, _ = to_simplified([u for p in plans for u in p.units], name, script)

    def cue_texts(out: list[str]) -> list[list[str]]:
        it = iter(out)
        return [render_cue(p, [next(it) for _ in p.units]) for p in plans]

    def render(out: list[str]) -> str:
        return doc.render(cue_texts(out), doc.fmt)

    def pairs(out: list[str]) -> list[list[str]]:
        return [["\n".join(c.text), "\n".join(t)] for c, t in zip(doc.cues, cue_texts(out))]

    return FilePlan(units, render, len(doc.cues), pairs)


class FileStore:
    """Translated files kept for download (module doc)."""

    def __init__(self, max_files: int = 100, max_age_s: float = 3600.0):
        self.max_files, self.max_age_s = max_files, max_age_s
        self.root = Path(tempfile.mkdtemp(prefix="doctrans-serve-files-"))

    def put(self, name: str, text: str) -> str:
        """Store ``text`` (UTF-8) under a fresh name for ``name``; returns that name."""
        self.prune(room=1)
        stored = f"{uuid.uuid4().hex}.{safe_name(name)}"
        tmp = self.root / f".{stored}.part"
        tmp.write_text(text, encoding="utf-8", newline="")
        os.replace(tmp, self.root / stored)
        return stored

    def path(self, stored: str) -> Path | None:
        """The file stored as ``stored``, or None (no such name, expired, or not of the form)."""
        if not _STORED.match(stored or ""):
            return None
        p = self.root / stored
        if p.parent != self.root or not p.is_file():
            return None
        if time.time() - p.stat().st_mtime > self.max_age_s:
            p.unlink(missing_ok=True)
            return None
        return p

    def prune(self, room: int = 0) -> None:
        """Remove files older than ``max_age_s``, then the oldest until ``room`` more fit."""
        files = sorted((p for p in self.root.iterdir() if _STORED.match(p.name)), key=lambda p: p.stat().st_mtime)
        now = time.time()
        keep = []
        for p in files:
            if now - p.stat().st_mtime > self.max_age_s:
                p.unlink(missing_ok=True)
            else:
                keep.append(p)
        for p in keep[:max(0, len(keep) + room - self.max_files)]:
            p.unlink(missing_ok=True)

    def close(self) -> None:
        shutil.rmtree(self.root, ignore_errors=True)
