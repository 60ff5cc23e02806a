"""``doctrans table dp|context|rec|full`` (``doctrans/experiments/``)."""
from __future__ import annotations

import click

from doctrans.cli.options import POSITIVE, config_options, translate_options
from doctrans.decoding import DecodeConfig


@click.group("table", short_help="Experiment tables: translate and score several systems into one markdown table.")
def table_grp() -> None:
    """Experiment tables: each translates the TVsub test set with several systems, scores them
    (3-reference BLEU in the thesis setting, significance against the first row, discourse
    columns) and writes a markdown table (`make dp-table`, `make context-table`, `make quickstart`,
    `make rnn-context-table`, `make full-table`)."""


def _table_options(out: str, work: str):
    """The options every table shares (``experiments.base.TableConfig``)."""
    def deco(f):
        for opt in reversed([
            click.option("--prepared", default="data/quickstart", show_default=True,
                         help="Prepared dataset (doctrans preprocess): PREP/test.tok.zh, test.docs, train.tok.*."),
            click.option("--data", default="../shared/corpora/tvsub", show_default=True,
                         help="TVsub root (test/test.ref.sgm, test.seg.zh, test.oracle-dp.seg.zh)."),
            click.option("--out", default=out, show_default=True, help="The markdown table to write."),
            click.option("--work", default=work, show_default=True,
                         help="Directory of the translations, rows.json and the contrastive set."),
            config_options(DecodeConfig, ("beam",)),
            click.option("--bootstrap", type=POSITIVE, default=1000, show_default=True,
                         help="Paired-bootstrap samples of the significance test against the first row."),
            click.option("--contrastive", default="", help="Contrastive set directory (with --discourse) "
                                                           "[default: built under WORK]."),
        ]):
            f = opt(f)
        return f
    return deco


def _run_table_options(f):
    """The options of the tables whose rows are run directories (context, rec: ``RunTableConfig``)."""
    f = click.option("--checkpoint", type=click.Choice(["last", "best"]), default="last", show_default=True,
                     help="Which checkpoint of each run translates (last: equal updates).")(f)
    return click.option("--ref", default="", help="Test references (SGML) [default: DATA/test/test.ref.sgm].")(f)


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
    from doctrans.experiments.dp_table import DPTableConfig, build_dp_table

    click.echo(f"wrote {build_dp_table(DPTableConfig(**kw))}")


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
@_run_table_options
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
@translate_options("engine", override={"engine": {
    "help": "ctranslate2: rows whose model CTranslate2 can run (sentence Transformer, concatenation) are exported "
            "under WORK and decoded with it (the decode column names the engine); others native."}})
@click.option("--compute-type", type=click.Choice(["float32", "int8", "int8_float32"]), default="int8",
              show_default=True, help="--engine ctranslate2: CTranslate2's compute type.")
@click.option("--table", "tables", multiple=True, metavar="TITLE=NAME,NAME,...",
              help="Render these rows as a table of their own under '## TITLE' (its first row is the one Δ, ratios "
                   "and significance refer to). Repeatable [default: one table of every row].")
@translate_options("threads", override={"threads": {
    "help": "torch threads (and CTranslate2's) for translating and scoring (0 = all usable cores)."}})
def table_context_cmd(systems, context_options, tables, **kw) -> None:
    """The context-model table (HAN paper Table 1 as the anchor; `make context-table`).

    Translates the TVsub test set as documents (PREP/test.docs) with each run's last.pt (or
    best.pt) and writes per row: 3-reference BLEU in the thesis setting with paired bootstrap and
    sign test against the first row, sacreBLEU, English pronouns, parameters, training tok/s,
    decoding sentences/s, peak training memory and the update count; with DP annotation in DATA
    also DP translation recall, with --discourse CXMI and contrastive pronoun accuracy. A row's
    translation (WORK/test.NAME.hyp) is reused by a later call while its checkpoint, beam and
    options are unchanged, so an interrupted table resumes; contrastive scores likewise (kept in
    the contrastive set's scores/ directory per checkpoint and source). The table is printed and
    written to --out.

    \b
    Example:
      doctrans table context --system Transformer=runs/context/transformer \\
          --system HAN=runs/context/han_encoder --discourse --out results/context_table.md
    """
    from doctrans.experiments.context_table import ContextTableConfig, build_context_table

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
    out = build_context_table(systems, ContextTableConfig(**kw), options, split)
    click.echo(out.read_text(encoding="utf-8"), nl=False)
    click.echo(f"wrote {out}")


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
@_run_table_options
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
    from doctrans.experiments.rec_table import RecTableConfig, build_rec_table

    names = [n for n, _ in systems]
    options: dict[str, list[str]] = {}
    for spec in row_options:
        name, sep, kv = spec.partition(":")       # a name holds no ':', a value may (A.pt:B.pt ensembles)
        if not sep or "=" not in kv or name not in names:
            raise click.BadParameter(f"{spec!r}: expected NAME:KEY=VALUE with NAME one of the --system names",
                                     param_hint="--row-option")
        options.setdefault(name, []).append(kv)
    click.echo(f"wrote {build_rec_table(systems, RecTableConfig(**kw), options)}")


@table_grp.command("full", short_help="The whole-corpus table (issue 74): train every row of a spec, translate, score.")
@click.option("--spec", default="pipelines/full_table.yaml", show_default=True,
              help="The rows (YAML: updates, init, recipe, rows; doctrans/experiments/full_spec.py).")
@click.option("--runs", default="runs/full_table", show_default=True, help="Run directories: RUNS/NAME per row.")
@click.option("--jk", default="", help="The annotate-dp jackknife directory ({jk}; {jk_generator}: its "
                                       "generator.txt) [default: PREP/dp_jk3].")
@click.option("--heldout", default="", help="The held-out context-needed set (doctrans contrastive build-heldout) "
                                            "[default: none, no such column].")
@click.option("--keep", default="benchmarks/full_table", show_default=True,
              help="Where each row's scored translation (NAME.en) and rows.json are kept (in the repository).")
@_table_options("results/full_table.md", "results/full_table")
@click.option("--ref", default="", help="Test references (SGML) [default: DATA/test/test.ref.sgm].")
@click.option("--train", is_flag=True, help="First train, in spec order, every row not done whose needs are met "
                                            "(resuming a row that has a last.pt).")
@click.option("--rescore", is_flag=True, help="Only score KEEP/NAME.en again (no checkpoint needed), carrying the "
                                              "model columns from KEEP/rows.json.")
@translate_options("threads", override={"threads": {
    "help": "torch threads of each training (train.threads) and of translating and scoring (0 = all usable cores)."}})
def table_full_cmd(**kw) -> None:
    """The whole-corpus table (issue 74; `make full-table`).

    Every row of --spec is trained from the same checkpoint for the same number of updates with
    one recipe (RUNS/NAME; --train trains the rows not done, each resumable: SIGTERM or Ctrl-C
    stops the running training after it saved last.pt). Then each done row translates the TVsub
    test set as documents and gets: updates, CPU-hours, training tok/s against the control (the
    first row), 3-reference BLEU (thesis setting) with paired bootstrap p, sacreBLEU, English
    pronouns, DP recall with its p, context-needed contrastive accuracy on the test and on
    --heldout (McNemar p), CXMI against an empty and a random context, lone-sentence BLEU. A row
    not done says so (unfinished: N of U updates, not started, waits: …). Each scored translation
    is kept as KEEP/NAME.en with KEEP/rows.json, so --rescore scores a fresh clone again. Exits 1
    after writing the table when a training failed.

    \b
    Example:
      doctrans table full --spec pipelines/full_table.yaml --prepared data/prep_full \\
          --runs runs/full_table --train --heldout data/prep_full/heldout_cn
    """
    import sys

    from doctrans.experiments.full_table import FullTableConfig, build_full_table

    out, failed = build_full_table(FullTableConfig(**kw))
    click.echo(out.read_text(encoding="utf-8"), nl=False)
    click.echo(f"wrote {out}")
    if failed:
        click.echo("error: training failed: " + ", ".join(f"{name} (exit {code})" for name, code in failed), err=True)
        sys.exit(1)
