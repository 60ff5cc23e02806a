"""How a translated cue is laid out on screen, and how fast it reads (``subtitles.py``).

Line breaking (``break_lines``), as subtitle style guides ask (Netflix's English guide: at most
42 characters a line, at most two lines, a two-line cue broken where the lines are balanced and
at a natural point — after punctuation, before a conjunction or preposition, never between an
article and its noun): a text of at most ``width`` characters stays one line; a longer one is
broken into the fewest lines of at most ``width`` characters — two whenever it fits in two —
choosing among the breaks at spaces the one of least cost: the lines' imbalance (in characters)
minus a bonus for a break after a sentence end (12) or after a comma, semicolon, colon or dash
(6), or before a conjunction or preposition (2), plus a penalty for a break after an article,
possessive or preposition (6) and for a one-word line (40: a one-word orphan is left only when no
other break fits). A text with more than two lines' worth is broken the same way into more
lines (``LayoutReport`` counts those cues); a word longer than ``width`` is a line of its own,
over-long (counted too): text is never dropped. A text without spaces (Chinese, Japanese output)
may break between any two characters, not before closing punctuation.

Reading speed (``chars_per_second``): the cue's characters — its text lines without markup
(``{…}``, ``<…>``), spaces and punctuation counted, line breaks not — over its duration in
seconds, as Subtitle Edit and Aegisub count them (their default settings); a cue without
duration has none (None).
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

MAX_LINE_LENGTH = 42     # characters a line (translate --max-line-length; Netflix's English limit)
MAX_CPS = 20.0           # characters per second above which a cue is reported (translate --max-cps)
MAX_LINES = 2            # lines a cue should have; more are reported

SENTENCE_BONUS = 12
CLAUSE_BONUS = 6
BEFORE_WORD_BONUS = 2
AFTER_WORD_PENALTY = 6
ORPHAN_PENALTY = 40

_SENTENCE_END = re.compile(r"[.?!…。？！][\"'”’)\]]*$")
_CLAUSE_END = re.compile(r"[,;:，；：—–-][\"'”’)\]]*$")
_BREAK_BEFORE = frozenset("and but or nor so because if when while until unless that which who to of in on at "
                          "for with from about as than".split())
_NO_BREAK_AFTER = frozenset("a an the my your his her its our their this these those to of in on at for with "
                            "from by I".split())
_NO_LINE_START = tuple("，。！？、；：,.!?;:)]）】」』”’…")
_MARKUP = re.compile(r"\{[^{}]*\}|</?[A-Za-z][^<>]*>|<\d[\d:.]*>")


def _break_cost(left: str, right: str) -> int:
    """Cost of a line break between the words ``left`` and ``right`` (module doc)."""
    cost = 0
    if _SENTENCE_END.search(left):
        cost -= SENTENCE_BONUS
    elif _CLAUSE_END.search(left) or right in ("-", "—", "–"):
        cost -= CLAUSE_BONUS
    if right.lower().strip("\"'“‘(") in _BREAK_BEFORE:
        cost -= BEFORE_WORD_BONUS
    word = left.strip("\"'“‘(")
    if word in _NO_BREAK_AFTER or word.lower() in _NO_BREAK_AFTER:
        cost += AFTER_WORD_PENALTY
    return cost


def _tokens(text: str) -> tuple[list[str], str]:
    """The pieces a text breaks between and the separator that joins them: words and " ", or
    (no spaces, CJK output) characters — a closing punctuation mark kept with the one before."""
    words = text.split()
    if len(words) > 1 or len(text) <= 1:
        return words, " "
    chars: list[str] = []
    for ch in text:
        if chars and ch.startswith(_NO_LINE_START):
            chars[-1] += ch
        else:
            chars.append(ch)
    return chars, ""


def _fewest_lines(lengths: list[int], sep: int, width: int) -> int:
    """The fewest lines the pieces fit in (greedy filling is optimal; an over-long piece is a line)."""
    lines, cur = 1, -1
    for n in lengths:
        if cur >= 0 and cur + sep + n > width:
            lines, cur = lines + 1, n
        else:
            cur = n if cur < 0 else cur + sep + n
    return lines


def break_lines(text: str, width: int = MAX_LINE_LENGTH) -> list[str]:
    """``text`` in lines of at most ``width`` characters (module doc): one line when it fits,
    else the fewest lines, balanced and broken at natural points; a piece longer than ``width``
    is a line of its own. ``width`` ≥ 1, in characters (code points)."""
    text = " ".join(text.split()) if text.split() else ""
    if len(text) <= width:
        return [text]
    pieces, sep = _tokens(text)
    lengths = [len(p) for p in pieces]
    k = _fewest_lines(lengths, len(sep), width)
    n = len(pieces)
    if k >= n:
        return pieces
    start = [0]
    for x in lengths:
        start.append(start[-1] + x + len(sep))

    def span(i: int, j: int) -> int:                 # characters of pieces i..j-1 on one line
        return start[j] - start[i] - len(sep)

    goal = len(text) / k
    inf = float("inf")
    # best[m][j]: (cost, break positions) of pieces[:j] in m lines, each within width (or one piece)
    best: list[dict[int, tuple[float, tuple[int, ...]]]] = [{0: (0.0, ())}] + [{} for _ in range(k)]
    for m in range(1, k + 1):
        for j in range(1, n + 1):
            if m == k and j != n:
                continue
            options = []
            for i, (cost, cuts) in best[m - 1].items():
                if i >= j or (span(i, j) > width and j - i > 1):
                    continue
                c = cost + abs(span(i, j) - goal) + (ORPHAN_PENALTY if j - i == 1 and n > k else 0)
                if i > 0:
                    c += _break_cost(pieces[i - 1], pieces[i])
                options.append((c, -i, cuts + (i,) if i > 0 else cuts))
            if options:
                c, _, cuts = min(options)               # ties: the longer line last (a bottom-heavy pair)
                best[m][j] = (c, cuts)
    cost, cuts = best[k].get(n, (inf, ()))
    bounds = [0, *cuts, n]
    return [sep.join(pieces[a:b]) for a, b in zip(bounds, bounds[1:])]


def visible_length(line: str) -> int:
    """Characters of a subtitle line as shown: markup (``{…}``, ``<…>``) not counted, ASS ``\\h`` one."""
    return len(_MARKUP.sub("", line).replace("\\h", " "))


def chars_per_second(lines: list[str], start_ms: int, end_ms: int) -> float | None:
    """Reading speed of a cue (module doc): visible characters of ``lines`` (line breaks not
    counted) per second of its duration; None when it has none (end ≤ start)."""
    if end_ms <= start_ms:
        return None
    return sum(visible_length(x) for x in lines) * 1000.0 / (end_ms - start_ms)


@dataclass
class LayoutReport:
    """What the layout of one file could not do, and how fast its cues read: ``long`` (cue
    location, its lines) of cues laid out in more than ``MAX_LINES`` lines or with a line over
    the width; ``cps`` (cue location, characters per second) of every timed cue with text."""

    long: list[tuple[str, int]] = field(default_factory=list)
    cps: list[tuple[str, float]] = field(default_factory=list)

    def fast(self, max_cps: float) -> list[tuple[str, float]]:
        """The cues over ``max_cps``, fastest first (none when ``max_cps`` is 0)."""
        return sorted((x for x in self.cps if max_cps and x[1] > max_cps), key=lambda x: -x[1])

    def log(self, log, name: str, width: int, max_cps: float, show: int = 5) -> None:
        """Warnings: cues that do not fit ``MAX_LINES`` lines of ``width``, and cues over ``max_cps``
        (the ``show`` fastest named); an info line with the cue count and the fastest reading."""
        if self.long:
            where = ", ".join(w for w, _ in self.long[:show]) + (", …" if len(self.long) > show else "")
            log.warning("%s: %d cue(s) do not fit %d lines of --max-line-length %d (laid out in more lines, or a "
                        "word longer than a line; no text dropped): %s", name, len(self.long), MAX_LINES, width,
                        where)
        fast = self.fast(max_cps)
        if fast:
            where = ", ".join(f"{w} {c:.1f}" for w, c in fast[:show]) + (", …" if len(fast) > show else "")
            log.warning("%s: %d of %d cues over --max-cps %g characters per second (characters without line "
                        "breaks and markup / duration); fastest: %s", name, len(fast), len(self.cps), max_cps, where)
