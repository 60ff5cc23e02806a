"""The ``doctrans`` command line: one click command per stage.

Each command only parses options, builds the stage's config and calls the stage's ``run``.
Only this module calls ``sys.exit``.
"""
from __future__ import annotations

import logging
import os
import sys

# OpenMP threads sleep, not spin, while they wait for work: with other jobs on the cores, spinning
# threads made translation about 4x slower (benchmarks/busy_machine.py, RESULTS.md). Set before
# torch loads OpenMP; a value the user set wins.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import click  # noqa: E402

from doctrans import __version__  # noqa: E402


def _setup_logging(verbose: bool, quiet: bool = False) -> None:
    quiet = quiet or os.environ.get("RANK", "0") not in ("", "0")     # torchrun: only rank 0 logs INFO
    logging.basicConfig(
        level=logging.WARNING if quiet else logging.DEBUG if verbose else logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        datefmt="%H:%M:%S",
    )


# Numeric option types: every count, size and rate is range-checked by click (a one-line usage
# error naming the option); 0 is accepted only where the help says what it means.
POSITIVE = click.IntRange(min=1)
NON_NEGATIVE = click.IntRange(min=0)


@click.group(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(__version__, prog_name="doctrans")
@click.option("-v", "--verbose", is_flag=True, help="Debug logging.")
@click.option("-q", "--quiet", is_flag=True, help="Warnings and errors only; no progress bars.")
def cli(verbose: bool, quiet: bool) -> None:
    """doctrans: document-level neural machine translation (Chinese→English first).

    Stages: preprocess → [annotate-dp] → train → translate → score. Run `doctrans COMMAND --help`;
    `doctrans configs` lists the shipped YAML configs and their keys.
    """
    from doctrans.utils import set_quiet

    if verbose and quiet:
        raise click.UsageError("-v/--verbose and -q/--quiet exclude each other")
    set_quiet(quiet)
    _setup_logging(verbose, quiet)


# --- preprocess (doctrans/data/preprocess.py) -------------------------------------------------


@cli.command("preprocess", short_help="Tokenize, filter and BPE-encode a zh-en corpus (TVsub by default).")
@click.option("--data-dir", default="../shared/corpora/tvsub", show_default=True,
              help="TVsub root: the shared copy or a clone of github.com/longyuewangdcu/tvsub.")
@click.option("--train-dir", default=None, help="Instead of --data-dir: directory of N.zh/N.en documents.")
@click.option("--dev-prefix", default=None, help="Dev text PREFIX.zh/PREFIX.en (raw); needs --dev-sgm.")
@click.option("--dev-sgm", default=None, help="SGML file with the dev <DOC> boundaries.")
@click.option("--test-prefix", default=None, help="Test text PREFIX.zh/PREFIX.en (raw); needs --test-sgm.")
@click.option("--test-sgm", default=None, help="SGML file with the test <DOC> boundaries.")
@click.option("--train-docs", default="0:300", show_default=True,
              help="Train documents (numerically sorted): 'all', a count N, or a slice 'A:B'.")
@click.option("-o", "--out", required=True, help="Prepared dataset directory to write.")
@click.option("--bpe-merges", type=POSITIVE, default=8000, show_default=True, help="BPE merge operations per language.")
@click.option("--joint-bpe", is_flag=True, help="Learn one set of BPE codes on both languages.")
@click.option("--bpe-sample-lines", type=NON_NEGATIVE, default=500_000, show_default=True,
              help="Learn BPE on at most this many evenly spaced train lines (0 = all).")
@click.option("--keep-case", is_flag=True, help="Do not lowercase (default: lowercase both sides).")
@click.option("--max-len", type=POSITIVE, default=80, show_default=True,
              help="Train only: drop pairs with a side over N tokens.")
@click.option("--max-len-ratio", type=click.FloatRange(min=1.0), default=3.0, show_default=True,
              help="Train only: drop pairs whose token counts differ by more than this factor (≥ 1).")
@click.option("--workers", type=NON_NEGATIVE, default=0, show_default=True, help="Processes (0 = all usable CPUs).")
def preprocess_cmd(data_dir, train_dir, dev_prefix, dev_sgm, test_prefix, test_sgm, train_docs, out,
                   bpe_merges, joint_bpe, bpe_sample_lines, keep_case, max_len, max_len_ratio, workers) -> None:
    """Tokenize, filter and BPE-encode a document-level zh-en corpus (TVsub by default).

    \b
    Writes OUT/:
      meta.json              settings and counts; written last (absent = unfinished)
      bpe.codes.{zh,en}      BPE codes (bpe.codes.joint with --joint-bpe)
      vocab.{zh,en}.txt      train BPE tokens, "token<TAB>count", most frequent first
      {split}.tok.{zh,en}    tokenized text, one sentence per line
      {split}.bpe.{zh,en}    the same after BPE ("@@ " joins units)
      {split}.docs           "doc_id<TAB>position" per line, position 0-based in the document
      train.target           1 = training target, 0 = filtered (kept as document context only)
    Splits: train, dev, test. Every sentence of every document is kept (no gaps); only train
    is length-filtered, by marking lines 0 in train.target. Without --train-dir, paths come
    from --data-dir.
    """
    from doctrans.data import preprocess

    settings = dict(train_docs=train_docs, bpe_merges=bpe_merges, joint_bpe=joint_bpe,
                    bpe_sample_lines=bpe_sample_lines, lowercase=not keep_case, max_len=max_len,
                    max_len_ratio=max_len_ratio)
    if workers:
        settings["workers"] = workers
    paths = dict(dev_prefix=dev_prefix, dev_sgm=dev_sgm, test_prefix=test_prefix, test_sgm=test_sgm)
    if train_dir:
        cfg = preprocess.PreprocessConfig(out=out, train_dir=train_dir, **paths, **settings)
    else:
        given = {k: v for k, v in paths.items() if v is not None}
        cfg = preprocess.tvsub_config(data_dir, out, **given, **settings)
    click.echo(f"prepared dataset: {preprocess.run(cfg)}")


# --- train (doctrans/training/train.py) -------------------------------------------------------


@cli.command("train", context_settings={"ignore_unknown_options": False},
             short_help="Train a model (NMT, context model or DP generator) from a YAML config.")
@click.argument("config_path", metavar="CONFIG.yaml", type=click.Path(exists=True, dir_okay=False))
@click.argument("overrides", nargs=-1, metavar="[KEY=VALUE]...")
@click.option("--resume", is_flag=True, help="Continue from RUN_DIR/last.pt with the same subsequent updates.")
@click.option("--max-time", "max_time", type=click.FloatRange(min=0), default=None,
              help="Wall-clock training budget in minutes (same as train.max_time_min=...; 0 = unlimited).")
def train_cmd(config_path: str, overrides: tuple[str, ...], resume: bool, max_time: float | None) -> None:
    """Train a model described by CONFIG.yaml (`doctrans configs` lists the shipped ones).

    KEY=VALUE pairs override config fields by dotted path, e.g.
    `train.lr=5e-4 model.layers_enc=2 run_dir=runs/try1`. Unknown keys are errors.
    The run directory receives config.yaml, metrics.jsonl, train.log, tensorboard/,
    learning_curves.png, best.pt and last.pt. A `context:` section trains a context model on
    document batches: concatenation, HAN, QCN (capsules), HGC, HRNN, multi-encoder, ISG, cache
    (the YAMLs of pipelines/context/: `doctrans configs`; their keys and defaults:
    `doctrans configs --keys context`);
    `train.init_from=CKPT` starts from another run's weights (stage 2 of the HAN recipe;
    `train.freeze=[backbone.*]`, `train.init_lr_scale=0.1`).
    A YAML with `task: dp_generator` (pipelines/dp/) trains a dropped-pronoun generator on
    `doctrans annotate-dp` output instead (sections data/model/train: doctrans/dp/config.py,
    model.name picks doctrans/dp/models/*.py); its τ and best epoch are tuned on TVsub's
    hand-annotated dev DPs (`data.tune_on=oracle`, default; `data.tune_on=annotated` uses our
    annotation of dev), `model.sparse_embeddings=false` for dense Adam, `model.context_next=N`
    adds following sentences to the labeler's context, `train.lr_decay=0.5 train.lr_decay_start=3`
    halves the learning rate after every epoch from the 3rd on, `model.pseudo_dp=0.5
    model.pseudo_weight=0.25` also trains the labeler's pronoun choice on overt pronouns deleted
    at random.

    Data-parallel on K processes (gloo on CPU, nccl on GPU): `torchrun --nproc_per_node=K -m
    doctrans.cli train CONFIG.yaml …`; an update then takes K × train.accum batches.
    """
    from doctrans.config import load_experiment
    from doctrans.dp import train as dp_train
    from doctrans.dp.config import is_dp_config, load_dp_config
    from doctrans.runtime import distributed
    from doctrans.stages import train

    if max_time is not None:
        overrides = overrides + (f"train.max_time_min={max_time}",)
    try:
        if is_dp_config(config_path):                        # task: dp_generator (pipelines/dp/)
            run_dir = dp_train.run(load_dp_config(config_path, overrides), resume=resume)
        else:
            run_dir = train(load_experiment(config_path, overrides), resume=resume)
    finally:
        distributed.shutdown()                               # under torchrun: leave the process group
    if distributed.env_rank() == 0:
        click.echo(f"run directory: {run_dir}")


@cli.command("average", short_help="Average the weights of several checkpoints of one run.")
@click.argument("checkpoints", nargs=-1, metavar="[CKPT]...")
@click.option("--last", "last", type=POSITIVE, default=None,
              help="Average the last N checkpoint{STEP}.pt of --run-dir (written with train.keep_last=K ≥ N).")
@click.option("--run-dir", default=None, help="Run directory for --last.")
@click.option("-o", "--output", required=True, help="Checkpoint to write (atomically).")
def average_cmd(checkpoints: tuple[str, ...], last: int | None, run_dir: str | None, output: str) -> None:
    """Average the weights of several checkpoints of one run into one checkpoint to translate
    (fairseq's average_checkpoints.py; Vaswani et al. 2017 average the last 5).

    `doctrans average --run-dir runs/quickstart --last 4 -o runs/quickstart/avg4.pt`, or name
    the checkpoints. The result carries the last one's config, vocabularies and BPE codes and no
    optimizer state (translate with it; it does not resume).
    """
    from doctrans.training.checkpoint import average_checkpoints, step_checkpoints
    from doctrans.utils.io import atomic_torch_save

    paths = list(checkpoints)
    if last:
        if not run_dir:
            raise click.UsageError("--last needs --run-dir")
        found = step_checkpoints(run_dir)
        if len(found) < last:
            raise click.UsageError(f"--last {last}: {run_dir} has {len(found)} checkpoint{{STEP}}.pt "
                                   f"(train with train.keep_last={last} or more)")
        paths += [str(p) for p in found[-last:]]
    if not paths:
        raise click.UsageError("give checkpoints or --run-dir DIR --last N")
    atomic_torch_save(average_checkpoints(paths), output)
    click.echo(f"averaged {len(paths)} checkpoints → {output}")


# --- translate (doctrans/inference/translate.py) ----------------------------------------------


@cli.command("translate", short_help="Translate a file, stdin or a directory of documents (beam search).")
@click.option("-c", "--checkpoint", required=True, type=click.Path(exists=True),
              help="A checkpoint written by `doctrans train` (best.pt or last.pt), or with --engine ctranslate2 "
                   "a directory written by `doctrans export --format ctranslate2`.")
@click.option("--engine", type=click.Choice(["native", "ctranslate2"]), default="native", show_default=True,
              help="native: doctrans' own beam search (torch); ctranslate2: the CTranslate2 engine on an exported "
                   "directory (sentence Transformer or concatenation model; pip install 'doctrans[ct2]').")
@click.option("--compute-type", default="default", show_default=True,
              type=click.Choice(["default", "auto", "float32", "int8", "int8_float32", "int8_float16", "int8_bfloat16",
                                 "int16", "float16", "bfloat16"]),
              help="--engine ctranslate2: weights/computation type (default: as exported, float32; int8 is int8 "
                   "weights and activations).")
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
@click.option("--encoding-errors", type=click.Choice(["strict", "replace"]), default="strict", show_default=True,
              help="Input that is not UTF-8: strict: an error naming file, line and byte; replace: U+FFFD "
                   "for each undecodable byte sequence, with a warning giving their count.")
@click.option("--resume", is_flag=True, help="Directory input: skip documents whose output already exists "
                                             "with as many lines as the input (outputs are written atomically).")
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
@click.option("--out-suffix", default="", metavar="SUFFIX",
              help="Directory input: name each output after its source with the last suffix replaced, e.g. "
                   "--out-suffix .en writes a.zh's translation to OUT/a.en [default: the source's own name].")
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
                   "line (empty for empty), as annotate-dp --generator writes; score it with `doctrans score dp "
                   "FILE --base SRC.tok.zh --oracle …`. A cross-sentence labeler (rec_joint_context.yaml) labels "
                   "each line with its own document's previous lines (give --docs or an .sgm input).")
@click.option("--dp-threshold", type=click.FloatRange(min=0, max=1), default=None, metavar="TAU",
              help="--dp-out: insert the most likely pronoun wherever the model's P(NONE) < TAU (0 = the arg-max "
                   "label; in [0, 1]). Tune it on dev with `doctrans score dp` as the external generator's "
                   "threshold [default: the model's model.reconstructor.dp_threshold].")
def translate_cmd(checkpoint, engine, compute_type, quantize, shortlist, input_, output, beam, lenpen, max_len_ratio, max_len_extra, batch_sentences,
                  input_format, tokenized, prepared, threads, device, workers, group_lines, docs, dp_generator,
                  dp_input, dp_nbest, dp_combine, dp_weights, dp_docs, write_lattice, encoding_errors, resume,
                  max_source_len, explain_context, explain_dir, context_options, glob_, out_suffix, output_format,
                  nbest, nbest_out, rerank, rerank_k, rerank_vocab, dp_out, dp_threshold) -> None:
    """Translate a file, stdin, or a directory of documents with beam search.

    The output has exactly as many lines as the input; an empty input line gives an empty
    output line; an over-long line is split, translated in pieces and joined (with a warning).
    Output is BPE-merged and Moses-detokenized unless --tokenized, and lowercase unless the
    data was prepared with `doctrans preprocess --keep-case` (case is not restored; the TVsub
    references are lowercase too). An SGML input (.sgm, .sgml,
    .xml) is read as its first system's segments and gives plain text, one line per segment,
    unless --output-format sgml. The checkpoint carries its BPE codes, so it translates from
    any directory.

    A directory of documents: the files under it, recursively (hidden ones skipped), that
    match --glob (by default those with the most common suffix among its top-level files, so
    a readme.txt beside *.zh documents is left out), each translated to the same relative
    path under --output (same name, or the suffix replaced by --out-suffix). Bad files are
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
    """
    from doctrans.inference.translate import TranslateConfig
    from doctrans.stages import translate

    translate(TranslateConfig(checkpoint=checkpoint, input=input_, output=output, beam=beam, lenpen=lenpen,
                        max_len_ratio=max_len_ratio, max_len_extra=max_len_extra,
                        batch_sentences=batch_sentences, input_format=input_format,
                        tokenized=tokenized, prepared=prepared, threads=threads, device=device, docs=docs,
                        dp_generator=dp_generator,
                        dp_input=dp_input, dp_nbest=dp_nbest, dp_combine=dp_combine, dp_weights=dp_weights,
                        dp_docs=dp_docs, write_lattice=write_lattice, encoding_errors=encoding_errors,
                        resume=resume, max_source_len=max_source_len, workers=workers,
                        group_lines=group_lines, explain_context=explain_context, explain_dir=explain_dir,
                        context_options=tuple(context_options), glob=glob_, out_suffix=out_suffix,
                        output_format=output_format, nbest=nbest, nbest_out=nbest_out, engine=engine,
                        compute_type=compute_type, quantize=quantize, shortlist=shortlist, rerank=rerank or "",
                        rerank_k=rerank_k, rerank_vocab=rerank_vocab, dp_out=dp_out, dp_threshold=dp_threshold))


# --- export (doctrans/inference/export.py) ----------------------------------------------------


@cli.command("export", short_help="Export a checkpoint for another inference engine (CTranslate2).")
@click.option("--format", "format_", type=click.Choice(["ctranslate2"]), default="ctranslate2", show_default=True,
              help="ctranslate2: a CTranslate2 model directory (pip install 'doctrans[ct2]').")
@click.option("-c", "--checkpoint", required=True, type=click.Path(exists=True, dir_okay=False),
              help="A checkpoint written by `doctrans train`.")
@click.option("-o", "--output", required=True, type=click.Path(), help="The model directory to write.")
@click.option("--prepared", default="", help="Prepared dataset dir holding the BPE codes (older checkpoints only).")
def export_cmd(format_, checkpoint, output, prepared) -> None:
    """Write CHECKPOINT's model as a CTranslate2 model directory, with its BPE codes and text
    settings, for `doctrans translate --engine ctranslate2 -c DIR [--compute-type int8]` (files,
    directories and documents, as native translation). Models CTranslate2 can express: the
    sentence-level Transformer and the concatenation context model; others are refused with the
    list. An earlier export at OUTPUT is replaced; the directory is written atomically."""
    from doctrans.inference.export import export_ctranslate2

    out = export_ctranslate2(checkpoint, output, prepared)
    click.echo(f"exported {checkpoint} → {out} (translate: doctrans translate --engine ctranslate2 -c {out} …)")


# --- shortlist (doctrans/inference/shortlist.py) ---------------------------------------------------


@cli.command("shortlist", short_help="Build a lexical shortlist (vocabulary map) for faster decoding.")
@click.option("-p", "--prepared", required=True, type=click.Path(exists=True, file_okay=False),
              help="Prepared dataset dir (`doctrans preprocess`): its train.bpe.* pairs and vocabularies.")
@click.option("-o", "--output", default="", metavar="FILE",
              help="The shortlist file to write [default: PREPARED/shortlist.vmap].")
@click.option("--top-k", type=NON_NEGATIVE, default=20, show_default=True,
              help="Candidates kept per source token (best p(t|s) first; 0 = none, only the --frequent ones).")
@click.option("--frequent", type=NON_NEGATIVE, default=100, show_default=True,
              help="Most frequent target tokens, candidates in every batch (0 = none).")
@click.option("--align", "align_path", default="", metavar="FILE", type=click.Path(dir_okay=False),
              help="Symmetrised Pharaoh alignments of the train.bpe pairs, one line per pair [default: align them "
                   "with eflomal and symmetrise with grow-diag-final-and].")
@click.option("--threads", type=POSITIVE, default=2, show_default=True, help="eflomal samplers.")
def shortlist_cmd(prepared, output, top_k, frequent, align_path, threads) -> None:
    """Build a lexical shortlist from PREPARED's training pairs for `doctrans translate --shortlist
    FILE`: word alignment (eflomal) → p(t|s) → per source BPE token its TOP-K likeliest target
    tokens, plus the FREQUENT most frequent target tokens. The file is CTranslate2's
    vocabulary-mapping format (`source<TAB>targets`). Decoding over the shortlist is faster
    and can change translations; the measured BLEU cost is in benchmarks/RESULTS.md."""
    from doctrans.stages import shortlist

    out = shortlist(prepared, output, top_k, frequent, align_path, threads)
    click.echo(f"wrote {out} (translate with: doctrans translate --shortlist {out} …)")


# --- annotate-dp (doctrans/dp/corpus.py, doctrans/dp/apply.py) -------------------------------------------


@cli.command("annotate-dp", short_help="Annotate dropped pronouns in a prepared corpus, or apply a DP generator.")
@click.argument("input_", metavar="[INPUT]", required=False, type=click.Path(exists=True, dir_okay=False))
@click.option("-p", "--prepared", type=click.Path(exists=True, file_okay=False),
              help="Prepared dataset (doctrans preprocess output): its {split}.tok.{zh,en} are annotated.")
@click.option("-o", "--out", default=None,
              help="Output directory [default: PREPARED/dp]; with --generator: output prefix [default: INPUT].")
@click.option("--generator", metavar="MODEL[:MODEL...]",
              help="Apply a trained DP generator (doctrans train pipelines/dp/...) to the Chinese INPUT instead; "
                   "several checkpoints joined by ':' are ensembled (distributions averaged, τ = their mean).")
@click.option("--docs", type=click.Path(exists=True, dir_okay=False),
              help="--generator: doc<TAB>position per INPUT line (e.g. PREPARED/test.docs) for document context.")
@click.option("--nbest", type=POSITIVE, default=6, show_default=True, help="--generator: completions per line in OUT.nbest.")
@click.option("--input-format", type=click.Choice(["tok", "raw"]), default="tok", show_default=True,
              help="--generator: INPUT is segmented (as PREPARED/*.tok.zh) or raw Chinese.")
@click.option("--threshold", type=click.FloatRange(min=0, max=1, min_open=True), default=None,
              help="--generator: insert a DP where P(no DP) < this, in (0, 1] [default: the value tuned on dev].")
@click.option("--splits", default="train,dev,test", show_default=True,
              help="Comma-separated splits to annotate (train is needed: the LM is estimated on it).")
@click.option("--symmetrize", type=click.Choice(["intersect", "grow-diag-final-and", "union", "forward", "reverse"]),
              default="intersect", show_default=True,
              help="How the two eflomal directions are combined (intersect: the thesis' high-precision choice).")
@click.option("--mode", type=click.Choice(["strict_unaligned", "misaligned"]), default="strict_unaligned",
              show_default=True,
              help="Which English pronouns are searched for a dropped Chinese counterpart (a pronoun linked to a "
                   "Chinese pronoun never is). strict_unaligned: only pronouns with no alignment link at all. "
                   "misaligned: also pronouns whose links all go to Chinese non-pronouns (the thesis' 'misaligned' "
                   "pronoun) — more DPs (31% of the training pronouns) and better agreement with TVsub's hand "
                   "oracle, but a labeler trained on them is no better (docs/dp.md; `make dp-ensemble-full` uses "
                   "one as an ensemble member).")
@click.option("--overt-match/--no-overt-match", default=True, show_default=True,
              help="An unlinked English pronoun is not a DP if a matching Chinese pronoun is in the source "
                   "unclaimed (also inside jieba words like 我要). --no-overt-match: Algorithm 1 as written.")
@click.option("--lm-order", type=click.IntRange(min=2), default=5, show_default=True,
              help="n-gram order of the Chinese KenLM model (≥ 2).")
@click.option("--lm", "lm_path", default=None, type=click.Path(exists=True, dir_okay=False),
              help="Use this KenLM model (binary or ARPA) instead of estimating one with lmplz.")
@click.option("--lm-memory", default="2G", show_default=True, help="lmplz sorting memory (-S), e.g. 2G or 20%.")
@click.option("--workers", type=POSITIVE, default=2, show_default=True, help="Search processes (1 = in this process).")
@click.option("--align-samplers", type=POSITIVE, default=2, show_default=True,
              help="eflomal parallel samplers (threads).")
@click.option("--explain", type=NON_NEGATIVE, default=0, show_default=True,
              help="Write explain/SPLIT-LINE.png (alignment matrix, candidate gaps, choice) and .txt for N "
                   "sampled sentences with a DP (0 = none).")
@click.option("--explain-split", default="train", show_default=True, help="The split --explain samples from.")
@click.option("--seed", type=NON_NEGATIVE, default=1, show_default=True, help="Sampling seed of --explain (any N ≥ 0, 0 too).")
@click.option("--oracle-dir", default=None, type=click.Path(exists=True, file_okay=False),
              help="TVsub root holding dev/dev.oracle-dp.seg.zh etc. [default: from the prepared meta.json].")
@click.option("--jackknife", type=click.IntRange(min=2), default=None, metavar="K",
              help="With -p (after annotate-dp -p): complete the training sources with PREDICTED DPs, each of K "
                   "document folds by a DP generator trained on the other K-1 folds; dev/test by their "
                   "ensemble. Writes OUT [default: PREPARED/dp_jkK] in the layout of PREPARED/dp "
                   "(pipelines/dp/nmt_dp_predicted.yaml trains on it). Resumable per fold.")
@click.option("--jackknife-config", default="", metavar="YAML",
              help="--jackknife: the DP generator of each fold [default: pipelines/dp/labeler.yaml].")
@click.option("--jackknife-set", "jackknife_set", multiple=True, metavar="KEY=VALUE",
              help="--jackknife: override for every fold's generator training (repeatable), e.g. "
                   "train.max_epochs=1.")
@click.option("--source-bpe", is_flag=True,
              help="With -p, after annotate-dp -p: only write SPLIT.dp.srcbpe.zh (PREPARED/dp/SPLIT.dp.zh BPE-encoded "
                   "as the prepared source, pronouns not kept whole) into OUT [default: PREPARED/dp]: the +DPs source "
                   "of a model continued from a stage-1 checkpoint (its vocabulary). New annotations write it too.")
def annotate_dp_cmd(input_, prepared, out, generator, docs, nbest, input_format, threshold, splits, symmetrize, mode, overt_match, lm_order, lm_path, lm_memory, workers,
                    align_samplers, explain, explain_split, seed, oracle_dir, jackknife, jackknife_config,
                    jackknife_set, source_bpe) -> None:
    """Annotate dropped pronouns (DPs) in a prepared parallel corpus (thesis §4.3.1, Algorithm 1).

    \b
    Aligns all splits with eflomal (both directions, symmetrised), estimates a Chinese n-gram
    LM with KenLM on the training source, then for every English pronoun with no Chinese
    counterpart searches the source gap between its nearest aligned neighbours and inserts
    the Chinese pronoun (gap × candidate) the LM scores best. Writes, line-aligned with the
    prepared split:
      SPLIT.dp.zh     source with DPs inserted (+DPs)
      SPLIT.dpp.zh    source with #DP# at each DP position (+DPPs)
      SPLIT.dplabel   per source token and a final </s>: the pronoun dropped before it, or N
      SPLIT.align     the symmetrised alignment (Pharaoh i-j); .align.fwd/.rev: directions
      SPLIT.docs      document ids and positions (copied)
      stats.json/md   English pronouns, how many dropped, by pronoun and by type
      agreement.json/md  dev/test against the hand-annotated oracle (TVsub), position and
                      pronoun P/R/F (thesis Table 4.8)
    Train lines marked 0 in PREPARED/train.target (filtered, context only) are not annotated:
    there .dp.zh/.dpp.zh are the source, .dplabel is all N, .align is empty, and the LM and
    the statistics use the other lines only.
    Stages already done (alignment, LM) are reused when the command is rerun.

    \b
    With --generator MODEL INPUT: predict DPs in monolingual Chinese with a trained generator
    and write OUT.dp.zh (1-best), OUT.dpp.zh (#DP#) and OUT.nbest ("LINE ||| SENTENCE |||
    SCORE", the N best joint completions, score = product of slot probabilities); line counts
    preserved. Score against an oracle with `doctrans score dp`.

    \b
    With -p PREPARED --jackknife K (after `annotate-dp -p PREPARED`): the training sources
    completed with predicted DPs (doctrans/dp/jackknife.py): the documents are dealt into K
    folds, fold k is completed by a generator (--jackknife-config) trained on the other folds
    (OUT/folds/k/best.pt), dev and test by the ensemble of the K generators (OUT/generator.txt,
    for translate --dp-generator); OUT holds SPLIT.dp.zh, .dpp.zh, .dplabel, .dp.bpe.zh,
    .dpp.bpe.zh, vocab.dp.zh.txt like PREPARED/dp, so train and test DPs carry the same errors.

    \b
    Examples:
      doctrans annotate-dp -p data/quickstart --explain 5
      doctrans annotate-dp -p data/quickstart --jackknife 3 --jackknife-set train.max_epochs=1
      doctrans annotate-dp --generator runs/dp_labeler/best.pt data/quickstart/test.tok.zh \\
          --docs data/quickstart/test.docs -o runs/dp_labeler/test --nbest 6
    """
    if generator:
        from doctrans.dp import apply as dp_apply

        if not input_:
            raise click.UsageError("--generator needs an INPUT file")
        try:
            paths = dp_apply.run(generator, input_, out or input_, docs=docs, nbest=nbest,
                                 input_format=input_format, threshold=threshold)
        except FileNotFoundError as e:
            raise click.BadParameter(str(e), param_hint="--generator") from None
        for p in paths.values():
            click.echo(f"wrote {p}")
        return
    if not prepared:
        raise click.UsageError("give -p/--prepared (annotate a parallel corpus) or --generator MODEL INPUT")
    if source_bpe:
        from pathlib import Path

        from doctrans.dp.corpus import source_bpe as write_source_bpe

        dp_dir = Path(prepared) / "dp"
        names = [sp.strip() for sp in splits.split(",") if (dp_dir / f"{sp.strip()}.dp.zh").is_file()]
        if not names:
            raise click.UsageError(f"no {dp_dir}/SPLIT.dp.zh: run `doctrans annotate-dp -p {prepared}` first")
        for p in write_source_bpe(prepared, dp_dir, out or dp_dir, names):
            click.echo(f"wrote {p}")
        return
    if jackknife:
        from doctrans.config_catalog import find_pipelines
        from doctrans.dp.jackknife import JackknifeConfig, run as run_jackknife

        res = run_jackknife(JackknifeConfig(            # errors: main() prints them (exit 1)
            prepared=prepared, folds=jackknife, out=out or "",
            config=jackknife_config or str(find_pipelines() / "dp" / "labeler.yaml"),
            overrides=tuple(jackknife_set)))
        click.echo(f"DPs inserted: {', '.join(f'{k} {v:,}' for k, v in res['dps'].items())}")
        click.echo(f"fold generators (translate --dp-generator): {':'.join(map(str, res['generators']))}")
        click.echo(f"jackknifed corpus: {res['out']}")
        return
    from doctrans.dp.corpus import AnnotateConfig, render_agreement_table, run

    cfg = AnnotateConfig(prepared=prepared, out=out, splits=tuple(s.strip() for s in splits.split(",") if s.strip()),
                         symmetrize=symmetrize, mode=mode, overt_match=overt_match, lm_order=lm_order, lm=lm_path, lm_memory=lm_memory,
                         workers=workers, align_samplers=align_samplers, explain=explain,
                         explain_split=explain_split, seed=seed, oracle_dir=oracle_dir)
    result = run(cfg)
    for split, s in result["stats"].items():
        click.echo(f"{split}: {s['sentences']:,} sentences, {s['pronouns']:,} English pronouns, "
                   f"{s['dropped']:,} dropped ({s['dropped_pct']:.1f}%)")
    if result["agreement"]:
        click.echo("agreement with the hand-annotated oracle:")
        click.echo(render_agreement_table(result["agreement"]), nl=False)
    for p in result["explain"]:
        click.echo(f"explain: {p}")
    click.echo(f"annotated corpus: {result['out']}")


# --- score (doctrans/evaluation/score.py; dp/agreement.py, evaluation/cxmi.py, contrastive.py) --------


class _ScoreGroup(click.Group):
    """``doctrans score HYP -r REF …`` scores a translation (BLEU, the ``bleu`` subcommand, named
    or not); ``doctrans score MODE …`` runs one of the other modes. ``--help`` shows the BLEU
    options and lists the modes."""

    DEFAULT = "bleu"
    FORMER_FLAGS = {"--dp": "dp HYP --base SRC --oracle ORACLE",
                    "--cxmi": "cxmi -c CKPT --src SRC -r REF",
                    "--contrastive": "contrastive SET_DIR -c CKPT"}

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        head = args[:args.index("--")] if "--" in args else args
        for flag, spelling in self.FORMER_FLAGS.items():
            if any(a == flag or a.startswith(flag + "=") for a in head):
                raise click.UsageError(f"{flag} is now a subcommand: use `doctrans score {spelling} …` "
                                       f"(`doctrans score {spelling.split()[0]} --help`)", ctx=ctx)
        if args and args[0] not in self.commands and args[0] not in ctx.help_option_names:
            args = [self.DEFAULT, *args]
        return super().parse_args(ctx, args)

    def format_help(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        bleu = self.commands[self.DEFAULT]
        sub = click.Context(bleu, info_name=ctx.info_name, parent=ctx.parent)
        bleu.format_usage(sub, formatter)
        formatter.write_text(f"   or: {ctx.command_path} MODE [OPTIONS] ...   (MODE: "
                             f"{', '.join(n for n in self.commands if n != self.DEFAULT)}; see below)")
        bleu.format_help_text(sub, formatter)
        bleu.format_options(sub, formatter)
        rows = [(name, cmd.get_short_help_str(80)) for name, cmd in self.commands.items()
                if name != self.DEFAULT]
        with formatter.section(f"Other modes ({ctx.command_path} MODE --help)"):
            formatter.write_dl(rows)
        bleu.format_epilog(sub, formatter)


@cli.group("score", cls=_ScoreGroup, short_help="Score a translation (BLEU, chrF, discourse), DPs, or a model's "
                                                "context use (CXMI, contrastive pronouns).")
def score_grp() -> None:
    """Score translations, DP insertions or models."""


_BLEU_EPILOG = """\b
Examples:
  doctrans score test.hyp -r ../shared/corpora/tvsub/test/test.ref.sgm --json --out scores.json
  doctrans translate -c CKPT -i test.zh | doctrans score - -r test.ref.sgm
  doctrans score test.hyp -r test.ref.sgm --base test.seg.zh --oracle test.oracle-dp.seg.zh \\
      --cohesion --lsa PREP/train.tok.en
"""


def _json_out_options(f):
    f = click.option("--out", type=click.Path(dir_okay=False), default=None,
                     help="Also write the result to this file (atomically).")(f)
    return click.option("--json", "as_json", is_flag=True, help="Print (and write) JSON instead of a table.")(f)


def _model_options(f):
    """The options of the modes that score with a model (cxmi, contrastive)."""
    f = click.option("--threads", type=NON_NEGATIVE, default=0, show_default=True,
                     help="torch threads (0 = all cores).")(f)
    return click.option("--max-tokens", type=POSITIVE, default=3000, show_default=True,
                        help="Tokens per scoring batch.")(f)


@score_grp.command("bleu", epilog=_BLEU_EPILOG,
                   short_help="HYP against references: BLEU, chrF, significance, discourse columns (default).")
@click.argument("hyp", type=click.Path(exists=True, dir_okay=False, allow_dash=True))
@click.option("-r", "--ref", "refs", multiple=True, required=True,
              type=click.Path(exists=True, dir_okay=False),
              help="Reference: plain text (one reference) or .sgm (one reference per sysid). Repeatable.")
@click.option("--hyp-tokenized/--hyp-detok", "hyp_tokenized", default=None,
              help="Whether HYP is Moses-tokenized [default: detected from the text (split punctuation and "
                   "clitics, &apos;); no evidence: detokenized].")
@click.option("--refs-tokenized/--refs-detok", "refs_tokenized", default=None,
              help="Whether the references are Moses-tokenized [default: detected; no evidence: yes for .sgm, no "
                   "for plain text].")
@click.option("--metrics", default=",".join(("bleu_tok_lc", "sacrebleu", "chrf")), show_default=True,
              help="Comma-separated subset of bleu_tok_lc,sacrebleu,chrf.")
@click.option("--detok-case", type=click.Choice(["auto", "lc", "mixed"]), default="auto", show_default=True,
              help="Case handling of sacrebleu/chrf; auto = case-insensitive iff all references are lowercase.")
@click.option("--no-split-hyphens", is_flag=True,
              help="bleu_tok_lc: do not split hyphens Moses-style (mix-up -> mix @-@ up) on both sides.")
@_json_out_options
@click.option("--baseline", type=click.Path(exists=True, dir_okay=False), default=None,
              help="A baseline hypothesis (same format as HYP): adds paired bootstrap resampling (sacrebleu, "
                   "Koehn 2004) and the sign test of HYP vs it, in the bleu_tok_lc setting.")
@click.option("--bootstrap", type=POSITIVE, default=1000, show_default=True,
              help="Paired-bootstrap samples (with --baseline).")
@click.option("--base", type=click.Path(exists=True, dir_okay=False),
              help="With --oracle: the segmented source (test.seg.zh), for DP translation recall.")
@click.option("--oracle", type=click.Path(exists=True, dir_okay=False),
              help="With --base: the oracle DP-inserted source (test.oracle-dp.seg.zh): adds DP translation recall "
                   "of HYP (share of the dropped pronouns the reference realises that HYP realises too).")
@click.option("--cohesion", is_flag=True,
              help="Add lexical cohesion (Wong & Kit 2012; lemma repetition) of HYP and the first reference, per "
                   "document (--docs or an .sgm reference).")
@click.option("--cohesion-window", type=NON_NEGATIVE, default=0, show_default=True,
              help="--cohesion over consecutive windows of this many lines of each document (0: whole documents; "
                   "a subtitle episode of 300–800 lines repeats nearly every content word, so whole-episode "
                   "cohesion saturates).")
@click.option("--docs", type=click.Path(exists=True, dir_okay=False),
              help="--cohesion, --lsa: doc_id<TAB>position per line (as PREP/test.docs) [default: from an .sgm -r].")
@click.option("--lsa", type=click.Path(exists=True, dir_okay=False),
              help="Add coherence (Foltz et al. 1998: adjacent-sentence cosine in LSA space, and averaged word "
                   "vectors): an LSA model (.pkl) or a tokenized English corpus to fit one on (e.g. "
                   "PREP/train.tok.en; cached beside it).")
@click.option("--apt", "apt_src", type=click.Path(exists=True, dir_okay=False),
              help="Add APT pronoun and noun translation accuracy (Miculicich Werlen & Popescu-Belis 2017): the "
                   "segmented source (e.g. test.seg.zh) aligned with eflomal to the first reference and to HYP.")
@click.option("--apt-corpus", default=None, metavar="PREFIX",
              help="--apt: tokenized parallel text PREFIX.zh / PREFIX.en (e.g. PREP/train.tok, first 50,000 "
                   "lines) aligned alongside, for better alignments.")
def score_bleu_cmd(hyp: str, refs: tuple[str, ...], hyp_tokenized: bool | None, refs_tokenized: bool | None,
                   metrics: str, detok_case: str, no_split_hyphens: bool, as_json: bool, out: str | None,
                   baseline: str | None, bootstrap: int, base: str | None, oracle: str | None, cohesion: bool,
                   cohesion_window: int, docs: str | None, lsa: str | None, apt_src: str | None,
                   apt_corpus: str | None) -> None:
    """Score HYP (a file, or - for stdin) against references with sacrebleu; prints each score
    with its signature.

    \b
    Two BLEU settings:
      bleu_tok_lc  the thesis' comparison setting: case-insensitive BLEU-4 on
                   Moses-tokenized text against all references (sacrebleu
                   tokenize=none, lowercase). A detokenized HYP is tokenized with
                   sacremoses first; references likewise when plain/detokenized.
      sacrebleu    standard detokenized sacreBLEU (tokenize=13a). Tokenized text is
                   Moses-detokenized first. TVsub references are lowercased, so by
                   default it is case-insensitive then (case:lc in the signature),
                   as it is for a lowercase HYP.
    chrf is sacrebleu chrF2 on the same detokenized text. Whether HYP and the
    references are tokenized and lowercase is detected (or given) and printed;
    a NOTE says where they differ. `doctrans score bleu HYP …` is the same
    command (for a hypothesis file named like a mode).
    """
    from pathlib import Path

    from doctrans.evaluation import score

    if (base is None) != (oracle is None):
        raise click.UsageError("DP translation recall needs both --base and --oracle")
    cfg = score.ScoreConfig(
        hyp=hyp, refs=tuple(refs), hyp_tokenized=hyp_tokenized, refs_tokenized=refs_tokenized,
        metrics=tuple(m.strip() for m in metrics.split(",") if m.strip()),
        lowercase_detok={"auto": None, "lc": True, "mixed": False}[detok_case],
        split_hyphens=not no_split_hyphens, fmt="json" if as_json else "table", out=out,
        baseline=baseline, bootstrap=bootstrap, dp_base=base, dp_oracle=oracle, cohesion=cohesion, lsa=lsa,
        cohesion_window=cohesion_window, docs=docs, apt_src=apt_src, apt_corpus=apt_corpus,
    )
    result = score.run(cfg)
    click.echo(result.read_text(encoding="utf-8") if isinstance(result, Path) else score.render(result, cfg.fmt),
               nl=False)


@score_grp.command("dp", short_help="Dropped-pronoun insertion against the hand oracle: position and pronoun P/R/F.")
@click.argument("hyp", type=click.Path(exists=True, dir_okay=False, allow_dash=True))
@click.option("--base", required=True, type=click.Path(exists=True, dir_okay=False),
              help="The source HYP was made from, without DPs (any segmentation).")
@click.option("--oracle", required=True, type=click.Path(exists=True, dir_okay=False),
              help="The oracle DP-inserted source (e.g. test.oracle-dp.seg.zh).")
@click.option("--oracle-base", type=click.Path(exists=True, dir_okay=False),
              help="The oracle's source without DPs (e.g. test.seg.zh) [default: --base].")
@click.option("--baseline", type=click.Path(exists=True, dir_okay=False), default=None,
              help="Another DP-inserted file (made from --baseline-base), compared by paired bootstrap.")
@click.option("--baseline-base", type=click.Path(exists=True, dir_okay=False), default=None,
              help="The source the baseline's DPs were inserted into [default: --base].")
@click.option("--bootstrap", type=NON_NEGATIVE, default=1000, show_default=True,
              help="Bootstrap samples: 95% intervals over lines, and the paired test with --baseline (0 = off).")
@_json_out_options
def score_dp_cmd(hyp: str, base: str, oracle: str, oracle_base: str | None, baseline: str | None,
                 baseline_base: str | None, bootstrap: int, as_json: bool, out: str | None) -> None:
    """Dropped-pronoun agreement: HYP is a DP-inserted segmented source (e.g. `doctrans
    annotate-dp --generator` output), scored against an oracle.

    Position and pronoun precision/recall/F1 of the dropped pronouns in HYP against the oracle,
    matching each DP by its character offset in the sentence with spaces removed
    (NFKC-normalised), so the two sides may be segmented differently; 95% bootstrap intervals
    over lines, and with --baseline a paired bootstrap p-value.

    \b
    Examples:
      doctrans score dp test.auto-dp.seg.zh --base test.seg.zh --oracle test.oracle-dp.seg.zh
      doctrans score dp ours.dp.zh --base test.tok.zh --oracle test.oracle-dp.seg.zh \\
          --oracle-base test.seg.zh --baseline test.auto-dp.seg.zh --baseline-base test.seg.zh
    """
    import json

    from doctrans.dp.agreement import dp_agreement_with_bootstrap, render_agreement

    result = dp_agreement_with_bootstrap(base, hyp, oracle_base or base, oracle, baseline, baseline_base,
                                         bootstrap)
    _emit(json.dumps(result, indent=2) + "\n" if as_json else render_agreement(result), out)


@score_grp.command("cxmi", short_help="A model's context usage: CXMI and P-CXMI on references (no HYP).")
@click.option("-c", "--checkpoint", required=True, type=click.Path(exists=True, dir_okay=False),
              help="The model to score with (any model; a sentence-level one gets exactly 0).")
@click.option("--src", required=True, type=click.Path(exists=True, dir_okay=False),
              help="The source, plain text or .sgm (its <DOC> blocks are the documents).")
@click.option("-r", "--ref", "ref", required=True, type=click.Path(exists=True, dir_okay=False),
              help="The reference, plain text or .sgm (its first system).")
@click.option("--docs", type=click.Path(exists=True, dir_okay=False),
              help="doc_id<TAB>position per line (as PREP/test.docs) [default: from an .sgm --src or -r].")
@click.option("--tokenized", is_flag=True,
              help="--src and -r are tokenized (e.g. PREP/test.tok.*; BPE only) [default: raw text, but an .sgm "
                   "reference is taken as tokenized, as TVsub's are].")
@click.option("--random-context", is_flag=True,
              help="Also the real vs a random context from another document (contextual-mt's check).")
@_model_options
@_json_out_options
def score_cxmi_cmd(checkpoint: str, src: str, ref: str, docs: str | None, tokenized: bool, random_context: bool,
                   max_tokens: int, threads: int, as_json: bool, out: str | None) -> None:
    """Context usage of -c CKPT on --src/-r as documents (Fernandes et al. 2021).

    CXMI = mean over sentences of log q(ref | src, context) − log q(ref | src, empty context)
    in nats (eq. 3), per token, and P-CXMI per word class (pronouns, punctuation, other), for
    the reference -r; the context is the model's (previous N sentences of the document,
    references as target context). > 0: the model uses its context.

    \b
    Examples:
      doctrans score cxmi -c runs/context/han_encoder/last.pt --src test.zh -r test.ref.sgm --random-context
      doctrans score cxmi -c CKPT --src PREP/test.tok.zh -r PREP/test.tok.en \\
          --docs PREP/test.docs --tokenized --json --out cxmi.json
    """
    import json
    from pathlib import Path

    from doctrans.data.documents import read_doc_positions
    from doctrans.evaluation.cxmi import compute_cxmi, load_scoring_set, render_cxmi

    _set_threads(threads)
    src_lines, src_docs = _lines_and_docs(src)
    ref_lines, ref_docs = _lines_and_docs(ref)
    doc_ids = src_docs or ref_docs
    if docs:
        names, doc, _ = read_doc_positions(Path(docs), len(src_lines))
        doc_ids = [names[d] for d in doc]
    if doc_ids is None:
        click.echo("note: no documents given (--docs or an .sgm input): the whole input is one document", err=True)
    scoring = load_scoring_set(checkpoint, src_lines, ref_lines, doc_ids, tokenized=tokenized,
                               ref_tokenized=tokenized or ref_docs is not None)   # .sgm references: tokenized
    result = compute_cxmi(scoring.model, scoring.src, scoring.tgt, scoring.doc, scoring.targets,
                          conditions=("empty", "random") if random_context else ("empty",), max_tokens=max_tokens,
                          progress=True)
    result = {"checkpoint": checkpoint, "source": src, "reference": ref, **result}
    _emit(json.dumps(result, indent=1) + "\n" if as_json else render_cxmi(
        {k: v for k, v in result.items() if isinstance(v, dict)}), out)


@score_grp.command("contrastive", short_help="Contrastive pronoun accuracy of a model on a set (no HYP).")
@click.argument("set_dir", metavar="SET_DIR", type=click.Path(exists=True, file_okay=False))
@click.option("-c", "--checkpoint", required=True, type=click.Path(exists=True, dir_okay=False),
              help="The model to score with.")
@click.option("--baseline", "baseline", default=None, type=click.Path(exists=True, dir_okay=False),
              help="A second model: McNemar's test of -c against it on all, DP and context-needed items.")
@_model_options
@_json_out_options
def score_contrastive_cmd(set_dir: str, checkpoint: str, baseline: str | None, max_tokens: int, threads: int,
                          as_json: bool, out: str | None) -> None:
    """Contrastive pronoun accuracy of -c CKPT on SET_DIR (built by `doctrans contrastive build`).

    For each item of the set (a pronoun of the reference, dropped in the Chinese source or
    overt), whether the model gives the reference a higher log-probability than every variant
    with another pronoun of the same case; accuracy overall, DP vs overt, context-needed, by class
    and by pronoun; with --baseline, McNemar's test against a second model.

    \b
    Examples:
      doctrans contrastive build --split test -o contrastive/test
      doctrans score contrastive contrastive/test -c runs/context/han_encoder/last.pt
    """
    import json

    from doctrans.evaluation.contrastive import compare, read_set, render_scores, score_set

    _set_threads(threads)
    result = score_set(checkpoint, set_dir, max_tokens=max_tokens, progress=True)
    if baseline:
        base = score_set(baseline, set_dir, max_tokens=max_tokens, progress=True)
        result["baseline"] = baseline
        result["compare"] = compare(result, base, read_set(set_dir)[3])
    _emit(json.dumps(result, indent=1) + "\n" if as_json else render_scores(result), out)


def _set_threads(threads: int) -> None:
    """``--threads N``: torch intra-op threads (0: torch's default, all cores)."""
    if threads:
        import torch

        torch.set_num_threads(threads)


def _emit(text: str, out: str | None) -> None:
    """Print a result, and with ``--out`` also write it (atomically)."""
    from doctrans.utils.io import atomic_write_text

    if out:
        atomic_write_text(out, text)
    click.echo(text, nl=False)


def _lines_and_docs(path: str) -> tuple[list[str], list[str] | None]:
    """Plain text (no documents) or the first system of an SGML file with its document ids."""
    from pathlib import Path

    from doctrans.data.sgml import read_sgml
    from doctrans.utils.io import read_lines

    if Path(path).suffix.lower() in (".sgm", ".sgml", ".xml"):
        first = read_sgml(path)[0]
        return list(first.segments), first.doc_ids()
    return read_lines(path), None


# --- table, contrastive (doctrans/experiments/, doctrans/evaluation/contrastive.py) -------------


@cli.group("table", short_help="Experiment tables: translate and score several systems into one markdown table.")
def table_grp() -> None:
    """Experiment tables: each translates the TVsub test set with several systems, scores them
    (3-reference BLEU in the thesis setting, significance against the first row, discourse
    columns) and writes a markdown table (`make dp-table`, `make context-table`, `make quickstart`,
    `make rnn-context-table`)."""


def _table_options(out: str, work: str):
    """The options every table shares."""
    def deco(f):
        for opt in reversed([
            click.option("--prepared", default="data/quickstart", show_default=True,
                         help="Prepared dataset (doctrans preprocess): PREP/test.tok.zh, test.docs, train.tok.*."),
            click.option("--data", default="../shared/corpora/tvsub", show_default=True,
                         help="TVsub root (test/test.ref.sgm, test.seg.zh, test.oracle-dp.seg.zh)."),
            click.option("--out", default=out, show_default=True, help="The markdown table to write."),
            click.option("--work", default=work, show_default=True,
                         help="Directory of the translations, rows.json and the contrastive set."),
            click.option("--beam", type=POSITIVE, default=5, show_default=True, help="Beam size."),
            click.option("--bootstrap", type=POSITIVE, default=1000, show_default=True,
                         help="Paired-bootstrap samples of the significance test against the first row."),
            click.option("--contrastive", default="", help="Contrastive set directory (with --discourse) "
                                                           "[default: built under WORK]."),
        ]):
            f = opt(f)
        return f
    return deco


def _nbest_list(ctx, param, value: str) -> tuple[int, ...]:
    try:
        ns = tuple(int(x) for x in value.split(",") if x.strip())
    except ValueError:
        ns = ()
    if not value.strip():
        return ()
    if not ns or any(n < 2 for n in ns):
        raise click.BadParameter(f"{value!r}: expected comma-separated N ≥ 2, e.g. 2,4,6,8")
    return ns


@table_grp.command("dp", short_help="The DP translation table: Baseline / +DPs (1-best, N-best) / +DPPs / oracles.")
@click.option("--baseline", required=True, type=click.Path(exists=True, dir_okay=False),
              help="The sentence-level Transformer (translates the original input).")
@click.option("--dp", required=True, type=click.Path(exists=True, dir_okay=False),
              help="The +DPs Transformer (pipelines/dp/nmt_dp.yaml).")
@click.option("--dpp", default="", help="The +DPPs Transformer (pipelines/dp/nmt_dpp.yaml) [default: no +DPPs row].")
@click.option("--generator", required=True, type=click.Path(exists=True, dir_okay=False),
              help="The DP generator (pipelines/dp/labeler.yaml) completing the test source.")
@_table_options("results/dp_table.md", "results/dp_table")
@click.option("--nbest", default="2,4,6,8", show_default=True, callback=_nbest_list,
              help="N of the N-best mixture rows, comma-separated (N ≥ 2; empty: none).")
@click.option("--discourse", is_flag=True,
              help="Add the discourse columns (docs/discourse.md): contrastive pronoun accuracy (DP / overt items, "
                   "each model scored on the input it translates), APT pronoun / noun accuracy, lexical cohesion, "
                   "LSA coherence.")
def table_dp_cmd(**kw) -> None:
    """The DP translation table (thesis Tables 4.10, 5.4, 6.2, 6.8; `make dp-table`).

    Translates the TVsub test set with the Baseline (original input), +DPs with the
    generator's 1-best completion and N-best mixture decoding (one shared beam over the N
    DP-completed inputs), +DPPs (#DP# at the generator's positions), and +DPs on the manual
    oracle input (the hand DPs moved onto our segmentation) and the auto oracle input
    (annotate-dp with the reference, PREP/dp/test.dp.zh). Scores each (tokenized, lowercased
    BLEU, 3 references) with paired bootstrap and sign test against the baseline, counts English
    pronouns, and times 1-best vs N-best decoding. Writes --out and WORK/rows.json.
    """
    from doctrans.experiments.dp_table import DPTableConfig, run

    click.echo(f"wrote {run(DPTableConfig(**kw))}")


def _system_spec(ctx, param, values: tuple[str, ...]) -> list[tuple[str, "Path"]]:
    from pathlib import Path

    systems = []
    for spec in values:
        name, sep, run = spec.rpartition("=")               # a name may hold '=' (+z=0), a run dir not
        if not sep or not name or not run:
            raise click.BadParameter(f"{spec!r}: expected NAME=RUN_DIR")
        systems.append((name, Path(run)))
    return systems


@table_grp.command("context", short_help="The context-model table: runs as rows, BLEU, speed, memory, discourse.")
@click.option("--system", "systems", multiple=True, required=True, metavar="NAME=RUN_DIR", callback=_system_spec,
              help="A row: its name and run directory (the first row is the baseline). Repeatable.")
@_table_options("results/context_table.md", "results/context_table")
@click.option("--ref", default="", help="Test references (SGML) [default: DATA/test/test.ref.sgm].")
@click.option("--checkpoint", type=click.Choice(["last", "best"]), default="last", show_default=True,
              help="Which checkpoint of each run translates (last: equal updates).")
@click.option("--discourse", is_flag=True,
              help="Add CXMI and contrastive pronoun accuracy per system (a few minutes each; docs/discourse.md).")
@click.option("--usage", is_flag=True,
              help="Add only the context-usage columns: CXMI vs empty and random context, contrastive accuracy "
                   "(all / DP / overt / context-needed) with McNemar's test against the first row (1–2 min each).")
@click.option("--lone", is_flag=True,
              help="Also translate every test line as its own document with each context model and report that "
                   "BLEU (the empty context everywhere).")
@click.option("--context-option", "context_options", multiple=True, metavar="NAME:KEY=VALUE",
              help="Translate row NAME with this context option (doctrans translate --context-option), e.g. a "
                   "test-time ablation of a trained run: --system +NULL=runs/isg --context-option "
                   "+NULL:test_ablation=null. Repeatable.")
@click.option("--engine", type=click.Choice(["native", "ctranslate2"]), default="native", show_default=True,
              help="ctranslate2: rows whose model CTranslate2 can run (sentence Transformer, concatenation) are "
                   "exported under WORK and decoded with it (the decode column names the engine); others native.")
@click.option("--compute-type", type=click.Choice(["float32", "int8", "int8_float32"]), default="int8",
              show_default=True, help="--engine ctranslate2: CTranslate2's compute type.")
@click.option("--table", "tables", multiple=True, metavar="TITLE=NAME,NAME,...",
              help="Render these rows as a table of their own under '## TITLE' (its first row is the one Δ, ratios "
                   "and significance refer to). Repeatable [default: one table of every row].")
def table_context_cmd(systems, context_options, tables, **kw) -> None:
    """The context-model table (HAN paper Table 1 as the anchor; `make context-table`).

    Translates the TVsub test set as documents (PREP/test.docs) with each run's last.pt (or
    best.pt) and writes per row: 3-reference BLEU in the thesis setting with paired bootstrap and
    sign test against the first row, sacreBLEU, English pronouns, parameters, training tok/s,
    decoding sentences/s, peak training memory and the update count; with DP annotation in DATA
    also DP translation recall, with --discourse CXMI and contrastive pronoun accuracy. A row's
    translation (WORK/test.NAME.hyp) is reused by a later call while its checkpoint, beam and
    options are unchanged, so an interrupted table resumes; contrastive scores likewise (kept in
    the contrastive set's scores/ directory per checkpoint and source).

    \b
    Example:
      doctrans table context --system Transformer=runs/context/transformer \\
          --system HAN=runs/context/han_encoder --discourse --out results/context_table.md
    """
    from doctrans.experiments.context_table import ContextTableConfig, run

    names = [n for n, _ in systems]
    options: dict[str, list[str]] = {}
    for spec in context_options:
        name, sep, kv = spec.partition(":")
        if not sep or "=" not in kv or name not in names:
            raise click.BadParameter(f"{spec!r}: expected NAME:KEY=VALUE with NAME one of the --system names",
                                     param_hint="--context-option")
        options.setdefault(name, []).append(kv)
    if options and (kw["discourse"] or kw["usage"]):
        raise click.UsageError("--discourse scores each checkpoint as trained: leave out --context-option rows "
                               "(make a second table)")
    split = []
    for spec in tables:
        title, sep, members = spec.partition("=")
        rows_of = [m for m in members.split(",") if m]
        if not sep or not rows_of or any(m not in names for m in rows_of):
            raise click.BadParameter(f"{spec!r}: expected TITLE=NAME,NAME,... of --system names", param_hint="--table")
        split.append((title, rows_of))
    click.echo(f"wrote {run(systems, ContextTableConfig(**kw), options, split)}")


@table_grp.command("rec", short_help="The reconstructor / DP table (issue 28): +DPs, reconstructors, joint DP models.")
@click.option("--system", "systems", multiple=True, required=True, metavar="NAME=RUN_DIR", callback=_system_spec,
              help="A row: its name and run directory (the first row is the baseline). Repeatable.")
@click.option("--row-option", "row_options", multiple=True, metavar="NAME:KEY=VALUE",
              help="Translate row NAME with this translate option (KEY: dp_generator, dp_input, rerank, rerank_k, rerank_vocab, dp_threshold), "
                   "e.g. --row-option '+DPs:dp_generator=runs/dp_labeler/best.pt' or 'enc+dec, reranked:rerank="
                   "reconstructor'. Repeatable.")
@click.option("--generator", default="", help="The external DP generator: its 1-best completion of the test source "
                                              "heads the DP prediction table (P/R/F against the hand oracle).")
@_table_options("results/rec_table.md", "results/rec_table")
@click.option("--ref", default="", help="Test references (SGML) [default: DATA/test/test.ref.sgm].")
@click.option("--checkpoint", type=click.Choice(["last", "best"]), default="last", show_default=True,
              help="Which checkpoint of each run translates (last: equal updates).")
@click.option("--discourse", is_flag=True, help="Add contrastive DP / overt pronoun accuracy per row (minutes each).")
@click.option("--skip-missing", is_flag=True, help="Skip a row whose run has no checkpoint yet (with a warning).")
def table_rec_cmd(systems, row_options, **kw) -> None:
    """The reconstructor / DP table (issue 28; thesis Tables 5.4, 6.2, 6.6; `make rec-table`).

    Translates the TVsub test set as documents with each run's last.pt and its row options (a
    DP generator completing a +DPs row's input or making a reconstructor's x̂, --rerank
    reconstructor), and writes per row: 3-reference BLEU with paired bootstrap and sign test
    against the first row, English pronouns, DP translation recall, contrastive DP / overt
    accuracy (--discourse), parameters, training tok/s, decoding sent/s (a reranked row also
    against the same run decoded plainly) and updates; then the DP prediction table: the
    external generator's and every joint DP model's (translate --dp-out) position and pronoun
    P/R/F against the hand oracle. Writes --out and WORK/rows.json; translations and
    contrastive scores are reused.

    \b
    Example:
      doctrans table rec --system Baseline=runs/rec/baseline --system +DPs=runs/rec/nmt_dp \\
          --row-option +DPs:dp_generator=runs/dp_labeler/best.pt --generator runs/dp_labeler/best.pt
    """
    from doctrans.experiments.rec_table import RecTableConfig, run

    names = [n for n, _ in systems]
    options: dict[str, list[str]] = {}
    for spec in row_options:
        name, sep, kv = spec.partition(":")       # a name holds no ':', a value may (A.pt:B.pt ensembles)
        if not sep or "=" not in kv or name not in names:
            raise click.BadParameter(f"{spec!r}: expected NAME:KEY=VALUE with NAME one of the --system names",
                                     param_hint="--row-option")
        options.setdefault(name, []).append(kv)
    click.echo(f"wrote {run(systems, RecTableConfig(**kw), options)}")


@cli.group("contrastive", short_help="The contrastive pronoun test set (build it; score with `score contrastive`).")
def contrastive_grp() -> None:
    """The ContraPro-style contrastive pronoun set built from TVsub (docs/discourse.md). Build it
    here; score a model on it with `doctrans score contrastive SET_DIR -c CKPT`."""


@contrastive_grp.command("build", short_help="Build the contrastive pronoun set of a TVsub split (deterministic).")
@click.option("--data", default="../shared/corpora/tvsub", show_default=True,
              help="TVsub root (with dev/ and test/: SPLIT.zh, .seg.zh, .oracle-dp.seg.zh, .ref.sgm).")
@click.option("--split", type=click.Choice(["dev", "test"]), default="test", show_default=True)
@click.option("-o", "--out", required=True, help="Output directory (the set).")
@click.option("--max-distance", type=POSITIVE, default=3, show_default=True,
              help="Context-needed items: the farthest antecedent (lines back) counted (the HAN models read 3).")
def contrastive_build_cmd(data: str, split: str, out: str, max_distance: int) -> None:
    """Build the contrastive pronoun set of a TVsub split (deterministic).

    Every English central pronoun of the first reference becomes an item when the hand DP
    annotation says unambiguously whether the Chinese source drops it (kind dp or overt); its
    contrasts are the reference with that pronoun replaced by every other pronoun of the same
    grammatical case. DP items whose pronoun only the preceding lines decide (a 3rd-person
    antecedent within --max-distance lines, or a reply flipping 1st/2nd person) are marked
    context-needed, with their antecedent distance. Writes OUT/src.zh, ref.en, docs,
    items.jsonl and summary.json, and prints the summary.
    """
    import json
    from pathlib import Path

    from doctrans.evaluation.contrastive import build_set

    s = build_set(Path(data), split, Path(out), max_distance)
    click.echo(json.dumps({k: v for k, v in s.items() if k != "by_pronoun"}, ensure_ascii=False))


# --- configs (doctrans/config_catalog.py) -----------------------------------------------------


_KEY_SECTIONS = ("top", "data", "model", "context", "train", "decode", "dp")


@cli.command("configs", short_help="List the shipped YAML configs, or (--keys) the config keys and defaults.")
@click.option("--keys", "keys", is_flag=True,
              help="List the config keys with their defaults and comments instead (of SECTION, or all).")
@click.argument("section", required=False, type=click.Choice(_KEY_SECTIONS), metavar="[SECTION]")
def configs_cmd(keys: bool, section: str | None) -> None:
    """List the YAML configs shipped in pipelines/ (to pass to `doctrans train`), each with the
    first line of its comment; with --keys, the keys a config may set, their defaults and what
    they mean.

    \b
    SECTION (with --keys): top (name, run_dir), data, model (per model.backbone), context (per
    context.type), train, decode, dp (the DP generator's YAML: task: dp_generator). Override any
    key on the command line: `doctrans train CONFIG.yaml train.lr=5e-4 context.context_sents=2`.

    \b
    Examples:
      doctrans configs
      doctrans configs --keys context
    """
    from doctrans import config_catalog

    if section and not keys:
        raise click.UsageError(f"SECTION needs --keys: doctrans configs --keys {section}")
    if keys:
        click.echo(config_catalog.render_keys(section), nl=False)
        return
    root = config_catalog.find_pipelines()
    rows = config_catalog.shipped_configs(root)
    width = max(len(p) for p, _ in rows) if rows else 0
    click.echo(f"{len(rows)} configs in {root} (doctrans train PATH [KEY=VALUE]...; keys: doctrans configs --keys):")
    for path, note in rows:
        click.echo(f"  {path:<{width}}  {note}".rstrip())


def main() -> None:
    """Console-script entry point: turn known errors into a one-line message and exit code 1."""
    try:
        cli(standalone_mode=False)
    except click.exceptions.Abort:
        click.echo("Aborted.", err=True)
        sys.exit(130)
    except click.ClickException as e:
        e.show()
        sys.exit(e.exit_code)
    except (ValueError, OSError, RuntimeError) as e:
        click.echo(f"error: {e}", err=True)
        sys.exit(1)


if __name__ == "__main__":
    main()
