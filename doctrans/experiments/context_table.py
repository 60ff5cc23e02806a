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
with uncommitted changes, ``unknown`` outside git), the date and the machine.
"""
from __future__ import annotations

import json
import logging
import re
import time
from dataclasses import dataclass, replace
from pathlib import Path

from doctrans.training.metrics import read_metrics
from doctrans.utils.io import atomic_write_lines, atomic_write_text, read_lines
from doctrans.utils.provenance import provenance_line

logger = logging.getLogger(__name__)


def train_speed(run_dir: Path) -> float:
    recs = [r["tok_per_s"] for r in read_metrics(run_dir / "metrics.jsonl") if r.get("kind") == "train"
            and "tok_per_s" in r]
    return sum(recs) / len(recs) if recs else float("nan")


def _peak_memory(run_dir: Path) -> float:
    """Largest ``peak_rss_gib`` of the run's train records (the training process's peak
    resident memory, GiB), NaN for runs that did not record it."""
    recs = [r["peak_rss_gib"] for r in read_metrics(run_dir / "metrics.jsonl") if r.get("kind") == "train"
            and "peak_rss_gib" in r]
    return max(recs) if recs else float("nan")


def recall_delta(r: dict, b: dict) -> str:
    """`` (+6.2, p 0.004)``: a row's DP recall against the first row's ``b``, in points, with the
    paired bootstrap p-value over lines (``evaluation.dp_recall.dp_recall_bootstrap``); empty for
    the first row or a row without one."""
    if r is b or r.get("dp_recall_p") is None or b.get("dp_recall") is None or r.get("dp_recall") is None:
        return ""
    return f" ({(r['dp_recall'] - b['dp_recall']) * 100:+.1f}, p {r['dp_recall_p']:.3f})"


def slug(name: str) -> str:
    """A file-name-safe form of a row name (``+Gating Auxi`` → ``_Gating_Auxi``)."""
    return re.sub(r"[^A-Za-z0-9._-]", "_", name)


def _system_row(name: str, run_dir: Path, args, base_hyp: Path | None,
                options: tuple[str, ...] = ()) -> tuple[dict, Path]:
    from doctrans.evaluation.metrics import metric_columns
    from doctrans.evaluation.score import ScoreConfig, score_files
    from doctrans.inference.translate import TranslateConfig, Translator
    from doctrans.models.interface import reads_documents
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
            tr = Translator(replace(tr.cfg, checkpoint=str(ct2_dir), engine="ctranslate2",
                                    compute_type=args.compute_type))
        t0 = time.perf_counter()
        atomic_write_lines(hyp, tr.translate(lines, doc_ids=doc_ids))
        dt = time.perf_counter() - t0
        atomic_write_text(done, json.dumps({**stamp, "decode_s": dt, "date": time.strftime("%Y-%m-%d %H:%M:%S")}) + "\n")
    ref = references(args)
    seg, oracle = Path(args.data) / "test" / "test.seg.zh", Path(args.data) / "test" / "test.oracle-dp.seg.zh"
    dp = seg.is_file() and oracle.is_file()
    res = score_files(ScoreConfig(hyp=str(hyp), refs=(ref,), hyp_tokenized=True,
                                  metrics=("bleu_tok_lc", "sacrebleu"),
                                  baseline=None if base_hyp is None else str(base_hyp), bootstrap=args.bootstrap,
                                  dp_base=str(seg) if dp else None, dp_oracle=str(oracle) if dp else None,
                                  cohesion=args.discourse, lsa=_lsa_corpus(args),
                                  apt_src=str(prep / "test.tok.zh") if args.discourse else None,
                                  apt_corpus=str(prep / "train.tok") if args.discourse and (
                                      prep / "train.tok.zh").is_file() else None))
    row = {"system": name, "run": str(run_dir), "options": list(options), "updates": load_checkpoint(ckpt)["state"]["step"],
           "bleu": res["bleu_tok_lc"]["score"], "sacrebleu": res["sacrebleu"]["score"],
           "pronouns": res["pronouns"]["hyp"], "ref_pronouns": res["pronouns"]["refs"],
           "params_m": params_m, "engine": engine,
           "train_tok_s": train_speed(run_dir), "decode_sent_s": len(lines) / dt,
           "peak_rss_gib": _peak_memory(run_dir)}
    if dp:
        row["dp_recall"] = res["dp_recall"]["recall"]
        boot = res["dp_recall"].get("bootstrap")
        if boot:                                            # against the first row (paired bootstrap over lines)
            row["dp_recall_p"], row["dp_recall_ci95"] = boot["p_value"], boot["ci95"]
    row.update(metric_columns(res))
    if args.discourse or args.usage:
        if options:
            raise SystemExit(f"--discourse/--usage with --context-option ({name}): the discourse columns score the "
                             "checkpoint as trained")
        row.update(_discourse(ckpt, lines, doc_ids, args))
    if args.lone and tr.reads_documents:
        lone = work / f"test.{slug(name)}.lone.hyp"
        atomic_write_lines(lone, tr.translate(lines, doc_ids=[f"line{i}" for i in range(len(lines))]))
        row["lone_bleu"] = score_files(ScoreConfig(hyp=str(lone), refs=(ref,), hyp_tokenized=True,
                                                   metrics=("bleu_tok_lc",)))["bleu_tok_lc"]["score"]
    if "significance" in res:
        row.update(p_values(res))
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


def _lsa_corpus(args) -> str | None:
    """With --discourse: the English training side of the prepared data, for coherence's LSA."""
    corpus = Path(args.prepared) / "train.tok.en"
    return str(corpus) if args.discourse and corpus.is_file() else None


def _discourse(ckpt: Path, lines: list[str], doc_ids: list[str], args) -> dict:
    """CXMI (real vs empty and vs random context, nats per sentence), P-CXMI of pronouns (nats
    per word, vs empty) and contrastive pronoun accuracy (DP / overt / context-needed / all, and
    the per-item results) of one checkpoint (issues 17, 29)."""
    from doctrans.evaluation.contrastive import table_columns
    from doctrans.evaluation.cxmi import compute_cxmi, load_scoring_set
    from doctrans.models.interface import reads_documents

    refs = read_lines(Path(args.prepared) / "test.tok.en")
    s = load_scoring_set(str(ckpt), lines, refs, doc_ids, tokenized=True)
    contrastive = table_columns(str(ckpt), _set_dir(args), Path(args.data))
    if not reads_documents(s.model):                 # a sentence model ignores its context: exactly 0
        return {"cxmi": 0.0, "cxmi_random": 0.0, "pcxmi_pronoun": 0.0, **contrastive}
    both = compute_cxmi(s.model, s.src, s.tgt, s.doc, s.targets, conditions=("empty", "random"))
    cx = both["empty"]
    return {"cxmi": cx["cxmi"], "cxmi_random": both["random"]["cxmi"],
            "pcxmi_pronoun": cx["by_class"].get("pronoun", {}).get("mean_pcxmi", float("nan")), **contrastive}


def _set_dir(args) -> Path:
    return Path(args.contrastive) if args.contrastive else Path(args.work) / "contrastive_test"


def _mcnemar_columns(rows: list[dict], args) -> None:
    """McNemar's test of every row after the first against the first row on the contrastive
    set's DP and context-needed items (in place: ``mcnemar_dp_p``, ``mcnemar_cn_p``)."""
    from doctrans.evaluation.contrastive import mcnemar, read_set

    if len(rows) < 2 or "contrastive_per_item" not in rows[0]:
        return
    items = read_set(_set_dir(args))[3]
    base = rows[0]["contrastive_per_item"]
    for r in rows[1:]:
        if "contrastive_per_item" not in r:
            continue
        for key, keep in (("mcnemar_dp_p", lambda it: it["kind"] == "dp"),
                          ("mcnemar_cn_p", lambda it: it.get("context_needed", False))):
            idx = [k for k, it in enumerate(items) if keep(it)]
            r[key] = mcnemar([r["contrastive_per_item"][k] for k in idx], [base[k] for k in idx])["p_value"]


def args_discourse(rows: list[dict]) -> bool:
    """Whether the rows carry the full discourse columns (``--discourse``, or DP recall alone
    without the context-usage table), which get the second table."""
    return any("apt_pronoun" in r or "cohesion" in r for r in rows) or not any(
        "cxmi_random" in r or "lone_bleu" in r for r in rows)


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
    def cell(r, k, fmt):
        return format(r[k], fmt) if k in r else "—"
    if any("cxmi_random" in r or "lone_bleu" in r for r in rows):
        lines += ["", "| system | DP recall | contrastive all | DP | overt | context-needed | McNemar p DP / "
                      "context-needed | CXMI vs empty | CXMI vs random | lone-sentence BLEU |",
                  "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
        for r in rows:
            lines.append(f"| {r['system']} | {cell(r, 'dp_recall', '.1%')}{recall_delta(r, b)} | {cell(r, 'contrastive', '.1%')} "
                         f"| {cell(r, 'contrastive_dp', '.1%')} | {cell(r, 'contrastive_overt', '.1%')} "
                         f"| {cell(r, 'contrastive_context_needed', '.1%')} "
                         f"| {cell(r, 'mcnemar_dp_p', '.3f')} / {cell(r, 'mcnemar_cn_p', '.3f')} "
                         f"| {cell(r, 'cxmi', '+.3f')} | {cell(r, 'cxmi_random', '+.3f')} | {cell(r, 'lone_bleu', '.2f')} |")
        n_cn = b.get("contrastive_context_needed_items", "?")
        lines += ["", f"Context usage (docs/discourse.md): contrastive = the model scores the reference above every "
                      f"same-case pronoun swap (TVsub test; DP / overt items; context-needed: the {n_cn} DP items whose "
                      "pronoun only the preceding lines decide); McNemar p against the first row; CXMI = mean "
                      "log-likelihood gain of the reference from the real context over an empty / a random other-"
                      "document context (nats per sentence; 0: context unused); lone-sentence BLEU: every test line "
                      "translated as its own document (context models only)."]
    if args_discourse(rows) and any("dp_recall" in r or "cxmi" in r for r in rows):
        lines += ["", "| system | EN pronouns | DP recall | contrastive DP | contrastive overt | contrastive all "
                      "| APT pronouns | APT nouns | CXMI (nats/sent) | P-CXMI pronouns (nats/word) | cohesion "
                      "| coherence (LSA) |",
                  "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]

        for r in rows:
            lines.append(f"| {r['system']} | {r['pronouns']} | {cell(r, 'dp_recall', '.1%')}{recall_delta(r, b)} "
                         f"| {cell(r, 'contrastive_dp', '.1%')} | {cell(r, 'contrastive_overt', '.1%')} "
                         f"| {cell(r, 'contrastive', '.1%')} | {cell(r, 'apt_pronoun', '.1%')} "
                         f"| {cell(r, 'apt_noun', '.1%')} | {cell(r, 'cxmi', '+.3f')} "
                         f"| {cell(r, 'pcxmi_pronoun', '+.4f')} | {cell(r, 'cohesion', '.4f')} "
                         f"| {cell(r, 'coherence', '.4f')} |")
        if "ref_cohesion" in b:
            lines.append(f"| reference 1 | {b['ref_pronouns'][0]} | — | — | — | — | — | — | — | — "
                         f"| {cell(b, 'ref_cohesion', '.4f')} | {cell(b, 'ref_coherence', '.4f')} |")
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


@dataclass(frozen=True)
class ContextTableConfig:
    """The settings of ``doctrans table context`` (its options, same names)."""

    prepared: str = "data/quickstart"
    data: str = "../shared/corpora/tvsub"
    ref: str = ""                       # test references (SGML) [default: DATA/test/test.ref.sgm]
    checkpoint: str = "last"            # last | best: which checkpoint of each run
    out: str = "results/context_table.md"
    work: str = "results/context_table"
    beam: int = 5
    bootstrap: int = 1000
    discourse: bool = False             # add CXMI and contrastive pronoun accuracy per system
    engine: str = "native"              # native | ctranslate2: rows CTranslate2 can run decode with it
    compute_type: str = "int8"          # --engine ctranslate2: CTranslate2's compute type
    usage: bool = False                 # only the context-usage columns (CXMI vs empty/random, contrastive)
    lone: bool = False                  # also BLEU with every test line its own document (context models)
    contrastive: str = ""               # contrastive set directory [default: built under WORK]
    threads: int = 0                    # torch threads (and CTranslate2's) of this process; 0 = torch's count


def run(systems: list[tuple[str, Path]], args: ContextTableConfig, options: dict[str, list[str]] | None = None,
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
    _mcnemar_columns(list(rows.values()), args)
    atomic_write_text(Path(args.work) / "rows.json", json.dumps(list(rows.values()), indent=1) + "\n")
    out = Path(args.out)
    stamp = f"\n{provenance_line()}\n"
    if not tables:
        atomic_write_text(out, render(list(rows.values())) + stamp)
        return out
    parts = []
    for title, members in tables:
        table_rows = [dict(rows[m]) for m in members]
        if members[0] != names[0]:                       # significance against this table's first row
            for k in ("bootstrap_p", "sign_p"):
                table_rows[0].pop(k, None)
            for r, m in zip(table_rows[1:], members[1:]):
                r.update(_significance(hyps[m], hyps[members[0]], args))
        parts.append(render(table_rows, title))
    atomic_write_text(out, "\n".join(parts) + stamp)
    return out


def _significance(hyp: Path, base_hyp: Path, args) -> dict:
    """Paired bootstrap and sign-test p-values of ``hyp`` against ``base_hyp`` (3-reference BLEU,
    the thesis setting)."""
    from doctrans.evaluation.score import ScoreConfig, score_files
    return p_values(score_files(ScoreConfig(hyp=str(hyp), refs=(references(args),), hyp_tokenized=True,
                                             metrics=("bleu_tok_lc",), baseline=str(base_hyp),
                                             bootstrap=args.bootstrap)))


def references(args) -> str:
    """The test references: ``--ref``, else DATA/test/test.ref.sgm."""
    return args.ref or str(Path(args.data) / "test" / "test.ref.sgm")


def p_values(res: dict) -> dict:
    """``score_files``' significance (``res["significance"]``) as the row's bootstrap_p / sign_p."""
    sig = res["significance"]
    return {"bootstrap_p": sig["paired_bootstrap"]["p_value"], "sign_p": sig["sign_test"]["p_value"]}

