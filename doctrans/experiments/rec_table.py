"""The reconstructor / DP table (issue 28; thesis Tables 5.4 and 6.2, 6.6; docs/dp.md).

``doctrans table rec --system Baseline=RUN0 --system +DPs=RUN1 --row-option +DPs:dp_generator=G …
--generator G --prepared PREP --data TVSUB --out results/rec_table.md`` translates the TVsub test
set with each run's ``last.pt`` (equal updates from the same stage-1 checkpoint), as documents
(``PREP/test.docs``), each row with its translate options (``--row-option NAME:KEY=VALUE``, KEY one
of ``ROW_OPTIONS``: the DP generator completing a +DPs row's input or making a reconstructor's
x̂, ``dp_input``, ``rerank=reconstructor``, ``rerank_k``, ``dp_threshold``: a joint model's τ of
``--dp-out``), and writes:

* the main table — 3-reference BLEU in the thesis setting with paired bootstrap and sign test
  against the first row, the output / reference length ratio (BLEU's sys_len / ref_len: the
  pronoun columns follow it), English pronouns (references: ~1,310 over three), DP translation recall
  (``score --base/--oracle``: the hand-annotated DPs the first reference realises that the output
  realises too), contrastive DP / overt accuracy (``--discourse``; each model scored on the
  source it reads), parameters, training target tok/s and its ratio to the first row, decoding
  sentences/s with its ratio to the first row and, for a reranked row, to the same run decoded
  without reranking (a row of the same run without ``rerank``), and the update count;
* the DP prediction table (thesis Table 6.6) — position and pronoun P/R/F against the hand oracle
  (``test.oracle-dp.seg.zh``) of the external generator's 1-best completion of the test source
  (``--generator``) and of every joint model (``model.reconstruction.predicts_dps``: its
  ``translate --dp-out`` output), the joint models with a paired bootstrap p-value of their pronoun
  F against the external generator's.

A row's translation (``WORK/test.NAME.hyp``, ``.dp.zh``) is reused when its stamp (``.json``:
checkpoint path and time, beam, options, line count, decoding seconds) matches, as in ``table
context``, and its contrastive scores while the checkpoint file and the source it reads are
unchanged (``contrastive.table_columns``). A ``--system`` whose run has no checkpoint yet is skipped with a warning when
``skip_missing`` (``make rec-table`` lists only the rows whose YAML exists). The file ends with the
``provenance_line`` (commit, date, machine, command). The settings, scoring (the metric table's
columns), the model metrics (the metric table's rows shown in the ``rec`` view: contrastive
accuracy) and the metrics' markdown columns are the table base's (``experiments/base.py``).
"""
from __future__ import annotations

import json
import logging
import math
from dataclasses import dataclass
from pathlib import Path

from doctrans.experiments.base import (RunTableConfig, cell, dp_files, dp_source_of, model_columns, row_cells, score,
                                       train_speed, translate_test, view_columns, write_rows, write_table)
from doctrans.utils.io import atomic_write_text, read_lines

logger = logging.getLogger(__name__)

VIEWS = ("rec",)     # the metric table's view this table shows: its model metrics (contrastive accuracy)
ROW_OPTIONS = ("dp_generator", "dp_input", "rerank", "rerank_k", "rerank_vocab", "dp_threshold")


@dataclass(frozen=True, kw_only=True)
class RecTableConfig(RunTableConfig):
    """The settings of ``doctrans table rec`` (its options, same names; the shared ones are
    ``RunTableConfig``'s; ``discourse``: contrastive DP / overt accuracy per row)."""

    generator: str = ""                 # the external DP generator scored in the DP table ("" = none)
    out: str = "results/rec_table.md"
    work: str = "results/rec_table"
    skip_missing: bool = False          # skip rows whose run has no checkpoint (with a warning)


def parse_row_options(pairs: list[str]) -> dict:
    """``KEY=VALUE`` translate options of a row → TranslateConfig keyword arguments. Raises
    ``ValueError`` naming a key outside ``ROW_OPTIONS`` or a malformed pair."""
    out: dict = {}
    for kv in pairs:
        key, sep, value = kv.partition("=")
        if not sep or key not in ROW_OPTIONS:
            raise ValueError(f"row option {kv!r}: expected KEY=VALUE with KEY one of {', '.join(ROW_OPTIONS)}")
        out[key] = int(value) if key in ("rerank_k", "rerank_vocab") else float(value) if key == "dp_threshold" else value
    return out


def _model_columns(ckpt: Path, tr, args: RecTableConfig) -> dict:
    """The model metrics' columns of ``ckpt`` (contrastive pronoun accuracy) scored on the source it
    reads: the test source, or the DP generator's 1-best completion for a model whose encoder reads
    x̂ (+DPs rows, encoder_input "annotated": ``base.dp_source_of``)."""
    prep = Path(args.prepared)
    tok = read_lines(prep / "test.tok.zh")
    doc_ids = [x.split("\t")[0] for x in read_lines(prep / "test.docs")]
    return model_columns(ckpt, args, VIEWS, test_source=tok, doc_ids=doc_ids, source_of=dp_source_of(tr, args))


def _dp_scores(dp_file: Path, base: Path, args: RecTableConfig, baseline: Path | None = None) -> dict:
    """Position and pronoun P/R/F of a DP-completed test source against the hand oracle (and the
    paired bootstrap p-value of pronoun F against ``baseline``, another DP-completed file of ``base``)."""
    from doctrans.dp.agreement import dp_agreement_with_bootstrap

    seg, oracle = dp_files(args)
    res = dp_agreement_with_bootstrap(base, dp_file, seg, oracle, baseline, base if baseline else None,
                                      args.bootstrap if baseline else 0)
    row = {"dp_position": res["position"], "dp_pronoun": res["pronoun"], "sys_dps": res["sys_dps"],
           "oracle_dps": res["oracle_dps"]}
    p = res.get("bootstrap", {}).get("pronoun", {}).get("p_value")
    if p is not None:
        row["dp_pronoun_f1_p"] = p
    return row


def build_rec_table(systems: list[tuple[str, Path]], args: RecTableConfig, row_options: dict[str, list[str]] | None = None) -> Path:
    """Translate and score every row (NAME, RUN_DIR; the first is the baseline) with its row
    options, write ``args.out`` and WORK/rows.json; returns ``args.out``. Raises
    ``FileNotFoundError`` for a run without a checkpoint (unless ``skip_missing``) and
    ``ValueError`` for a bad row option."""
    from doctrans.evaluation.metrics import metric_columns
    from doctrans.runtime.checkpoint import load_checkpoint

    work, prep = Path(args.work), Path(args.prepared)
    work.mkdir(parents=True, exist_ok=True)
    row_options = row_options or {}
    dp = dp_files(args)
    rows: list[dict] = []
    base_hyp = None
    external = None
    if args.generator and dp:
        from doctrans.dp import apply as dp_apply

        ext, stamp = work / "test.external", work / "test.external.json"
        made_by = {"generator": args.generator, "source": str((prep / "test.tok.zh").resolve())}
        if not Path(f"{ext}.dp.zh").is_file() or not stamp.is_file() or json.loads(stamp.read_text()) != made_by:
            dp_apply.apply_generator(args.generator, prep / "test.tok.zh", ext, docs=prep / "test.docs", nbest=1)
            atomic_write_text(stamp, json.dumps(made_by) + "\n")
        external = Path(f"{ext}.dp.zh")
    for name, run_dir in systems:
        ckpt = run_dir / f"{args.checkpoint}.pt"
        if not ckpt.is_file():
            if args.skip_missing:
                logger.warning("%s: no %s: row skipped (train it first)", name, ckpt)
                continue
            raise FileNotFoundError(f"{name}: {ckpt} not found")
        opts = parse_row_options(row_options.get(name, []))
        hyp, dp_out, dt, tr = translate_test(name, ckpt, opts, args)
        res = score(args, hyp, baseline=base_hyp)
        n_lines = len(read_lines(prep / "test.tok.zh"))
        row = {"system": name, "run": str(run_dir), "options": opts,
               "updates": load_checkpoint(ckpt)["state"]["step"], **metric_columns(res),
               "len_ratio": res["bleu_tok_lc"]["sys_len"] / max(res["bleu_tok_lc"]["ref_len"], 1),
               "params_m": sum(p.numel() for p in tr.model.parameters()) / 1e6,
               "train_tok_s": train_speed(run_dir), "decode_sent_s": n_lines / dt,
               "reranked": bool(opts.get("rerank"))}
        if args.discourse:
            row.update(_model_columns(ckpt, tr, args))
        if dp_out is not None and dp:
            row.update(_dp_scores(dp_out, prep / "test.tok.zh", args, external))
        rows.append(row)
        base_hyp = base_hyp or hyp
        logger.info("%s: BLEU %.2f, %.1f sent/s", name, row["bleu"], row["decode_sent_s"])
    if not rows:
        raise ValueError("no row to tabulate (every run is missing)")
    ext_row = None
    if external is not None:
        ext_row = {"system": f"external generator ({args.generator})",
                   **_dp_scores(external, prep / "test.tok.zh", args)}
    write_rows(args, {"rows": rows, "external": ext_row})
    return write_table(args, render(rows, ext_row))


def _ratio(x: float, base: float) -> str:
    return "—" if not base or math.isnan(base) or math.isnan(x) else f"{x / base:.2f}×"


def render(rows: list[dict], external: dict | None = None) -> str:
    """The markdown tables (module doc); ratios, Δ and significance against the first row."""
    b = rows[0]

    def cell_nan(r, k, fmt):                        # a NaN (a run without the figure) as "—" too
        return cell(r, k, fmt, nan_dash=True)

    plain = {r["run"]: r for r in rows if not r["reranked"]}
    metrics = view_columns("rec")                   # DP recall, contrastive DP / overt (the metric table's)
    lines = ["| system | updates | test BLEU | Δ | bootstrap p | sign p | length ratio | EN pronouns | "
             + "".join(f"{c.header} | " for c in metrics)
             + "params (M) | train tok/s (×) | decode sent/s (× base) | (× same run) |",
             "| --- |" + " ---: |" * (11 + len(metrics))]
    for r in rows:
        mark = "*" if r.get("bootstrap_p", 1) < 0.05 and r.get("sign_p", 1) < 0.05 else ""
        same = plain.get(r["run"]) if r["reranked"] else None
        lines.append(
            f"| {r['system']} | {r['updates']} | {r['bleu']:.2f}{mark} | {r['bleu'] - b['bleu']:+.2f} "
            f"| {cell_nan(r, 'bootstrap_p', '.3f')} | {cell_nan(r, 'sign_p', '.3f')} | {cell_nan(r, 'len_ratio', '.3f')} "
            f"| {r['pronouns']} | " + "".join(x + " | " for x in row_cells(r, b, metrics, nan_dash=True))
            + f"{r['params_m']:.2f} | {r['train_tok_s']:.0f} ({_ratio(r['train_tok_s'], b['train_tok_s'])}) "
            f"| {r['decode_sent_s']:.1f} ({_ratio(r['decode_sent_s'], b['decode_sent_s'])}) "
            f"| {_ratio(r['decode_sent_s'], same['decode_sent_s']) if same else '—'} |")
    refs = b["ref_pronouns"]
    lines += ["", f"English pronouns in the 3 references: {refs}. BLEU: case-insensitive, tokenized, 3 references (the "
                  "thesis' setting); `*`: p < 0.05 in both the paired bootstrap and the sign test against the first row. "
                  "Length ratio: output tokens / reference tokens (BLEU's; the pronoun count and DP recall follow it, "
                  "docs/dp.md). "
                  "DP recall: share of the hand-annotated dropped pronouns the first reference realises that the output "
                  "realises too (docs/discourse.md), with its difference to the first row in points and a paired "
                  "bootstrap p over lines. Contrastive: each model scored on the source it reads. Decoding: "
                  "the test set as documents; (× same run): a reranked row against the same run decoded plainly."]
    joint = [r for r in rows if "dp_pronoun" in r]
    if external is not None or joint:
        lines += ["", "| DP prediction (test, hand oracle) | DPs | position P | R | F | pronoun P | R | F | p (F vs external) |",
                  "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
        for r in ([external] if external else []) + joint:
            pos, pro = r["dp_position"], r["dp_pronoun"]
            lines.append(f"| {r['system']} | {r['sys_dps']} | {pos['precision']:.3f} | {pos['recall']:.3f} "
                         f"| {pos['f1']:.3f} | {pro['precision']:.3f} | {pro['recall']:.3f} | {pro['f1']:.3f} "
                         f"| {cell_nan(r, 'dp_pronoun_f1_p', '.3f')} |")
        lines += ["", f"Hand-annotated DPs in the test oracle: {(external or joint[0])['oracle_dps']}. Joint models: "
                      "their `translate --dp-out` output, scored as the external generator's 1-best completion "
                      "(`doctrans score dp`; thesis Table 6.6: external 0.66 F, joint labeler 0.75)."]
    return "\n".join(lines) + "\n"
