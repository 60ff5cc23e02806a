"""``doctrans translate`` (``doctrans/inference/translate.py``): its options in sections, each made from
its setting's field (``inference/config.py``; ``cli.options.translate_options``)."""
from __future__ import annotations

import click

from doctrans.cli.options import ENSEMBLE, SectionedCommand, ensemble_options, ensemble_settings, given, translate_options


# --help lists the options by section (options.SectionedCommand), in this order.
SECTIONS = (
    ("Model and engine", ("checkpoint", "sentence", "ensemble", "ensemble_weights", "ensemble_mode", "engine",
                          "compute_type", "quantize", "shortlist", "device", "threads")),
    ("Input", ("input", "input_format", "prepared", "encoding", "encoding_errors", "script", "segment", "max_source_len",
               "glossary", "protect", "translate_all")),
    ("Output", ("output", "tokenized", "recase", "output_format", "nbest", "nbest_out", "scores")),
    ("Subtitle files and streams", ("bilingual", "max_line_length", "max_cps", "stream")),
    ("Search", ("beam", "lenpen", "max_len_ratio", "max_len_extra", "no_repeat_ngram_size", "batch_sentences")),
    ("Documents and context models", ("docs", "history_chunk", "warmup_beam", "context_options", "explain_context", "explain_dir")),
    ("Directory input", ("workers", "group_lines", "glob", "out_suffix", "resume")),
    ("Dropped pronouns (DP input)", ("dp_generator", "dp_input", "dp_nbest", "dp_combine", "dp_weights", "dp_docs",
                                    "write_lattice")),
    ("Reconstructor (reranking, DP output)", ("rerank", "rerank_k", "rerank_vocab", "dp_out", "dp_threshold")),
)


@click.command("translate", cls=SectionedCommand, sections=SECTIONS,
               short_help="Translate a file, stdin or a directory of documents (beam search).")
@translate_options("checkpoint")
@click.option("--sentence", is_flag=True,
              help="Without -c: translate with the shipped sentence-level model instead of the document model.")
@ensemble_options
@translate_options(*(n for _, names in SECTIONS for n in names if n not in ("checkpoint", "sentence", *ENSEMBLE)))
def translate_cmd(sentence: bool, **kw) -> None:
    """Translate a file, stdin, or a directory of documents with beam search.

    The output has exactly as many lines as the input; an empty input line gives an empty
    output line; an over-long line is split, translated in pieces and joined (with a warning).
    Output is BPE-merged and Moses-detokenized unless --tokenized. A model trained on lowercased
    data (the default, as TVsub's references) writes lowercase; its recaser restores the case of
    detokenized output (--recase; scores are case-insensitive). An SGML input (.sgm, .sgml,
    .xml) is read as its first system's segments and gives plain text, one line per segment,
    unless --output-format sgml. The checkpoint carries its BPE codes, so it translates from
    any directory.

    A directory of documents: the files under it, recursively (hidden ones skipped), that
    match --glob (by default those with the most common suffix among its top-level files, so
    a readme.txt beside *.zh documents is left out), each translated to the same relative
    path under --output (ep1.zh → ep1.en, or the suffix replaced by --out-suffix). Bad files are
    reported and skipped (exit code 1 at the end), --resume skips finished documents;
    --workers N translates with N processes, and `torchrun --nproc_per_node=K -m doctrans.cli
    translate -i DIR …` shards the documents by rank (rank 0 logs the summary of all ranks).
    These directory options are ignored, with a warning, for a file or stdin.

    A context model translates each document in order (--docs, an .sgm input, or the files of
    a directory); a plain file or stdin without --docs is one document (with a warning).
    --explain-context N draws where its context attention goes for N sentences.

    A model trained with a reconstructor (pipelines/dp/rec_*.yaml): --rerank reconstructor
    rescores the k best translations with it (all k candidates of a batch in one pass), and
    --dp-out FILE writes a joint DP model's predicted DP-completed source.

    Without -c, the model shipped with doctrans translates (`doctrans models` lists them): the
    document model, or the sentence model with --sentence.

    Subtitle files (.srt, .vtt, .ass, .ssa; or a directory of them): each file is one document,
    written in its own format with every cue's timing, index, style, position and markup kept
    and the same number of cues, the translation laid out in lines of at most --max-line-length
    characters, cues reading faster than --max-cps reported (inference/subtitles.py): `doctrans
    translate -c CKPT -i ep01.srt -o ep01.en.srt`; a directory's ep01.srt becomes OUT/ep01.en.srt.
    --stream: stdin a line at a time, each translation flushed, a
    blank line ending a document (inference/stream.py).
    """
    from doctrans.inference.translate import TranslateConfig
    from doctrans.runtime.shipped import resolve
    from doctrans.stages import translate

    checkpoint, engine = kw.pop("checkpoint"), kw["engine"]
    if sentence and checkpoint:
        raise click.UsageError("--sentence chooses a shipped model: give it without -c")
    if engine == "ctranslate2" and not checkpoint:
        from doctrans.inference.export import shipped_export_hint

        raise click.UsageError(shipped_export_hint("sentence" if sentence else "document"))
    checkpoint = resolve(checkpoint, "sentence" if sentence else "document")
    models = ensemble_settings(*(kw.pop(n) for n in ENSEMBLE))
    if models and engine != "native":
        raise click.UsageError("--ensemble needs the native engine")
    translate(TranslateConfig(checkpoint, **models, **given(kw)))
