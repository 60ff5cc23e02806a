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


def _setup_logging(verbose: bool) -> None:
    quiet = os.environ.get("RANK", "0") not in ("", "0")     # torchrun: only rank 0 logs INFO
    logging.basicConfig(
        level=logging.WARNING if quiet else logging.DEBUG if verbose else logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        datefmt="%H:%M:%S",
    )


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="doctrans")
@click.option("-v", "--verbose", is_flag=True, help="Debug logging.")
def cli(verbose: bool) -> None:
    """doctrans: document-level neural machine translation (Chinese→English first).

    Stages: preprocess → [annotate-dp] → train → translate → score. Run `doctrans COMMAND --help`.
    """
    _setup_logging(verbose)


# --- preprocess (doctrans/data/preprocess.py) -------------------------------------------------


@cli.command("preprocess")
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
@click.option("--bpe-merges", default=8000, show_default=True, help="BPE merge operations per language.")
@click.option("--joint-bpe", is_flag=True, help="Learn one set of BPE codes on both languages.")
@click.option("--bpe-sample-lines", default=500_000, show_default=True,
              help="Learn BPE on at most this many evenly spaced train lines (0 = all).")
@click.option("--keep-case", is_flag=True, help="Do not lowercase (default: lowercase both sides).")
@click.option("--max-len", default=80, show_default=True, help="Train only: drop pairs with a side over N tokens.")
@click.option("--max-len-ratio", default=3.0, show_default=True,
              help="Train only: drop pairs whose token counts differ by more than this factor.")
@click.option("--workers", default=0, show_default=True, help="Processes (0 = all usable CPUs).")
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


@cli.command("train", context_settings={"ignore_unknown_options": False})
@click.argument("config_path", metavar="CONFIG.yaml", type=click.Path(exists=True, dir_okay=False))
@click.argument("overrides", nargs=-1, metavar="[KEY=VALUE]...")
@click.option("--resume", is_flag=True, help="Continue from RUN_DIR/last.pt with the same subsequent updates.")
@click.option("--max-time", "max_time", type=float, default=None,
              help="Wall-clock training budget in minutes (same as train.max_time_min=...).")
def train_cmd(config_path: str, overrides: tuple[str, ...], resume: bool, max_time: float | None) -> None:
    """Train a model described by CONFIG.yaml (see pipelines/).

    KEY=VALUE pairs override config fields by dotted path, e.g.
    `train.lr=5e-4 model.layers_enc=2 run_dir=runs/try1`. Unknown keys are errors.
    The run directory receives config.yaml, metrics.jsonl, train.log, tensorboard/,
    learning_curves.png, best.pt and last.pt. A `context:` section (pipelines/context/: concat,
    HAN encoder/decoder/joint) trains a context model on document batches;
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
    from doctrans.training import distributed, train

    if max_time is not None:
        overrides = overrides + (f"train.max_time_min={max_time}",)
    try:
        if is_dp_config(config_path):                        # task: dp_generator (pipelines/dp/)
            run_dir = dp_train.run(load_dp_config(config_path, overrides), resume=resume)
        else:
            run_dir = train.run(load_experiment(config_path, overrides), resume=resume)
    finally:
        distributed.shutdown()                               # under torchrun: leave the process group
    if distributed.env_rank() == 0:
        click.echo(f"run directory: {run_dir}")


@cli.command("average")
@click.argument("checkpoints", nargs=-1, metavar="[CKPT]...")
@click.option("--last", "last", type=int, default=0,
              help="Average the last N checkpoint{STEP}.pt of --run-dir (written with train.keep_last=K ≥ N).")
@click.option("--run-dir", default=None, help="Run directory for --last.")
@click.option("-o", "--output", required=True, help="Checkpoint to write (atomically).")
def average_cmd(checkpoints: tuple[str, ...], last: int, run_dir: str | None, output: str) -> None:
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


@cli.command("translate")
@click.option("-c", "--checkpoint", required=True, type=click.Path(exists=True, dir_okay=False),
              help="A checkpoint written by `doctrans train` (best.pt or last.pt).")
@click.option("-i", "--input", "input_", default="-", show_default=True,
              help="Input file, a directory of document files (mirrored under --output), or - for stdin.")
@click.option("-o", "--output", default="-", show_default=True, help="Output file or directory, or - for stdout.")
@click.option("--beam", default=5, show_default=True, help="Beam size (1 = greedy).")
@click.option("--lenpen", default=1.0, show_default=True, help="Length penalty: score = log p / length^lenpen.")
@click.option("--max-len-ratio", default=1.5, show_default=True, help="Max output length = ratio × source length + extra.")
@click.option("--max-len-extra", default=10, show_default=True)
@click.option("--batch-sentences", default=64, show_default=True, help="Sentences per beam-search batch.")
@click.option("--input-format", type=click.Choice(["raw", "tok", "bpe"]), default="raw", show_default=True,
              help="raw: untokenized Chinese; tok: already segmented; bpe: already BPE-encoded.")
@click.option("--tokenized", is_flag=True, help="Write Moses-tokenized output (BPE merged) instead of detokenized text.")
@click.option("--prepared", default="", help="Prepared dataset dir holding the BPE codes (default: the codes inside "
                                             "the checkpoint; for older checkpoints, the dataset it names).")
@click.option("--threads", default=0, show_default=True,
              help="torch threads (0 = all usable cores; idle OpenMP threads sleep: OMP_WAIT_POLICY=PASSIVE unless "
                   "set); with --workers or torchrun, the machine's budget, split evenly: each process gets "
                   "max(1, threads // processes).")
@click.option("--device", type=click.Choice(["auto", "cpu", "cuda"]), default="auto", show_default=True,
              help="auto: the GPU when torch sees one, else the CPU.")
@click.option("--workers", default=1, show_default=True,
              help="Directory input: translate with N processes on this machine (each loads the model once). "
                   "Under torchrun, each rank translates its share of the documents (by rank).")
@click.option("--group-lines", default=512, show_default=True,
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
@click.option("--dp-nbest", default=1, show_default=True,
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
@click.option("--max-source-len", default=0, show_default=True,
              help="Split lines of more than N BPE tokens at sentence punctuation (or into chunks), translate "
                   "the pieces and join them (0 = the model's limit, e.g. max_positions - 1).")
@click.option("--explain-context", default=0, show_default=True, metavar="N",
              help="Context models (e.g. HAN): write pictures of the sentence- and word-level context attention "
                   "for each word of N sampled translated sentences (HAN paper Table 5) to --explain-dir.")
@click.option("--explain-dir", default="", help="Where --explain-context writes [default: OUTPUT.explain/].")
@click.option("--context-option", "context_options", multiple=True, metavar="KEY=VALUE",
              help="Override a field of the checkpoint's context config (repeatable), e.g. a test-time "
                   "ablation: --context-option test_ablation=null. An unknown key is an error.")
def translate_cmd(checkpoint, input_, output, beam, lenpen, max_len_ratio, max_len_extra, batch_sentences,
                  input_format, tokenized, prepared, threads, device, workers, group_lines, docs, dp_generator,
                  dp_input, dp_nbest, dp_combine, dp_weights, dp_docs, write_lattice, encoding_errors, resume,
                  max_source_len, explain_context, explain_dir, context_options) -> None:
    """Translate a file, stdin, or a directory of documents with beam search.

    The output has exactly as many lines as the input; an empty input line gives an empty
    output line; an over-long line is split, translated in pieces and joined (with a warning).
    Output is BPE-merged and Moses-detokenized unless --tokenized. The checkpoint carries its BPE
    codes, so it translates from any directory. A directory of documents: bad files are reported
    and skipped (exit code 1 at the end), --resume skips finished documents; --workers N translates
    with N processes, and `torchrun --nproc_per_node=K -m doctrans.cli translate -i DIR …` shards
    the documents by rank (rank 0 logs the summary of all ranks). A context model translates
    each document in order (--docs, an .sgm input, or the files of a directory);
    --explain-context N draws where its context attention goes for N sentences.
    """
    from doctrans.inference.translate import TranslateConfig, run

    run(TranslateConfig(checkpoint=checkpoint, input=input_, output=output, beam=beam, lenpen=lenpen,
                        max_len_ratio=max_len_ratio, max_len_extra=max_len_extra,
                        batch_sentences=batch_sentences, input_format=input_format,
                        tokenized=tokenized, prepared=prepared, threads=threads, device=device, docs=docs,
                        dp_generator=dp_generator,
                        dp_input=dp_input, dp_nbest=dp_nbest, dp_combine=dp_combine, dp_weights=dp_weights,
                        dp_docs=dp_docs, write_lattice=write_lattice, encoding_errors=encoding_errors,
                        resume=resume, max_source_len=max_source_len, workers=workers,
                        group_lines=group_lines, explain_context=explain_context, explain_dir=explain_dir,
                        context_options=tuple(context_options)))


# --- annotate-dp (doctrans/dp/corpus.py, doctrans/dp/apply.py) -------------------------------------------


@cli.command("annotate-dp")
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
@click.option("--nbest", default=6, show_default=True, help="--generator: completions per line in OUT.nbest.")
@click.option("--input-format", type=click.Choice(["tok", "raw"]), default="tok", show_default=True,
              help="--generator: INPUT is segmented (as PREPARED/*.tok.zh) or raw Chinese.")
@click.option("--threshold", type=float, default=None,
              help="--generator: insert a DP where P(no DP) < this [default: the value tuned on dev].")
@click.option("--splits", default="train,dev,test", show_default=True,
              help="Comma-separated splits to annotate (train is needed: the LM is estimated on it).")
@click.option("--symmetrize", type=click.Choice(["intersect", "grow-diag-final-and", "union", "forward", "reverse"]),
              default="intersect", show_default=True,
              help="How the two eflomal directions are combined (intersect: the thesis' high-precision choice).")
@click.option("--mode", type=click.Choice(["strict_unaligned", "misaligned"]), default="strict_unaligned",
              show_default=True, help="strict_unaligned: only English pronouns with no link are DPs; misaligned: "
                                      "also those linked only to non-pronouns (agrees better with TVsub's hand oracle; see README).")
@click.option("--overt-match/--no-overt-match", default=True, show_default=True,
              help="An unlinked English pronoun is not a DP if a matching Chinese pronoun is in the source "
                   "unclaimed (also inside jieba words like 我要). --no-overt-match: Algorithm 1 as written.")
@click.option("--lm-order", default=5, show_default=True, help="n-gram order of the Chinese KenLM model.")
@click.option("--lm", "lm_path", default=None, type=click.Path(exists=True, dir_okay=False),
              help="Use this KenLM model (binary or ARPA) instead of estimating one with lmplz.")
@click.option("--lm-memory", default="2G", show_default=True, help="lmplz sorting memory (-S), e.g. 2G or 20%.")
@click.option("--workers", default=2, show_default=True, help="Search processes (1 = in this process).")
@click.option("--align-samplers", default=2, show_default=True, help="eflomal parallel samplers (threads).")
@click.option("--explain", default=0, show_default=True,
              help="Write explain/SPLIT-LINE.png (alignment matrix, candidate gaps, choice) and .txt for N "
                   "sampled sentences with a DP.")
@click.option("--explain-split", default="train", show_default=True)
@click.option("--seed", default=1, show_default=True, help="Sampling seed of --explain.")
@click.option("--oracle-dir", default=None, type=click.Path(exists=True, file_okay=False),
              help="TVsub root holding dev/dev.oracle-dp.seg.zh etc. [default: from the prepared meta.json].")
def annotate_dp_cmd(input_, prepared, out, generator, docs, nbest, input_format, threshold, splits, symmetrize, mode, overt_match, lm_order, lm_path, lm_memory, workers,
                    align_samplers, explain, explain_split, seed, oracle_dir) -> None:
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
    preserved. Score against an oracle with `doctrans score --dp`.

    \b
    Examples:
      doctrans annotate-dp -p data/quickstart --explain 5
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


# --- score (doctrans/evaluation/score.py) ------------------------------------------------------
@cli.command("score")
@click.argument("hyp", type=click.Path(exists=True, dir_okay=False), required=False)
@click.option("-r", "--ref", "refs", multiple=True,
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
@click.option("--json", "as_json", is_flag=True, help="Print (and write) JSON instead of a table.")
@click.option("--out", type=click.Path(dir_okay=False), default=None,
              help="Also write the result to this file (atomically).")
@click.option("--baseline", type=click.Path(exists=True, dir_okay=False), default=None,
              help="A baseline hypothesis (same format as HYP): adds paired bootstrap resampling (sacrebleu, "
                   "Koehn 2004) and the sign test of HYP vs it, in the bleu_tok_lc setting. With --dp: "
                   "another DP-inserted file (made from --baseline-base), compared by paired bootstrap.")
@click.option("--bootstrap", default=1000, show_default=True,
              help="Paired-bootstrap samples (with --baseline; with --dp always: 95% intervals, 0 = off).")
@click.option("--baseline-base", type=click.Path(exists=True, dir_okay=False), default=None,
              help="--dp --baseline: the source the baseline's DPs were inserted into [default: --base].")
@click.option("--dp", is_flag=True,
              help="Dropped-pronoun agreement instead of BLEU: HYP is a DP-inserted segmented source; "
                   "needs --base and --oracle.")
@click.option("--base", type=click.Path(exists=True, dir_okay=False),
              help="--dp: the source HYP was made from, without DPs (any segmentation). Without --dp, with "
                   "--oracle: the segmented source (test.seg.zh) for DP translation recall.")
@click.option("--oracle", type=click.Path(exists=True, dir_okay=False),
              help="--dp: the oracle DP-inserted source (e.g. test.oracle-dp.seg.zh). Without --dp, with --base: "
                   "adds DP translation recall of HYP (share of the dropped pronouns the reference realises "
                   "that HYP realises too).")
@click.option("--oracle-base", type=click.Path(exists=True, dir_okay=False),
              help="--dp: the oracle's source without DPs (e.g. test.seg.zh) [default: --base].")
@click.option("--cxmi", is_flag=True,
              help="Context usage instead of BLEU (no HYP): CXMI and P-CXMI of -c CKPT on --src/-r as documents "
                   "(Fernandes et al. 2021): reference cross-entropy with the real vs an empty context.")
@click.option("-c", "--checkpoint", type=click.Path(exists=True, dir_okay=False),
              help="--cxmi: the model to score with (any model; a sentence-level one gets exactly 0).")
@click.option("--src", type=click.Path(exists=True, dir_okay=False),
              help="--cxmi: the source, plain text or .sgm (its <DOC> blocks are the documents).")
@click.option("--docs", type=click.Path(exists=True, dir_okay=False),
              help="--cxmi, --cohesion, --lsa: doc_id<TAB>position per line (as PREP/test.docs) [default: from an "
                   ".sgm --src or -r].")
@click.option("--tokenized", is_flag=True,
              help="--cxmi: --src and -r are tokenized (e.g. PREP/test.tok.*; BPE only) [default: raw text, "
                   "but an .sgm reference is taken as tokenized, as TVsub's are].")
@click.option("--random-context", is_flag=True,
              help="--cxmi: also the real vs a random context from another document (contextual-mt's check).")
@click.option("--cohesion", is_flag=True,
              help="Add lexical cohesion (Wong & Kit 2012; lemma repetition) of HYP and the first reference, per "
                   "document (--docs or an .sgm reference).")
@click.option("--cohesion-window", type=int, default=0, show_default=True,
              help="--cohesion over consecutive windows of this many lines of each document (0: whole documents; "
                   "a subtitle episode of 300–800 lines repeats nearly every content word, so whole-episode "
                   "cohesion saturates).")
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
@click.option("--contrastive", "contrastive_set", type=click.Path(exists=True, file_okay=False),
              help="Contrastive pronoun accuracy of -c CKPT (no HYP) on a set directory built by "
                   "`python -m doctrans.evaluation.contrastive --split test -o DIR`.")
@click.option("--max-tokens", default=3000, show_default=True, help="--cxmi/--contrastive: tokens per scoring batch.")
def score_cmd(hyp: str | None, refs: tuple[str, ...], hyp_tokenized: bool | None, refs_tokenized: bool | None,
              metrics: str, detok_case: str, no_split_hyphens: bool, as_json: bool, out: str | None,
              baseline: str | None, bootstrap: int, baseline_base: str | None, dp: bool, base: str | None,
              oracle: str | None, oracle_base: str | None, cxmi: bool, checkpoint: str | None, src: str | None,
              docs: str | None, tokenized: bool, random_context: bool, cohesion: bool, cohesion_window: int,
              lsa: str | None, apt_src: str | None, apt_corpus: str | None, contrastive_set: str | None, max_tokens: int) -> None:
    """Score HYP against references with sacrebleu; prints each score with its signature.

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
    a NOTE says where they differ.

    \b
    With --cxmi: CXMI = mean over sentences of log q(ref | src, context) − log q(ref |
    src, empty context) in nats (Fernandes et al. 2021, eq. 3), per token, and P-CXMI
    per word class (pronouns, punctuation, other), for the checkpoint -c on the first
    reference of -r; the context is the model's (previous N sentences of the document,
    references as target context). > 0: the model uses its context.

    \b
    With --contrastive DIR: for each item of the set (a pronoun of the reference, dropped
    in the Chinese source or overt), whether -c CKPT gives the reference a higher
    log-probability than every variant with another pronoun of the same case; accuracy
    overall, DP vs overt, by class and by pronoun.

    \b
    With --dp: position and pronoun precision/recall/F1 of the dropped pronouns in HYP
    against an oracle, matching each DP by its character offset in the sentence with
    spaces removed (NFKC-normalised), so the two sides may be segmented differently;
    95% bootstrap intervals over lines, and with --baseline a paired bootstrap p-value.

    \b
    Examples:
      doctrans score test.hyp -r ../shared/corpora/tvsub/test/test.ref.sgm --json --out scores.json
      doctrans score test.hyp -r test.ref.sgm --base test.seg.zh --oracle test.oracle-dp.seg.zh \\
          --cohesion --lsa PREP/train.tok.en
      doctrans score --dp test.auto-dp.seg.zh --base test.seg.zh --oracle test.oracle-dp.seg.zh
      doctrans score --dp ours.dp.zh --base test.tok.zh --oracle test.oracle-dp.seg.zh \\
          --oracle-base test.seg.zh --baseline test.auto-dp.seg.zh --baseline-base test.seg.zh
      doctrans score --cxmi -c runs/context/han_encoder/last.pt --src test.zh \\
          -r test.ref.sgm --random-context
      doctrans score --cxmi -c CKPT --src PREP/test.tok.zh -r PREP/test.tok.en \\
          --docs PREP/test.docs --tokenized --json --out cxmi.json
      python -m doctrans.evaluation.contrastive --split test -o contrastive/test
      doctrans score --contrastive contrastive/test -c runs/context/han_encoder/last.pt
    """
    from pathlib import Path

    from doctrans.evaluation import score

    if dp:
        _score_dp(hyp, base, oracle, oracle_base, as_json, out, baseline, baseline_base, bootstrap)
        return
    if cxmi:
        _score_cxmi(checkpoint, src, refs, docs, tokenized, random_context, max_tokens, as_json, out)
        return
    if contrastive_set:
        _score_contrastive(checkpoint, contrastive_set, max_tokens, as_json, out)
        return
    if hyp is None:
        raise click.UsageError("give HYP, the hypothesis to score (or use --cxmi / --contrastive / --dp)")
    if not refs:
        raise click.UsageError("give at least one reference with -r/--ref (or use --dp)")

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



def _lines_and_docs(path: str) -> tuple[list[str], list[str] | None]:
    """Plain text (no documents) or the first system of an SGML file with its document ids."""
    from pathlib import Path

    from doctrans.data.sgml import read_sgml
    from doctrans.utils.io import read_lines

    if Path(path).suffix.lower() in (".sgm", ".sgml", ".xml"):
        first = read_sgml(path)[0]
        return list(first.segments), first.doc_ids()
    return read_lines(path), None


def _score_cxmi(checkpoint: str | None, src: str | None, refs: tuple[str, ...], docs: str | None, tokenized: bool,
                random_context: bool, max_tokens: int, as_json: bool, out: str | None) -> None:
    import json
    from pathlib import Path

    from doctrans.data.documents import read_doc_positions
    from doctrans.evaluation.cxmi import compute_cxmi, load_scoring_set, render_cxmi
    from doctrans.utils.io import atomic_write_text

    if not checkpoint or not src or not refs:
        raise click.UsageError("--cxmi needs -c CKPT, --src SOURCE and -r REFERENCE")
    src_lines, src_docs = _lines_and_docs(src)
    ref_lines, ref_docs = _lines_and_docs(refs[0])
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
    result = {"checkpoint": checkpoint, "source": src, "reference": refs[0], **result}
    text = json.dumps(result, indent=1) + "\n" if as_json else render_cxmi(
        {k: v for k, v in result.items() if isinstance(v, dict)})
    if out:
        atomic_write_text(out, text)
    click.echo(text, nl=False)


def _score_contrastive(checkpoint: str | None, set_dir: str, max_tokens: int, as_json: bool,
                       out: str | None) -> None:
    import json

    from doctrans.evaluation.contrastive import render_scores, score_set
    from doctrans.utils.io import atomic_write_text

    if not checkpoint:
        raise click.UsageError("--contrastive needs -c CKPT")
    result = score_set(checkpoint, set_dir, max_tokens=max_tokens, progress=True)
    text = json.dumps(result, indent=1) + "\n" if as_json else render_scores(result)
    if out:
        atomic_write_text(out, text)
    click.echo(text, nl=False)


def _score_dp(hyp: str, base: str | None, oracle: str | None, oracle_base: str | None,
              as_json: bool, out: str | None, baseline: str | None = None,
              baseline_base: str | None = None, bootstrap: int = 1000) -> None:
    import json

    from doctrans.dp.agreement import dp_agreement_with_bootstrap, render_agreement
    from doctrans.utils.io import atomic_write_text

    if not base or not oracle:
        raise click.UsageError("--dp needs --base (HYP without DPs) and --oracle")
    result = dp_agreement_with_bootstrap(base, hyp, oracle_base or base, oracle, baseline, baseline_base,
                                         bootstrap)
    text = json.dumps(result, indent=2) + "\n" if as_json else render_agreement(result)
    if out:
        atomic_write_text(out, text)
    click.echo(text, nl=False)


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
