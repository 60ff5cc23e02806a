"""Readers for NIST/WMT-style SGML files (``<refset>``/``<srcset>``/``<tstset>``).

TVsub dev/test give their document boundaries and references this way: one ``<DOC docid=…
sysid=…>`` block per document and system, ``<seg id=N>`` lines in order. A reference set with
several systems (``reference_1``…``reference_3``) holds several references for the same
segments.
"""
from __future__ import annotations

import html
import re
from dataclasses import dataclass
from pathlib import Path

_DOC_RE = re.compile(r"<doc\s+([^>]*)>", re.IGNORECASE)
_ATTR_RE = re.compile(r"(\w+)\s*=\s*\"?([^\"\s>]+)\"?")
_SEG_RE = re.compile(r"<seg[^>]*>(.*?)</seg>", re.IGNORECASE)


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


def read_sgml(path: str | Path, unescape: bool = True) -> list[SGMLSet]:
    """Read every system of an SGML file, in order of first appearance.

    Raises SGMLError (naming file and line) on a ``<seg>`` outside a ``<DOC>``, or when the
    systems of a multi-reference set disagree on their documents.
    """
    path = Path(path)
    systems: dict[str, tuple[list[tuple[str, int]], list[str]]] = {}
    cur: tuple[list[tuple[str, int]], list[str]] | None = None
    with open(path, encoding="utf-8") as f:
        for lineno, line in enumerate(f, 1):
            m = _DOC_RE.search(line)
            if m:
                attrs = {k.lower(): v for k, v in _ATTR_RE.findall(m.group(1))}
                if "docid" not in attrs:
                    raise SGMLError(f"{path}:{lineno}: <DOC> without docid")
                sysid = attrs.get("sysid", "")
                cur = systems.setdefault(sysid, ([], []))
                cur[0].append((attrs["docid"], 0))
                continue
            for seg in _SEG_RE.findall(line):
                if cur is None:
                    raise SGMLError(f"{path}:{lineno}: <seg> outside a <DOC> block")
                docid, n = cur[0][-1]
                cur[0][-1] = (docid, n + 1)
                text = seg.strip()
                cur[1].append(html.unescape(text) if unescape else text)
    if not systems:
        raise SGMLError(f"{path}: no <DOC> blocks found")
    sets = [SGMLSet(sysid, docs, segs) for sysid, (docs, segs) in systems.items()]
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
