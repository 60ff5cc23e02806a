"""``doctrans translate``: batched beam search over a file, stdin, or a directory of documents.

Input lines are normalised, segmented (jieba), BPE-encoded with the training data's codes,
translated with beam search (``beam_search.py``), BPE-merged and Moses-detokenized (unless
``tokenized``). The output always has exactly as many lines as the input; an empty input line
gives an empty output line without running the model; a line longer than the model can read is
split, translated in pieces and joined back (``long_lines.py``). A directory input is mirrored
file by file under the output directory, so document files keep their boundaries; bad files are
reported and skipped (``collection.py``; which files, ``glob``, and the outputs' names,
``out_suffix``, are described there); the directory options given for a file or stdin are
ignored with a warning, and so is a context model given no documents (one document). An SGML
input gives text, or with ``output_format="sgml"`` its ``<DOC>`` blocks with the translations
(``data/sgml.format_sgml``). ``nbest`` > 0 also writes each line's best hypotheses with their
scores as JSON lines (``write_nbest``; sentence-level models). The checkpoint carries the BPE
codes and text settings, so it translates without its prepared dataset. Engines (``load_model``):
``native`` searches with ``beam_search`` (``quantize="int8"``: int8 output and feed-forward layers,
``quantize_int8``); ``ctranslate2`` runs the search of a ``doctrans export`` directory in
CTranslate2 (``ct2.py``) — the text processing, line handling and documents stay these.

The pieces: ``config.py`` (``TranslateConfig``: the model, search, input/output and DP settings,
each declared once), ``engine.py`` (the engine interface), ``loading.py`` (checkpoints,
quantization, text processors, engines), ``decode.py`` (``decode_corpus``), ``translator.py`` (``Translator``),
``reconstructing.py`` (reconstruction decoding); this module is the stage (inputs, directories,
n-best lists, outputs) and re-exports their public names, so ``from doctrans.inference.translate
import TranslateConfig, Translator, …`` keeps working.
"""
from __future__ import annotations

import json
import logging
import os
import sys
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path

import torch

from doctrans.inference.collection import CollectionSummary, Sharing, TextReading, translate_collection
from doctrans.inference.config import TranslateConfig
from doctrans.inference.decode import decode_corpus
from doctrans.inference.loading import QUANTIZE, LoadedModel, load_model, quantize_int8, text_processors
from doctrans.inference.options import check_outputs, directory_out_suffix
from doctrans.inference import scores
from doctrans.inference.reconstructing import RERANK_BLOCK
from doctrans.inference.scores import Scorer
from doctrans.inference.translator import InputsOf, Translation, Translator, build_translator
from doctrans.runtime import distributed
from doctrans.runtime.device import resolve_device
from doctrans.utils.io import atomic_write_lines, atomic_write_text

__all__ = ["QUANTIZE", "RERANK_BLOCK", "SGML_SUFFIXES", "InputsOf", "LoadedModel", "TranslateConfig", "Translation",
           "Translator", "build_translator", "decode_corpus", "load_model", "process_threads", "quantize_int8",
           "read_documents", "read_input", "text_processors", "translate_directory", "translate_input", "write_nbest"]

log = logging.getLogger(__name__)

SGML_SUFFIXES = (".sgm", ".sgml", ".xml")        # an input read as SGML (its <DOC> blocks are documents)


def read_input(path: str, errors: str = "strict", encoding: str = "") -> list[str]:
    """Lines of a file, or of stdin for ``-`` (named ``<stdin>`` in errors), decoded by
    ``data.encoding.text_lines``: ``encoding`` "" reads UTF-8 (a file that is not UTF-8 but
    wholly GB18030 or Big5: that, logged; else ``errors`` as ``utils.io.decode_lines``); ``auto``
    or a codec name decodes with ``data.encoding.decode_text`` (detected, or as given; logged).
    Raises TextDecodeError / EncodingError naming the file and line."""
    from doctrans.data.encoding import text_lines

    if path == "-":
        buf = getattr(sys.stdin, "buffer", None)
        data, name = (buf.read() if buf is not None else sys.stdin.read().encode("utf-8")), "<stdin>"
    else:
        data, name = Path(path).read_bytes(), path
    return text_lines(data, name, errors, encoding)


def read_documents(cfg: TranslateConfig) -> tuple[list[str], list[str] | None]:
    """The input lines and their document ids: from ``cfg.io.docs`` (``doc_id<TAB>position`` per
    input line, as ``PREP/{split}.docs``), or the ``<DOC>`` blocks of an SGML input (``.sgm`` /
    ``.xml``: its first system's segments are the lines), else None (one document). Raises
    ValueError naming the file and line for a docs file whose line count differs from the
    input, positions that do not go up by one, a document that is not contiguous, or an SGML
    file without ``<DOC>`` blocks."""
    from doctrans.data.documents import read_doc_positions
    from doctrans.data.sgml import read_sgml

    if _is_sgml(cfg.io.input):
        if cfg.io.docs:
            raise ValueError(f"--docs given for an SGML input {cfg.io.input}: its <DOC> blocks are the documents")
        first = read_sgml(cfg.io.input)[0]
        return list(first.segments), first.doc_ids()
    from doctrans.data.encoding import to_simplified

    lines = read_input(cfg.io.input, cfg.io.encoding_errors, cfg.io.encoding)
    lines = to_simplified(lines, "<stdin>" if cfg.io.input == "-" else cfg.io.input, cfg.io.script)[0]
    if not cfg.io.docs:
        return lines, None
    names, doc, _ = read_doc_positions(Path(cfg.io.docs), len(lines))
    return lines, [names[d] for d in doc]


def process_threads(threads: int, processes: int) -> int:
    """torch threads of each of ``processes`` translating processes on this machine when
    ``threads`` (0 = the usable cores) is the machine's budget: max(1, budget // processes)."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    return max(1, (threads or cores) // max(1, processes))


def _gather_summaries(s: CollectionSummary) -> CollectionSummary | None:
    """All ranks' summaries added up on rank 0 (seconds: the slowest rank's), None elsewhere."""
    parts = distributed.all_gather(s)
    if distributed.rank() != 0:
        return None
    total = CollectionSummary(seconds=max(p.seconds for p in parts))
    for p in parts:
        total.add(p)
    return total


def translate_directory(cfg: TranslateConfig, inputs_of: InputsOf | None = None) -> Path:
    """Translate the directory ``cfg.io.input`` into ``cfg.io.output`` as a collection, with
    ``cfg.io.workers`` processes, and sharded by rank under torchrun (WORLD_SIZE > 1: a gloo/nccl
    process group only to gather the summary). Raises like ``translate_collection``."""
    world = distributed.env_world()
    local = int(os.environ.get("LOCAL_WORLD_SIZE", "1") or 1) if world > 1 else 1
    threads = process_threads(cfg.model.threads, local * max(1, cfg.io.workers))
    if world > 1 or cfg.io.workers > 1 or cfg.model.threads:
        torch.set_num_threads(threads)
    try:
        if world > 1:
            distributed.setup(resolve_device(cfg.model.device))
        reading = TextReading(cfg.io.encoding_errors, cfg.io.encoding, cfg.io.script)
        io = cfg.io
        sharing = Sharing(io.workers, threads, (distributed.rank(), distributed.world()),
                          _gather_summaries if world > 1 else None)
        translate_collection(partial(build_translator, cfg, inputs_of), Path(io.input), Path(io.output), io.resume,
                             reading, progress=distributed.env_rank() == 0, sharing=sharing,
                             group_lines=io.group_lines, pattern=io.glob,
                             out_suffix=directory_out_suffix(io.out_suffix, cfg.model.checkpoint))
    finally:
        distributed.shutdown()
    return Path(cfg.io.output)


def _warn_directory_options(cfg: TranslateConfig, name: str) -> None:
    """A warning for each directory-only option given for a file or stdin (they do nothing there)."""
    given = [(cfg.io.workers > 1, f"--workers {cfg.io.workers}"), (cfg.io.resume, "--resume"),
             (cfg.io.glob is not None, "--glob"), (cfg.io.out_suffix is not None, "--out-suffix")]
    for on, option in given:
        if on:
            log.warning("%s is for a directory input: ignored for %s (translated by this one process)", option, name)


def translate_input(cfg: TranslateConfig, inputs_of: InputsOf | None = None,
                    after: Callable[[Translator, Translation, list[str] | None], None] | None = None,
                    scorer: Scorer | None = None) -> Path | None:
    """Translate ``cfg.io.input`` to ``cfg.io.output``; returns the output path (None for stdout).

    ``inputs_of``: builds each Translator's ``InputSetup`` from ``cfg`` (``dp_generator`` needs
    one: ``doctrans.dp.apply.dp_inputs``). ``after``: called for a file or stdin with the
    translator, the ``Translation`` and the document ids once translated (e.g. the
    ``--explain-context`` pictures), before the output is written. ``scorer``: makes
    ``cfg.io.scores`` (``inference/scores.py``; ``stages.translate`` gives
    ``evaluation.confidence.line_scores``).

    A directory is translated as a collection (``translate_directory``: bad files skipped,
    ``resume``, ``workers``, torchrun ranks, summary). ``stream``: stdin a line at a time
    (``stream.run_config``); a subtitle file, or a directory of them, is translated by
    ``subtitles.run_config``. Raises FileNotFoundError for a missing
    input, ValueError (TextDecodeError) for undecodable input under ``encoding_errors="strict"``
    and for a file or stdin under torchrun (only a directory is sharded), CollectionError when
    documents of a collection failed (the others are written)."""
    inp = Path(cfg.io.input)
    if cfg.io.input != "-" and not inp.exists():
        raise FileNotFoundError(f"input not found: {inp}")
    from doctrans.inference import stream, subtitles

    scores.check(cfg, cfg.io.input != "-" and inp.is_dir(), subtitles.takes(cfg))
    if cfg.io.scores and scorer is None:
        raise ValueError("--scores needs a scorer (doctrans.stages.translate gives one)")
    if cfg.io.stream:
        return stream.run_config(cfg, inputs_of)
    if subtitles.takes(cfg):
        return subtitles.run_config(cfg, inputs_of, scorer)
    _check_outputs(cfg)
    if cfg.io.input != "-" and inp.is_dir():
        if cfg.io.output == "-":
            raise ValueError(f"input {inp} is a directory: give --output DIR")
        return translate_directory(cfg, inputs_of)
    if distributed.env_world() > 1:
        raise ValueError("torchrun (WORLD_SIZE > 1) shards a directory of documents: translate a single file "
                         "or stdin without torchrun")
    name = "<stdin>" if cfg.io.input == "-" else cfg.io.input
    _warn_directory_options(cfg, name)
    if cfg.model.threads:
        torch.set_num_threads(cfg.model.threads)
    translator = build_translator(cfg, inputs_of)
    lines, doc_ids = read_documents(cfg)
    if not lines:
        log.info("%s: empty input: the output is empty", name)
    if doc_ids is None and translator.reads_documents and any(x.strip() for x in lines):
        log.warning("%s: no documents given: the context model translates the whole input as one document "
                    "(give documents with --docs FILE, an .sgm input, or a directory of document files)", name)
    t0 = time.time()
    res = translator.translate_detailed(lines, progress=cfg.io.output != "-", name=name, doc_ids=doc_ids)
    out = res.lines
    dt = time.time() - t0
    log.info("translated %d lines in %.1f s (%.1f sent/s, beam %d)", len(lines), dt,
             len(lines) / max(dt, 1e-9), cfg.search.beam)
    if after is not None:
        after(translator, res, doc_ids)
    if cfg.search.nbest:
        write_nbest(cfg.io.nbest_out, len(lines), res.nbest)
    if cfg.io.scores:
        got = scorer(translator, res, doc_ids)
        scores.write(cfg.io.scores, scores.line_rows(got))
        scores.log_lowest(name, [(f"line {k + 1}", x) for k, x in enumerate(got)])
    if cfg.dp.dp_out:
        atomic_write_lines(cfg.dp.dp_out, res.dp_lines)
        log.info("wrote the predicted DP-completed source to %s (score it: doctrans score dp %s --base …)",
                 cfg.dp.dp_out, cfg.dp.dp_out)
    text = "".join(f"{line}\n" for line in out)
    if cfg.io.output_format == "sgml":
        from doctrans.data.sgml import format_sgml, read_sgml, set_attributes

        attrs = set_attributes(cfg.io.input)
        text = format_sgml(read_sgml(cfg.io.input)[0].docs, out, setid=attrs.get("setid", "doctrans"),
                           srclang=attrs.get("srclang", "zh"), trglang=attrs.get("trglang", "en"))
    if cfg.io.output == "-":
        sys.stdout.write(text)
        return None
    atomic_write_text(cfg.io.output, text)
    return Path(cfg.io.output)


def _is_sgml(path: str) -> bool:
    """An SGML input: named .sgm/.sgml/.xml, or a file whose content starts with an SGML set or
    ``<DOC>`` tag whatever its name (``data.sgml.is_sgml_file``)."""
    from doctrans.data.sgml import is_sgml_file

    return path != "-" and (Path(path).suffix.lower() in SGML_SUFFIXES or is_sgml_file(path))


def _check_outputs(cfg: TranslateConfig) -> None:
    """ValueError for output options the input cannot have, and for an output that is an input
    or an existing directory (``options.check_outputs``; before the model is loaded)."""
    check_outputs({"--input": cfg.io.input, "--docs": cfg.io.docs, "--dp-docs": cfg.dp.dp_docs,
                   "--checkpoint": cfg.model.checkpoint, "--shortlist": cfg.model.shortlist},
                  {"--output": cfg.io.output, "--nbest-out": cfg.io.nbest_out, "--dp-out": cfg.dp.dp_out,
                   "--write-lattice": cfg.dp.write_lattice, "--scores": cfg.io.scores})
    if cfg.io.output_format not in ("text", "sgml"):
        raise ValueError(f"output_format must be text or sgml, got {cfg.io.output_format!r}")
    is_dir = cfg.io.input != "-" and Path(cfg.io.input).is_dir()
    if cfg.io.output_format == "sgml" and (is_dir or not _is_sgml(cfg.io.input)):
        raise ValueError(f"--output-format sgml needs an SGML input file ({', '.join(SGML_SUFFIXES)}), whose <DOC> "
                         f"blocks it mirrors; {cfg.io.input} is not one")
    if cfg.search.nbest and not cfg.io.nbest_out:
        raise ValueError("--nbest N needs --nbest-out FILE (where the n-best lists go)")
    if cfg.io.nbest_out and not cfg.search.nbest:
        raise ValueError("--nbest-out needs --nbest N (how many hypotheses per line)")
    if cfg.search.nbest and cfg.io.nbest_out == "-" and cfg.io.output == "-":
        raise ValueError("--nbest-out - and the translations both go to stdout: give --output FILE or a --nbest-out FILE")
    if cfg.search.nbest and is_dir:
        raise ValueError("--nbest is for a file or stdin input, not a directory")
    if cfg.dp.dp_out and is_dir:
        raise ValueError("--dp-out is for a file or stdin input, not a directory")


def write_nbest(path: str, n_lines: int, nbest: dict[int, list[tuple[str, float | None]]]) -> None:
    """``--nbest-out``: one JSON object per input line, ``{"line": k (from 1), "hypotheses":
    [{"rank": r (from 1), "text": …, "score": normalised log-prob or null}, …]}``, best first,
    an empty list for an empty line; written atomically, or to stdout for ``-``."""
    rows = []
    for i in range(n_lines):
        hyps = [{"rank": r + 1, "text": t, "score": None if sc is None else round(sc, 6)}
                for r, (t, sc) in enumerate(nbest.get(i, []))]
        rows.append(json.dumps({"line": i + 1, "hypotheses": hyps}, ensure_ascii=False))
    if path == "-":
        sys.stdout.write("".join(f"{r}\n" for r in rows))
    else:
        atomic_write_lines(path, rows)
