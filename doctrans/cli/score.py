"""``doctrans score`` and its modes (``doctrans/evaluation/score.py``; ``dp/agreement.py``,
``evaluation/cxmi.py``, ``evaluation/contrastive.py``)."""
from __future__ import annotations

import click

from doctrans.cli.options import CHECKPOINT, NON_NEGATIVE, POSITIVE, ensemble_options, ensemble_settings
from doctrans.evaluation.metrics import corpus_metrics, metric_options


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


@click.group("score", cls=_ScoreGroup, short_help="Score a translation (BLEU, chrF, discourse), DPs, or a model's "
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


_OPTION_TYPES = {"file": click.Path(exists=True, dir_okay=False), "positive": POSITIVE, "non_negative": NON_NEGATIVE}


def _metric_options(f):
    """The options of the metric table's rows (``evaluation/metrics/``: ``Option``s with a flag),
    in table order, each passed to ``ScoreConfig`` under its name."""
    for opt in reversed([o for o in metric_options().values() if o.flag]):
        kw = {"is_flag": True} if opt.type == "flag" else {"type": _OPTION_TYPES.get(opt.type)}
        f = click.option(opt.flag, opt.name, default=opt.default, show_default=opt.show_default, help=opt.help,
                         metavar=opt.metavar, **kw)(f)
    return f


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
@click.option("--metrics", default=",".join(corpus_metrics()), show_default=True,
              help=f"Comma-separated subset of {','.join(corpus_metrics())}.")
@click.option("--detok-case", type=click.Choice(["auto", "lc", "mixed"]), default="auto", show_default=True,
              help="Case handling of sacrebleu/chrf; auto = case-insensitive iff all references are lowercase.")
@click.option("--no-split-hyphens", is_flag=True,
              help="bleu_tok_lc: do not split hyphens Moses-style (mix-up -> mix @-@ up) on both sides.")
@_json_out_options
@_metric_options
def score_bleu_cmd(hyp: str, refs: tuple[str, ...], hyp_tokenized: bool | None, refs_tokenized: bool | None,
                   metrics: str, detok_case: str, no_split_hyphens: bool, as_json: bool, out: str | None,
                   **options) -> None:
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

    try:
        cfg = score.ScoreConfig(
            hyp=hyp, refs=tuple(refs), hyp_tokenized=hyp_tokenized, refs_tokenized=refs_tokenized,
            metrics=tuple(m.strip() for m in metrics.split(",") if m.strip()),
            lowercase_detok={"auto": None, "lc": True, "mixed": False}[detok_case],
            split_hyphens=not no_split_hyphens, fmt="json" if as_json else "table", out=out, **options)
        result = score.score_translation(cfg)        # a metric may refuse its options' values only when it computes
    except score.ScoreOptionError as e:
        raise click.UsageError(str(e)) from None
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
    annotate-dp apply --generator` output), scored against an oracle.

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
@click.option("-c", "--checkpoint", required=True, type=CHECKPOINT,
              help="The model to score with (a checkpoint or a shipped model's name; any model: a sentence-level "
                   "one gets exactly 0).")
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
@ensemble_options
@_model_options
@_json_out_options
def score_cxmi_cmd(checkpoint: str, src: str, ref: str, docs: str | None, tokenized: bool, random_context: bool,
                   ensemble: tuple[str, ...], ensemble_weights: str, ensemble_mode: str,
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
                               ref_tokenized=tokenized or ref_docs is not None,   # .sgm references: tokenized
                               ensemble=ensemble_settings(ensemble, ensemble_weights, ensemble_mode))
    result = compute_cxmi(scoring.model, scoring.src, scoring.tgt, scoring.doc, scoring.targets,
                          conditions=("empty", "random") if random_context else ("empty",), max_tokens=max_tokens,
                          progress=True)
    result = {"checkpoint": checkpoint, "source": src, "reference": ref, **result}
    _emit(json.dumps(result, indent=1) + "\n" if as_json else render_cxmi(
        {k: v for k, v in result.items() if isinstance(v, dict)}), out)


@score_grp.command("contrastive", short_help="Contrastive pronoun accuracy of a model on a set (no HYP).")
@click.argument("set_dir", metavar="SET_DIR", type=click.Path(exists=True, file_okay=False))
@click.option("-c", "--checkpoint", required=True, type=CHECKPOINT,
              help="The model to score with: a checkpoint or a shipped model's name (`doctrans models`).")
@click.option("--baseline", "baseline", default=None, type=CHECKPOINT,
              help="A second model (checkpoint or shipped name): McNemar's test of -c against it on all, DP and "
                   "context-needed items.")
@ensemble_options
@_model_options
@_json_out_options
def score_contrastive_cmd(set_dir: str, checkpoint: str, baseline: str | None, ensemble: tuple[str, ...],
                          ensemble_weights: str, ensemble_mode: str, max_tokens: int, threads: int,
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
    result = score_set(checkpoint, set_dir, max_tokens=max_tokens, progress=True,
                       ensemble=ensemble_settings(ensemble, ensemble_weights, ensemble_mode))
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

    from doctrans.data.sgml import is_sgml_file

    if Path(path).suffix.lower() in (".sgm", ".sgml", ".xml") or is_sgml_file(path):
        first = read_sgml(path)[0]
        return list(first.segments), first.doc_ids()
    return read_lines(path), None
