"""A cue's text lines → the sentences the model translates (``split_cue``), and their
translations → the cue's output lines (``render_cue``), for ``subtitles.py``.

Lines. Each text line (SRT/VTT lines; ASS ``\\N``) is split into its leading markup (tags
``<i>``, ``<font …>``, ``{\\an8}``, ``{\\pos(…)}``, VTT ``<v Name>``, a dialogue dash
``-``/``－``/``–``/``—``, music notes ``♪``/``♫``), its text and its trailing markup (tags, music
notes); tags inside the text are dropped (one closing a tag of the leading markup is moved to
the trailing markup) unless ``inner_tags`` (a translator that protects spans, ``spans.py``, keeps
them: put back at their relative position in the translation), ``\\h`` is a space. Bracketed labels at the text's start or end — the
sound descriptions of subtitles for the deaf and hard of hearing (SDH): ``[笑声]``, ``（笑）``,
``【音乐】`` — are taken out of the sentence: each label with Chinese inside is translated alone
(its inside, as its own one-line document: no context read, none given) and written back in
brackets (``[`` for ``[【［``, ``(`` for ``（(``; the translation's final full stop and quotes
dropped: ``[Laughter]``); a label without Chinese is kept as read. A line of labels only is a
line of its own in the output, unless the cue would then take more than two lines: it then
goes before the next sentence (``[Laughter] I don't want…``), laid out with it.

Sentences. The text lines of a cue between label-only lines hold several sentences when a line
starts with a dialogue dash (two speakers) or every line but the last ends a sentence (``。！？!?.…♪``,
or a music note or label after it): each line is then translated alone. Otherwise the lines are
one sentence wrapped for the screen: they are joined (no space between two Chinese characters)
and translated once.

Layout (``subtitle_layout.break_lines``, at most ``width`` characters a line). Dialogue: one
line per turn (a turn longer than a line goes on in the lines below it, its dash on the first).
Separate sentences: one line each when there are at most two and each fits; else, as a joined
sentence, the translation (with its labels) is broken into balanced lines — one when it fits,
two when it fits in two, more (reported) otherwise — whatever the number of source lines.
Markup is put back around the output lines: markup repeated on every source line is repeated
on every output line; otherwise the first output line takes the first line's leading markup
and the last output line the last line's trailing markup (lines in between positionally; when
there are fewer output lines, the markup of the source lines left over is joined onto the last
one). Markup-only lines are written as read; a line left with neither text nor markup is
dropped.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

from doctrans.inference.subtitle_layout import MAX_LINE_LENGTH, MAX_LINES, break_lines

_TAG = r"(?:\{[^{}]*\}|</?[A-Za-z][^<>]*>|<\d[\d:.]*>)"
_NOTES = "♪♫"
_LEAD = re.compile(rf"^((?:{_TAG}|\s)*)((?:[-‐–—－]\s*)?)((?:{_TAG}|\s|[{_NOTES}])*)")
_TRAIL = re.compile(rf"((?:{_TAG}|\s|[{_NOTES}])*)$")
_TAGS = re.compile(_TAG)
_SENTENCE_END = tuple("。！？!?.…♪」』\"”")
_CJK = re.compile(r"[\u3000-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uff00-\uffef]")
_OPEN = {"[": "[", "【": "[", "［": "[", "（": "(", "(": "("}
_CLOSE = {"]": "]", "】": "]", "］": "]", "）": ")", ")": ")"}
_O, _C = re.escape("".join(_OPEN)), re.escape("".join(_CLOSE))
_LABEL = rf"[{_O}][^{_O}{_C}]*[^{_O}{_C}\s][^{_O}{_C}]*[{_C}]"        # a bracketed span, not blank inside
_FIRST_LABEL = re.compile(rf"^\s*({_LABEL})")
_LAST_LABEL = re.compile(rf"({_LABEL})\s*$")


@dataclass
class Line:
    """One text line of a cue: lead markup (tags, dialogue dash, music notes), text, trail
    markup, and the SDH labels before and after the text (``[笑声]``, as read)."""

    lead: str
    text: str
    trail: str
    before: tuple[str, ...] = ()
    after: tuple[str, ...] = ()

    @property
    def dialogue(self) -> bool:
        return bool(_LEAD.match(self.lead).group(2)) if self.lead else False

    @property
    def labels(self) -> tuple[str, ...]:
        return self.before + self.after

    @property
    def ends_sentence(self) -> bool:
        return (self.text.rstrip().endswith(_SENTENCE_END) or bool(self.after)
                or any(n in self.trail for n in _NOTES))


def _closes(tag: str, lead: str) -> bool:
    """Whether ``tag`` closes a tag opened in ``lead`` (``</i>`` after ``<i>``, ``{\\i0}`` after
    ``{\\i1}``): such a closing tag inside the text is kept, after the translation."""
    m = re.match(r"^</([A-Za-z]+)>$", tag)
    if m:
        return re.search(rf"<{m.group(1)}[\s>]", lead, re.I) is not None
    m = re.match(r"^\{\\([ibus])0\}$", tag)
    return bool(m) and f"\\{m.group(1)}1" in lead


def split_line(raw: str, inner_tags: bool = False) -> Line:
    """A cue text line → ``Line`` (module doc): tags inside the text dropped, a closing one moved
    to the trailing markup (``inner_tags``: both kept in the text), ``\\h`` / ``\\n`` (ASS) read
    as spaces, SDH labels at the text's start and end taken out."""
    m = _LEAD.match(raw)
    lead = m.group(0)
    rest = raw[len(lead):]
    t = _TRAIL.search(rest)
    trail = t.group(1) if t else ""
    text = rest[:len(rest) - len(trail)]
    closing = "" if inner_tags else "".join(x for x in _TAGS.findall(text) if _closes(x, lead))
    text = (text if inner_tags else _TAGS.sub("", text)).replace("\\h", " ").replace("\\n", " ")
    before, after = [], []
    while (s := _FIRST_LABEL.match(text)):
        before.append(s.group(1))
        text = text[s.end():]
    while text.strip() and (s := _LAST_LABEL.search(text)):
        after.insert(0, s.group(1))
        text = text[:s.start()]
    text = " ".join(text.split()) if not _CJK.search(text) else text.strip()
    return Line(lead, text, closing + trail, tuple(before), tuple(after))


def _join(parts: list[str]) -> str:
    out = parts[0]
    for p in parts[1:]:
        out += ("" if out and p and _CJK.match(out[-1]) and _CJK.match(p[0]) else " ") + p
    return out


def translates(label: str) -> bool:
    """Whether an SDH label is translated (Chinese inside) or kept as read."""
    return bool(_CJK.search(label))


def label_inside(label: str) -> str:
    """What is translated of an SDH label: its inside (``[笑声]`` → ``笑声``)."""
    return label[1:-1].strip()


def render_label(label: str, translation: str) -> str:
    """An SDH label's output: the translation of its inside in Latin brackets, its final full
    stop and quotes dropped (``[笑声]``, ``"Laughter."`` → ``[Laughter]``); the label as read
    when it is not translated, or its inside when the translation is empty."""
    if not translates(label):
        return label
    inside = translation.strip().strip("\"'“”‘’").rstrip(".。").strip() or label_inside(label)
    return _OPEN[label[0]] + inside + _CLOSE[label[-1]]


@dataclass
class Group:
    """Content lines of a cue laid out together (module doc): ``rows`` (their indices among the
    cue's lines), ``units`` (the sentences sent to the model: one for all joined, else one per
    row; none for a line of labels only), ``joined``, ``dialogue`` (one line per turn)."""

    rows: list[int]
    units: list[str] = field(default_factory=list)
    joined: bool = False
    dialogue: bool = False


@dataclass
class CuePlan:
    """How one cue's text lines are translated and laid out: ``lines`` (parsed), ``groups``."""

    lines: list[Line]
    groups: list[Group]

    @property
    def units(self) -> list[str]:
        """The sentences of the cue, in order, sent to the model with the file's context."""
        return [u for g in self.groups for u in g.units]

    @property
    def labels(self) -> list[str]:
        """The SDH labels of the cue that are translated (each alone), in order of their lines."""
        return [x for line in self.lines for x in line.labels if translates(x)]


def split_cue(raw_lines: list[str], inner_tags: bool = False) -> CuePlan:
    """A cue's text lines → its ``CuePlan`` (module doc: dialogue lines and lines ending a
    sentence are separate sentences, else the lines are one wrapped sentence; a line of SDH
    labels only is a group of its own; ``inner_tags``: ``split_line``'s)."""
    lines = [split_line(x, inner_tags) for x in raw_lines]
    groups: list[Group] = []
    run: list[int] = []

    def close() -> None:
        if not run:
            return
        rows, texts = list(run), [lines[k].text for k in run]
        run.clear()
        dialogue = any(lines[k].dialogue for k in rows)
        if len(rows) == 1 or dialogue or all(lines[k].ends_sentence for k in rows[:-1]):
            groups.append(Group(rows, texts, dialogue=dialogue))
        else:
            groups.append(Group(rows, [_join(texts)], joined=True))

    for k, x in enumerate(lines):
        if x.text.strip():
            run.append(k)
        elif x.labels:
            close()
            groups.append(Group([k]))
    close()
    return CuePlan(lines, groups)


def _dress(rows: list[Line], texts: list[str]) -> list[str]:
    """Output lines ``texts`` with the markup of source lines ``rows`` around them (module doc)."""
    n, m = len(rows), len(texts)
    if n > 1 and len({(x.lead, x.trail) for x in rows}) == 1:
        return [rows[0].lead + t + rows[0].trail for t in texts]
    lead = [rows[j].lead if j < n else "" for j in range(m - 1)] + ["".join(x.lead for x in rows[m - 1:])]
    trail = (["".join(x.trail for x in rows[:max(0, n - m + 1)])]
             + [rows[n - m + j].trail if n - m + j >= 0 else "" for j in range(1, m)])
    return [a + t + b for a, t, b in zip(lead, texts, trail)]


def _lay_out(group: Group, lines: list[Line], hyps: list[str], labels: dict[int, tuple[str, str]],
             width: int) -> list[str]:
    """The output lines of ``group`` from its translations ``hyps`` and its lines' rendered
    labels (row → (before, after)), laid out in lines of ``width`` (module doc)."""
    rows = [lines[k] for k in group.rows]

    def labelled(k: int, text: str) -> str:
        return " ".join(x for x in (labels[k][0], text, labels[k][1]) if x)

    if not group.units:                                    # a line of labels only
        return _dress(rows, break_lines(labelled(group.rows[0], ""), width))
    if group.joined:
        before = " ".join(labels[k][0] for k in group.rows if labels[k][0])
        after = " ".join(labels[k][1] for k in group.rows if labels[k][1])
        return _dress(rows, break_lines(" ".join(x for x in (before, hyps[0], after) if x), width))
    texts = [labelled(k, h) for k, h in zip(group.rows, hyps)]
    if group.dialogue:
        return [y for x, t in zip(rows, texts) for y in _dress([x], break_lines(t, width))]
    if len(texts) <= MAX_LINES and all(len(t) <= width for t in texts):
        return [x.lead + t + x.trail for x, t in zip(rows, texts)]
    return _dress(rows, break_lines(" ".join(t for t in texts if t), width))


def _fold_labels(plan: CuePlan, rendered: dict[int, tuple[str, str]]) -> tuple[list[Group], dict] | None:
    """The groups and rendered labels with each line of labels only (and no markup) put before the
    next sentence's text, or after the previous one's when none follows (``render_cue``); None
    when there is no such line."""
    groups, rendered = list(plan.groups), dict(rendered)
    text = [g for g in groups if g.units]
    folded = False
    for g in [g for g in groups if not g.units]:
        k = g.rows[0]
        if not text or (plan.lines[k].lead + plan.lines[k].trail).strip():
            continue
        label = " ".join(x for x in rendered[k] if x)
        after = [t for t in text if t.rows[0] > k]
        if after:
            j = after[0].rows[0]
            rendered[j] = (" ".join(x for x in (label, rendered[j][0]) if x), rendered[j][1])
        else:
            j = text[-1].rows[-1]
            rendered[j] = (rendered[j][0], " ".join(x for x in (rendered[j][1], label) if x))
        groups.remove(g)
        folded = True
    return (groups, rendered) if folded else None


def _render(plan: CuePlan, groups: list[Group], hyps: list[str], rendered: dict, width: int) -> list[str]:
    hyp = iter(hyps)
    first = {g.rows[0]: g for g in groups}
    grouped = {k for g in plan.groups for k in g.rows}
    out = []
    for k, x in enumerate(plan.lines):
        if k in first:
            g = first[k]
            out += _lay_out(g, plan.lines, [next(hyp) for _ in g.units], rendered, width)
        elif k not in grouped:
            out.append(x.lead + x.text + x.trail)
    return [s for s in out if s.strip()]


def render_cue(plan: CuePlan, hyps: list[str], labels: list[str] = (), width: int = MAX_LINE_LENGTH) -> list[str]:
    """The cue's output text lines (module doc) from the translations of its ``units``
    (``hyps``) and of its translated SDH labels' insides (``labels``, as ``plan.labels``),
    laid out in lines of at most ``width`` characters where the words allow; a line of labels
    only keeps its own line unless that makes the cue longer than ``MAX_LINES`` lines and putting
    it before the next sentence (``[Laughter] I don't…``) makes it shorter. A cue without text is
    written as read."""
    if not plan.groups:
        return [x.lead + x.text + x.trail for x in plan.lines]
    lab = iter(labels)
    rendered = {k: tuple(" ".join(render_label(s, next(lab) if translates(s) else "") for s in side)
                         for side in (x.before, x.after)) for k, x in enumerate(plan.lines)}
    out = _render(plan, plan.groups, hyps, rendered, width)
    if len(out) > MAX_LINES and (folded := _fold_labels(plan, rendered)) is not None:
        other = _render(plan, folded[0], hyps, folded[1], width)
        if len(other) < len(out):
            return other
    return out
