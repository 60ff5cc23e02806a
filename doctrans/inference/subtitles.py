"""Subtitle files (SRT, WebVTT, ASS/SSA) translated as documents.

A subtitle file is one document: its cues' sentences, in order, go through the translator's
document path (``Translator.translate(…, doc_ids=…)``), so a context model reads the previous
cues' sentences as context. A directory of subtitle files is a collection, each file one
document, in natural sort order of their paths (``ep2`` before ``ep10``).

Reading and writing (``subtitle_files.py``): every line but the cue text is kept as read
(index, timing, settings, styles, ASS/SSA through pysubs2); a malformed cue or event is a
``SubtitleError`` naming the file, the cue and the line; input is decoded by
``data.encoding.decode_text``, output is UTF-8 with the input's line ends; a file with no text
gives an empty file.

Cue text → sentences (``split_cue``). Each text line (SRT/VTT lines; ASS ``\\N``) is split into
its leading markup (tags ``<i>``, ``<font …>``, ``{\\an8}``, ``{\\pos(…)}``, VTT ``<v Name>``,
and a dialogue dash ``-``/``－``/``–``/``—``), its text and its trailing markup; tags inside the
text are dropped (one closing a tag of the leading markup is moved to the trailing markup), ``\\h`` is a space.
A cue of several lines holds several sentences when a line starts with a dialogue dash (two
speakers) or every line but the last ends a sentence (``。！？!?.…♪``): each line is then
translated alone and written back on its own line. Otherwise its lines are one sentence
wrapped for the screen: they are joined (no space between two Chinese characters), translated
once, and the translation is wrapped again into as many lines, at word boundaries, as evenly
as the words allow (fewer lines when it has fewer words). Markup is put back around each
line's translation. A cue with no text (empty, or markup only) is written as read. The cue
count of the output always equals the input's.

Script: each file's sentences are converted to Simplified script for the model when they are
Traditional (``data.encoding.to_simplified``, ``script``). ``bilingual``: each cue's source
lines (as read) above its translation, for review.
"""
from __future__ import annotations

import logging
import re
import time
from dataclasses import dataclass
from pathlib import Path

from doctrans.data.encoding import ENCODINGS_AUTO, to_simplified
from doctrans.inference.config import IOOptions
from doctrans.inference.subtitle_files import (FORMATS, Cue, SubtitleDoc, SubtitleError, is_subtitle, parse,
                                               read_subtitles)
from doctrans.utils.io import atomic_write_text
from doctrans.utils.settings import default_of

__all__ = ["FORMATS", "GROUP_SENTENCES", "Cue", "CuePlan", "Line", "SubtitleDoc", "SubtitleError", "SubtitleOptions",
           "is_subtitle", "natural_key", "output_format", "output_path", "parse", "read_subtitles", "render_cue",
           "run_config", "split_cue", "split_line", "subtitle_files", "takes", "translate_directory", "translate_docs",
           "translate_file", "wrap"]

log = logging.getLogger(__name__)

GROUP_SENTENCES = 512          # a directory's files are translated together up to this many sentences

_TAG = r"(?:\{[^{}]*\}|</?[A-Za-z][^<>]*>|<\d[\d:.]*>)"
_LEAD = re.compile(rf"^((?:{_TAG}|\s)*)((?:[-‐–—－]\s*)?)((?:{_TAG}|\s)*)")
_TRAIL = re.compile(rf"((?:{_TAG}|\s)*)$")
_TAGS = re.compile(_TAG)
_SENTENCE_END = tuple("。！？!?.…♪」』\"”")
_CJK = re.compile(r"[\u3000-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uff00-\uffef]")


def natural_key(path: Path) -> list:
    """Sort key of a path with its digit runs compared as numbers (ep2 < ep10)."""
    return [(0, int(t), "") if t.isdigit() else (1, 0, t.lower()) for t in re.split(r"(\d+)", path.as_posix())]


# --- cue text ⇄ sentences ----------------------------------------------------------------------


@dataclass
class Line:
    """One text line of a cue: lead markup (tags, dialogue dash), text, trail markup."""

    lead: str
    text: str
    trail: str

    @property
    def dialogue(self) -> bool:
        return bool(_LEAD.match(self.lead).group(2)) if self.lead else False


def _closes(tag: str, lead: str) -> bool:
    """Whether ``tag`` closes a tag opened in ``lead`` (``</i>`` after ``<i>``, ``{\\i0}`` after
    ``{\\i1}``): such a closing tag inside the text is kept, after the translation."""
    m = re.match(r"^</([A-Za-z]+)>$", tag)
    if m:
        return re.search(rf"<{m.group(1)}[\s>]", lead, re.I) is not None
    m = re.match(r"^\{\\([ibus])0\}$", tag)
    return bool(m) and f"\\{m.group(1)}1" in lead


def split_line(raw: str) -> Line:
    """A cue text line → ``Line`` (module doc): tags inside the text dropped, a closing one moved
    to the trailing markup, ``\\h`` / ``\\n`` (ASS) read as spaces."""
    m = _LEAD.match(raw)
    lead = m.group(0)
    rest = raw[len(lead):]
    t = _TRAIL.search(rest)
    trail = t.group(1) if t else ""
    text = rest[:len(rest) - len(trail)]
    closing = "".join(x for x in _TAGS.findall(text) if _closes(x, lead))
    text = _TAGS.sub("", text).replace("\\h", " ").replace("\\n", " ")
    return Line(lead, " ".join(text.split()) if not _CJK.search(text) else text.strip(), closing + trail)


def _join(parts: list[str]) -> str:
    out = parts[0]
    for p in parts[1:]:
        out += ("" if out and p and _CJK.match(out[-1]) and _CJK.match(p[0]) else " ") + p
    return out


def wrap(text: str, n: int) -> list[str]:
    """``text`` in at most ``n`` lines at word boundaries (spaces; a text without spaces is cut
    between characters), each as close to len(text)/n characters as the words allow."""
    words = text.split()
    if len(words) < n and not _CJK.search(text):
        return words if words else [""]
    if len(words) < n:                          # CJK output without spaces: cut between characters
        words = list(text.replace(" ", ""))
        if len(words) < n:
            return ["".join(words)]
    sep = "" if len(text.split()) < n else " "
    lines, start, total = [], 0, len(sep.join(words))
    for k in range(1, n):
        goal = total * k / n
        best, pos = None, 0
        for j in range(start + 1, len(words) - (n - k) + 1):
            pos = len(sep.join(words[:j]))
            if best is None or abs(pos - goal) < abs(best[1] - goal):
                best = (j, pos)
        lines.append(sep.join(words[start:best[0]]))
        start = best[0]
    lines.append(sep.join(words[start:]))
    return lines


@dataclass
class CuePlan:
    """How one cue's text lines are translated: ``lines`` (parsed), ``units`` (the sentences sent
    to the model: one per text line, or one for all joined), ``joined``."""

    lines: list[Line]
    units: list[str]
    joined: bool


def split_cue(raw_lines: list[str]) -> CuePlan:
    """A cue's text lines → its ``CuePlan`` (module doc: dialogue lines and lines ending a
    sentence are separate sentences, else the lines are one wrapped sentence)."""
    lines = [split_line(x) for x in raw_lines]
    content = [x for x in lines if x.text.strip()]
    if len(content) <= 1:
        return CuePlan(lines, [x.text for x in content], False)
    separate = any(x.dialogue for x in content) or all(x.text.rstrip().endswith(_SENTENCE_END) for x in content[:-1])
    if separate:
        return CuePlan(lines, [x.text for x in content], False)
    return CuePlan(lines, [_join([x.text for x in content])], True)


def render_cue(plan: CuePlan, hyps: list[str]) -> list[str]:
    """The cue's output text lines: each content line's markup around its translation (a joined
    cue: the translation wrapped into its content lines); markup-only lines as read; a line
    left with neither text nor markup is dropped."""
    content = [k for k, x in enumerate(plan.lines) if x.text.strip()]
    if not content:
        return [x.lead + x.text + x.trail for x in plan.lines]
    texts = wrap(hyps[0], len(content)) if plan.joined else list(hyps)
    texts += [""] * (len(content) - len(texts))
    by_line = dict(zip(content, texts))
    out = []
    for k, x in enumerate(plan.lines):
        s = x.lead + by_line[k] + x.trail if k in by_line else x.lead + x.text + x.trail
        if s.strip():
            out.append(s)
    return out


# --- translation -------------------------------------------------------------------------------


@dataclass(frozen=True)
class SubtitleOptions:
    encoding: str = ENCODINGS_AUTO      # auto (detect) or a codec name
    script: str = default_of(IOOptions, "script")   # auto | simplified | traditional (data.encoding.to_simplified)
    bilingual: bool = False             # source lines above the translation in each cue


def translate_docs(translator, docs: list[SubtitleDoc], options: SubtitleOptions = SubtitleOptions(),
                   progress: bool = False) -> list[list[list[str]]]:
    """Per document, per cue, its output text lines: every document's sentences (``split_cue``)
    translated in one ``translator.translate`` call, each document its own ``doc_id`` (a context
    model reads each file's previous cues), warnings located by file and cue."""
    plans = [[split_cue(c.text) for c in d.cues] for d in docs]
    units, doc_ids, where = [], [], []
    for d, (doc, ps) in enumerate(zip(docs, plans)):
        mine = [u for p in ps for u in p.units]
        mine, _ = to_simplified(mine, doc.name, options.script)
        units += mine
        doc_ids += [str(d)] * len(mine)
        where += [c.where for c, p in zip(doc.cues, ps) for _ in p.units]
    hyps = iter(translator.translate(units, progress=progress, name=docs[0].name if docs else "<subtitles>",
                                     doc_ids=doc_ids, where=where)) if units else iter(())
    out = []
    for doc, ps in zip(docs, plans):
        texts = []
        for c, p in zip(doc.cues, ps):
            lines = render_cue(p, [next(hyps) for _ in p.units])
            texts.append(c.text + lines if options.bilingual and p.units else lines)
        out.append(texts)
    return out


def output_format(src: Path, dest: Path | None) -> str:
    fmt = FORMATS[src.suffix.lower()]
    if dest is not None and dest.suffix.lower() in FORMATS and FORMATS[dest.suffix.lower()] != fmt:
        raise ValueError(f"{dest}: the output keeps the input's format ({fmt}); converting {src.suffix} to "
                         f"{dest.suffix} is not supported (pysubs2 / ffmpeg convert subtitle formats)")
    return fmt


def translate_file(translator, src: str | Path, dest: str | Path | None,
                   options: SubtitleOptions = SubtitleOptions(), progress: bool = False) -> str:
    """Translate the subtitle file ``src`` as one document; write it to ``dest`` (UTF-8,
    atomically) unless None; returns the output text. Raises OSError, EncodingError, SubtitleError."""
    src = Path(src)
    fmt = output_format(src, Path(dest) if dest else None)
    doc = read_subtitles(src, options.encoding)
    t0 = time.time()
    texts = translate_docs(translator, [doc], options, progress)[0]
    text = doc.render(texts, fmt)
    log.info("%s: %d cues translated in %.1f s (%s)", src, len(doc.cues), time.time() - t0, doc.encoding)
    if dest is not None:
        atomic_write_text(dest, text)
    return text


def subtitle_files(inp: Path) -> list[Path]:
    """The subtitle files under ``inp`` (recursively, hidden ones skipped), in natural order."""
    files = [p for p in inp.rglob("*") if p.is_file() and is_subtitle(p)
             and not any(part.startswith(".") for part in p.relative_to(inp).parts)]
    return sorted(files, key=lambda p: natural_key(p.relative_to(inp)))


def output_path(src: Path, inp: Path, out: Path, suffix: str = "") -> Path:
    """``src``'s output: its path relative to ``inp`` under ``out``, ``suffix`` inserted before
    the subtitle extension (``ep01.srt`` + ``.en`` → ``ep01.en.srt``)."""
    dest = out / src.relative_to(inp)
    return dest.with_name(dest.stem + suffix + dest.suffix) if suffix else dest


def translate_directory(translator, inp: str | Path, out: str | Path, options: SubtitleOptions = SubtitleOptions(),
                        out_suffix: str = "", resume: bool = False, group: int = GROUP_SENTENCES):
    """Translate every subtitle file under ``inp`` into ``out`` (same relative paths,
    ``output_path``): files in natural order, up to ``group`` cues translated together, each file
    its own document. A file that cannot be read or parsed is reported and skipped; ``resume``
    skips files whose output exists. Returns the ``collection.CollectionSummary``; raises
    ``collection.CollectionError`` at the end when some files failed (the others are written),
    ValueError when ``out`` lies inside ``inp`` or no subtitle file is there."""
    from doctrans.inference.collection import CollectionSummary

    inp, out = Path(inp), Path(out)
    if out.resolve().is_relative_to(inp.resolve()):
        raise ValueError(f"output directory {out} is inside the input directory {inp}: choose another")
    files = subtitle_files(inp)
    if not files:
        raise ValueError(f"{inp}: no subtitle files ({', '.join(FORMATS)}) in it")
    s, t0 = CollectionSummary(), time.time()
    pending: list[tuple[Path, SubtitleDoc]] = []

    def flush():
        if not pending:
            return
        try:
            texts = translate_docs(translator, [d for _, d in pending], options)
        except ValueError as e:                 # attribute the failure to its file
            if len(pending) == 1:
                s.failed.append((str(pending[0][0]), str(e)))
                log.error("skipped %s: %s", pending[0][0], e)
                pending.clear()
                return
            texts = []
            for f, d in pending:
                try:
                    texts.append(translate_docs(translator, [d], options)[0])
                except ValueError as e1:
                    texts.append(None)
                    s.failed.append((str(f), str(e1)))
        for (f, d), t in zip(pending, texts):
            if t is None:
                continue
            atomic_write_text(output_path(f, inp, out, out_suffix), d.render(t))
            s.translated += 1
            s.lines += len(d.cues)
            s.sentences += sum(1 for c in d.cues if c.text)
        pending.clear()

    size = 0
    for f in files:
        dest = output_path(f, inp, out, out_suffix)
        if resume and dest.is_file():
            s.resumed += 1
            continue
        try:
            doc = read_subtitles(f, options.encoding)
        except (OSError, ValueError) as e:
            log.error("skipped %s: %s", f, e)
            s.failed.append((str(f), str(e)))
            continue
        if pending and size + len(doc.cues) > group:
            flush()
            size = 0
        pending.append((f, doc))
        size += len(doc.cues)
    flush()
    s.seconds = time.time() - t0
    s.finish(len(files), out, "subtitle files")
    return s


# --- doctrans translate ------------------------------------------------------------------------


def _dir_pattern(cfg) -> str | None:
    from doctrans.inference.collection import default_pattern

    return cfg.io.glob if cfg.io.glob is not None else default_pattern(Path(cfg.io.input))


def takes(cfg) -> bool:
    """Whether ``doctrans translate`` with ``cfg`` (a ``TranslateConfig``) translates subtitles:
    a subtitle file, or a directory whose files taken (``--glob``, or its most common suffix)
    are subtitle files."""
    if cfg.io.input == "-":
        return False
    inp = Path(cfg.io.input)
    if inp.is_dir():
        pattern = _dir_pattern(cfg)
        return bool(pattern) and is_subtitle(pattern.replace("*", "x"))
    return is_subtitle(inp)


def run_config(cfg, inputs_of=None) -> Path | None:
    """``doctrans translate`` of a subtitle file (to ``cfg.io.output``, or stdout for ``-``) or a
    directory of them (``translate_directory``; ``out_suffix`` and ``resume`` apply, ``workers``
    and the plain-text options are ignored with a warning). Raises like ``translate_file`` /
    ``translate_directory``, ValueError for options subtitles cannot have and, before the model
    is loaded, for an output that is the input or cannot be written (``options.check_outputs``)."""
    import sys

    from doctrans.inference.options import check_outputs
    from doctrans.inference.translator import build_translator

    bad = [(cfg.io.docs, "--docs (a subtitle file is one document)"), (cfg.search.nbest, "--nbest"),
           (cfg.dp.dp_out, "--dp-out"), (cfg.io.output_format != "text", "--output-format"),
           (cfg.io.explain_context, "--explain-context")]
    given = [name for on, name in bad if on]
    if given:
        raise ValueError(f"{cfg.io.input}: {', '.join(given)} not supported for subtitle files")
    check_outputs({"--input": cfg.io.input, "--checkpoint": cfg.model.checkpoint}, {"--output": cfg.io.output})
    options = SubtitleOptions(cfg.io.encoding or ENCODINGS_AUTO, cfg.io.script, cfg.io.bilingual)
    inp = Path(cfg.io.input)
    if inp.is_dir():
        if cfg.io.output == "-":
            raise ValueError(f"input {inp} is a directory: give --output DIR")
        if cfg.io.workers > 1:
            log.warning("--workers %d: subtitle directories are translated by this one process", cfg.io.workers)
        translate_directory(build_translator(cfg, inputs_of), inp, Path(cfg.io.output), options,
                            cfg.io.out_suffix, cfg.io.resume, cfg.io.group_lines)
        return Path(cfg.io.output)
    translator = build_translator(cfg, inputs_of)
    dest = None if cfg.io.output == "-" else Path(cfg.io.output)
    text = translate_file(translator, inp, dest, options, progress=dest is not None)
    if dest is None:
        sys.stdout.write(text)
    return dest
