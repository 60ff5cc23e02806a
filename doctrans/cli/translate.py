"""``doctrans translate`` (``doctrans/inference/translate.py``): its options in sections."""
from __future__ import annotations

import click

from doctrans.cli.options import AUTO_OR_COUNT, NON_NEGATIVE, POSITIVE, SectionedCommand, ensemble_options, ensemble_settings
from doctrans.inference.subtitle_layout import MAX_CPS, MAX_LINE_LENGTH


# --help lists the options by section (options.SectionedCommand), in this order.
SECTIONS = (
    ("Model and engine", ("checkpoint", "sentence", "ensemble", "ensemble_weights", "ensemble_mode", "engine",
                          "compute_type", "quantize", "shortlist", "device", "threads")),
    ("Input", ("input_", "input_format", "prepared", "encoding", "encoding_errors", "script", "segment", "max_source_len",
               "glossary", "protect", "translate_all")),
    ("Output", ("output", "tokenized", "recase", "output_format", "nbest", "nbest_out", "scores")),
    ("Subtitle files and streams", ("bilingual", "max_line_length", "max_cps", "stream")),
    ("Search", ("beam", "lenpen", "max_len_ratio", "max_len_extra", "batch_sentences")),
    ("Documents and context models", ("docs", "history_chunk", "warmup_beam", "context_options", "explain_context", "explain_dir")),
    ("Directory input", ("workers", "group_lines", "glob_", "out_suffix", "resume")),
    ("Dropped pronouns (DP input)", ("dp_generator", "dp_input", "dp_nbest", "dp_combine", "dp_weights", "dp_docs",
                                    "write_lattice")),
    ("Reconstructor (reranking, DP output)", ("rerank", "rerank_k", "rerank_vocab", "dp_out", "dp_threshold")),
)


@click.command("translate", cls=SectionedCommand, sections=SECTIONS,
               short_help="Translate a file, stdin or a directory of documents (beam search).")
@click.option("-c", "--checkpoint", default=None, metavar="CKPT|NAME",
              help="A checkpoint written by `doctrans train` (best.pt or last.pt), the name of a shipped model "
                   "(`doctrans models`), or with --engine ctranslate2 a directory written by `doctrans export "
                   "--format ctranslate2`. [default: the shipped document model; with --sentence the shipped "
                   "sentence model]")
@click.option("--sentence", is_flag=True,
              help="Without -c: translate with the shipped sentence-level model instead of the document model.")
@ensemble_options
@click.option("--engine", type=click.Choice(["native", "ctranslate2"]), default="native", show_default=True,
              help="native: doctrans' own beam search (torch); ctranslate2: the CTranslate2 engine on an exported "
                   "directory (sentence Transformer or concatenation model; pip install 'doctrans[ct2]').")
@click.option("--compute-type", default="default", show_default=True,
              type=click.Choice(["default", "auto", "float32", "int8", "int8_float32", "int8_float16", "int8_bfloat16",
                                 "int16", "float16", "bfloat16"]),
              help="--engine ctranslate2: weights/computation type (default: as exported, float32; int8 is int8 "
                   "weights and activations). With --engine native, int8 / int8_float32 mean --quantize int8 "
                   "(logged); types native lacks (float16, bfloat16, int16, …) are refused.")
@click.option("--quantize", type=click.Choice(["none", "int8"]), default="none", show_default=True,
              help="--engine native on CPU: int8 dynamic quantization of the output layer and feed-forward layers.")
@click.option("--shortlist", default="", metavar="FILE", type=click.Path(dir_okay=False),
              help="A lexical shortlist (`doctrans shortlist`): each batch's output layer runs over the likely "
                   "translations of its source tokens only (faster; scores normalised over them; with --engine "
                   "ctranslate2 it is CTranslate2's vocabulary map).")
@click.option("-i", "--input", "input_", default="-", show_default=True,
              help="Input file, a directory of document files (mirrored under --output), or - for stdin.")
@click.option("-o", "--output", default="-", show_default=True, help="Output file or directory, or - for stdout.")
@click.option("--beam", type=POSITIVE, default=5, show_default=True, help="Beam size (1 = greedy).")
@click.option("--lenpen", type=click.FloatRange(min=0), default=1.0, show_default=True,
              help="Length penalty: score = log p / length^lenpen (0 = none).")
@click.option("--max-len-ratio", type=click.FloatRange(min=0, min_open=True), default=1.5, show_default=True,
              help="Max output length = ratio × source length + --max-len-extra.")
@click.option("--max-len-extra", type=NON_NEGATIVE, default=10, show_default=True,
              help="Tokens an output may have beyond ratio × source length (0 = none; short sources need some).")
@click.option("--batch-sentences", type=POSITIVE, default=64, show_default=True,
              help="Sentences per beam-search batch.")
@click.option("--input-format", type=click.Choice(["raw", "tok", "bpe"]), default="raw", show_default=True,
              help="raw: untokenized Chinese; tok: already segmented; bpe: already BPE-encoded.")
@click.option("--tokenized", is_flag=True, help="Write Moses-tokenized output (BPE merged) instead of detokenized text.")
@click.option("--recase", type=click.Choice(["auto", "yes", "no"]), default="auto", show_default=True,
              help="Restore the case of a lowercasing model's output (I, Ross, the first word of each sentence) "
                   "with the recaser it carries (learnt by `doctrans preprocess` from the cased training "
                   "targets, data/casing.py). auto: detokenized output only; yes: tokenized output too (an "
                   "error for a model without one); no: lowercase, as the model writes it.")
@click.option("--prepared", default="", help="Prepared dataset dir holding the BPE codes (default: the codes inside "
                                             "the checkpoint; for older checkpoints, the dataset it names).")
@click.option("--threads", type=NON_NEGATIVE, default=0, show_default=True,
              help="torch threads (0 = all usable cores; idle OpenMP threads sleep: OMP_WAIT_POLICY=PASSIVE unless "
                   "set); with --workers or torchrun, the machine's budget, split evenly: each process gets "
                   "max(1, threads // processes).")
@click.option("--device", type=click.Choice(["auto", "cpu", "cuda"]), default="auto", show_default=True,
              help="auto: the GPU when torch sees one, else the CPU.")
@click.option("--workers", type=POSITIVE, default=1, show_default=True,
              help="Directory input: translate with N processes on this machine (each loads the model once). "
                   "Under torchrun, each rank translates its share of the documents (by rank).")
@click.option("--group-lines", type=POSITIVE, default=512, show_default=True,
              help="Directory input: consecutive documents are translated together (batched jointly) up to N "
                   "lines; the groups are what --workers and torchrun ranks share out.")
@click.option("--docs", default="", help="doc_id<TAB>position per input line (like PREP/test.docs): the documents a "
                                         "context model translates in order with their context. An SGML input "
                                         "(.sgm) takes its <DOC> blocks; a directory, one document per file. "
                                         "Sentence-level models ignore documents.")
@click.option("--history-chunk", type=AUTO_OR_COUNT, default="auto", show_default=True,
              help="Target-side context models (the rolling history: each line reads the model's own translation "
                   "of the previous ones, so a document's lines wait for each other): translate each document as "
                   "independent pieces of N lines, each preceded by the model's context lines as warm-up, so all "
                   "pieces decode side by side (0 = whole documents; auto = the shortest pieces, at least 8 lines, "
                   "that fill one batch of --batch-sentences). Faster on few long documents; a piece's first "
                   "line reads a warm-up translation made with less context. Both engines.")
@click.option("--warmup-beam", type=NON_NEGATIVE, default=1, show_default=True, metavar="W",
              help="With history pieces (--history-chunk): the beam of the warm-up lines, whose translations "
                   "are only the next lines' context (1 = greedy, the fastest: on the TVsub test 1 line of "
                   "1,154 differs from 0 = --beam's, 3% less time). Both engines.")
@click.option("--dp-generator", default="", help="Complete dropped pronouns in the input with this DP generator "
                                                 "(for models trained on +DP/+DPP sources, pipelines/dp/nmt_*.yaml); "
                                                 "A.pt:B.pt ensembles several.")
@click.option("--dp-input", type=click.Choice(["dp", "dpp"]), default="dp", show_default=True,
              help="dp: insert the predicted pronouns; dpp: insert #DP# at the predicted positions.")
@click.option("--dp-nbest", type=POSITIVE, default=1, show_default=True,
              help="Decode the N best DP completions of each sentence together (1 = the 1-best only).")
@click.option("--dp-combine", type=click.Choice(["mixture", "max", "1best"]), default="mixture", show_default=True,
              help="mixture: one shared beam scoring log Σ_r w_r p(y|x_r) (confusion-network analogue); "
                   "max: decode each variant, keep the best length-normalised hypothesis; 1best.")
@click.option("--dp-weights", type=click.Choice(["uniform", "generator"]), default="uniform", show_default=True,
              help="Mixture weights: 1/N (the thesis) or the generator's normalised completion scores.")
@click.option("--dp-docs", default="", help="doc<TAB>position per input line (document context of the generator).")
@click.option("--write-lattice", default="", help="Also write the DP input as Moses PLF confusion networks, one per line.")
@click.option("--encoding", default="", metavar="ENC",
              help="Input encoding: auto (detected: a byte-order mark, UTF-8, else GB18030 / Big5 / UTF-16 by "
                   "charset-normalizer; the choice is logged) or a codec (utf-8, gb18030, big5, utf-16). Default: "
                   "auto for subtitle files, UTF-8 for text (see --encoding-errors). Binary, mixed-encoding and "
                   "undecidable files are refused naming the file.")
@click.option("--script", type=click.Choice(["auto", "simplified", "traditional"]), default="auto", show_default=True,
              help="Chinese script of the input: auto converts Traditional input to Simplified (OpenCC t2s) for the "
                   "model when detected (logged); simplified: never convert; traditional: always convert.")
@click.option("--glossary", default="", metavar="FILE", type=click.Path(dir_okay=False),
              help="Terms to enforce: one source<TAB>target per line (UTF-8; blank and #-lines skipped). Where a "
                   "source term occurs (longest match first), the output has its target (the model reads a "
                   "placeholder it copies; inference/spans.py). A malformed line is an error naming it.")
@click.option("--protect/--no-protect", default=True, show_default=True,
              help="Keep Latin-script words and names, numbers of 2+ digits, URLs, e-mail addresses and markup "
                   "tags of a Chinese line as they are (placeholders the model copies, put back after it).")
@click.option("--translate-all", is_flag=True,
              help="Translate lines without Chinese too (no Han character, or kana: Japanese; Hangul: Korean). "
                   "Without it they are written unchanged, not sent to the model, and counted in the log.")
@click.option("--bilingual", is_flag=True,
              help="Subtitle files: write each cue's source lines above its translation (for review).")
@click.option("--max-line-length", type=POSITIVE, default=MAX_LINE_LENGTH, show_default=True, metavar="N",
              help="Subtitle files: lay each cue's translation out in lines of at most N characters: one line when "
                   "it fits, else two balanced lines broken at a natural point (after punctuation, not after an "
                   "article), more only when it does not fit in two (reported as a warning; no text is dropped); "
                   "dialogue keeps one line per speaker.")
@click.option("--max-cps", type=click.FloatRange(min=0), default=MAX_CPS, show_default=True, metavar="CPS",
              help="Subtitle files: report (a warning naming the fastest) the cues whose translation reads faster "
                   "than CPS characters per second (characters without line breaks and markup / the cue's "
                   "duration, as subtitle editors count them); 0 = no report.")
@click.option("--stream", is_flag=True,
              help="Read stdin a line at a time and write each line's translation as soon as it is ready (flushed); "
                   "a blank line ends a document (a context model's rolling context starts again).")
@click.option("--encoding-errors", type=click.Choice(["strict", "replace"]), default="strict", show_default=True,
              help="Input that is not UTF-8: strict: an error naming file, line and byte; replace: U+FFFD "
                   "for each undecodable byte sequence, with a warning giving their count.")
@click.option("--resume", is_flag=True, help="Directory input: skip documents whose output already exists "
                                             "with as many lines as the input (outputs are written atomically).")
@click.option("--segment", type=click.Choice(["model", "punct", "off"]), default="model", show_default=True,
              help="A line of several sentences (a paragraph) is translated sentence by sentence, each a sentence "
                   "of its document (a context model reads the one before, in the line too), and the translations "
                   "joined onto one output line; line and cue counts never change. punct: sentences end at "
                   "sentence-final punctuation (。！？；… and closing quotes after them; inference/sentences.py); "
                   "model: punct, and a run of 12 or more words without punctuation is cut where the shipped "
                   "boundary model (trained on TVsub's line ends, inference/boundaries.py) sees a sentence end; "
                   "off: each line whole, as the models were trained. Off where each line's own result is asked "
                   "for: --nbest, --rerank, --dp-out, --dp-generator (logged).")
@click.option("--max-source-len", type=NON_NEGATIVE, default=0, show_default=True,
              help="Split lines of more than N BPE tokens at sentence punctuation (or into chunks), translate "
                   "the pieces and join them (0 = the model's limit, e.g. max_positions - 1).")
@click.option("--explain-context", type=NON_NEGATIVE, default=0, show_default=True, metavar="N",
              help="Context models (e.g. HAN): write pictures of the sentence- and word-level context attention "
                   "for each word of N sampled translated sentences (HAN paper Table 5) to --explain-dir (0 = none).")
@click.option("--explain-dir", default="", help="Where --explain-context writes [default: OUTPUT.explain/].")
@click.option("--context-option", "context_options", multiple=True, metavar="KEY=VALUE",
              help="Override a field of the checkpoint's context config (repeatable), e.g. a test-time "
                   "ablation: --context-option test_ablation=null. An unknown key is an error.")
@click.option("--glob", "glob_", default=None, metavar="PATTERN",
              help="Directory input: translate the files matching PATTERN (fnmatch on the path relative to the "
                   "directory, where * also crosses /, or on the name), e.g. '*.zh'; '*' takes every file. "
                   "[default: *SUFFIX, the most common suffix among the directory's top-level files]")
@click.option("--out-suffix", default=None, metavar="SUFFIX",
              help="Directory input: name each output after its source with the last suffix replaced, e.g. "
                   "--out-suffix .txt writes a.zh's translation to OUT/a.txt; '' keeps the source's name "
                   "[default: the model's source-language suffix becomes its target's: ep1.zh's translation is "
                   "OUT/ep1.en; other names are kept. Subtitle files: SUFFIX goes before the extension, and by "
                   "default the target language does, replacing a source-language tag: ep1.srt and ep1.zh.srt → "
                   "OUT/ep1.en.srt].")
@click.option("--output-format", type=click.Choice(["text", "sgml"]), default="text", show_default=True,
              help="text: one line per input line; sgml (SGML input only): the input's <DOC> blocks with the "
                   "translations as <seg> lines, in the references' layout (a <tstset>).")
@click.option("--nbest", type=NON_NEGATIVE, default=0, show_default=True, metavar="N",
              help="Also write the N best hypotheses of each line with their scores (length-normalised log-prob, "
                   "as the beam ranks them) to --nbest-out; N ≤ --beam; sentence-level models only (a context "
                   "model is refused). The 1-best output is unchanged (0 = no n-best list).")
@click.option("--nbest-out", default="", metavar="FILE",
              help='Where --nbest goes (- for stdout): one JSON object per input line, {"line": K (from 1), '
                   '"hypotheses": [{"rank": 1, "text": ..., "score": ...}, ...]}, [] for an empty line; a line '
                   "split into pieces has one hypothesis, its joined 1-best, with score null.")
@click.option("--scores", default="", metavar="FILE",
              help='Also write how sure the model is of each translation (- for stdout): JSON lines, per input '
                   'line {"line": K, "score": log-probability in nats, "tokens": N, "length_normalized": score/N}, '
                   'per subtitle cue the same with its start, end, characters per second and lines; null for an '
                   'empty line or one translated in pieces. The lowest are logged: check those first. Native '
                   'engine only (not --engine ctranslate2, --dp-generator, --stream or a directory of text files).')
@click.option("--rerank", type=click.Choice(["reconstructor"]), default=None,
              help="Rerank the k best hypotheses of each line by the beam's score + λ·log R(x̂|s(y))/|x̂|, the "
                   "model's reconstructor rebuilding the source x̂ from each candidate's decoder states (docs/"
                   "models.md §2.8 Decoding; λ: the model's weight). x̂: the source itself (joint labeler) or the "
                   "--dp-generator's completion (--dp-input as the model reconstructs). Models trained with a "
                   "decoder-side reconstructor only (pipelines/dp/rec_*.yaml); one over a context model (e.g. "
                   "rec_joint_labeler_han.yaml) reranks each document batch on its context-aware states.")
@click.option("--rerank-k", type=NON_NEGATIVE, default=0, show_default=True, metavar="K",
              help="--rerank: candidates per line (≤ --beam; 0 = --beam).")
@click.option("--rerank-vocab", type=NON_NEGATIVE, default=0, show_default=True, metavar="N",
              help="--rerank: normalise log R over the N most frequent source words and the reconstructed word "
                   "itself instead of the whole source vocabulary — an approximation for speed (TVsub test, beam "
                   "10: N=4000 reranks at 1.45x plain decoding instead of 1.85x, keeping 91% of the exact choices; "
                   "docs/dp.md). 0 = exact.")
@click.option("--dp-out", default="", metavar="FILE",
              help="Also write the DP-completed source the model predicts (joint DP predictor/labeler, "
                   "pipelines/dp/rec_joint_*.yaml): segmented words with the pronouns inserted, one line per input "
                   "line (empty for empty), as annotate-dp apply --generator writes; score it with `doctrans score dp "
                   "FILE --base SRC.tok.zh --oracle …`. A cross-sentence labeler (rec_joint_context.yaml) labels "
                   "each line with its own document's previous lines (give --docs or an .sgm input).")
@click.option("--dp-threshold", type=click.FloatRange(min=0, max=1), default=None, metavar="TAU",
              help="--dp-out: insert the most likely pronoun wherever the model's P(NONE) < TAU (0 = the arg-max "
                   "label; in [0, 1]). Tune it on dev with `doctrans score dp` as the external generator's "
                   "threshold [default: the model's model.reconstructor.dp_threshold].")
def translate_cmd(checkpoint, sentence, ensemble, ensemble_weights, ensemble_mode, engine, compute_type, quantize, shortlist, input_, output, beam, lenpen, max_len_ratio, max_len_extra, batch_sentences,
                  input_format, tokenized, recase, prepared, threads, device, workers, group_lines, docs, dp_generator,
                  dp_input, dp_nbest, dp_combine, dp_weights, dp_docs, write_lattice, encoding_errors, resume,
                  max_source_len, explain_context, explain_dir, context_options, glob_, out_suffix, output_format,
                  history_chunk, warmup_beam,
                  nbest, nbest_out, rerank, rerank_k, rerank_vocab, dp_out, dp_threshold, encoding, script, bilingual,
                  stream, max_line_length, max_cps, scores, glossary, protect, translate_all, segment) -> None:
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

    if sentence and checkpoint:
        raise click.UsageError("--sentence chooses a shipped model: give it without -c")
    if engine == "ctranslate2" and not checkpoint:
        from doctrans.inference.export import shipped_export_hint

        raise click.UsageError(shipped_export_hint("sentence" if sentence else "document"))
    checkpoint = resolve(checkpoint, "sentence" if sentence else "document")
    models = ensemble_settings(tuple(ensemble), ensemble_weights, ensemble_mode)
    if ensemble and engine != "native":
        raise click.UsageError("--ensemble needs the native engine")
    translate(TranslateConfig(checkpoint=checkpoint, **models, input=input_, output=output, beam=beam, lenpen=lenpen,
                        max_len_ratio=max_len_ratio, max_len_extra=max_len_extra,
                        batch_sentences=batch_sentences, input_format=input_format,
                        tokenized=tokenized, recase=recase, prepared=prepared, threads=threads, device=device, docs=docs,
                        dp_generator=dp_generator,
                        dp_input=dp_input, dp_nbest=dp_nbest, dp_combine=dp_combine, dp_weights=dp_weights,
                        dp_docs=dp_docs, write_lattice=write_lattice, encoding_errors=encoding_errors,
                        resume=resume, max_source_len=max_source_len, workers=workers,
                        group_lines=group_lines, explain_context=explain_context, explain_dir=explain_dir,
                        context_options=tuple(context_options), glob=glob_, out_suffix=out_suffix, history_chunk=history_chunk, warmup_beam=warmup_beam,
                        output_format=output_format, nbest=nbest, nbest_out=nbest_out, engine=engine,
                        compute_type=compute_type, quantize=quantize, shortlist=shortlist, rerank=rerank or "",
                        rerank_k=rerank_k, rerank_vocab=rerank_vocab, dp_out=dp_out, dp_threshold=dp_threshold,
                        encoding=encoding, script=script, bilingual=bilingual, stream=stream,
                        max_line_length=max_line_length, max_cps=max_cps, scores=scores, glossary=glossary,
                        protect=protect, translate_all=translate_all, segment=segment))
