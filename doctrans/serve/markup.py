"""``format: "html"`` of LibreTranslate's ``/translate``: the markup is kept as sent, its text
nodes are translated.

``split_html(text)`` parses ``text`` with Python's ``html.parser`` (the standard library's
parser: lenient, as browsers are, and kept with Python) and cuts it into the raw source of each
parser event: tags, comments, declarations, character data. Each text node that holds a letter
(not only whitespace, digits or punctuation) and is not inside ``<script>`` / ``<style>`` is a
*unit*: its character references decoded, its whitespace runs made one space, without its
leading and trailing whitespace. ``HtmlText.render(translations)`` puts each unit's translation
(HTML-escaped: ``&``, ``<``, ``>``) back in place of its text between the same whitespace; every
other byte of the input is output as it came. Attribute values (``title``, ``alt``) are not
translated. A unit is a text node, so a sentence that inline markup cuts (``我<b>很</b>好``) is
translated as its pieces."""
from __future__ import annotations

import html
import re
from dataclasses import dataclass
from html.parser import HTMLParser

_SPACE = re.compile(r"\s+")
_RAW = ("script", "style")


@dataclass
class HtmlText:
    """``parts``: the input cut into raw strings, and for each unit its index in ``parts``;
    ``units``: the units' text (module doc)."""

    parts: list[str]
    slots: list[int]
    units: list[str]

    def render(self, translations: list[str]) -> str:
        """The input with each unit's text replaced by its translation (escaped)."""
        if len(translations) != len(self.units):
            raise ValueError(f"{len(translations)} translations for {len(self.units)} text nodes")
        parts = list(self.parts)
        for k, t in zip(self.slots, translations):
            raw = parts[k]
            lead = raw[:len(raw) - len(raw.lstrip())]
            trail = raw[len(raw.rstrip()):]
            parts[k] = lead + html.escape(t, quote=False) + trail
        return "".join(parts)


class _Events(HTMLParser):
    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.events: list[tuple[tuple[int, int], str, str]] = []     # (line, column), kind, data
        self.raw = 0                                                  # inside <script> / <style>

    def handle_starttag(self, tag, attrs):
        self.events.append((self.getpos(), "tag", ""))
        if tag in _RAW:
            self.raw += 1

    def handle_startendtag(self, tag, attrs):
        self.events.append((self.getpos(), "tag", ""))

    def handle_endtag(self, tag):
        self.events.append((self.getpos(), "tag", ""))
        if tag in _RAW and self.raw:
            self.raw -= 1

    def handle_data(self, data):
        self.events.append((self.getpos(), "raw" if self.raw else "data", data))

    def handle_comment(self, data):
        self.events.append((self.getpos(), "tag", ""))

    def handle_decl(self, decl):
        self.events.append((self.getpos(), "tag", ""))

    def handle_pi(self, data):
        self.events.append((self.getpos(), "tag", ""))

    def unknown_decl(self, data):
        self.events.append((self.getpos(), "tag", ""))


def split_html(text: str) -> HtmlText:
    """``text`` (an HTML document or fragment) → its raw parts and translatable units."""
    p = _Events()
    p.feed(text)
    p.close()
    starts = [0]
    for line in text.split("\n")[:-1]:
        starts.append(starts[-1] + len(line) + 1)
    offsets = [starts[ln - 1] + col for (ln, col), _, _ in p.events]
    parts, slots, units = [], [], []
    if offsets and offsets[0] > 0:
        parts.append(text[:offsets[0]])
    for k, ((_, kind, data), a) in enumerate(zip(p.events, offsets)):
        b = offsets[k + 1] if k + 1 < len(offsets) else len(text)
        raw = text[a:b]
        unit = _SPACE.sub(" ", data).strip() if kind == "data" else ""
        if unit and any(c.isalpha() for c in unit):
            slots.append(len(parts))
            units.append(unit)
        parts.append(raw)
    if not p.events:
        parts = [text]
    return HtmlText(parts, slots, units)
