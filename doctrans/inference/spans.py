"""What the model must not translate, and lines it must not see (``Translator``'s transform
around the model: source line → masked line and its spans → translate → restore; how a
glossary's lines are translated: ``Translator.translate_detailed``).

**Which lines are translated** (``is_chinese``): a line is Chinese when it has a Han character
(CJK unified ideographs, extension A, compatibility) and no kana or Hangul — a line with kana is
Japanese even when most of it is Han (漢字), one with Hangul Korean. Every other line (English,
Japanese, digits, punctuation, markup) is not sent to the model: its output is the line itself,
unchanged (``translate_all``: sent to the model as it is, as before). A passed-through line is
not a context model's context either: the next Chinese line reads the previous Chinese one.

**Spans kept through translation** (``protect``; a Chinese line only). Each span becomes a
*placeholder*, a token the shipped models copy from source to output, and the output's
placeholder is replaced by the span (or, for a glossary term, by its target), simultaneously, so
one span's text is never read as another's placeholder:

* a glossary term (``Glossary``; a given source → target list, longest match first);
* a URL (``http(s)://…``, ``www.…``) or an e-mail address;
* a run of Latin-script words (letters with or without accents, digits, inner ``' - . &``;
  words joined by spaces, ``, `` or ``. ``: ``Nancy Sinatra``, ``Hello, how are you``), with
  the markup tags touching it (``<b>Tony</b>``);
* a number of two or more digits or with inner separators (``23``, ``10:30``, ``25,000``,
  ``555-3147``); a lone digit is left to the model, which writes it as a word (``2个`` → ``two``,
  as English writes numbers under ten);
* markup tags (``{\\…}`` ASS overrides, HTML/VTT tags): at the line's start or end they are set
  aside and put back around the translation; inside the text they are taken out and put back
  at the same relative position of the translation, at a word boundary (no placeholder: no token
  the models copy fits inside a sentence, see below).

Placeholders, as measured (docs/journal/2026-12-07-protected-spans.md): for text spans the
English names the models' source vocabulary holds as single tokens, ``tony phil john garcia
reid``, one per span of a line (a name whose Chinese spelling — 东尼, 菲尔… — is in the line is
skipped, its English would be ambiguous); for numbers ``301`` … ``309``. On 38 constructed lines
holding 42 Latin names the three shipped models copied 42/42 name placeholders (unprotected they
kept 6, 4 and 3 of the names); ``#``, ``@``, ``*`` were copied 0–4, 0 and 18–26 times of 42,
one ``tony`` for every span 34 (two identical placeholders in a line cannot be told apart), ``x``
``y`` ``z`` 40–42 but as common nouns (*the X*). The numbers 301–310 were copied in 20/20 number
slots by each model; names in a number slot break the sentence (*I got Tony an apple*). A line
with more text spans than names (5) keeps the rest unprotected, with more numbers than 9 the same.
A placeholder missing from the output (the model dropped it) gets its span put back at its
relative position, and is counted.

The transform is lossless for the line's non-translated content: every span and tag of a
Chinese line is in its output (restored, or put at its position when its placeholder was lost).
"""
from __future__ import annotations

import functools
import os
import re
import unicodedata
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from doctrans.inference.config import IOOptions
from doctrans.utils.settings import default_of


# --- scripts -------------------------------------------------------------------------------------

HAN = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\U00020000-\U0002fa1f]")
# kana (not ・ U+30FB and ー U+30FC, which Chinese text uses too), half-width katakana; Hangul
_KANA = re.compile(r"[\u3041-\u3096\u309d-\u309f\u30a1-\u30fa\u30fd-\u30ff\u31f0-\u31ff\uff66-\uff9d]")
_HANGUL = re.compile(r"[\u1100-\u11ff\u3130-\u318f\uac00-\ud7af]")


def script_of(line: str) -> str:
    """``zh`` (a Han character, no kana, no Hangul), ``ja`` (kana), ``ko`` (Hangul) or ``other``
    (no Han, kana or Hangul: Latin text, digits, punctuation, markup, blank)."""
    if _KANA.search(line):
        return "ja"
    if _HANGUL.search(line):
        return "ko"
    return "zh" if HAN.search(line) else "other"


def is_chinese(line: str) -> bool:
    """Whether ``line`` is Chinese: it has a Han character and no kana or Hangul (module doc)."""
    return script_of(line) == "zh"


# --- glossary ------------------------------------------------------------------------------------

class GlossaryError(ValueError):
    """A glossary file that cannot be read as ``source<TAB>target`` lines; the message names the
    file and the line."""


def _norm(s: str) -> str:
    """A term as the model's input normalisation sees it (``data.text.normalize_zh``: NFKC,
    whitespace runs → one space)."""
    return " ".join(unicodedata.normalize("NFKC", s).split())


@dataclass(frozen=True)
class Glossary:
    """Source term → target term, applied where the source term occurs in a Chinese line,
    longest match first (``finditer``); a term in Latin letters matches as a whole word and
    regardless of case. ``label``: where the terms came from (a file), for messages."""

    terms: Mapping[str, str]
    label: str = "<glossary>"
    _pattern: re.Pattern | None = field(default=None, init=False, repr=False, compare=False)
    _lower: dict = field(default_factory=dict, init=False, repr=False, compare=False)

    def __post_init__(self):
        if not self.terms:
            return
        alts = []
        for src in sorted(self.terms, key=lambda s: (-len(s), s)):      # longest first: leftmost-longest
            p = re.escape(src)
            if re.match(r"\w", src[0], re.ASCII):
                p = r"(?<![A-Za-z0-9])" + p
            if re.match(r"\w", src[-1], re.ASCII):
                p += r"(?![A-Za-z0-9])"
            alts.append(p)
        object.__setattr__(self, "_pattern", re.compile("|".join(alts), re.IGNORECASE))
        object.__setattr__(self, "_lower", {k.casefold(): v for k, v in self.terms.items()})

    @classmethod
    def from_pairs(cls, pairs: Iterable[tuple[str, str]], label: str = "<glossary>") -> "Glossary":
        """A glossary of (source, target) pairs. Raises GlossaryError for an empty term or a
        source given two different targets."""
        terms: dict[str, str] = {}
        for k, (src, tgt) in enumerate(pairs):
            src, tgt = _norm(src), " ".join(tgt.split())
            if not src or not tgt:
                raise GlossaryError(f"{label}: entry {k + 1}: an empty {'source' if not src else 'target'} term")
            if terms.get(src, tgt) != tgt:
                raise GlossaryError(f"{label}: entry {k + 1}: {src!r} is given two targets, {terms[src]!r} and {tgt!r}")
            terms[src] = tgt
        return cls(terms, label)

    @classmethod
    def load(cls, path: str | Path) -> "Glossary":
        """Read a glossary file: UTF-8 (a byte-order mark dropped), one ``source<TAB>target``
        term per line; blank lines and lines starting with ``#`` are skipped. Raises
        FileNotFoundError, GlossaryError naming the file and line (not UTF-8, not exactly one
        tab, an empty term, a source given two targets). Cached per process by path, size and
        modification time."""
        st = os.stat(path)
        return _load_glossary(str(path), st.st_mtime_ns, st.st_size)

    def __len__(self) -> int:
        return len(self.terms)

    def finditer(self, text: str) -> Iterable[tuple[int, int, str]]:
        """(start, end, target) of each term occurrence in ``text``, left to right, the longest
        term at each position."""
        if self._pattern is None:
            return
        for m in self._pattern.finditer(text):
            yield m.start(), m.end(), self._lower[m.group(0).casefold()]


@functools.lru_cache(maxsize=8)
def _load_glossary(path: str, mtime_ns: int, size: int) -> Glossary:
    raw = Path(path).read_bytes()
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        line = raw[:e.start].count(b"\n") + 1
        raise GlossaryError(f"{path}:{line}: not UTF-8 (byte {raw[e.start]:#04x})") from None
    terms: dict[str, tuple[str, int]] = {}
    for n, line in enumerate(text.removeprefix("\ufeff").splitlines(), 1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        parts = line.split("\t")
        if len(parts) != 2:
            raise GlossaryError(f"{path}:{n}: expected 'source<TAB>target', got {line!r}")
        src, tgt = _norm(parts[0]), " ".join(parts[1].split())
        if not src or not tgt:
            raise GlossaryError(f"{path}:{n}: an empty {'source' if not src else 'target'} term in {line!r}")
        if src in terms and terms[src][0] != tgt:
            raise GlossaryError(f"{path}:{n}: {src!r} → {tgt!r}, but line {terms[src][1]} gives {terms[src][0]!r}")
        terms.setdefault(src, (tgt, n))
    return Glossary({s: t for s, (t, _) in terms.items()}, path)


# --- spans ---------------------------------------------------------------------------------------

NAME_PLACEHOLDERS = ("tony", "phil", "john", "garcia", "reid")
NUMBER_PLACEHOLDERS = tuple(str(n) for n in range(301, 310))
# a name placeholder is not used in a line holding its Chinese spelling (the output's name would be ambiguous)
_SPELLED = {"tony": ("东尼", "托尼", "汤尼", "東尼"), "phil": ("菲尔", "菲利", "菲爾"), "john": ("约翰", "約翰"),
            "garcia": ("加西亚", "贾西亚", "嘉西亚", "加西亞"), "reid": ("瑞德", "里德", "芮德")}

_L = "A-Za-z\u00c0-\u00d6\u00d8-\u00f6\u00f8-\u024f\u1e00-\u1eff"
_TAG = r"(?:\{\\[^{}]*\}|</?[A-Za-z][^<>]*>|<\d[\d:.]*>)"
_WORD = rf"[{_L}0-9]*[{_L}][{_L}0-9]*(?:['’.\-&][{_L}0-9]+)*"
_LATIN = rf"{_WORD}(?:(?:[ \t]+|[ \t]*[,.][ \t]+){_WORD})*"
_URL = r"(?:https?://|www\.)[^\s\u3000-\u303f\u3400-\u9fff\uff00-\uffef<>\"]+"
_EMAIL = r"[A-Za-z0-9._%+\-]+@[A-Za-z0-9\-]+(?:\.[A-Za-z0-9\-]+)*\.[A-Za-z]{2,}"
_NUMBER = r"(?<!\d)\d+(?:,\d{3}(?!\d)|[.:/\-]\d+)*(?!\d)"
_KINDS = (("tag", re.compile(_TAG)), ("url", re.compile(_URL)), ("email", re.compile(_EMAIL)),
          ("glossary", None), ("latin", re.compile(_LATIN)), ("number", re.compile(_NUMBER)))
_LEAD = re.compile(rf"^(?:{_TAG}|\s)+")
_TRAIL = re.compile(rf"(?:{_TAG}|\s)+$")
_TRIM = ".,;:!?)]}'\""
KINDS = ("glossary", "url", "email", "latin", "number", "tag")


@dataclass(frozen=True)
class Span:
    """A piece of a source line kept through translation: ``kind`` (``KINDS``), ``source`` (its
    text), ``target`` (what the output gets: the source, or a glossary term's target),
    ``placeholder`` (what the model reads instead; None for a tag, taken out of the text),
    ``position`` (the share of the line's other text — not spans — before it, 0 … 1, for
    putting it back when the placeholder is lost, or a tag)."""

    kind: str
    source: str
    target: str
    placeholder: str | None
    position: float


@dataclass(frozen=True)
class Masked:
    """A source line prepared for the model: ``text`` (what the model reads; the line itself
    when nothing is protected, "" when it is passed through), ``spans`` (in source order),
    ``lead`` / ``trail`` (markup at the line's ends, put back around the translation), ``passed``
    (not Chinese: the output is ``original``), ``original`` (the line as given)."""

    text: str
    spans: tuple[Span, ...] = ()
    lead: str = ""
    trail: str = ""
    passed: bool = False
    original: str = ""


@dataclass
class SpanStats:
    """Counts of one translation: lines passed through (by script: ``other``, ``ja``, ``ko``),
    spans kept (by kind), placeholders the model lost (their spans put at their position), text
    spans left unprotected for want of placeholders; lines with glossary terms whose own
    translation had every target (``glossary_kept``) and those translated again with the terms
    as placeholders (``glossary_again``: ``Translator.translate_detailed``)."""

    passed: Counter = field(default_factory=Counter)
    spans: Counter = field(default_factory=Counter)
    lost: int = 0
    unprotected: int = 0
    glossary_kept: int = 0
    glossary_again: int = 0


class SpanProtector:
    """The transform (module doc): ``mask`` a source line, ``restore`` its translation.

    ``glossary``: terms enforced (a ``Glossary``, or None); ``protect``: keep Latin-script text,
    numbers, URLs, e-mail addresses and tags (the glossary applies either way); ``translate_all``:
    lines without Chinese go to the model as they are instead of being passed through;
    ``spaced``: placeholders set off by spaces (segmented ``tok`` input); ``names``: the name
    placeholders, in the order they are given out."""

    def __init__(self, glossary: Glossary | None = None, protect: bool = default_of(IOOptions, "protect"),
                 translate_all: bool = False, spaced: bool = False, names: tuple[str, ...] = NAME_PLACEHOLDERS):
        self.glossary = glossary if glossary is not None and len(glossary) else None
        self.protect, self.translate_all, self.spaced = protect, translate_all, spaced
        self.names = tuple(names)

    def mask(self, line: str, stats: SpanStats | None = None) -> Masked:
        """``line`` → ``Masked`` (blank lines and, with neither protection nor glossary, lines
        come back as they are; a line without Chinese is passed through unless
        ``translate_all``)."""
        if not line.strip():
            return Masked(line, original=line)
        script = script_of(line)
        if script != "zh":
            if not self.translate_all:
                if stats is not None:
                    stats.passed[script] += 1
                return Masked("", passed=True, original=line)
            return Masked(line, original=line)
        if not self.protect and self.glossary is None:
            return Masked(line, original=line)
        text = unicodedata.normalize("NFKC", line)
        lead = trail = ""
        if self.protect:
            m = _LEAD.match(text)
            lead = m.group(0) if m else ""
            text = text[len(lead):]
            m = _TRAIL.search(text)
            trail = m.group(0) if m else ""
            text = text[:len(text) - len(trail)] if trail else text
            lead, trail = lead.strip(), trail.strip()
        found = self._find(text)
        rest, at = [], 0                    # the text no span covers (Latin there with --no-protect)
        for a, b, *_ in found:
            rest.append(text[at:a])
            at = b
        words = {w.lower() for w in re.findall(rf"[{_L}]+", "".join(rest) + text[at:])}
        names = [p for p in self.names if p not in words and not any(s in text for s in _SPELLED.get(p, ()))]
        numbers = list(NUMBER_PLACEHOLDERS)
        kept = []
        for start, end, kind, target in found:
            pool = numbers if kind == "number" else names
            if kind != "tag" and not pool:
                if stats is not None:
                    stats.unprotected += 1
                continue
            kept.append((start, end, kind, target, None if kind == "tag" else pool.pop(0)))
        # a span's position: the share of the line's other text (not spans) that comes before it
        other = len(text) - sum(e - a for a, e, *_ in kept)
        out, spans, at, before = [], [], 0, 0
        for start, end, kind, target, ph in kept:
            out.append(text[at:start])
            before += start - at
            if ph is not None:
                out.append(f" {ph} " if self.spaced else ph)
            piece = text[start:end]
            spans.append(Span(kind, piece, target if target is not None else piece, ph,
                              before / other if other else 0.0))
            at = end
        out.append(text[at:])
        masked = "".join(out)
        if stats is not None:
            stats.spans.update(s.kind for s in spans)
        return Masked(" ".join(masked.split()) if self.spaced else masked, tuple(spans), lead, trail, original=line)

    def _find(self, text: str) -> list[tuple[int, int, str, str | None]]:
        """Non-overlapping spans of ``text`` (start, end, kind, glossary target), by priority:
        tags, URLs, e-mail addresses, glossary terms, Latin runs, numbers; each kind is looked
        for in the text the kinds before it left."""
        taken: list[tuple[int, int, str, str | None]] = []

        def gaps() -> list[tuple[int, int]]:
            out, at = [], 0
            for a, b, *_ in sorted(taken):
                out.append((at, a))
                at = b
            return out + [(at, len(text))]

        for kind, rx in _KINDS:
            if kind == "glossary":
                if self.glossary is not None:
                    taken += [(g + a, g + b, kind, t) for g, h in gaps()
                              for a, b, t in self.glossary.finditer(text[g:h])]
                continue
            if not self.protect:
                continue
            for g, h in gaps():
                for m in rx.finditer(text, g, h):
                    a, b = m.start(), m.end()
                    if kind == "url":
                        while b > a and text[b - 1] in _TRIM:
                            b -= 1
                    if kind == "number" and b - a < 2:         # a lone digit: the model's (a word in English)
                        continue
                    if b > a:
                        taken.append((a, b, kind, None))
        return _absorb_tags(sorted(taken))

    def restore(self, masked: Masked, output: str, render=None, stats: SpanStats | None = None,
                source: bool = False) -> str:
        """The output line of ``masked`` from the model's translation ``output`` of its text:
        each placeholder (case-insensitive, as a whole word; a number's also with an ordinal
        suffix, ``301st``) replaced by its span's target passed through ``render`` (e.g.
        tokenization for tokenized output; default: as is), a lost placeholder's span and each
        inner tag put at its relative position, the end markup put back. A passed-through
        line gives its original. ``source``: ``output`` is a rewritten source (the DP-completed
        source of ``--dp-out``): the spans' source text goes back, not rendered."""
        if masked.passed:
            return masked.original
        if not masked.spans and not masked.lead and not masked.trail:
            return output
        if source:
            masked = Masked(masked.text, tuple(Span(s.kind, s.source, s.source, s.placeholder, s.position)
                                               for s in masked.spans), masked.lead, masked.trail,
                            original=masked.original)
            render = None
        render = render or (lambda s: s)
        by_ph = {s.placeholder: s for s in masked.spans if s.placeholder is not None}
        seen: set[str] = set()
        if by_ph:
            alts = "|".join(re.escape(p) for p in sorted(by_ph, key=len, reverse=True))
            rx = re.compile(rf"(?<![A-Za-z0-9])({alts})(st|nd|rd|th)?(?![A-Za-z0-9])", re.IGNORECASE)

            def sub(m: re.Match) -> str:
                s = by_ph[m.group(1).lower()]
                seen.add(s.placeholder)
                text = render(s.target)
                if m.group(2) and s.kind == "number":
                    return text + _ordinal(s.target)
                return text + (m.group(2) or "")

            output = rx.sub(sub, output)
        late = [s for s in masked.spans if s.placeholder is None or s.placeholder not in seen]
        if stats is not None:
            stats.lost += sum(1 for s in late if s.placeholder is not None)
        for k, s in sorted(enumerate(late), key=lambda ks: (ks[1].position, ks[0]), reverse=True):
            output = _insert(output, s.position, s.target if s.placeholder is None else render(s.target),
                             spaced=s.placeholder is not None)
        if masked.lead:
            output = masked.lead + output
        if masked.trail:
            output = output + masked.trail
        return output


def _absorb_tags(spans: list[tuple[int, int, str, str | None]]) -> list[tuple[int, int, str, str | None]]:
    """Sorted spans with each run of tags touching a Latin run merged into it (``<b>Tony</b>``:
    one span, the tags travel with the name)."""
    out = list(spans)
    k = 0
    while k < len(out):
        a, b, kind, t = out[k]
        if kind == "latin":
            while k > 0 and out[k - 1][2] == "tag" and out[k - 1][1] == a:
                a = out[k - 1][0]
                del out[k - 1]
                k -= 1
            while k + 1 < len(out) and out[k + 1][2] == "tag" and out[k + 1][0] == b:
                b = out[k + 1][1]
                del out[k + 1]
            out[k] = (a, b, kind, t)
        k += 1
    return out


def _ordinal(number: str) -> str:
    digits = re.sub(r"\D", "", number)
    n = int(digits[-2:]) if digits else 0
    return "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")


def _insert(text: str, position: float, piece: str, spaced: bool) -> str:
    """``piece`` put into ``text`` at the word boundary nearest ``position`` × its length (a
    text span with a space after it, or before it at the end; a tag as it is)."""
    bounds = [0] + [i + 1 for i, c in enumerate(text) if c == " "] + [len(text)]
    goal = position * len(text)
    p = min(bounds, key=lambda b: (abs(b - goal), b))
    if not spaced:
        return text[:p] + piece + text[p:]
    if p >= len(text):
        return (text + " " + piece) if text else piece
    return text[:p] + piece + " " + text[p:]
