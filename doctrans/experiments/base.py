"""What the experiment tables (``doctrans table dp|context|rec|full``) share: their settings
(``TableConfig``; ``RunTableConfig`` for tables whose rows are run directories), the test set's
files (references, the hand DP annotation), translating the test set with a row's checkpoint and
translate options, reused while its stamp matches (``translate_test``), scoring a row's translation
with the metric table (``score``: ``evaluation.metrics.metric_columns`` gives the row's columns), a
checkpoint's model metrics (``model_columns``, on the source the row's model reads:
``dp_source_of``; ``compare_to_first``), the metrics' markdown columns in each view
(``view_columns``: ``Metric.views`` in ``VIEW_ORDER``; ``column_table``), and
writing the table stamped with where it was made (``write_table``: ``utils.provenance``, the
commit and the command).
"""
from __future__ import annotations

import hashlib
import json
import logging
import math
import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from doctrans.decoding import DecodeConfig
from doctrans.evaluation.metrics.base import Column
from doctrans.training.metrics import read_metrics
from doctrans.utils.io import atomic_write_lines, atomic_write_text, read_lines
from doctrans.utils.provenance import command_line, provenance_line
from doctrans.utils.settings import default_of

logger = logging.getLogger(__name__)


@dataclass(frozen=True, kw_only=True)
class TableConfig:
    """The settings every table has (``doctrans table`` options of the same names)."""

    prepared: str = "data/quickstart"   # PREP: test.tok.zh, test.docs, train.tok.*
    data: str = "../shared/corpora/tvsub"   # DATA: test/test.ref.sgm, test.seg.zh, test.oracle-dp.seg.zh
    out: str = "results/table.md"       # the markdown table
    work: str = "results/table"         # translations, rows.json, the contrastive set
    beam: int = default_of(DecodeConfig, "beam")
    bootstrap: int = 1000               # paired-bootstrap samples against the first row
    discourse: bool = False             # the discourse columns (each table says which)
    contrastive: str = ""               # contrastive set directory [default: built under WORK]

    def references(self) -> str:
        """The test references: DATA/test/test.ref.sgm."""
        return str(Path(self.data) / "test" / "test.ref.sgm")


@dataclass(frozen=True, kw_only=True)
class RunTableConfig(TableConfig):
    """A table whose rows are run directories (NAME=RUN_DIR: ``table context``, ``table rec``)."""

    ref: str = ""                       # test references (SGML) [default: DATA/test/test.ref.sgm]
    checkpoint: str = "last"            # last | best: which checkpoint of each run translates

    def references(self) -> str:
        """``ref``, else DATA/test/test.ref.sgm."""
        return self.ref or super().references()


def dp_files(args: TableConfig) -> tuple[Path, Path] | None:
    """DATA's segmented test source and its hand DP annotation (test.seg.zh, test.oracle-dp.seg.zh),
    or None when DATA lacks either."""
    seg, oracle = Path(args.data) / "test" / "test.seg.zh", Path(args.data) / "test" / "test.oracle-dp.seg.zh"
    return (seg, oracle) if seg.is_file() and oracle.is_file() else None


def score_options(args: TableConfig, baseline: str | Path | None = None, dp: bool = True,
                  text: bool = False) -> dict:
    """The ``ScoreConfig`` metric options a table gives a row: the ``baseline`` hypothesis (the first
    row's) with ``args.bootstrap`` samples; DP translation recall when ``dp`` and DATA has the DP
    annotation; with ``text`` the text measures — lexical cohesion, coherence in an LSA space of
    PREP/train.tok.en (when it exists), APT on PREP/test.tok.zh (PREP/train.tok alongside when it
    exists)."""
    prep = Path(args.prepared)
    opts: dict = {"baseline": None if baseline is None else str(baseline), "bootstrap": args.bootstrap}
    files = dp_files(args) if dp else None
    if files:
        opts.update(dp_base=str(files[0]), dp_oracle=str(files[1]))
    if text:
        lsa = prep / "train.tok.en"
        opts.update(cohesion=True, lsa=str(lsa) if lsa.is_file() else None, apt_src=str(prep / "test.tok.zh"),
                    apt_corpus=str(prep / "train.tok") if (prep / "train.tok.zh").is_file() else None)
    return opts


def score(args: TableConfig, hyp: str | Path, metrics: tuple[str, ...] = ("bleu_tok_lc",),
          baseline: str | Path | None = None, dp: bool = True, text: bool = False) -> dict:
    """``score_files`` of a row's tokenized translation ``hyp`` against ``args.references()`` with
    ``metrics`` and ``score_options``; its columns are ``evaluation.metrics.metric_columns`` of it."""
    from doctrans.evaluation.score import ScoreConfig, score_files

    return score_files(ScoreConfig(hyp=str(hyp), refs=(args.references(),), hyp_tokenized=True, metrics=metrics,
                                   **score_options(args, baseline, dp, text)))


def p_values(res: dict) -> dict:
    """A ``score`` result's significance against its baseline as the row's bootstrap_p / sign_p."""
    from doctrans.evaluation.metrics import METRIC_TABLE

    return METRIC_TABLE["significance"].columns(res["significance"])


def model_columns(ckpt: str | Path, args: TableConfig, views: tuple[str, ...], source: list[str] | None = None,
                  test_source: list[str] | None = None, doc_ids: list[str] | None = None,
                  source_of: Callable[[list[str], list[str]], list[str]] | None = None) -> dict:
    """The columns of ``ckpt`` of every model metric the table shows in one of its ``views``
    (``evaluation.metrics.model_metrics``, in table order: CXMI, contrastive accuracy …), each
    metric's ``compute`` given a ``ModelInputs``: the checkpoint, ``args``, the ``source`` the row's
    model reads (None: the test source, or ``source_of`` of it), the test source / document ids as
    the builder has them (None: read from PREP) and ``source_of`` (segmented lines, document ids →
    the lines the row's model reads, ``dp_source_of``; None: the lines themselves)."""
    from doctrans.evaluation.metrics import model_metrics
    from doctrans.evaluation.metrics.base import ModelInputs

    inputs = ModelInputs(Path(ckpt), args, source, test_source, doc_ids, source_of)
    row: dict = {}
    for m in model_metrics(views):
        row.update(m.compute(inputs))
    return row


def compare_to_first(rows: list[dict], args: TableConfig, views: tuple[str, ...]) -> None:
    """Every row after the first gets each model metric's ``compare`` columns against the first row
    (in place; McNemar's test of the contrastive items)."""
    from doctrans.evaluation.metrics import model_metrics

    for m in model_metrics(views):
        if m.compare is not None:
            for r in rows[1:]:
                r.update(m.compare(r, rows[0], args))


def translate_test(name: str, ckpt: Path, opts: dict, args: TableConfig, lone: bool = False
                   ) -> tuple[Path, Path | None, float, object]:
    """Translate the test set (PREP/test.tok.zh, tokenized output) as documents (PREP/test.docs;
    with ``lone`` every line its own document: WORK/test.NAME.lone.hyp) with one row's checkpoint
    and translate options ``opts`` (``TranslateConfig`` fields: a DP generator, ``rerank`` …),
    reusing an earlier translation whose stamp (WORK/test.NAME.json: checkpoint path and time,
    beam, options, line count, decoding seconds) matches → (hyp path, the DP-completed source a
    joint DP model predicts (WORK/test.NAME.dp.zh) or None, decoding seconds, the Translator)."""
    from doctrans.dp.apply import dp_inputs
    from doctrans.inference.translate import TranslateConfig, Translator

    prep, work = Path(args.prepared), Path(args.work)
    stem = f"test.{slug(name)}" + (".lone" if lone else "")
    hyp = work / f"{stem}.hyp"
    probe = Translator(TranslateConfig(checkpoint=str(ckpt)))
    spec = probe.model.reconstruction
    dp_out = work / f"{stem}.dp.zh" if spec.predicts_dps else None   # (a document model: with its context)
    cfg = TranslateConfig(checkpoint=str(ckpt), input=str(prep / "test.tok.zh"), input_format="tok", tokenized=True,
                          beam=args.beam, dp_docs=str(prep / "test.docs") if opts.get("dp_generator") else "",
                          dp_out=str(dp_out) if dp_out else "", **opts)
    lines = read_lines(prep / "test.tok.zh")
    doc_ids = [f"line{i}" for i in range(len(lines))] if lone else \
        [x.split("\t")[0] for x in read_lines(prep / "test.docs")]
    stamp = {"checkpoint": str(ckpt.resolve()), "checkpoint_mtime": ckpt.stat().st_mtime, "beam": args.beam,
             "options": sorted(f"{k}={v}" for k, v in opts.items()), "lines": len(lines)}
    if lone:
        stamp["lone"] = True
    done = hyp.with_suffix(".json")
    prior = json.loads(done.read_text(encoding="utf-8")) if done.is_file() and hyp.is_file() else {}
    tr = probe.with_config(cfg, dp_inputs(cfg))          # the model loaded once
    if {k: prior.get(k) for k in stamp} == stamp and (dp_out is None or dp_out.is_file()):
        logger.info("%s: reusing %s", name, hyp)
        return hyp, dp_out, prior["decode_s"], tr
    t0 = time.perf_counter()
    res = tr.translate_detailed(lines, doc_ids=doc_ids)
    dt = time.perf_counter() - t0
    atomic_write_lines(hyp, res.lines)
    if dp_out is not None:
        atomic_write_lines(dp_out, res.dp_lines)
    atomic_write_text(done, json.dumps({**stamp, "decode_s": dt, "date": time.strftime("%Y-%m-%d %H:%M:%S")}) + "\n")
    return hyp, dp_out, dt, tr


def dp_source_of(tr, args: TableConfig) -> Callable[[list[str], list[str]], list[str]] | None:
    """What a row's model reads when its translator completes the input with a DP generator and the
    encoder reads the completion (+DPs / +DPPs rows: ``dp_generator`` set, ``encoder_input`` not
    "original"): (segmented lines, document ids) → the generator's 1-best completion (``dp_input``
    as the row translates), kept under WORK/sources/ and reused for the same generator file,
    ``dp_input`` and lines; None for every other row (it reads the lines as they are)."""
    c, spec = tr.cfg.dp, tr.model.reconstruction
    if not c.dp_generator or spec.encoder_input == "original":
        return None

    def complete(lines: list[str], doc_ids: list[str]) -> list[str]:
        from doctrans.dp.apply import DPInputVariants

        gens = [Path(g) for g in c.dp_generator.split(":")]
        key = hashlib.sha1(json.dumps({"generators": [[str(g.resolve()), g.stat().st_mtime_ns] for g in gens],
                                       "dp_input": c.dp_input, "lines": lines, "docs": doc_ids}).encode("utf-8"))
        kept = Path(args.work) / "sources" / f"{key.hexdigest()}.zh"
        if kept.is_file():
            out = read_lines(kept)
            if len(out) == len(lines):
                return out
        variants = DPInputVariants(c.dp_generator, c.dp_input, nbest=1, combine="1best")(lines, doc_ids)
        out = [v[0][0] if v else "" for v in variants]
        atomic_write_lines(kept, out)
        return out

    return complete


def train_speed(run_dir: Path) -> float:
    """Mean training target tokens/s of a run (its metrics.jsonl train records), NaN without any."""
    recs = [r["tok_per_s"] for r in read_metrics(run_dir / "metrics.jsonl") if r.get("kind") == "train"
            and "tok_per_s" in r]
    return sum(recs) / len(recs) if recs else float("nan")


def slug(name: str) -> str:
    """A file-name-safe form of a row name (``+Gating Auxi`` → ``_Gating_Auxi``)."""
    return re.sub(r"[^A-Za-z0-9._-]", "_", name)


# The order of the metrics' markdown columns (``Metric.views``) in each view of the tables, by
# metric row; a metric with columns in a view that does not name it comes after these, in table order.
VIEW_ORDER = {
    "context_usage": ("dp_recall", "contrastive", "cxmi"),
    "context_discourse": ("pronouns", "dp_recall", "contrastive", "apt", "cxmi", "cohesion", "coherence"),
    "dp_discourse": ("contrastive", "apt", "cohesion", "coherence"),
    "rec": ("dp_recall", "contrastive"),
    "full": ("dp_recall", "contrastive", "heldout", "cxmi"),
}


def view_columns(view: str) -> list[Column]:
    """The markdown columns of ``view``: those of the metric table's rows (``Metric.views``) in
    ``VIEW_ORDER``."""
    from doctrans.evaluation.metrics import METRIC_TABLE

    named = [n for n in VIEW_ORDER.get(view, ()) if n in METRIC_TABLE]
    order = named + [n for n in METRIC_TABLE if n not in named]
    return [c for n in order for c in METRIC_TABLE[n].views.get(view, ())]


def cell(r: dict, key: str, fmt: str, nan_dash: bool = False) -> str:
    """``r[key]`` formatted, "—" when the row has none (or, with ``nan_dash``, a NaN)."""
    v = r.get(key)
    if v is None or (nan_dash and isinstance(v, float) and math.isnan(v)):
        return "—"
    return format(v, fmt)


def row_cells(r: dict, b: dict, columns: list[Column], nan_dash: bool = False) -> list[str]:
    """Row ``r``'s cells under ``columns`` (a key "a / b" joins two cells), each followed by its
    column's comparison with the first row ``b`` (``Column.against_first``)."""
    return [" / ".join(cell(r, k, c.fmt, nan_dash) for k in c.keys)
            + (c.against_first(r, b) if c.against_first else "") for c in columns]


def column_table(rows: list[dict], columns: list[Column], reference: bool = False) -> list[str]:
    """A markdown table of ``rows`` under "system" and ``columns`` (``row_cells``). With
    ``reference`` and a first row that has the reference's cohesion (the text measures), a last
    row "reference 1": each column's ``reference`` figure."""
    b = rows[0]
    lines = ["| system | " + " | ".join(c.header for c in columns) + " |", "| --- |" + " ---: |" * len(columns)]
    lines += [f"| {r['system']} | " + " | ".join(row_cells(r, b, columns)) + " |" for r in rows]
    if reference and "ref_cohesion" in b:
        lines.append("| reference 1 | " + " | ".join(c.reference(b) if c.reference else "—" for c in columns) + " |")
    return lines


def write_rows(args: TableConfig, rows: object) -> Path:
    """WORK/rows.json: the rows as computed (every column, also those the markdown leaves out)."""
    path = Path(args.work) / "rows.json"
    atomic_write_text(path, json.dumps(rows, indent=1) + "\n")
    return path


def write_table(args: TableConfig, text: str) -> Path:
    """Write the markdown ``text`` to ``args.out`` (atomically), ending with the provenance line:
    the commit, date and machine (``utils.provenance``) and the command that made it."""
    out = Path(args.out)
    atomic_write_text(out, text + f"\n{provenance_line(command=command_line())}\n")
    return out
