"""Readers for NIST/WMT-style SGML files (``<refset>``/``<srcset>``/``<tstset>``).

TVsub dev/test give their document boundaries and references this way: one ``<DOC docid=…
sysid=…>`` block per document and system, ``<seg id=N>`` lines in order. A reference set with
several systems (``reference_1``…``reference_3``) holds several references for the same
segments. ``write_sgml`` writes the same format (a ``<tstset>`` of one system), e.g. the
translations of an SGML input with its documents.
"""
from __future__ import annotations

import html
import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

_DOC_RE = re.compile(r"<doc\s+([^>]*)>", re.IGNORECASE)
_ATTR_RE = re.compile(r"(\w+)\s*=\s*\"?([^\"\s>]+)\"?")


class SGMLError(ValueError):
    """Malformed SGML; the message names the file and line."""


@dataclass(frozen=True)
class SGMLSet:
    """One system's segments, in file order.

    docs: list of (docid, n_segments) in order; segments: the segment texts, unescaped
    (``&apos;`` → ``'``) unless read with ``unescape=False``.
    """

    sysid: str
    docs: list[tuple[str, int]]
    segments: list[str]

    def doc_ids(self) -> list[str]:
        """The document id of every segment, line-aligned with ``segments``."""
        return [d for d, n in self.docs for _ in range(n)]


_TAG_RE = re.compile(r"<(/?)(doc|seg)\b([^>]*)>", re.IGNORECASE)


class _Reader:
    """Scans ``<DOC …>``/``</DOC>``/``<seg …>``/``</seg>`` tags line by line, checking nesting."""

    def __init__(self, path: Path, unescape: bool):
        self.path, self.unescape = path, unescape
        self.systems: dict[str, tuple[list[tuple[str, int]], list[str]]] = {}
        self.doc: tuple[list[tuple[str, int]], list[str]] | None = None
        self.doc_line = 0                         # line of the open <DOC>, 0 = none open
        self.seg_line = 0                         # line of the open <seg>, 0 = none open
        self.seg_text: list[str] = []

    def error(self, lineno: int, msg: str) -> SGMLError:
        return SGMLError(f"{self.path}:{lineno}: {msg}")

    def line(self, lineno: int, line: str) -> None:
        pos = 0
        for m in _TAG_RE.finditer(line):
            if self.seg_line:
                self.seg_text.append(line[pos:m.start()])
            self.tag(lineno, m.group(1) == "/", m.group(2).lower(), m.group(3))
            pos = m.end()
        if self.seg_line:
            self.seg_text.append(line[pos:])

    def tag(self, lineno: int, closing: bool, name: str, attrs: str) -> None:
        if self.seg_line and not (closing and name == "seg"):
            raise self.error(lineno, f"<{'/' if closing else ''}{name}> inside the <seg> opened at line "
                                     f"{self.seg_line} (missing </seg>)")
        if name == "doc" and not closing:
            if self.doc_line:
                raise self.error(lineno, f"<DOC> inside the <DOC> opened at line {self.doc_line} (missing </DOC>)")
            found = {k.lower(): v for k, v in _ATTR_RE.findall(attrs)}
            if "docid" not in found:
                raise self.error(lineno, "<DOC> without docid")
            self.doc = self.systems.setdefault(found.get("sysid", ""), ([], []))
            self.doc[0].append((found["docid"], 0))
            self.doc_line = lineno
        elif name == "doc":
            if not self.doc_line:
                raise self.error(lineno, "</DOC> without an open <DOC>")
            self.doc_line = 0
        elif not closing:
            if not self.doc_line:
                raise self.error(lineno, "<seg> outside a <DOC> block")
            self.seg_line, self.seg_text = lineno, []
        else:
            if not self.seg_line:
                raise self.error(lineno, "</seg> without an open <seg>")
            self.close_seg()

    def close_seg(self) -> None:
        docid, n = self.doc[0][-1]
        self.doc[0][-1] = (docid, n + 1)
        text = "".join(self.seg_text).replace("\r", "").replace("\n", " ").strip()
        self.doc[1].append(html.unescape(text) if self.unescape else text)
        self.seg_line = 0

    def finish(self, lineno: int) -> None:
        if self.seg_line:
            raise self.error(self.seg_line, "<seg> never closed (missing </seg> before the end of the file)")
        if self.doc_line:
            raise self.error(self.doc_line, "<DOC> never closed (missing </DOC> before the end of the file)")
        if not self.systems:
            raise SGMLError(f"{self.path}: no <DOC> blocks found")


def read_sgml(path: str | Path, unescape: bool = True) -> list[SGMLSet]:
    """Read every system of an SGML file, in order of first appearance.

    Raises SGMLError (a ValueError) naming the file, the line and the problem: a ``<seg>``
    outside a ``<DOC>``, a ``<seg>`` without ``</seg>`` (another tag or the end of the file
    comes first), a ``<DOC>`` without ``</DOC>``, a closing tag with nothing open, a ``<DOC>``
    without docid, no ``<DOC>`` at all, or systems of a multi-reference set that disagree on
    their documents. A segment may span lines (each line break becomes a space).
    """
    path = Path(path)
    with open(path, encoding="utf-8-sig") as f:          # a UTF-8 byte order mark is not text
        return parse_sgml(f, path, unescape)


def parse_sgml(lines: Iterable[str], name: str | Path = "<sgml>", unescape: bool = True) -> list[SGMLSet]:
    """``read_sgml`` of text lines (e.g. stdin's); ``name`` labels the errors."""
    path = Path(name)
    reader = _Reader(path, unescape)
    lineno = 0
    for lineno, line in enumerate(lines, 1):
        if lineno == 1:
            line = line.lstrip("\ufeff")
        reader.line(lineno, line)
    reader.finish(lineno)
    sets = [SGMLSet(sysid, docs, segs) for sysid, (docs, segs) in reader.systems.items()]
    first = sets[0]
    for s in sets[1:]:
        if s.docs != first.docs:
            raise SGMLError(
                f"{path}: system {s.sysid!r} has documents {s.docs} but {first.sysid!r} has {first.docs}"
            )
    return sets


def read_doc_ids(path: str | Path) -> list[str]:
    """Document id of every segment (first system), e.g. to restore dev/test boundaries."""
    return read_sgml(path)[0].doc_ids()


_SET_RE = re.compile(r"<(refset|srcset|tstset)\b([^>]*)>", re.IGNORECASE)
_START_RE = re.compile(r"<(refset|srcset|tstset|doc)[\s>]", re.IGNORECASE)
SNIFF_BYTES = 4096


def looks_like_sgml(text: str) -> bool:
    """Whether ``text`` starts, after a byte order mark and whitespace, with a ``<refset``,
    ``<srcset``, ``<tstset`` or ``<DOC`` tag (any case): a NIST/WMT SGML file, whatever its name."""
    return bool(_START_RE.match(text.lstrip("\ufeff \t\r\n")))


def is_sgml_file(path: str | Path) -> bool:
    """``looks_like_sgml`` of the first bytes of the file ``path`` (False for ``-``, a directory
    or an unreadable file)."""
    if str(path) == "-" or not Path(path).is_file():
        return False
    try:
        with open(path, "rb") as f:
            head = f.read(SNIFF_BYTES)
    except OSError:
        return False
    return looks_like_sgml(head.decode("utf-8", errors="replace"))


def set_attributes(path: str | Path) -> dict[str, str]:
    """The attributes (lower-case names) of the first ``<refset>``/``<srcset>``/``<tstset>`` tag
    of an SGML file ({} when it has none), e.g. its ``setid`` and ``srclang``."""
    with open(path, encoding="utf-8-sig") as f:
        for line in f:
            m = _SET_RE.search(line)
            if m:
                return {k.lower(): v for k, v in _ATTR_RE.findall(m.group(2))}
    return {}


def _escape(text: str) -> str:
    return (text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
            .replace('"', "&quot;").replace("'", "&apos;"))


def format_sgml(docs: list[tuple[str, int]], segments: list[str], sysid: str = "doctrans", setid: str = "doctrans",
                srclang: str = "zh", trglang: str = "en") -> str:
    """A ``<tstset>`` of one system in the layout of the NIST/TVsub references: per document
    ``<DOC docid=… sysid=…>``, a ``<p>``, one ``<seg id=N> text</seg>`` line per segment
    (N from 1 in each document), ``&``, ``<``, ``>``, quotes escaped. ``docs``: (docid,
    n_segments) in order, as ``SGMLSet.docs``; ``read_sgml`` reads it back. Raises ValueError
    when the documents' segments do not add up to ``segments``."""
    if sum(n for _, n in docs) != len(segments):
        raise ValueError(f"the documents hold {sum(n for _, n in docs)} segments, {len(segments)} given")
    out = [f'<tstset setid="{_escape(setid)}" srclang="{_escape(srclang)}" trglang="{_escape(trglang)}">']
    it = iter(segments)
    for docid, n in docs:
        out += [f'<DOC docid="{_escape(docid)}" sysid="{_escape(sysid)}">', "<p>"]
        out += [f"<seg id={k}> {_escape(next(it))}</seg>" for k in range(1, n + 1)]
        out += ["</p>", "</DOC>"]
    out.append("</tstset>")
    return "\n".join(out) + "\n"
