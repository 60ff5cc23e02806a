"""The context-model table (issue: documents end to end; HAN paper Table 1 as the anchor).

``doctrans table context --system Transformer=RUN0 --system HAN=RUN1 … --prepared PREP
--data TVSUB --out results/context_table.md`` translates the TVsub test set with
each run's ``last.pt`` (equal updates: every row's run stops after the same number of updates)
— as documents (``PREP/test.docs``), so context models see their context and a sentence model
simply ignores it — and writes, per system: 3-reference BLEU in the thesis setting
(case-insensitive, tokenized) with the paired bootstrap and sign test against the first system,
detokenized sacreBLEU, English pronoun counts, parameters, training target tok/s (mean over the
run's train records) and its ratio to the first system's, decoding sentences/s and its ratio,
and the update count. Rows keep the order given; ``--table TITLE=NAME,…`` splits them into several
tables (each against its own first row), and ``--context-option NAME:KEY=VALUE`` translates a row
with a test-time context option (S3 Table 1's ablations of one trained run). A row's translation
(``WORK/test.NAME.hyp``) is reused by a later call when its stamp (``.json`` beside it: checkpoint
path and modification time, beam, options, line count, decoding seconds) matches, so an
interrupted table resumes and rows can be translated as their runs finish. A second table (issue 17, docs/discourse.md)
gives DP translation recall (when DATA has the hand DP annotation) and, with ``--discourse``,
CXMI and contrastive pronoun accuracy (DP / overt items); ``--usage`` gives only the context-usage
columns (CXMI against an empty and a random context, contrastive accuracy all / DP / overt /
context-needed, McNemar's test against the first row on the context-needed and DP items), a
minute or two per system (``make quickstart``); ``--lone`` adds each context model's BLEU with
every test line its own document (the empty context everywhere). The file ends with the line of
``utils.provenance.provenance_line``: the git commit of the doctrans checkout (``(modified)``
with uncommitted changes, ``unknown`` outside git), the date, the machine and the command. The
settings, scoring (the metric table's columns), the model metrics (the metric table's rows of kind
"model" shown in ``VIEWS``: CXMI, contrastive accuracy and its McNemar test), the markdown columns
of the metrics and that line are the table base's (``experiments/base.py``).
"""
from __future__ import annotations

import json
import logging
import time
from dataclasses import dataclass
from pathlib import Path

from doctrans.evaluation.metrics import model_metrics
from doctrans.evaluation.metrics.base import Column
from doctrans.experiments.base import (RunTableConfig, column_table, compare_to_first, model_columns, p_values, score,
                                       slug, train_speed, view_columns, write_rows, write_table)
from doctrans.inference.config import ModelOptions
from doctrans.training.metrics import read_metrics
from doctrans.utils.io import atomic_write_lines, atomic_write_text, read_lines
from doctrans.utils.settings import default_of

logger = logging.getLogger(__name__)

# The views of the metric table this table shows (``Metric.views``): its model metrics are those
# with columns in one of them (CXMI, contrastive accuracy).
VIEWS = ("context_usage", "context_discourse")


def _peak_memory(run_dir: Path) -> float:
    """Largest ``peak_rss_gib`` of the run's train records (the training process's peak
    resident memory, GiB), NaN for runs that did not record it."""
    recs = [r["peak_rss_gib"] for r in read_metrics(run_dir / "metrics.jsonl") if r.get("kind") == "train"
            and "peak_rss_gib" in r]
    return max(recs) if recs else float("nan")


def _system_row(name: str, run_dir: Path, args, base_hyp: Path | None,
                options: tuple[str, ...] = ()) -> tuple[dict, Path]:
    from doctrans.evaluation.metrics import metric_columns
    from doctrans.inference.translate import TranslateConfig, Translator
    from doctrans.runtime.checkpoint import load_checkpoint

    prep, work = Path(args.prepared), Path(args.work)
    ckpt = run_dir / f"{args.checkpoint}.pt"
    hyp = work / f"test.{slug(name)}.hyp"
    tr = Translator(TranslateConfig(checkpoint=str(ckpt), input_format="tok", tokenized=True, beam=args.beam,
                                    context_options=options, threads=args.threads))
    params_m = sum(p.numel() for p in tr.model.parameters()) / 1e6
    engine = _engine(name, tr, args, options)
    lines = read_lines(prep / "test.tok.zh")
    doc_ids = [x.split("\t")[0] for x in read_lines(prep / "test.docs")]
    stamp = {"checkpoint": str(ckpt.resolve()), "checkpoint_mtime": ckpt.stat().st_mtime, "beam": args.beam,
             "options": list(options), "lines": len(lines)}
    if engine != "native":                              # (native rows keep the stamps of earlier tables)
        stamp["engine"] = engine
    done = hyp.with_suffix(".json")                     # a translation made by an earlier call, for this checkpoint
    prior = json.loads(done.read_text(encoding="utf-8")) if done.is_file() and hyp.is_file() else {}
    if {k: prior.get(k) for k in stamp} == stamp:
        dt = prior["decode_s"]
        logger.info("%s: reusing %s (translated %.0f s, %s)", name, hyp, dt, prior.get("date", "?"))
    else:
        if engine != "native":                          # export (replacing an earlier one) and load it
            from doctrans.inference.export import export_ctranslate2

            ct2_dir = export_ctranslate2(str(ckpt), str(work / f"{slug(name)}.ct2"))
            tr = Translator(tr.cfg.replace(checkpoint=str(ct2_dir), engine="ctranslate2",
                                    compute_type=args.compute_type))
        t0 = time.perf_counter()
        atomic_write_lines(hyp, tr.translate(lines, doc_ids=doc_ids))
        dt = time.perf_counter() - t0
        atomic_write_text(done, json.dumps({**stamp, "decode_s": dt, "date": time.strftime("%Y-%m-%d %H:%M:%S")}) + "\n")
    res = score(args, hyp, ("bleu_tok_lc", "sacrebleu"), baseline=base_hyp, text=args.discourse)
    row = {"system": name, "run": str(run_dir), "options": list(options),
           "updates": load_checkpoint(ckpt)["state"]["step"], **metric_columns(res), "params_m": params_m,
           "engine": engine, "train_tok_s": train_speed(run_dir), "decode_sent_s": len(lines) / dt,
           "peak_rss_gib": _peak_memory(run_dir)}
    if args.discourse or args.usage:
        if options:
            raise SystemExit(f"--discourse/--usage with --context-option ({name}): the discourse columns score the "
                             "checkpoint as trained")
        row.update(model_columns(ckpt, args, VIEWS, test_source=lines, doc_ids=doc_ids))
    if args.lone and tr.reads_documents:
        lone = work / f"test.{slug(name)}.lone.hyp"
        atomic_write_lines(lone, tr.translate(lines, doc_ids=[f"line{i}" for i in range(len(lines))]))
        row["lone_bleu"] = score(args, lone, dp=False)["bleu_tok_lc"]["score"]
    logger.info("%s: BLEU %.2f, %.1f sent/s", name, row["bleu"], row["decode_sent_s"])
    return row, hyp


def _engine(name: str, tr, args, options: tuple[str, ...]) -> str:
    """The engine row ``name`` decodes with: ``ctranslate2 COMPUTE_TYPE`` when ``args.engine`` asks
    for it, CTranslate2 is installed and the model is one it can express (``portable``) without
    context options, else ``native`` (logged)."""
    if args.engine == "native":
        return "native"
    try:
        from doctrans.inference.ct2 import require_ctranslate2
        require_ctranslate2()
    except ImportError as e:
        logger.warning("%s: %s: native decoding", name, e)
        return "native"
    if options or tr.model.portable() is None:
        logger.info("%s: CTranslate2 cannot run this model%s: native decoding", name,
                    " with context options" if options else "")
        return "native"
    return f"ctranslate2 {args.compute_type}"


def args_discourse(rows: list[dict]) -> bool:
    """Whether the rows carry the full discourse columns (``--discourse``, or DP recall alone
    without the context-usage table), which get the second table."""
    return any("apt_pronoun" in r or "cohesion" in r for r in rows) or not _usage(rows)


def _model_keys() -> set[str]:
    """The row keys of the columns of this table's model metrics (``--usage``, ``--discourse``)."""
    return {k for m in model_metrics(VIEWS) for columns in m.views.values() for c in columns for k in c.keys}


def _usage(rows: list[dict]) -> bool:
    """Whether the rows carry the context-usage columns: a model metric's, or the lone-sentence BLEU."""
    keys = _model_keys() | {"lone_bleu"}
    return any(keys & r.keys() for r in rows)


def _engine_note(row: dict) -> str:
    engine = row.get("engine", "native")
    return "" if engine == "native" else f", {engine.replace('ctranslate2', 'CTranslate2')}"


def _gib(x: float) -> str:
    return "—" if x != x else f"{x:.2f}"


def render(rows: list[dict], title: str = "") -> str:
    """The markdown table (under ``## title`` when given); ratios and Δ relative to the first row,
    whose system the rows' ``bootstrap_p`` / ``sign_p`` are against."""
    b = rows[0]
    lines = [f"## {title}", ""] if title else []
    lines += ["| system | updates | test BLEU | Δ | bootstrap p | sign p | sacreBLEU | EN pronouns | params (M) "
             "| train tok/s (×) | decode sent/s (×) | peak memory (GiB) |",
             "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for r in rows:
        mark = "*" if r.get("bootstrap_p", 1) < 0.05 and r.get("sign_p", 1) < 0.05 else ""
        bp = f"{r['bootstrap_p']:.3f}" if "bootstrap_p" in r else "—"
        sp = f"{r['sign_p']:.3f}" if "sign_p" in r else "—"
        lines.append(
            f"| {r['system']} | {r['updates']} | {r['bleu']:.2f}{mark} | {r['bleu'] - b['bleu']:+.2f} | {bp} | {sp} "
            f"| {r['sacrebleu']:.2f} | {r['pronouns']} | {r['params_m']:.2f} "
            f"| {r['train_tok_s']:.0f} ({r['train_tok_s'] / b['train_tok_s']:.2f}×) "
            f"| {r['decode_sent_s']:.1f} ({r['decode_sent_s'] / b['decode_sent_s']:.2f}×{_engine_note(r)}) "
            f"| {_gib(r.get('peak_rss_gib', float('nan')))} |")
    lines += ["", f"English pronouns in the 3 references: {b['ref_pronouns']}. BLEU: case-insensitive, tokenized, "
                  "3 references (the thesis' setting); `*`: p < 0.05 in both the paired bootstrap and the sign "
                  "test against the first row. Decoding: the test set as documents (`PREP/test.docs`). Peak memory: "
                  "the training process's peak resident memory (its data included; — for runs that did not "
                  "record it)."]
    if len({r.get("engine", "native") for r in rows}) > 1:
        lines += ["", "Rows were decoded by different engines (named in the decode column): their decoding speeds "
                      "compare the engines too."]
    if _usage(rows):
        usage = [*view_columns("context_usage"), Column("lone-sentence BLEU", "lone_bleu", ".2f")]
        lines += ["", *column_table(rows, usage)]
        n_cn = b.get("contrastive_context_needed_items", "?")
        lines += ["", f"Context usage (docs/discourse.md): contrastive = the model scores the reference above every "
                      f"same-case pronoun swap (TVsub test; DP / overt items; context-needed: the {n_cn} DP items whose "
                      "pronoun only the preceding lines decide); McNemar p against the first row; CXMI = mean "
                      "log-likelihood gain of the reference from the real context over an empty / a random other-"
                      "document context (nats per sentence; 0: context unused); lone-sentence BLEU: every test line "
                      "translated as its own document (context models only)."]
    if args_discourse(rows) and any("dp_recall" in r or _model_keys() & r.keys() for r in rows):
        lines += ["", *column_table(rows, view_columns("context_discourse"), reference=True)]
        lines += ["", "Discourse columns (docs/discourse.md): DP recall = share of the hand-annotated dropped pronouns "
                      "the first reference realises that the translation realises too (in brackets: the difference to the "
                      "first row in points, paired bootstrap p over lines); contrastive = the model scores "
                      "the reference above every same-case pronoun swap (TVsub test set, DP vs overt items); APT = "
                      "source pronouns / nouns whose aligned hypothesis word matches the reference's (eflomal); CXMI = "
                      "mean log-likelihood gain of the reference from the real over an empty context (0: context "
                      "unused); cohesion = repeated content-word lemmas over content words per document (Wong & Kit "
                      "2012 without WordNet); coherence = mean cosine of adjacent sentences in an LSA space of the "
                      "training English (Foltz et al. 1998)."]
    return "\n".join(lines) + "\n"


@dataclass(frozen=True, kw_only=True)
class ContextTableConfig(RunTableConfig):
    """The settings of ``doctrans table context`` (its options, same names; the shared ones are
    ``RunTableConfig``'s; ``discourse``: CXMI, contrastive pronoun accuracy, APT, cohesion and
    coherence per system)."""

    out: str = "results/context_table.md"
    work: str = "results/context_table"
    engine: str = default_of(ModelOptions, "engine")   # native | ctranslate2: rows CTranslate2 can run decode with it
    compute_type: str = "int8"          # --engine ctranslate2: CTranslate2's compute type
    usage: bool = False                 # only the context-usage columns (CXMI vs empty/random, contrastive)
    lone: bool = False                  # also BLEU with every test line its own document (context models)
    threads: int = default_of(ModelOptions, "threads")  # torch threads (and CTranslate2's) of this process; 0 = all


def build_context_table(systems: list[tuple[str, Path]], args: ContextTableConfig, options: dict[str, list[str]] | None = None,
        tables: list[tuple[str, list[str]]] = ()) -> Path:
    """Translate and score every row ``systems`` (NAME, RUN_DIR; the first is the baseline), with
    the context options ``options[NAME]`` (KEY=VALUE), and write ``args.out`` (one table, or one
    per ``tables`` entry (TITLE, [NAME, …])) and WORK/rows.json; returns ``args.out``."""
    Path(args.work).mkdir(parents=True, exist_ok=True)
    if args.threads:
        import torch

        torch.set_num_threads(args.threads)
    options = options or {}
    names = [n for n, _ in systems]
    rows, hyps, base_hyp = {}, {}, None
    for name, run in systems:
        row, hyp = _system_row(name, run, args, base_hyp, tuple(options.get(name, ())))
        base_hyp = base_hyp or hyp
        rows[name], hyps[name] = row, hyp
    compare_to_first(list(rows.values()), args, VIEWS)
    write_rows(args, list(rows.values()))
    if not tables:
        return write_table(args, render(list(rows.values())))
    parts = []
    for title, members in tables:
        table_rows = [dict(rows[m]) for m in members]
        if members[0] != names[0]:                       # significance against this table's first row
            for k in ("bootstrap_p", "sign_p"):
                table_rows[0].pop(k, None)
            for r, m in zip(table_rows[1:], members[1:]):
                r.update(_significance(hyps[m], hyps[members[0]], args))
        parts.append(render(table_rows, title))
    return write_table(args, "\n".join(parts))


def _significance(hyp: Path, base_hyp: Path, args) -> dict:
    """Paired bootstrap and sign-test p-values of ``hyp`` against ``base_hyp`` (3-reference BLEU,
    the thesis setting)."""
    return p_values(score(args, hyp, baseline=base_hyp, dp=False))
