"""``doctrans annotate-dp corpus|apply|jackknife|source-bpe`` (``doctrans/dp/corpus.py``,
``dp/apply.py``, ``dp/jackknife.py``): dropped-pronoun annotation of a prepared corpus and what is
built on it. The former one-command spelling (the job chosen by which flags are given) still
works: ``_AnnotateGroup`` maps it to the subcommand with a one-line deprecation note."""
from __future__ import annotations

import logging

import click

from doctrans.cli.options import NON_NEGATIVE, POSITIVE

log = logging.getLogger(__name__)


class _AnnotateGroup(click.Group):
    """``doctrans annotate-dp SUBCOMMAND …``; arguments that do not start with a subcommand are
    the former spelling: ``--generator`` → ``apply``, ``--source-bpe`` → ``source-bpe``,
    ``--jackknife K`` (``--jackknife-config``, ``--jackknife-set``) → ``jackknife --folds K``
    (``--config``, ``--set``), anything else → ``corpus``."""

    RENAMED = {"--jackknife": "--folds", "--jackknife-config": "--config", "--jackknife-set": "--set"}

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        if args and args[0] not in self.commands and args[0] not in ctx.help_option_names:
            old = " ".join(args)
            args = self.legacy_args(args)
            log.warning("`doctrans annotate-dp %s` is the former spelling: use `doctrans annotate-dp %s`", old,
                        " ".join(args))
        return super().parse_args(ctx, args)

    @classmethod
    def legacy_args(cls, args: list[str]) -> list[str]:
        """The subcommand's arguments for a former one-command invocation (``--`` ends options)."""
        head = args[:args.index("--")] if "--" in args else args

        def given(flag: str) -> bool:
            return any(a == flag or a.startswith(flag + "=") for a in head)

        if given("--generator"):
            return ["apply", *args]
        if given("--source-bpe"):
            return ["source-bpe", *[a for a in args if a != "--source-bpe"]]
        if given("--jackknife"):
            out = []
            for k, a in enumerate(args):
                flag, eq, value = a.partition("=")
                if k < len(head) and flag in cls.RENAMED:
                    a = cls.RENAMED[flag] + eq + value
                out.append(a)
            return ["jackknife", *out]
        return ["corpus", *args]


@click.group("annotate-dp", cls=_AnnotateGroup,
             short_help="Annotate dropped pronouns in a prepared corpus, apply a DP generator, jackknife.")
def annotate_dp_grp() -> None:
    """Dropped pronouns (DPs): annotate a prepared parallel corpus (thesis §4.3.1), then build on
    the annotation.

    \b
    Subcommands:
      corpus      annotate a prepared corpus (eflomal, KenLM, Algorithm 1): PREPARED/dp
      apply       a trained DP generator completing monolingual Chinese input
      jackknife   the training sources completed with predicted DPs (K folds)
      source-bpe  PREPARED/dp's +DPs source BPE-encoded as the prepared source

    \b
    Examples:
      doctrans annotate-dp corpus -p data/quickstart --explain 5
      doctrans annotate-dp jackknife -p data/quickstart --folds 3 --set train.max_epochs=1
      doctrans annotate-dp apply --generator runs/dp_labeler/best.pt data/quickstart/test.tok.zh \\
          --docs data/quickstart/test.docs -o runs/dp_labeler/test --nbest 6

    The former spelling without a subcommand (`annotate-dp -p PREP`, `--generator`,
    `--jackknife K`, `--source-bpe`) still runs the same subcommand, with a note giving the new one.
    """


def _prepared_option(**kw):
    return click.option("-p", "--prepared", required=True, type=click.Path(exists=True, file_okay=False), **kw)


def _splits(splits: str) -> list[str]:
    return [s.strip() for s in splits.split(",") if s.strip()]


@annotate_dp_grp.command("corpus", short_help="Annotate the DPs of a prepared parallel corpus (writes PREPARED/dp).")
@_prepared_option(help="Prepared dataset (doctrans preprocess output): its {split}.tok.{zh,en} are annotated.")
@click.option("-o", "--out", default=None, help="Output directory [default: PREPARED/dp].")
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
def annotate_corpus_cmd(prepared, out, splits, symmetrize, mode, overt_match, lm_order, lm_path, lm_memory, workers,
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
    Example:
      doctrans annotate-dp corpus -p data/quickstart --explain 5
    """
    from doctrans.dp.corpus import AnnotateConfig, annotate_corpus, render_agreement_table

    cfg = AnnotateConfig(prepared=prepared, out=out, splits=tuple(_splits(splits)),
                         symmetrize=symmetrize, mode=mode, overt_match=overt_match, lm_order=lm_order, lm=lm_path, lm_memory=lm_memory,
                         workers=workers, align_samplers=align_samplers, explain=explain,
                         explain_split=explain_split, seed=seed, oracle_dir=oracle_dir)
    result = annotate_corpus(cfg)
    for split, s in result["stats"].items():
        click.echo(f"{split}: {s['sentences']:,} sentences, {s['pronouns']:,} English pronouns, "
                   f"{s['dropped']:,} dropped ({s['dropped_pct']:.1f}%)")
    if result["agreement"]:
        click.echo("agreement with the hand-annotated oracle:")
        click.echo(render_agreement_table(result["agreement"]), nl=False)
    for p in result["explain"]:
        click.echo(f"explain: {p}")
    click.echo(f"annotated corpus: {result['out']}")


@annotate_dp_grp.command("apply", short_help="Complete the DPs of Chinese INPUT with a trained DP generator.")
@click.argument("input_", metavar="INPUT", type=click.Path(exists=True, dir_okay=False))
@click.option("--generator", required=True, metavar="MODEL[:MODEL...]",
              help="A trained DP generator (doctrans train pipelines/dp/...); several checkpoints joined by ':' are "
                   "ensembled (distributions averaged, τ = their mean).")
@click.option("-o", "--out", default=None, help="Output prefix [default: INPUT].")
@click.option("--docs", type=click.Path(exists=True, dir_okay=False),
              help="doc<TAB>position per INPUT line (e.g. PREPARED/test.docs) for document context.")
@click.option("--nbest", type=POSITIVE, default=6, show_default=True, help="Completions per line in OUT.nbest.")
@click.option("--input-format", type=click.Choice(["tok", "raw"]), default="tok", show_default=True,
              help="INPUT is segmented (as PREPARED/*.tok.zh) or raw Chinese.")
@click.option("--threshold", type=click.FloatRange(min=0, max=1, min_open=True), default=None,
              help="Insert a DP where P(no DP) < this, in (0, 1] [default: the value tuned on dev].")
def annotate_apply_cmd(input_, generator, out, docs, nbest, input_format, threshold) -> None:
    """Predict DPs in monolingual Chinese INPUT with a trained generator and write OUT.dp.zh
    (1-best), OUT.dpp.zh (#DP#) and OUT.nbest ("LINE ||| SENTENCE ||| SCORE", the N best joint
    completions, score = product of slot probabilities); line counts preserved. Score against an
    oracle with `doctrans score dp`.

    \b
    Example:
      doctrans annotate-dp apply --generator runs/dp_labeler/best.pt data/quickstart/test.tok.zh \\
          --docs data/quickstart/test.docs -o runs/dp_labeler/test --nbest 6
    """
    from doctrans.dp import apply as dp_apply

    try:
        paths = dp_apply.apply_generator(generator, input_, out or input_, docs=docs, nbest=nbest,
                             input_format=input_format, threshold=threshold)
    except FileNotFoundError as e:
        raise click.BadParameter(str(e), param_hint="--generator") from None
    for p in paths.values():
        click.echo(f"wrote {p}")


@annotate_dp_grp.command("jackknife", short_help="Complete the training sources with predicted DPs (K folds).")
@_prepared_option(help="Prepared dataset, annotated (`doctrans annotate-dp corpus -p PREPARED` first).")
@click.option("-k", "--folds", type=click.IntRange(min=2), required=True, metavar="K",
              help="Document folds: fold k is completed by a DP generator trained on the other K-1 (K ≥ 2).")
@click.option("-o", "--out", default=None, help="Output directory [default: PREPARED/dp_jkK].")
@click.option("--config", default="", metavar="YAML",
              help="The DP generator of each fold [default: pipelines/dp/labeler.yaml].")
@click.option("--set", "overrides", multiple=True, metavar="KEY=VALUE",
              help="Override for every fold's generator training (repeatable), e.g. train.max_epochs=1.")
@click.option("--splits", default="train,dev,test", show_default=True, hidden=True,
              help="Ignored (the former `annotate-dp --jackknife` accepted it).")
def annotate_jackknife_cmd(prepared, folds, out, config, overrides, splits) -> None:
    """The training sources completed with PREDICTED DPs (doctrans/dp/jackknife.py): the
    documents are dealt into K folds, fold k is completed by a generator (--config) trained on
    the other folds (OUT/folds/k/best.pt), dev and test by the ensemble of the K generators
    (OUT/generator.txt, for translate --dp-generator). OUT holds SPLIT.dp.zh, .dpp.zh, .dplabel,
    .dp.bpe.zh, .dpp.bpe.zh, vocab.dp.zh.txt like PREPARED/dp
    (pipelines/dp/nmt_dp_predicted.yaml trains on it), so train and test DPs carry the same
    errors. Resumable per fold.

    \b
    Example:
      doctrans annotate-dp jackknife -p data/quickstart --folds 3 --set train.max_epochs=1
    """
    from doctrans.config_catalog import find_pipelines
    from doctrans.dp.jackknife import JackknifeConfig, annotate_in_folds

    res = annotate_in_folds(JackknifeConfig(            # errors: main() prints them (exit 1)
        prepared=prepared, folds=folds, out=out or "",
        config=config or str(find_pipelines() / "dp" / "labeler.yaml"),
        overrides=tuple(overrides)))
    click.echo(f"DPs inserted: {', '.join(f'{k} {v:,}' for k, v in res['dps'].items())}")
    click.echo(f"fold generators (translate --dp-generator): {':'.join(map(str, res['generators']))}")
    click.echo(f"jackknifed corpus: {res['out']}")


@annotate_dp_grp.command("source-bpe", short_help="Write PREPARED/dp's +DPs source BPE-encoded as the prepared source.")
@_prepared_option(help="Prepared dataset, annotated (`doctrans annotate-dp corpus -p PREPARED` first).")
@click.option("-o", "--out", default=None, help="Output directory [default: PREPARED/dp].")
@click.option("--splits", default="train,dev,test", show_default=True,
              help="Comma-separated splits (those with PREPARED/dp/SPLIT.dp.zh are written).")
def annotate_source_bpe_cmd(prepared, out, splits) -> None:
    """Only write SPLIT.dp.srcbpe.zh (PREPARED/dp/SPLIT.dp.zh BPE-encoded as the prepared source,
    pronouns not kept whole) into OUT: the +DPs source of a model continued from a stage-1
    checkpoint (its vocabulary). New annotations (`annotate-dp corpus`) write it too.

    \b
    Example:
      doctrans annotate-dp source-bpe -p data/quickstart --splits train,dev
    """
    from pathlib import Path

    from doctrans.dp.corpus import source_bpe as write_source_bpe

    dp_dir = Path(prepared) / "dp"
    names = [sp for sp in _splits(splits) if (dp_dir / f"{sp}.dp.zh").is_file()]
    if not names:
        raise click.UsageError(f"no {dp_dir}/SPLIT.dp.zh: run `doctrans annotate-dp corpus -p {prepared}` first")
    for p in write_source_bpe(prepared, dp_dir, out or dp_dir, names):
        click.echo(f"wrote {p}")


@annotate_dp_grp.command("count-dense", short_help="Count the context-dense pairs of an annotated corpus.")
@_prepared_option(help="Prepared dataset, annotated (`doctrans annotate-dp corpus -p PREPARED` first).")
@click.option("--dp-dir", default=None, help="The annotation [default: PREPARED/dp].")
@click.option("--split", default="train", show_default=True, help="The split to count.")
@click.option("--max-distance", type=click.IntRange(min=1), default=1, show_default=True,
              help="The farthest previous line that may decide the dropped pronoun.")
@click.option("--rules", default="", metavar="R1,R2",
              help="Only these deciding rules select a line (agreement, agreement_en, reply; "
                   "train.context_dense.rules) [default: all].")
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
def annotate_count_dense_cmd(prepared, dp_dir, split, max_distance, rules, as_json) -> None:
    """How many pairs of an annotated split are context-dense — a dropped English pronoun whose
    form the previous lines decide (a 他/她/… or an English he/she/they within --max-distance lines,
    or a reply flipping I/you): the pairs `train.context_dense` upweights (docs/discourse.md).

    \b
    Example:
      doctrans annotate-dp count-dense -p data/quickstart --max-distance 3
      doctrans annotate-dp count-dense -p data/quickstart --rules agreement,agreement_en
    """
    import json
    from pathlib import Path

    from doctrans.dp.context_dense import count_dense

    try:
        r = count_dense(Path(prepared), Path(dp_dir) if dp_dir else None, split, max_distance,
                        tuple(x.strip() for x in rules.split(",") if x.strip()))
    except (FileNotFoundError, ValueError) as e:
        raise click.ClickException(str(e)) from None
    if as_json:
        click.echo(json.dumps(r))
        return
    fired = ", ".join(f"{k} {v:,}" for k, v in sorted(r["by_rule"].items()))
    click.echo(f"{split}: {r['lines']:,} lines, {r['with_dp']:,} with a dropped pronoun, {r['context_dense']:,} "
               f"context-dense ({100 * r['share_of_lines']:.1f}% of lines; previous {max_distance} line(s)); "
               f"by rule (a line can fire several): {fired}")
