"""Translating a stream of lines as they come, with a rolling document context.

``DocumentSession(translator)``: one document translated a line at a time —
``session.translate(line)`` returns that line's translation at once. A sentence model translates
the line alone. A context model (``model.document.context_sents`` = N > 0) translates it with
the N previous non-empty lines of the session as its context, exactly as the document path
(``inference/documents.py``) does for a whole file: the session keeps its ``history``, per
translated line (source ids, the model's own 1-best target ids, output text), and hands the
previous lines' 1-best to ``translate_documents(given=…)``, so they are read as context and not
translated again; a model reading target-side context (HAN decoder, any ``needs_target`` model)
gets its own previous translations there (docs/models.md §1.1). ``on_translated`` is the hook a
caller (or a model that wants the previous outputs in another form) uses to see each entry as it
is recorded. For a sentence model and for a target-side context model the stream therefore gives
the same translations as translating the whole document at once (a source-side model too, up to
batch-padding numerics). Models that cannot be served this way — sub-document models
(``context_block``, HGC: a sub-document is encoded whole), the CTranslate2 engine — translate
the window of the previous lines plus the new one as a document and keep its last line (the
same context, each call translating the window again).

A line of several sentences (``Translator.segments``, ``sentences.py``) is translated as that
many consecutive sentences of the session, each reading the one before (in the line too), and
their translations joined, as the document path does; its entry keeps them as ``sentences``,
the next lines' context. Empty lines are not sentences: they give "" and are not context (as in
a file); nor are lines without Chinese, which are passed through unchanged, and a Chinese line's
spans (Latin-script text, numbers, glossary terms) are kept, as ``Translator.translate`` does
(``spans.py``). Without segmentation (``--segment off``) a line over the model's length is
translated by ``Translator.translate`` (split in pieces) without context and is not context for
the next lines (a warning says so); with it, its sentences (and chunks) are translated as above.

``stream_lines(translator, lines)``: a generator of translations, one per input line, a blank
line ending the current document (it gives a blank line and starts a new session) — the
``doctrans translate --stream`` protocol (``run_stream``: stdin to stdout, each translation
written and flushed as soon as its line is read and translated). Stdin is read as the file
readers read files: UTF-8 under the ``--encoding-errors`` policy (strict: an error naming the
line; replace: U+FFFD with a warning naming the line; ``decoded_lines``), a byte-order mark at
a line's start dropped.
"""
from __future__ import annotations

import logging
import sys
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, replace

import numpy as np

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Entry:
    """A translated line of a session: ``source`` (its text), ``src_ids`` (BPE ids, ``</s>`` last),
    ``tgt_ids`` (the 1-best BPE ids, no ``</s>``; None when it is not context: a split long line,
    and for a line of several sentences, whose ``sentences`` hold them), ``output`` (the text
    returned), ``sentences``: a line translated as several sentences — per sentence (source ids,
    1-best ids), in order; () otherwise."""

    source: str
    src_ids: np.ndarray | None
    tgt_ids: list[int] | None
    output: str
    sentences: tuple[tuple[np.ndarray, list[int]], ...] = ()

    def context(self) -> tuple[tuple[np.ndarray, list[int]], ...]:
        """The (source ids, 1-best ids) of this line's sentences as context for later lines (none
        when it is not context)."""
        if self.sentences:
            return self.sentences
        return ((self.src_ids, self.tgt_ids),) if self.tgt_ids is not None else ()


class DocumentSession:
    """One document translated line by line with a rolling context (module doc). Not
    thread-safe: one session per document, one call at a time."""

    def __init__(self, translator, on_translated: Callable[[Entry], None] | None = None):
        self._tr = translator
        self.history: list[Entry] = []
        self.on_translated = on_translated
        model = translator.model
        doc = model.document if model is not None and translator.reads_documents else None
        self.context_sents = doc.context_sents if doc is not None else 0
        self.direct = model is not None and doc is not None and doc.context_block == 0
        # the window of previous lines of an indirect context model: its N sentences, or the rest of a
        # sub-document of K (K − 1), or 3 when the engine does not say (CTranslate2's concatenation model)
        block = doc.context_block if doc is not None else 0
        self.window = self.context_sents or max(1, block - 1) if doc is not None else 3

    @property
    def outputs(self) -> list[str]:
        """The translations of the non-empty lines so far, in order."""
        return [e.output for e in self.history]

    def _record(self, entry: Entry) -> str:
        self.history.append(entry)
        if self.on_translated is not None:
            self.on_translated(entry)
        return entry.output

    def translate(self, line: str) -> str:
        """The translation of the document's next line ("" for an empty line)."""
        if not line.strip():
            return ""
        tr = self._tr
        if not tr.reads_documents:
            return self._record(Entry(line, None, None, tr.translate([line])[0]))
        if not self.direct:                 # the window as a document, its last line kept
            window = [e.source for e in self.history[-self.window:]] + [line] if self.window else [line]
            return self._record(Entry(line, None, None, tr.translate(window, doc_ids=["s"] * len(window))[-1]))
        masked = tr.mask(line)
        if masked.passed:                   # no Chinese: the line itself, not context (Translator.translate_detailed)
            log.info("a stream line without Chinese passed through untranslated (--translate-all translates it)")
            return self._record(Entry(line, None, None, line))
        bpe = tr.source_bpe([masked.text])[0]
        if not tr.segments and len(bpe.split()) > tr.max_source_units():
            log.warning("a stream line of %d BPE units is over the model's limit: translated in pieces without "
                        "context, and not context for the next lines", len(bpe.split()))
            return self._record(Entry(line, None, None, tr.translate([line])[0]))
        split = tr.split_source([bpe])               # its sentences (one piece: the line)
        ids = [tr.src_vocab.encode(p) for p in split.pieces]
        ctx = [s for e in self.history for s in e.context()][-self.context_sents:]
        doc = [src for src, _ in ctx] + ids
        given = {(0, k): tgt for k, (_, tgt) in enumerate(ctx)}
        whole = replace(tr.cfg.search, history_chunk=0)     # the line after its given context: no pieces
        hyps = tr.engine.decode_documents([doc], whole, given=given)[0][len(ctx):]
        out = tr.restore(masked, tr.postprocess(split.join(hyps, 1))[0])
        tgt = [tr.tgt_vocab.encode(h, add_eos=False).tolist() for h in hyps]
        if len(ids) == 1:
            return self._record(Entry(line, ids[0], tgt[0], out))
        return self._record(Entry(line, None, None, out, tuple(zip(ids, tgt))))


def stream_lines(translator, lines: Iterable[str],
                 on_translated: Callable[[Entry], None] | None = None) -> Iterator[str]:
    """Each line's translation as soon as it is translated (a generator): lines of one document
    share a ``DocumentSession``; a blank line gives "" and ends the document (the next line starts
    a new one). Line endings are stripped, and a byte-order mark (U+FEFF) at a line's start, as
    the file readers drop it (``utils.io.decode_lines``)."""
    session = DocumentSession(translator, on_translated)
    for line in lines:
        line = line.rstrip("\r\n").removeprefix("\ufeff")
        if not line.strip():
            session = DocumentSession(translator, on_translated)
            yield ""
            continue
        yield session.translate(line)


def decoded_lines(inp, errors: str = "strict", name: str = "<stdin>") -> Iterator[str]:
    """The lines of ``inp`` (its ``readline``, called once per line as it is needed), without their
    ``\\n`` (and a trailing ``\\r``). Bytes (a binary stream: ``sys.stdin.buffer``) are decoded as
    UTF-8 line by line under ``errors``, the ``--encoding-errors`` policy of files
    (``utils.io.decode_lines``): strict raises TextDecodeError (a ValueError) naming ``name``,
    the 1-based line and the byte; replace turns each undecodable byte sequence into U+FFFD and
    logs a warning naming the line. Text (a text stream) is taken as read."""
    from doctrans.utils.io import ENCODING_ERRORS, decode_line

    if errors not in ENCODING_ERRORS:
        raise ValueError(f"encoding errors must be one of {', '.join(ENCODING_ERRORS)}, got {errors!r}")
    n = 0
    while True:
        raw = inp.readline()
        if not raw:
            return
        n += 1
        line = decode_line(raw.rstrip(b"\n"), name, n, errors) if isinstance(raw, bytes) else raw.rstrip("\n")
        yield line.removesuffix("\r")


def run_stream(translator, inp=None, out=None, errors: str = "strict",
               convert: Callable[[str], str] | None = None) -> int:
    """``doctrans translate --stream``: read ``inp`` (stdin's bytes) a line at a time
    (``decoded_lines`` with ``errors``; each line passed through ``convert`` when given), write
    each translation to ``out`` (stdout) followed by a newline and flush at once; a blank line
    ends a document (and is echoed). Returns the number of lines translated. Raises
    TextDecodeError for an undecodable line under ``errors="strict"`` (the lines before it are
    written)."""
    inp = inp if inp is not None else getattr(sys.stdin, "buffer", sys.stdin)
    out = out if out is not None else sys.stdout
    lines = decoded_lines(inp, errors)
    n = 0
    for hyp in stream_lines(translator, map(convert, lines) if convert is not None else lines):
        out.write(hyp + "\n")
        out.flush()
        n += 1
    return n


def _script_converter(script: str) -> Callable[[str], str] | None:
    """Per line, Traditional → Simplified (OpenCC t2s) for ``script`` auto (a line that
    ``is_traditional``) or traditional (every line); None for simplified."""
    if script == "simplified":
        return None
    from doctrans.data.encoding import is_traditional, opencc

    t2s, seen = opencc("t2s"), []

    def convert(line: str) -> str:
        if script == "traditional" or is_traditional(line):
            if not seen:
                log.info("<stdin>: Traditional script: converted to Simplified with OpenCC t2s (--script)")
                seen.append(True)
            return t2s.convert(line)
        return line

    return convert


def run_config(cfg, inputs_of=None) -> None:
    """``doctrans translate --stream`` with ``cfg`` (a ``TranslateConfig``): the model loaded
    once, then ``run_stream`` over stdin. Raises ValueError for an input or output other than
    ``-`` and for options a stream cannot have."""
    from doctrans.inference.translator import build_translator

    if cfg.io.input != "-" or cfg.io.output != "-":
        raise ValueError("--stream reads stdin and writes stdout: leave out --input and --output")
    io, dp = cfg.io, cfg.dp
    bad = [(io.docs, "--docs (a blank line ends a document)"), (cfg.search.nbest, "--nbest"), (dp.dp_out, "--dp-out"),
           (dp.rerank, "--rerank"), (dp.dp_generator, "--dp-generator"), (io.output_format != "text", "--output-format"),
           (io.explain_context, "--explain-context"), (io.encoding not in ("", "utf-8"), "--encoding (UTF-8 only)")]
    given = [name for on, name in bad if on]
    if given:
        raise ValueError(f"--stream does not support {', '.join(given)}")
    translator = build_translator(cfg, inputs_of)
    n = run_stream(translator, errors=cfg.io.encoding_errors, convert=_script_converter(cfg.io.script))
    log.info("--stream: %d lines translated", n)
