"""Over-long input lines: split into pieces the model can read, translated, joined back.

A Transformer reads at most ``max_positions`` source tokens (``</s>`` included); a longer line
used to stop ``doctrans translate`` for the whole file. Here such a line is split, on its BPE
units, into its sentences (``sentences.py``: after sentence-final punctuation, ``。！？；…`` and
their NFKC forms ``! ? ; ...``, with the closing quotes after it), each sentence becoming one
piece (the model was trained on sentences, not on paragraphs); a sentence still too long is cut into chunks of the training length
(``data.max_len`` of the checkpoint's config) at word boundaries (a BPE unit not ending in
``@@``), or anywhere when one word alone is too long. The pieces are translated with
all other lines and their translations joined with a space onto the original line. With
``segment`` (``translate --segment``, on by default) every line of several sentences is split
so, whatever its length; without it lines within the limit are not touched.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass

from doctrans.data.text import BPE_SEPARATOR
from doctrans.inference.sentences import split_sentences

log = logging.getLogger(__name__)


def chunk(units: list[str], limit: int) -> list[list[str]]:
    """Cut ``units`` into pieces of at most ``limit`` units, each cut after the last word end
    (a unit not ending in ``@@``) that fits, or exactly at ``limit`` when a word is longer.
    Raises ValueError for ``limit`` < 1."""
    if limit < 1:
        raise ValueError(f"piece limit must be ≥ 1, got {limit}")
    pieces, start = [], 0
    while len(units) - start > limit:
        end = start + limit
        cut = next((k for k in range(end, start, -1) if not units[k - 1].endswith(BPE_SEPARATOR)), end)
        pieces.append(units[start:cut])
        start = cut
    pieces.append(units[start:])
    return pieces


def split_line(units: list[str], limit: int, chunk_len: int = 0, segment: bool = False,
               boundaries=None) -> list[list[str]]:
    """Pieces of at most ``limit`` units: its sentences (``sentences.split_sentences``) with
    ``segment`` (``boundaries``: a ``BoundaryModel`` cutting them further, ``split_sentences``),
    else ``[units]`` when it fits and its sentences when not; a sentence still over
    ``limit`` is ``chunk``-ed into pieces of ``chunk_len`` units (0 or more than ``limit``:
    ``limit``) — e.g. the training length, which the model translates better (and much faster)
    than pieces as long as it can read."""
    if len(units) <= limit and not segment:
        return [units]
    size = chunk_len if 0 < chunk_len <= limit else limit
    sentences = split_sentences(units, boundaries if segment else None) or [units]
    return [p for s in sentences for p in (chunk(s, size) if len(s) > limit else [s])]


@dataclass
class SplitLines:
    """Pieces (BPE strings) of several lines and, per piece, the index of its line."""

    pieces: list[str]
    owner: list[int]

    def join(self, hyps: list[str], n_lines: int) -> list[str]:
        """Translations of ``pieces`` → one string per line (pieces joined by a space)."""
        out: list[list[str]] = [[] for _ in range(n_lines)]
        for i, h in zip(self.owner, hyps):
            if h:
                out[i].append(h)
        return [" ".join(x) for x in out]


def split_long_lines(bpe: list[str], limit: int, name: str = "<input>",
                     line_numbers: list[int] | None = None, chunk_len: int = 0,
                     locations: list[str] | None = None, segment: bool = False, boundaries=None) -> SplitLines:
    """Split every BPE line of more than ``limit`` units — with ``segment`` every line of
    several sentences — into pieces (``split_line`` with ``chunk_len``, ``boundaries``), logging a warning for
    a line over ``limit``, naming ``name`` and the 1-based line (``line_numbers[k]`` for
    ``bpe[k]``, default k + 1), or ``locations[k]`` (``file:line``) when given. ``limit`` is
    the model's source positions minus one for ``</s>``. Raises ValueError for ``limit`` < 1."""
    pieces, owner = [], []
    for k, line in enumerate(bpe):
        units = line.split()
        parts = split_line(units, limit, chunk_len, segment, boundaries)
        if len(units) > limit:
            no = line_numbers[k] if line_numbers is not None else k + 1
            at = locations[k] if locations is not None else f"{name}:{no}"
            log.warning("%s: %d source tokens exceed the model's limit of %d: split into %d pieces at "
                        "sentence punctuation (or into chunks), translated one by one and joined",
                        at, len(units), limit, len(parts))
        for p in parts:
            pieces.append(" ".join(p))
            owner.append(k)
    return SplitLines(pieces, owner)
