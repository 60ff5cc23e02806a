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

Cue text → sentences → output lines (``subtitle_cues.py``): a cue's lines are one sentence
wrapped for the screen (joined, translated once) unless they are dialogue turns or each ends a
sentence; SDH labels (``[笑声]``) are translated alone and kept in brackets, music notes kept
around the lyric. The translation is laid out anew (``subtitle_layout.py``), not in the source's
line count: one line of at most ``max_line_length`` characters (42, ``--max-line-length``) when
it fits, else two balanced lines broken at a natural point, more only when it does not fit in
two (reported; no text is dropped); dialogue keeps one line per turn. Markup is put back
around the lines. A cue with no text (empty, or markup only) is written as read. The cue count
of the output always equals the input's.

Reading speed: each cue's characters per second (``subtitle_layout.chars_per_second``: its
characters without line breaks and markup over its duration, as subtitle editors count them)
are measured, and cues over ``max_cps`` (20, ``--max-cps``; 0: none) are reported as a warning
naming the fastest, with the cues that did not fit two lines (``LayoutReport``).

Language: a header naming the file's language (WebVTT ``Language:``, ASS ``Language``) names
the translation's (``SubtitleOptions.language``, the model's target language). A directory's
outputs are named ``name.LANG.srt`` (``output_path``: ``ep01.srt`` and ``ep01.zh.srt`` →
``ep01.en.srt``), or with ``--out-suffix``. Scores (``--scores``, ``inference/scores.py``): per
cue, with its start, end and reading speed.

Script: each file's sentences are converted to Simplified script for the model when they are
Traditional (``data.encoding.to_simplified``, ``script``). ``bilingual``: each cue's source
lines (as read) above its translation, for review.
"""
from __future__ import annotations

import logging
import re
import time
from dataclasses import dataclass, field
from pathlib import Path

from doctrans.data.encoding import ENCODINGS_AUTO, to_simplified
from doctrans.inference import scores
from doctrans.inference.config import IOOptions
from doctrans.inference.subtitle_cues import CuePlan, Line, label_inside, render_cue, split_cue, split_line
from doctrans.inference.subtitle_files import (FORMATS, Cue, SubtitleDoc, SubtitleError, format_ms, is_subtitle,
                                               parse, read_subtitles)
from doctrans.inference.subtitle_layout import (MAX_CPS, MAX_LINE_LENGTH, MAX_LINES, LayoutReport, break_lines,
                                                chars_per_second, visible_length)
from doctrans.utils.io import atomic_write_text
from doctrans.utils.settings import default_of

__all__ = ["FORMATS", "GROUP_SENTENCES", "LANGUAGE_TAGS", "Cue", "CuePlan", "Line", "Rendered", "SubtitleDoc",
           "SubtitleError", "SubtitleOptions", "break_lines", "is_subtitle", "natural_key", "output_format",
           "output_path", "parse", "read_subtitles", "render_cue", "run_config", "split_cue", "split_line",
           "subtitle_files", "takes", "translate_directory", "translate_docs", "translate_file"]

log = logging.getLogger(__name__)

GROUP_SENTENCES = 512          # a directory's files are translated together up to this many sentences

def natural_key(path: Path) -> list:
    """Sort key of a path with its digit runs compared as numbers (ep2 < ep10)."""
    return [(0, int(t), "") if t.isdigit() else (1, 0, t.lower()) for t in re.split(r"(\d+)", path.as_posix())]


# --- translation -------------------------------------------------------------------------------


@dataclass(frozen=True)
class SubtitleOptions:
    encoding: str = ENCODINGS_AUTO      # auto (detect) or a codec name
    script: str = default_of(IOOptions, "script")   # auto | simplified | traditional (data.encoding.to_simplified)
    bilingual: bool = False             # source lines above the translation in each cue
    max_line_length: int = MAX_LINE_LENGTH   # characters a line of the translation (subtitle_layout)
    max_cps: float = MAX_CPS            # cues reading faster (characters per second) are reported; 0: none
    language: str = ""                  # the translation's language, set where a header names one ("": kept)
    inner_tags: bool = False            # tags inside the text go to the translator, which keeps them (spans.py)


@dataclass
class Rendered:
    """One subtitle file translated: ``texts`` (per cue, its output lines), ``report`` (layout and
    reading speed), ``translations`` (per cue its translation's lines: ``texts`` without the
    source lines of ``bilingual``), ``scores`` (per cue its ``scores.Score`` or None; empty
    without a scorer), ``rows`` (per cue its ``--scores`` row)."""

    texts: list[list[str]]
    report: LayoutReport
    translations: list[list[str]] = field(default_factory=list)
    scores: list = field(default_factory=list)

    def rows(self, doc: SubtitleDoc) -> list[dict]:
        """The ``--scores`` rows of the file's cues (``inference/scores.py``)."""
        out = []
        for k, (c, lines) in enumerate(zip(doc.cues, self.translations)):
            cps = chars_per_second(lines, c.start, c.end)
            out.append({"file": doc.name, "cue": k + 1, "start": format_ms(c.start), "end": format_ms(c.end),
                        **scores.fields(self.scores[k] if self.scores else None),
                        "cps": None if cps is None else round(cps, 2), "lines": lines})
        return out


def translate_docs(translator, docs: list[SubtitleDoc], options: SubtitleOptions = SubtitleOptions(),
                   progress: bool = False, scorer: scores.Scorer | None = None) -> list[Rendered]:
    """Per document its ``Rendered`` cues: every document's sentences (``split_cue``) translated in
    one ``translator.translate`` call, each document its own ``doc_id`` (a context model reads
    each file's previous cues), then the SDH labels' insides, each its own document; warnings
    located by file and cue. Each cue laid out in lines of ``options.max_line_length``
    (``render_cue``) and its reading speed measured. ``scorer``: the cues' scores too (the
    sentences through ``translator.translate_detailed``; ``inference/scores.py``)."""
    plans = [[split_cue(c.text, options.inner_tags) for c in d.cues] for d in docs]
    units, doc_ids, where, labels, label_where = [], [], [], [], []
    for d, (doc, ps) in enumerate(zip(docs, plans)):
        mine = [u for p in ps for u in p.units]
        marks = [label_inside(x) for p in ps for x in p.labels]
        both, _ = to_simplified(mine + marks, doc.name, options.script)
        units += both[:len(mine)]
        labels += both[len(mine):]
        doc_ids += [str(d)] * len(mine)
        where += [c.where for c, p in zip(doc.cues, ps) for _ in p.units]
        label_where += [c.where for c, p in zip(doc.cues, ps) for _ in p.labels]
    lines = units + labels
    ids = doc_ids + [f"label {k}" for k in range(len(labels))]
    name = docs[0].name if docs else "<subtitles>"
    got: list = [None] * len(lines)
    if not lines:
        outs = []
    elif scorer is not None:
        res = translator.translate_detailed(lines, progress=progress, name=name, doc_ids=ids, where=where + label_where)
        outs, got = res.lines, scorer(translator, res, ids)
    else:
        outs = translator.translate(lines, progress=progress, name=name, doc_ids=ids, where=where + label_where)
    hyps, marks = iter(zip(outs[:len(units)], got[:len(units)])), iter(zip(outs[len(units):], got[len(units):]))
    width = options.max_line_length
    out = []
    for doc, ps in zip(docs, plans):
        r = Rendered([], LayoutReport())
        for k, (c, p) in enumerate(zip(doc.cues, ps)):
            h = [next(hyps) for _ in p.units]
            m = [next(marks) for _ in p.labels]
            lines = render_cue(p, [x for x, _ in h], [x for x, _ in m], width)
            r.texts.append(c.text + lines if options.bilingual and p.groups else lines)
            r.translations.append(lines)
            cue_score = (0.0, 0) if h or m else None
            for _, sc in h + m:
                cue_score = scores.add(cue_score, sc)
            r.scores.append(cue_score)
            if p.groups:
                at = f"cue {k + 1} ({format_ms(c.start)})"
                if len(lines) > MAX_LINES or any(visible_length(x) > width for x in lines):
                    r.report.long.append((at, len(lines)))
                cps = chars_per_second(lines, c.start, c.end)
                if cps is not None:
                    r.report.cps.append((at, cps))
        if scorer is None:
            r.scores = []
        out.append(r)
    return out


def output_format(src: Path, dest: Path | None) -> str:
    fmt = FORMATS[src.suffix.lower()]
    if dest is not None and dest.suffix.lower() in FORMATS and FORMATS[dest.suffix.lower()] != fmt:
        raise ValueError(f"{dest}: the output keeps the input's format ({fmt}); converting {src.suffix} to "
                         f"{dest.suffix} is not supported (pysubs2 / ffmpeg convert subtitle formats)")
    return fmt


def translate_file(translator, src: str | Path, dest: str | Path | None,
                   options: SubtitleOptions = SubtitleOptions(), progress: bool = False,
                   scorer: scores.Scorer | None = None, scores_out: str = "") -> str:
    """Translate the subtitle file ``src`` as one document; write it to ``dest`` (UTF-8,
    atomically) unless None; returns the output text. Its layout and reading speed are logged
    (``LayoutReport.log``); with ``scorer`` its cues' scores go to ``scores_out``
    (``inference/scores.py``). Raises OSError, EncodingError, SubtitleError."""
    src = Path(src)
    fmt = output_format(src, Path(dest) if dest else None)
    doc = read_subtitles(src, options.encoding)
    t0 = time.time()
    r = translate_docs(translator, [doc], options, progress, scorer)[0]
    if options.language:
        doc.set_language(options.language)
    text = doc.render(r.texts, fmt)
    log.info("%s: %d cues translated in %.1f s (%s)", src, len(doc.cues), time.time() - t0, doc.encoding)
    r.report.log(log, str(src), options.max_line_length, options.max_cps)
    if dest is not None:
        atomic_write_text(dest, text)
    if scorer is not None and scores_out:
        rows = r.rows(doc)
        scores.write(scores_out, rows)
        scores.log_lowest(str(src), [(f"cue {x['cue']} ({x['start']})", s) for x, s in zip(rows, r.scores)])
    return text


def subtitle_files(inp: Path) -> list[Path]:
    """The subtitle files under ``inp`` (recursively, hidden ones skipped), in natural order."""
    files = [p for p in inp.rglob("*") if p.is_file() and is_subtitle(p)
             and not any(part.startswith(".") for part in p.relative_to(inp).parts)]
    return sorted(files, key=lambda p: natural_key(p.relative_to(inp)))


LANGUAGE_TAGS = {"zh": ("zh", "zho", "chi", "chs", "cht", "zh-cn", "zh-tw", "zh-hk", "zh-hans", "zh-hant", "zh_cn",
                        "zh_tw")}       # a source language's tags in subtitle file names (name.TAG.srt)


def output_path(src: Path, inp: Path, out: Path, suffix: str | tuple[str, str] = "") -> Path:
    """``src``'s output: its path relative to ``inp`` under ``out``, ``suffix`` inserted before
    the subtitle extension (``ep01.srt`` + ``.en`` → ``ep01.en.srt``; ``""`` keeps the name).
    ``suffix = (".zh", ".en")`` (the model's languages, ``options.language_suffixes``; the
    default of ``run_config``): the target's tag inserted, replacing a tag of the source
    language (``LANGUAGE_TAGS``) — ``ep01.srt``, ``ep01.zh.srt`` and ``ep01.chs.srt`` all give
    ``ep01.en.srt``, the ``name.LANG.srt`` of video players and subtitle tools."""
    dest = out / src.relative_to(inp)
    if isinstance(suffix, tuple):
        old, new = suffix[0].lstrip("."), suffix[1]
        stem = Path(dest.stem)
        base = stem.stem if stem.suffix.lower().lstrip(".") in LANGUAGE_TAGS.get(old, (old,)) else dest.stem
        return dest.with_name(base + new + dest.suffix)
    return dest.with_name(dest.stem + suffix + dest.suffix) if suffix else dest


def _check_outputs(files: list[Path], inp: Path, out: Path, suffix: str | tuple[str, str]) -> None:
    seen: dict[Path, Path] = {}
    for f in files:
        dest = output_path(f, inp, out, suffix)
        if dest in seen:
            raise ValueError(f"{seen[dest]} and {f} would both be translated to {dest}: choose another --out-suffix")
        seen[dest] = f


def translate_directory(translator, inp: str | Path, out: str | Path, options: SubtitleOptions = SubtitleOptions(),
                        out_suffix: str | tuple[str, str] = "", resume: bool = False, group: int = GROUP_SENTENCES,
                        scorer: scores.Scorer | None = None, scores_out: str = ""):
    """Translate every subtitle file under ``inp`` into ``out`` (same relative paths,
    ``output_path`` with ``out_suffix``): files in natural order, up to ``group`` cues translated
    together, each file its own document, laid out and reported as ``translate_file`` does; with
    ``scorer`` every cue's scores go to ``scores_out``. A file that cannot be read or parsed is
    reported and skipped; ``resume`` skips files whose output exists. Returns the
    ``collection.CollectionSummary``; raises ``collection.CollectionError`` at the end when some
    files failed (the others are written), ValueError when ``out`` lies inside ``inp``, no
    subtitle file is there or two files would have one output."""
    from doctrans.inference.collection import CollectionSummary

    inp, out = Path(inp), Path(out)
    if out.resolve().is_relative_to(inp.resolve()):
        raise ValueError(f"output directory {out} is inside the input directory {inp}: choose another")
    files = subtitle_files(inp)
    if not files:
        raise ValueError(f"{inp}: no subtitle files ({', '.join(FORMATS)}) in it")
    _check_outputs(files, inp, out, out_suffix)
    s, t0 = CollectionSummary(), time.time()
    pending: list[tuple[Path, SubtitleDoc]] = []
    rows: list[dict] = []
    scored: list = []

    def flush():
        if not pending:
            return
        try:
            done = translate_docs(translator, [d for _, d in pending], options, scorer=scorer)
        except ValueError as e:                 # attribute the failure to its file
            if len(pending) == 1:
                s.failed.append((str(pending[0][0]), str(e)))
                log.error("skipped %s: %s", pending[0][0], e)
                pending.clear()
                return
            done = []
            for f, d in pending:
                try:
                    done.append(translate_docs(translator, [d], options, scorer=scorer)[0])
                except ValueError as e1:
                    done.append(None)
                    s.failed.append((str(f), str(e1)))
        for (f, d), r in zip(pending, done):
            if r is None:
                continue
            if options.language:
                d.set_language(options.language)
            atomic_write_text(output_path(f, inp, out, out_suffix), d.render(r.texts))
            r.report.log(log, str(f), options.max_line_length, options.max_cps)
            if scorer is not None:
                rows.extend(r.rows(d))
                scored.extend((f"{f}: cue {k + 1}", x) for k, x in enumerate(r.scores))
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
    if scorer is not None and scores_out:
        scores.write(scores_out, rows)
        scores.log_lowest(str(inp), scored)
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


def run_config(cfg, inputs_of=None, scorer: scores.Scorer | None = None) -> Path | None:
    """``doctrans translate`` of a subtitle file (to ``cfg.io.output``, or stdout for ``-``) or a
    directory of them (``translate_directory``; ``out_suffix`` and ``resume`` apply, ``workers``
    and the plain-text options are ignored with a warning). The translation's lines are laid out
    in ``cfg.io.max_line_length`` characters, cues over ``cfg.io.max_cps`` reported; a header naming
    the file's language names the model's target language; a directory's outputs are named
    ``name.LANG.srt`` unless ``cfg.io.out_suffix`` says otherwise (``output_path``); ``cfg.io.scores``:
    each cue's score (``scorer``, ``inference/scores.py``). Raises like ``translate_file`` /
    ``translate_directory``, ValueError for options subtitles cannot have and, before the model
    is loaded, for an output that is the input or cannot be written (``options.check_outputs``)."""
    import sys

    from doctrans.inference.options import check_outputs, language_suffixes, model_languages
    from doctrans.inference.translator import build_translator

    bad = [(cfg.io.docs, "--docs (a subtitle file is one document)"), (cfg.search.nbest, "--nbest"),
           (cfg.dp.dp_out, "--dp-out"), (cfg.io.output_format != "text", "--output-format"),
           (cfg.io.explain_context, "--explain-context")]
    given = [name for on, name in bad if on]
    if given:
        raise ValueError(f"{cfg.io.input}: {', '.join(given)} not supported for subtitle files")
    inp = Path(cfg.io.input)
    check_outputs({"--input": cfg.io.input, "--checkpoint": cfg.model.checkpoint}, {"--output": cfg.io.output,
                                                                          "--scores": cfg.io.scores})
    scores.check(cfg, inp.is_dir(), subtitles=True)
    if cfg.io.scores and scorer is None:
        raise ValueError("--scores needs a scorer (doctrans.stages.translate gives one)")
    if cfg.io.max_line_length < 1 or cfg.io.max_cps < 0:
        raise ValueError(f"--max-line-length must be ≥ 1 and --max-cps ≥ 0, got {cfg.io.max_line_length} and "
                         f"{cfg.io.max_cps}")
    langs = model_languages(cfg.model.checkpoint)
    if inp.is_dir() and cfg.io.output == "-":
        raise ValueError(f"input {inp} is a directory: give --output DIR")
    translator = build_translator(cfg, inputs_of)
    options = SubtitleOptions(cfg.io.encoding or ENCODINGS_AUTO, cfg.io.script, cfg.io.bilingual, cfg.io.max_line_length,
                              cfg.io.max_cps, langs[1] if langs else "", inner_tags=translator.protects_spans)
    if inp.is_dir():
        if cfg.io.workers > 1:
            log.warning("--workers %d: subtitle directories are translated by this one process", cfg.io.workers)
        suffix = cfg.io.out_suffix if cfg.io.out_suffix is not None else language_suffixes(*langs) if langs else ""
        translate_directory(translator, inp, Path(cfg.io.output), options,
                            suffix, cfg.io.resume, cfg.io.group_lines, scorer if cfg.io.scores else None, cfg.io.scores)
        return Path(cfg.io.output)
    dest = None if cfg.io.output == "-" else Path(cfg.io.output)
    text = translate_file(translator, inp, dest, options, progress=dest is not None,
                          scorer=scorer if cfg.io.scores else None, scores_out=cfg.io.scores)
    if dest is None:
        sys.stdout.write(text)
    return dest
