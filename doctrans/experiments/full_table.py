"""The whole-corpus table (issue 74; `make full-table`, docs/usage.md "The whole corpus").

``doctrans table full --spec pipelines/full_table.yaml --prepared PREP_FULL --runs RUNS --data TVSUB
[--train] [--heldout SET]`` — the spec's rows (``experiments/full_spec.py``: every row trained
from one checkpoint for the same number of updates with one recipe, each resumable), with
``--train`` first training every row not done whose needs are met (``full_spec.train_rows``), then
always the table:

* each done row (and each ``decode_of`` row whose row is done) translates the TVsub test set as
  documents (PREP/test.docs) with RUNS/ROW/last.pt and its ``translate`` options
  (``base.translate_test``: reused while its stamp matches) and is scored against the control, the
  first row: 3-reference BLEU in the thesis setting (tokenized, lowercased) with the paired
  bootstrap p (and the sign test, in rows.json), detokenized sacreBLEU, English pronouns, DP
  translation recall with its difference and paired bootstrap p (DATA's hand DP annotation); the
  model metrics of the "full" view on the source the row's model reads: contrastive accuracy on
  the TVsub test's context-needed items and on the held-out context-needed set (``heldout``
  setting; McNemar's p against the control), CXMI against an empty and a random context (reused
  from WORK/model_columns/ while the checkpoint and the sources are unchanged); a row whose model
  reads documents also every line translated as its own document (lone-sentence BLEU);
* its training: updates and CPU-hours (``state.cpu_time_s`` of last.pt / 3600), mean training
  target tokens/s (``base.train_speed``) and its ratio to the control's;
* a kept row (``full_spec.read_kept``: scored by an earlier table, its run not here, e.g. on a new
  machine) is carried: its corpus columns computed again from KEEP/NAME.en against the control's
  translation, its other columns (training, model metrics, per-item results) as kept;
* a row not done is a line with its status ("unfinished: 350 of 731 updates", "not started",
  "waits: …") and dashes.

Kept in the repository (``keep``, default benchmarks/full_table/): each scored row's translation
as ``NAME.en`` — exactly the text the table scored: the model's tokenized output, Moses-tokenized
and lowercase as PREP is (not detokenized, not recased) — and ``rows.json`` (one row a line: every
column, the per-item lists as strings of 1 and 0), so ``--rescore`` re-scores a fresh clone without a checkpoint:
the corpus columns (BLEU, p, sacreBLEU, pronouns, DP recall) are computed again from the ``NAME.en``
files, the other columns carried from ``rows.json``. WORK/rows.json has every column. The markdown
(``out``) is one table and a note with the recipe and the provenance line (``base.write_table``).
"""
from __future__ import annotations

import hashlib
import json
import logging
from dataclasses import dataclass
from pathlib import Path

from doctrans.evaluation.metrics.base import Column
from doctrans.experiments.base import (RunTableConfig, cell, compare_to_first, dp_source_of, model_columns,
                                       row_cells, score, train_speed, translate_test, view_columns, write_rows,
                                       write_table)
from doctrans.experiments.full_spec import (Row, RowStatus, Spec, load_spec, pack_items, read_kept, row_statuses,
                                            train_rows, translate_options)
from doctrans.inference.config import ModelOptions
from doctrans.utils.io import atomic_write_bytes, atomic_write_text
from doctrans.utils.settings import default_of

logger = logging.getLogger(__name__)

VIEWS = ("full",)   # the metric table's view this table shows: its model metrics (contrastive, held-out, CXMI)


@dataclass(frozen=True, kw_only=True)
class FullTableConfig(RunTableConfig):
    """The settings of ``doctrans table full`` (its options, same names; the shared ones are
    ``RunTableConfig``'s; every row translates with its ``last.pt``: equal updates)."""

    spec: str = "pipelines/full_table.yaml"   # the rows (experiments/full_spec.py)
    runs: str = "runs/full_table"       # RUNS: a row's run directory is RUNS/NAME
    jk: str = ""                        # the annotate-dp jackknife directory [default: PREP/dp_jk3]
    heldout: str = ""                   # the held-out context-needed set ("" = no such column)
    keep: str = "benchmarks/full_table"  # the kept translations NAME.en and rows.json
    out: str = "results/full_table.md"
    work: str = "results/full_table"
    train: bool = False                 # train the rows not done first
    rescore: bool = False               # re-score the kept translations (no checkpoint read)
    threads: int = default_of(ModelOptions, "threads")   # torch threads of each training and of this process


def _run_of(row: Row, args: FullTableConfig) -> Path:
    return Path(args.runs) / (row.decode_of or row.name)


def _corpus_columns(args: FullTableConfig, hyp: Path, base_hyp: Path | None) -> dict:
    """The corpus columns of a translation (``metric_columns`` of ``score``: bleu, sacrebleu,
    pronouns, ref_pronouns, bootstrap_p, sign_p, dp_recall, dp_recall_p …), with
    ``corpus_columns`` naming them (what ``--rescore`` computes again)."""
    from doctrans.evaluation.metrics import metric_columns

    cols = metric_columns(score(args, hyp, ("bleu_tok_lc", "sacrebleu"), baseline=base_hyp))
    return {**cols, "corpus_columns": sorted(cols)}


def _model_row(ckpt: Path, tr, args: FullTableConfig) -> dict:
    """``base.model_columns`` of the "full" view on the source the row's model reads
    (``dp_source_of``), kept in WORK/model_columns/KEY.json (KEY: the checkpoint file, the source
    transform, the sets scored, the metrics) and reused — a ``decode_of`` row with its row's
    source shares its row's."""
    from doctrans.evaluation.metrics import model_metrics

    source_of = dp_source_of(tr, args)
    st = ckpt.stat()
    heldout = Path(args.heldout) / "items.jsonl" if args.heldout else None
    key = {"checkpoint": str(ckpt.resolve()), "mtime_ns": st.st_mtime_ns, "size": st.st_size,
           "source": [tr.cfg.dp.dp_generator, tr.cfg.dp.dp_input] if source_of else None,
           "heldout": [str(heldout.resolve()), heldout.stat().st_mtime_ns] if heldout and heldout.is_file()
           else args.heldout, "contrastive": args.contrastive, "data": str(Path(args.data).resolve()),
           "metrics": [m.name for m in model_metrics(VIEWS)]}
    kept = Path(args.work) / "model_columns" / f"{hashlib.sha1(json.dumps(key).encode()).hexdigest()}.json"
    if kept.is_file():
        logger.info("model columns of %s: reusing %s", ckpt, kept)
        return json.loads(kept.read_text(encoding="utf-8"))
    cols = model_columns(ckpt, args, VIEWS, source_of=source_of)
    atomic_write_text(kept, json.dumps(cols) + "\n")
    return cols


def _keep(hyp: Path, args: FullTableConfig, name: str) -> Path:
    """Copy a row's scored translation to KEEP/NAME.en (atomically; untouched when the same)."""
    dest = Path(args.keep) / f"{name}.en"
    data = hyp.read_bytes()
    if not dest.is_file() or dest.read_bytes() != data:
        atomic_write_bytes(dest, data)
    return dest


def _base_row(row: Row, status: RowStatus, args: FullTableConfig) -> dict:
    """A row's identity, status and training figures (CPU-hours, tok/s of its own run)."""
    r = {"name": row.name, "system": row.title, "state": status.state, "status": status.text,
         "updates": status.step, "translate": list(row.translate), "decode_of": row.decode_of or None}
    if status.cpu_time_s is not None and not row.decode_of:
        r["cpu_h"] = status.cpu_time_s / 3600
        run = Path(args.runs) / row.name
        if (run / "metrics.jsonl").is_file():
            r["train_tok_s"] = train_speed(run)
    return r


def tabulate(spec: Spec, args: FullTableConfig) -> list[dict]:
    """Every row of ``spec`` (module doc), in spec order: the done ones translated and scored
    against the first (the control), each kept under ``args.keep``."""
    statuses, kept = row_statuses(spec, args), read_kept(args.keep)
    rows, base_hyp = [], None
    for k, row in enumerate(spec.rows):
        status = statuses[row.name]
        if status.state == "kept":
            r = dict(kept[row.name], system=row.title, state="kept", status=status.text)
            rows.append(r)
            hyp = Path(args.keep) / f"{row.name}.en"
            for key in r.pop("corpus_columns"):
                r.pop(key, None)
            r.update(_corpus_columns(args, hyp, base_hyp if k else None))
            if k == 0:
                base_hyp = hyp
            logger.info("%s: kept (%s), BLEU %.2f", row.name, hyp, r["bleu"])
            continue
        r = _base_row(row, status, args)
        rows.append(r)
        if status.state != "done":
            logger.info("%s: %s", row.name, status.text)
            continue
        ckpt = _run_of(row, args) / "last.pt"
        hyp, _, dt, tr = translate_test(row.name, ckpt, translate_options(row, args), args)
        r["kept"] = _keep(hyp, args, row.name).name       # KEEP/NAME.en
        r.update(_corpus_columns(args, hyp, base_hyp if k else None), decode_s=dt)
        if k == 0:
            base_hyp = hyp
        r.update(_model_row(ckpt, tr, args))
        if tr.reads_documents:
            lone, _, _, _ = translate_test(row.name, ckpt, translate_options(row, args), args, lone=True)
            r["lone_bleu"] = score(args, lone, dp=False)["bleu_tok_lc"]["score"]
        logger.info("%s: BLEU %.2f", row.name, r["bleu"])
    if rows[0]["state"] in ("done", "kept"):
        compare_to_first([r for r in rows if r["state"] in ("done", "kept")], args, VIEWS)
    return rows


def _kept_rows(rows: list[dict]) -> str:
    """rows.json of the repository: one row a line (``full_spec.pack_items``)."""
    lines = [json.dumps(pack_items(r), ensure_ascii=False) for r in rows]
    return '{"rows": [\n' + ",\n".join(lines) + "\n]}\n"


def rescore(spec: Spec, args: FullTableConfig) -> list[dict]:
    """The rows of KEEP/rows.json with their corpus columns computed again from KEEP/NAME.en (the
    control's as the baseline); a spec row missing there is "not in rows.json". Raises
    FileNotFoundError for a missing rows.json or the translation of a row it lists as scored."""
    kept = Path(args.keep) / "rows.json"
    if not kept.is_file():
        raise FileNotFoundError(f"{kept} not found: make the table first (doctrans table full without --rescore)")
    try:
        by_name = {r["name"]: r for r in json.loads(kept.read_text(encoding="utf-8"))["rows"]}
    except (ValueError, KeyError, TypeError) as e:
        raise ValueError(f"{kept}: not the rows a table wrote ({e})") from None
    rows, base_hyp = [], None
    for k, row in enumerate(spec.rows):
        r = dict(by_name.get(row.name) or {"name": row.name, "state": "absent", "status": f"not in {kept}"})
        r["system"] = row.title
        rows.append(r)
        if "corpus_columns" not in r:
            continue
        hyp = Path(args.keep) / f"{row.name}.en"
        if not hyp.is_file():
            raise FileNotFoundError(f"{hyp} not found: row {row.name} was scored ({kept}) but its translation "
                                    "is not kept")
        for key in r.pop("corpus_columns"):
            r.pop(key, None)
        r.update(_corpus_columns(args, hyp, base_hyp if k else None))
        if k == 0:
            base_hyp = hyp
    return rows


def _ratio(x: float | None, base: float | None) -> str:
    return "" if not x or not base or x != x or base != base else f" ({x / base:.2f}×)"


def _text(s: str) -> str:
    return s.replace("|", "\\|")


def render(rows: list[dict], spec: Spec, args: FullTableConfig) -> str:
    """The markdown table (module doc) and its note; Δ, ratios and p-values against the first row."""
    b = rows[0]
    metrics = [c for c in view_columns("full")
               if c.key != "heldout" or args.heldout or any("heldout" in r for r in rows)]
    columns = [*metrics, Column("lone-sentence BLEU", "lone_bleu", ".2f")]
    head = ["row", "updates", "CPU-h", "train tok/s (× control)", "test BLEU", "Δ", "bootstrap p", "sacreBLEU",
            "EN pronouns", *(c.header for c in columns)]
    lines = ["| " + " | ".join(head) + " |", "| --- |" + " ---: |" * (len(head) - 1)]
    for r in rows:
        scored = "bleu" in r
        delta = f"{r['bleu'] - b['bleu']:+.2f}" if scored and r is not b and "bleu" in b else "—"
        tok_s = r.get("train_tok_s")
        cells = [_text(r["system"]), _text(r["status"]), cell(r, "cpu_h", ".2f", nan_dash=True),
                 "—" if tok_s is None or tok_s != tok_s else f"{tok_s:.0f}{_ratio(tok_s, b.get('train_tok_s'))}",
                 cell(r, "bleu", ".2f"), delta, cell(r, "bootstrap_p", ".3f"), cell(r, "sacrebleu", ".2f"),
                 cell(r, "pronouns", "d"), *row_cells(r, b, columns, nan_dash=True)]
        lines.append("| " + " | ".join(cells) + " |")
    recipe = " ".join(f"`{x}`" for x in spec.recipe) or "(none)"
    lines += ["", f"Rows: `{spec.path}`. Every trained row starts from `{spec.init}` (a row with `init: ROW` from "
                  f"that row's last update) and is trained for {spec.updates} updates on `{args.prepared}` with the "
                  f"recipe {recipe} and its own settings; each translates the TVsub test set as documents with its "
                  "last update (a `decode_of` row: another row's model with other translate options). "
                  "The first row is the control: Δ, ratios and every p are against it."]
    if any(r["state"] == "kept" for r in rows):
        lines += ["", f"(kept): a row scored by an earlier table whose run is not on this machine, carried from "
                      f"`{args.keep}/rows.json`: its translation `{args.keep}/ROW.en` scored again, its other columns "
                      "as kept."]
    refs = next((r["ref_pronouns"] for r in rows if "ref_pronouns" in r), None)
    refs = "?" if refs is None else " / ".join(str(n) for n in refs)
    lines += ["", "BLEU: case-insensitive, tokenized, all references (3 in TVsub: the thesis' setting), paired "
                  f"bootstrap p ({args.bootstrap} samples); sacreBLEU: detokenized; English pronouns in the "
                  f"references: {refs}. "
                  "CPU-h: the training process's CPU time (all threads); train tok/s: mean training target tokens/s "
                  "(both so far for a row not finished; — for a `decode_of` row: its row's). "
                  "DP recall: share of the hand-annotated dropped pronouns the first reference realises that the "
                  "translation realises too (difference in points, paired bootstrap p over lines). Context-needed, "
                  "test: contrastive pronoun accuracy on the TVsub test's hand-annotated context-needed items; "
                  "held-out context-needed: on the automatic set of held-out training episodes (`doctrans "
                  "contrastive build-heldout`); both on the source the row's model reads, McNemar p. CXMI: mean "
                  "log-likelihood gain of the reference from the real context over an empty / a random other-"
                  "document context (nats per sentence; 0: context unused). Lone-sentence BLEU: every test line "
                  "its own document (models that read documents). Translations: "
                  f"`{args.keep}/ROW.en` (tokenized, lowercased); `doctrans table full --rescore` scores them again."]
    return "\n".join(lines) + "\n"


def build_full_table(args: FullTableConfig) -> tuple[Path, list[tuple[str, int]]]:
    """Load the spec, train (``args.train``) or not, tabulate (or, with ``args.rescore``, re-score
    the kept translations), write WORK/rows.json, KEEP/rows.json (not when re-scoring) and
    ``args.out`` → (``args.out``, the (row, exit status) of the trainings that failed). Raises
    ``full_spec.SpecError`` for a bad spec, ValueError for ``train`` with ``rescore``,
    ``runtime.signals.Interrupted`` when stopped by a signal while training."""
    if args.train and args.rescore:
        raise ValueError("--train and --rescore: --rescore reads the kept translations only")
    spec = load_spec(args.spec)
    if args.threads:
        import torch

        torch.set_num_threads(args.threads)
    failed = train_rows(spec, args) if args.train else []
    rows = rescore(spec, args) if args.rescore else tabulate(spec, args)
    write_rows(args, {"spec": str(spec.path), "updates": spec.updates, "rows": rows})
    if not args.rescore:
        atomic_write_text(Path(args.keep) / "rows.json", _kept_rows(rows))
    return write_table(args, render(rows, spec, args)), failed

