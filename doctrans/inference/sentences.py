"""Sentences inside a line: where a source line's sentences end (issue 75).

The models were trained on TV-subtitle lines, one or two short utterances each; a line of a
document file may hold a paragraph. ``Translator`` (``translator.py``) therefore translates each
line's sentences as consecutive sentences of its document (a context model reads the previous
sentence, inside the line too) and joins their translations back onto the line
(``long_lines.SplitLines``). This module says where the sentences end, on the BPE units the model
reads (so raw, tokenized and BPE input are cut alike):

* units are grouped into words (a unit ending in ``@@`` continues into the next);
* a sentence ends after a run of sentence-final words — ``。 ！ ？ ； ｡`` and, after NFKC
  (``data/text.normalize_zh``), ``! ? ;``, an ellipsis (``…``, ``……``, ``...``, ``......``: any
  word made only of ``…`` and of two or more ``.``), and ``.`` unless it sits between two Latin
  words or numbers (``Mr . Smith``, ``www . x . com``) — together with the closing quotes and
  brackets right after the run (``” ’ 」 』 ) ] 】 》``, and an ASCII ``"`` / ``'`` that closes an
  open one: an odd number of them before it in the line);
* a piece without a letter, digit or CJK character (punctuation only, e.g. a line opening with
  ``!!``) is kept with the next piece (the last one: with the one before).

A comma or a space never ends a sentence here: TVsub's lines join two utterances with a space
(dropped by the tokenizer) or nothing, and the models translate such lines as they were
trained to. What the rules cannot see — sentences running on without punctuation — stays one
piece (an over-long one is cut by ``long_lines.chunk``). pysbd's Chinese rules were measured
and not used: they cut before closing quotes (``“你好。`` | ``”然后…``) and inside ``！！`` /
``？！`` runs (docs/journal/2026-12-07-paragraphs.md).
"""
from __future__ import annotations

import re

from doctrans.data.text import BPE_SEPARATOR

FINAL = frozenset({"。", "！", "？", "；", "｡", "!", "?", ";"})
CLOSING = frozenset({"”", "’", "」", "』", ")", "]", "】", "》", "）", "〉", "｣"})
QUOTES = frozenset({'"'})
_ELLIPSIS = re.compile(r"^(?:…+|\.{2,}|[….]*…[….]*)$")
_LATIN = re.compile(r"^[0-9A-Za-z]")
_CONTENT = re.compile(r"[0-9A-Za-z\u00c0-\u024f\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]")


def words(units: list[str]) -> list[tuple[int, int]]:
    """BPE units → (start, end) unit spans of their words (a unit ending in ``@@`` continues
    the word; a trailing ``x@@`` ends the last one)."""
    spans, start = [], 0
    for k, u in enumerate(units):
        if not u.endswith(BPE_SEPARATOR):
            spans.append((start, k + 1))
            start = k + 1
    if start < len(units):
        spans.append((start, len(units)))
    return spans


def _word(units: list[str], span: tuple[int, int]) -> str:
    return "".join(u.removesuffix(BPE_SEPARATOR) for u in units[span[0]:span[1]])


def is_final(ws: list[str], k: int) -> bool:
    """Whether word ``k`` of ``ws`` is sentence-final punctuation (module doc)."""
    w = ws[k]
    if w in FINAL or _ELLIPSIS.match(w):
        return True
    if w != ".":
        return False
    latin = 0 < k < len(ws) - 1 and _LATIN.match(ws[k - 1]) and _LATIN.match(ws[k + 1])
    return not latin


def sentence_ends(ws: list[str]) -> list[int]:
    """Word indices after which a sentence ends (the last word's index excluded: the line's end
    needs no cut), for a line's words ``ws`` (module doc)."""
    ends, open_quotes = [], {q: 0 for q in QUOTES}
    k = 0
    while k < len(ws):
        w = ws[k]
        if w in QUOTES:
            open_quotes[w] ^= 1
        if not is_final(ws, k):
            k += 1
            continue
        while k + 1 < len(ws) and (is_final(ws, k + 1) or ws[k + 1] in CLOSING
                                   or (ws[k + 1] in QUOTES and open_quotes[ws[k + 1]])):
            k += 1
            if ws[k] in QUOTES:
                open_quotes[ws[k]] ^= 1
        if k < len(ws) - 1:
            ends.append(k)
        k += 1
    return ends


def split_sentences(units: list[str], boundaries=None) -> list[list[str]]:
    """A line's BPE units → its sentences (lists of units, in order, together the line; module
    doc); ``[units]`` for a line of one sentence, ``[]`` for no units. ``boundaries``: a
    ``boundaries.BoundaryModel`` that also cuts each sentence the rules found where it sees a
    boundary (sentences running on without punctuation)."""
    if not units:
        return []
    spans = words(units)
    ws = [_word(units, s) for s in spans]
    ends = [k + 1 for k in sentence_ends(ws)]
    if boundaries is not None:
        bounds = [0] + ends + [len(ws)]
        ends = sorted(set(ends) | {a + k for a, b in zip(bounds, bounds[1:]) for k in boundaries.cuts(ws[a:b])})
    cuts = [spans[k - 1][1] for k in ends]
    pieces = [units[a:b] for a, b in zip([0] + cuts, cuts + [len(units)])]
    out: list[list[str]] = []
    carry: list[str] = []
    for p in pieces:
        if not _CONTENT.search("".join(p)):
            carry += p                              # punctuation only: kept with the next piece
            continue
        out.append(carry + p)
        carry = []
    if carry:
        if out:
            out[-1] += carry
        else:
            out.append(carry)
    return out
