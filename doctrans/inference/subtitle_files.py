"""Subtitle files (SRT, WebVTT, ASS/SSA) read and written, for ``subtitles.py`` (which translates
them): ``read_subtitles`` / ``parse`` give a ``SubtitleDoc`` whose ``cues`` hold each cue's text
lines and its start and end (milliseconds), and ``SubtitleDoc.render`` writes the file back with
those lines replaced (``set_language``: a header naming the file's language names another).

ASS/SSA through pysubs2 (``SSAFile``: script info, styles, every event's fields kept; Comment
events are not translated). SRT and WebVTT by the small block parser here, which keeps every
line but the cue text exactly as read (index, timing line with SRT ``X1:…`` coordinates or VTT
cue settings, VTT identifiers, NOTE/STYLE/REGION blocks): pysubs2 1.8 renumbers SRT cues, drops
SRT coordinates, ``{\\an8}`` and VTT cue settings, and reads a VTT cue identifier as text of the
previous cue [measured: I]. A malformed SRT/VTT cue (bad or missing timing line, SRT missing
index) raises ``SubtitleError`` naming the file, the cue and the line; so does an ASS/SSA event
line that pysubs2 would complete with invented values (fewer than ten fields, a time or number
it cannot read: ``check_ssa_events``). Input bytes are decoded by ``data.encoding.decode_text``
(detected or ``encoding``); ``\\r\\n`` and a lone ``\\r`` end lines; output is UTF-8 (a UTF-8
BOM is not written; the input's line ends, ``\\r\\n`` or ``\\r``, are kept). A file with no text
(empty, a byte-order mark, blank lines) is an empty document, written back as an empty file
(logged), as an empty text file gives an empty translation.
"""
from __future__ import annotations

import logging
import re
from dataclasses import dataclass, field
from pathlib import Path

from doctrans.data.encoding import ENCODINGS_AUTO, read_text

log = logging.getLogger(__name__)

FORMATS = {".srt": "srt", ".vtt": "vtt", ".ass": "ass", ".ssa": "ssa"}

_SRT_TIME = r"\d{1,3}:\d{1,2}:\d{1,2}[,.]\d{1,3}"
_SRT_TIMING = re.compile(rf"^\s*{_SRT_TIME}\s*-->\s*{_SRT_TIME}(?:\s.*)?$")
_VTT_TIME = r"(?:\d+:)?\d{2}:\d{2}\.\d{3}"
_VTT_TIMING = re.compile(rf"^\s*{_VTT_TIME}\s+-->\s+{_VTT_TIME}(?:\s.*)?$")


class SubtitleError(ValueError):
    """A malformed subtitle file; the message names the file, the cue and the line."""


def is_subtitle(path: str | Path) -> bool:
    """Whether ``path`` names a subtitle file (by suffix: .srt, .vtt, .ass, .ssa)."""
    return Path(str(path)).suffix.lower() in FORMATS


@dataclass
class Cue:
    text: list[str]          # its text lines as read (markup included)
    where: str               # "FILE: cue K (line L)"
    header: list[str] = field(default_factory=list)    # SRT/VTT: index / identifier and timing lines
    start: int = 0           # milliseconds, as its timing says
    end: int = 0


def _ms(stamp: str) -> int:
    """Milliseconds of an SRT / WebVTT time stamp (``[H:]MM:SS[,.]mmm``)."""
    *hm, sec = stamp.strip().split(":")
    s, _, frac = sec.replace(",", ".").partition(".")
    h, m = (int(hm[0]), int(hm[1])) if len(hm) == 2 else (0, int(hm[0]))
    return ((h * 60 + m) * 60 + int(s)) * 1000 + int((frac + "00")[:3])


def _span(timing: str) -> tuple[int, int]:
    """(start, end) in milliseconds of a timing line ``A --> B [settings]``."""
    a, _, b = timing.partition("-->")
    return _ms(a), _ms(b.split()[0])


def format_ms(ms: int) -> str:
    """``HH:MM:SS.mmm`` of a time in milliseconds (a cue's start in reports)."""
    s, ms = divmod(max(0, ms), 1000)
    return f"{s // 3600:02d}:{s // 60 % 60:02d}:{s % 60:02d}.{ms:03d}"


@dataclass
class SubtitleDoc:
    """A parsed subtitle file: ``fmt`` (srt | vtt | ass | ssa), ``cues`` (the translatable
    cues, in order), ``encoding`` (as read); ``render(texts)`` gives the file with each cue's
    text lines replaced (``texts``: per cue, its lines)."""

    name: str
    fmt: str
    cues: list[Cue]
    encoding: str = "utf-8"
    newline: str = "\n"
    empty: bool = False                               # no text at all: rendered as an empty file
    _items: list = field(default_factory=list)        # srt/vtt: str (verbatim block) or Cue index
    _ssa: object = None
    _events: list = field(default_factory=list)

    def set_language(self, lang: str) -> None:
        """Say the text is in ``lang`` where the file says which language it is in: a WebVTT
        header's ``Language:`` line, an ASS/SSA ``Language`` script info; a file that does not say
        is left as it is (no header is added)."""
        if self.fmt == "vtt" and self._items:
            self._items[0] = re.sub(r"(?mi)^(Language:[ \t]*)\S.*$", lambda m: m.group(1) + lang, self._items[0])
        elif self._ssa is not None and "Language" in self._ssa.info:
            self._ssa.info["Language"] = lang

    def render(self, texts: list[list[str]], fmt: str | None = None) -> str:
        fmt = fmt or self.fmt
        if len(texts) != len(self.cues):
            raise ValueError(f"{self.name}: {len(texts)} cue texts for {len(self.cues)} cues")
        if self.empty:
            return ""
        if self.fmt in ("ass", "ssa"):
            if fmt not in ("ass", "ssa"):
                raise ValueError(f"{self.name}: an {self.fmt.upper()} file is written as ASS/SSA, not {fmt}")
            for ev, t in zip(self._events, texts):
                ev.text = "\\N".join(t)
            text = self._ssa.to_string(fmt)
        else:
            if fmt != self.fmt:
                raise ValueError(f"{self.name}: a {self.fmt.upper()} file is written as {self.fmt.upper()}, not {fmt}")
            blocks = []
            for item in self._items:
                if isinstance(item, str):
                    blocks.append(item)
                else:
                    c = self.cues[item]
                    blocks.append("\n".join(c.header + texts[item]))
            text = "\n\n".join(blocks) + "\n"
        return text.replace("\n", self.newline) if self.newline != "\n" else text


def _blocks(text: str) -> list[tuple[int, list[str]]]:
    """(first line number, lines) of each run of non-blank lines."""
    out, cur, start = [], [], 0
    for n, line in enumerate(text.split("\n"), 1):
        if line.strip():
            if not cur:
                start = n
            cur.append(line)
        elif cur:
            out.append((start, cur))
            cur = []
    if cur:
        out.append((start, cur))
    return out


def parse_srt(text: str, name: str) -> SubtitleDoc:
    """SRT text → ``SubtitleDoc``. A block is an index line, a timing line and its text lines (an
    empty cue has none); an index line followed by a timing line inside a block's text starts a
    new cue (a missing blank line). Raises SubtitleError naming the file, the cue and the line for
    a missing index or a bad timing line."""
    doc = SubtitleDoc(name, "srt", [])
    lines = text.split("\n")
    n, k = 0, 0
    while n < len(lines):
        if not lines[n].strip():
            n += 1
            continue
        k += 1
        where = f"{name}: cue {k} (line {n + 1})"
        index = lines[n].strip()
        if _SRT_TIMING.match(lines[n]):
            raise SubtitleError(f"{where}: missing cue index before the timing line {lines[n].strip()!r}")
        if not index.isdigit():
            raise SubtitleError(f"{where}: expected a cue index (a number), got {index!r}")
        if n + 1 >= len(lines) or not _SRT_TIMING.match(lines[n + 1]):
            got = lines[n + 1].strip() if n + 1 < len(lines) else "the end of the file"
            raise SubtitleError(f"{name}: cue {k} (index {index}, line {n + 2}): bad timestamp line {got!r} "
                                f"(expected HH:MM:SS,mmm --> HH:MM:SS,mmm)")
        header = [lines[n], lines[n + 1]]
        n += 2
        body = []
        while n < len(lines) and lines[n].strip():
            if lines[n].strip().isdigit() and n + 1 < len(lines) and _SRT_TIMING.match(lines[n + 1]):
                break                              # the next cue, without a blank line before it
            body.append(lines[n])
            n += 1
        doc._items.append(len(doc.cues))
        doc.cues.append(Cue(body, where, header, *_span(header[1])))
    return doc


def parse_vtt(text: str, name: str) -> SubtitleDoc:
    """WebVTT text → ``SubtitleDoc``: the ``WEBVTT`` header block, NOTE / STYLE / REGION blocks
    kept verbatim; a cue is an optional identifier line, a timing line (``-->``, cue settings
    kept) and its text lines. Raises SubtitleError for a missing ``WEBVTT`` header or a block that
    is neither a cue nor a known block (a bad timing line), naming the file, cue and line."""
    doc = SubtitleDoc(name, "vtt", [])
    blocks = _blocks(text)
    if not blocks or not blocks[0][1][0].startswith("WEBVTT"):
        raise SubtitleError(f"{name}:1: not a WebVTT file (the first line must start with WEBVTT)")
    doc._items.append("\n".join(blocks[0][1]))
    k = 0
    for start, lines in blocks[1:]:
        if lines[0].startswith(("NOTE", "STYLE", "REGION")) and "-->" not in lines[0]:
            doc._items.append("\n".join(lines))
            continue
        k += 1
        t = 0 if "-->" in lines[0] else 1
        where = f"{name}: cue {k} (line {start})"
        if t >= len(lines) or not _VTT_TIMING.match(lines[t]):
            got = lines[t].strip() if t < len(lines) else lines[0].strip()
            raise SubtitleError(f"{where}: bad timestamp line {got!r} (expected [HH:]MM:SS.mmm --> [HH:]MM:SS.mmm)")
        doc._items.append(len(doc.cues))
        doc.cues.append(Cue(lines[t + 1:], where, lines[:t + 1], *_span(lines[t])))
    return doc


_SSA_EVENT_FIELDS = {"ass": ("Layer", "Start", "End", "Style", "Name", "MarginL", "MarginR", "MarginV", "Effect",
                              "Text"),
                      "ssa": ("Marked", "Start", "End", "Style", "Name", "MarginL", "MarginR", "MarginV", "Effect",
                              "Text")}
_SSA_TIME = re.compile(r"-?\d{1,2}:\d{1,2}:\d{1,2}(?:[.,]\d{1,3})?")     # pysubs2's TIMESTAMP / TIMESTAMP_SHORT
_SSA_SECTION = re.compile(r"^.{,3}\[[^]]*[a-z][^]]*]")                 # pysubs2's SECTION_HEADING


def check_ssa_events(text: str, name: str, fmt: str) -> list[int]:
    """The 1-based line numbers of ``text``'s Dialogue events, in order, after checking every
    Dialogue and Comment line as pysubs2 reads them (outside the Script Info, Aegisub, Fonts and
    Graphics sections; fields split at the first nine commas, in the standard order): pysubs2
    would give a line of fewer fields its defaults (an empty event from 0:00:00 to 0:00:10) and
    a Layer or margin that is not a number 0. Raises SubtitleError naming the file, the event and
    the line for fewer fields, a Start or End that is not a time, or a Layer / margin that is
    not a number."""
    fields = _SSA_EVENT_FIELDS[fmt]
    numbers = [f for f in fields if f in ("Layer", "MarginL", "MarginR", "MarginV")]
    skipped, events, k = False, [], 0
    for n, raw in enumerate(text.split("\n"), 1):
        line = raw.strip()
        if _SSA_SECTION.match(line):
            skipped = any(x in line for x in ("Info", "Aegisub", "Fonts", "Graphics"))
            continue
        if skipped or not line.startswith(("Dialogue:", "Comment:")):
            continue
        dialogue = line.startswith("Dialogue:")
        if dialogue:
            k += 1
        where = f"{name}: event {k} (line {n})" if dialogue else f"{name}: line {n}"
        values = dict(zip(fields, line.split(":", 1)[1].strip().split(",", len(fields) - 1)))
        if len(values) < len(fields):
            raise SubtitleError(f"{where}: {len(values)} field(s), expected {len(fields)} ({', '.join(fields)}): "
                                f"{line!r}")
        for f in ("Start", "End"):
            if not _SSA_TIME.fullmatch(values[f].strip()):
                raise SubtitleError(f"{where}: bad {f} time {values[f].strip()!r} (expected H:MM:SS.cc): {line!r}")
        for f in numbers:
            if not re.fullmatch(r"\s*-?\d+\s*", values[f]):
                raise SubtitleError(f"{where}: bad {f} {values[f]!r} (a number): {line!r}")
        if dialogue:
            events.append(n)
    return events


def parse_ssa(text: str, name: str, fmt: str) -> SubtitleDoc:
    """ASS/SSA text → ``SubtitleDoc`` through pysubs2 (its Dialogue events are the cues; Comment
    events are kept untranslated). Raises SubtitleError naming the file, the event and the line
    for an event line pysubs2 would fill with invented values (``check_ssa_events``), naming
    the file for other text pysubs2 cannot read."""
    import pysubs2

    lines = check_ssa_events(text, name, fmt)
    try:
        ssa = pysubs2.SSAFile.from_string(text, format_=fmt)
    except Exception as e:                       # pysubs2 raises several kinds for malformed files
        raise SubtitleError(f"{name}: not a readable {fmt.upper()} file: {e}") from None
    doc = SubtitleDoc(name, fmt, [], _ssa=ssa)
    events = [e for e in ssa.events if not e.is_comment]
    if len(events) != len(lines):                # (pysubs2 reading events another way than checked)
        raise SubtitleError(f"{name}: pysubs2 read {len(events)} Dialogue events, the file has {len(lines)} lines "
                            f"starting with 'Dialogue:'")
    for k, (ev, n) in enumerate(zip(events, lines)):
        doc._events.append(ev)
        doc.cues.append(Cue(ev.text.split("\\N"), f"{name}: event {k + 1} (line {n})", start=ev.start, end=ev.end))
    return doc


def parse(text: str, name: str, fmt: str) -> SubtitleDoc:
    """Subtitle text of format ``fmt`` (srt | vtt | ass | ssa) → ``SubtitleDoc``. ``\\r\\n``
    and a lone ``\\r`` (classic Mac files) end lines as ``\\n`` does (Python's universal newlines,
    as pysubs2 reads files); the output keeps the input's line end. A file with no text (empty,
    a byte-order mark, blank lines) is an empty document, rendered as an empty file (logged):
    as an empty text file gives an empty translation."""
    newline = "\r\n" if "\r\n" in text else "\r" if "\r" in text and "\n" not in text else "\n"
    text = text.replace("\r\n", "\n").replace("\r", "\n").lstrip("\ufeff")
    if fmt not in ("srt", "vtt", "ass", "ssa"):
        raise ValueError(f"{name}: unknown subtitle format {fmt!r} (one of {', '.join(sorted(set(FORMATS.values())))})")
    if not text.strip():
        log.info("%s: empty input: the output is empty", name)
        return SubtitleDoc(name, fmt, [], empty=True)
    if fmt == "srt":
        doc = parse_srt(text, name)
    elif fmt == "vtt":
        doc = parse_vtt(text, name)
    else:
        doc = parse_ssa(text, name, fmt)
    doc.newline = newline
    return doc


def read_subtitles(path: str | Path, encoding: str = ENCODINGS_AUTO) -> SubtitleDoc:
    """A subtitle file, decoded (``data.encoding.read_text``) and parsed by its suffix. Raises
    OSError, EncodingError, SubtitleError."""
    path = Path(path)
    text, enc = read_text(path, encoding)
    doc = parse(text, str(path), FORMATS[path.suffix.lower()])
    doc.encoding = enc
    return doc
