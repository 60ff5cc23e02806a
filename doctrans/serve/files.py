"""LibreTranslate's ``/translate_file``: an uploaded ``.txt`` / ``.srt`` / ``.vtt`` / ``.ass`` /
``.ssa`` file translated as ``doctrans translate`` translates that file, kept for download.

``translate_upload(name, data, run)`` reads the upload as the CLI reads a file of that suffix and
translates it with the CLI's code — a subtitle file decoded by ``data.encoding.decode_text``
(detected encoding), parsed by ``inference.subtitle_files.parse`` and translated by
``subtitles.translate_docs`` (its cues' sentences and SDH labels, the lines laid out in the
CLI's default line length, a header naming the language, the cue count, timings, styles and line
ends of the input); a text file read by ``data.encoding.text_lines`` (UTF-8, or a file wholly
GB18030 / Big5), one line a sentence, one line out per line in. Traditional script is converted
(``to_simplified``). All the file's sentences go to the model in one call (a context model reads
the previous cues), so the output is the CLI's.

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

from doctrans.inference.config import IOOptions
from doctrans.serve.limits import Limits
from doctrans.utils.settings import default_of

SUFFIXES = (".txt", ".srt", ".vtt", ".ass", ".ssa")
_STORED = re.compile(r"^[0-9a-f]{32}\.[A-Za-z0-9][A-Za-z0-9._-]{0,120}$")


@dataclass
class Translated:
    """An uploaded file translated: ``text`` (the file ``doctrans translate`` writes), ``cues``
    (its cues, or lines for a text file), ``pairs`` (per cue or line, [source, translation])."""

    text: str
    cues: int
    pairs: list[list[str]]


class _Lines:
    """What ``subtitles.translate_docs`` calls a translator: ``translate`` handed to ``run``."""

    def __init__(self, run: Callable[[list[str], list[str]], list[str]]):
        self.run = run

    def translate(self, lines, progress=False, name="", doc_ids=None, where=None):
        return self.run(lines, doc_ids if doc_ids is not None else ["0"] * len(lines))


def safe_name(name: str) -> str:
    """``name``'s last path component with every character but letters, digits, ``.``, ``_``,
    ``-`` replaced by ``_`` (``file.txt`` when nothing is left)."""
    base = re.split(r"[\\/]", name or "")[-1]
    s = re.sub(r"[^A-Za-z0-9._-]", "_", base).lstrip(".")
    return s[-120:] or "file.txt"


def translate_upload(name: str, data: bytes, run: Callable[[list[str], list[str]], list[str]],
                     script: str = default_of(IOOptions, "script"), language: str = "") -> Translated:
    """The upload ``name`` (its suffix decides how it is read) with bytes ``data``, translated by
    ``run(lines, doc_ids)`` (all its sentences in one call, as the CLI makes it; module doc);
    ``language``: the translation's language, for a header that names one (as the CLI sets the
    model's target). Raises ValueError (EncodingError, TextDecodeError, SubtitleError) naming the
    file and line for a file the CLI would refuse, and for another suffix; what ``run`` raises."""
    from doctrans.data.encoding import ENCODINGS_AUTO, decode_text, text_lines, to_simplified
    from doctrans.inference.subtitle_files import FORMATS, parse
    from doctrans.inference.subtitles import SubtitleOptions, translate_docs

    suffix = Path(name).suffix.lower()
    if suffix not in SUFFIXES:
        raise ValueError(f"{name}: file format not supported (one of {', '.join(SUFFIXES)})")
    if suffix == ".txt":
        lines = text_lines(data, name)
        out = run(to_simplified(lines, name, script)[0], ["0"] * len(lines)) if lines else []
        return Translated("".join(f"{x}\n" for x in out), len(lines), [[a, b] for a, b in zip(lines, out)])
    text, enc = decode_text(data, name)
    doc = parse(text, name, FORMATS[suffix])
    doc.encoding = enc
    options = SubtitleOptions(ENCODINGS_AUTO, script, language=language)
    r = translate_docs(_Lines(run), [doc], options)[0]
    if language:
        doc.set_language(language)
    return Translated(doc.render(r.texts, doc.fmt), len(doc.cues),
                      [["\n".join(c.text), "\n".join(t)] for c, t in zip(doc.cues, r.translations)])


class FileStore:
    """Translated files kept for download (module doc)."""

    def __init__(self, max_files: int = Limits.max_files, max_age_s: float = Limits.file_age_s):
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
