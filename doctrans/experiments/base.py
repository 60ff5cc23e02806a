"""What the experiment tables (``doctrans table dp|context|rec``) share: their settings
(``TableConfig``; ``RunTableConfig`` for tables whose rows are run directories), the test set's
files (references, the hand DP annotation), scoring a row's translation with the metric table
(``score``: ``evaluation.metrics.metric_columns`` gives the row's columns), the contrastive column,
the markdown columns of the discourse measures (``DISCOURSE_COLUMNS``, ``column_table``), and
writing the table stamped with where it was made (``write_table``: ``utils.provenance``, the
commit and the command).
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

from doctrans.training.metrics import read_metrics
from doctrans.utils.io import atomic_write_text
from doctrans.utils.provenance import command_line, provenance_line


@dataclass(frozen=True, kw_only=True)
class TableConfig:
    """The settings every table has (``doctrans table`` options of the same names)."""

    prepared: str = "data/quickstart"   # PREP: test.tok.zh, test.docs, train.tok.*
    data: str = "../shared/corpora/tvsub"   # DATA: test/test.ref.sgm, test.seg.zh, test.oracle-dp.seg.zh
    out: str = "results/table.md"       # the markdown table
    work: str = "results/table"         # translations, rows.json, the contrastive set
    beam: int = 5
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


def contrastive_dir(args: TableConfig) -> Path:
    """The contrastive set: ``args.contrastive``, else WORK/contrastive_test (built there)."""
    return Path(args.contrastive) if args.contrastive else Path(args.work) / "contrastive_test"


def contrastive_columns(ckpt: str | Path, args: TableConfig, source: list[str] | None = None) -> dict:
    """Contrastive pronoun accuracy of ``ckpt`` (``evaluation.contrastive.table_columns``: all / DP /
    overt / context-needed, per item) on the source it reads (``source``; None: the test source)."""
    from doctrans.evaluation.contrastive import table_columns

    return table_columns(str(ckpt), contrastive_dir(args), Path(args.data), source)


def train_speed(run_dir: Path) -> float:
    """Mean training target tokens/s of a run (its metrics.jsonl train records), NaN without any."""
    recs = [r["tok_per_s"] for r in read_metrics(run_dir / "metrics.jsonl") if r.get("kind") == "train"
            and "tok_per_s" in r]
    return sum(recs) / len(recs) if recs else float("nan")


def slug(name: str) -> str:
    """A file-name-safe form of a row name (``+Gating Auxi`` → ``_Gating_Auxi``)."""
    return re.sub(r"[^A-Za-z0-9._-]", "_", name)


def recall_delta(r: dict, b: dict) -> str:
    """`` (+6.2, p 0.004)``: a row's DP recall against the first row's ``b``, in points, with the
    paired bootstrap p-value over lines (``evaluation.dp_recall.dp_recall_bootstrap``); empty for
    the first row or a row without one."""
    if r is b or r.get("dp_recall_p") is None or b.get("dp_recall") is None or r.get("dp_recall") is None:
        return ""
    return f" ({(r['dp_recall'] - b['dp_recall']) * 100:+.1f}, p {r['dp_recall_p']:.3f})"


# The discourse columns of the tables: row key → (header, format). DP recall carries its difference
# to the first row (``recall_delta``); "A / B" joins two cells.
DISCOURSE_COLUMNS = {
    "pronouns": ("EN pronouns", "d"),
    "dp_recall": ("DP recall", ".1%"),
    "contrastive_dp": ("contrastive DP", ".1%"),
    "contrastive_overt": ("contrastive overt", ".1%"),
    "contrastive": ("contrastive all", ".1%"),
    "contrastive_context_needed": ("context-needed", ".1%"),
    "apt_pronoun": ("APT pronouns", ".1%"),
    "apt_noun": ("APT nouns", ".1%"),
    "cxmi": ("CXMI (nats/sent)", "+.3f"),
    "pcxmi_pronoun": ("P-CXMI pronouns (nats/word)", "+.4f"),
    "cohesion": ("cohesion", ".4f"),
    "coherence": ("coherence (LSA)", ".4f"),
}
# The first reference's figure under a column of a system's (the reference row of column_table).
REFERENCE_OF = {"pronouns": lambda b: b["ref_pronouns"][0], "cohesion": lambda b: cell(b, "ref_cohesion", ".4f"),
                "coherence": lambda b: cell(b, "ref_coherence", ".4f")}


def cell(r: dict, key: str, fmt: str) -> str:
    """``r[key]`` formatted, "—" when the row has none."""
    return "—" if r.get(key) is None else format(r[key], fmt)


def column_table(rows: list[dict], columns: list[tuple[str, str, str]], reference: bool = False) -> list[str]:
    """A markdown table of ``rows`` under "system" and ``columns`` (header, row key, format; a key
    "a / b" joins two cells); ``dp_recall`` with its difference to the first row. With
    ``reference`` and a first row that has the reference's cohesion, a last row "reference 1"."""
    b = rows[0]

    def one(r: dict, key: str, fmt: str) -> str:
        if " / " in key:
            return " / ".join(cell(r, k, fmt) for k in key.split(" / "))
        return cell(r, key, fmt) + (recall_delta(r, b) if key == "dp_recall" else "")

    lines = ["| system | " + " | ".join(h for h, _, _ in columns) + " |", "| --- |" + " ---: |" * len(columns)]
    lines += [f"| {r['system']} | " + " | ".join(one(r, k, f) for _, k, f in columns) + " |" for r in rows]
    if reference and "ref_cohesion" in b:
        lines.append("| reference 1 | " + " | ".join(str(REFERENCE_OF[k](b)) if k in REFERENCE_OF else "—"
                                                     for _, k, _ in columns) + " |")
    return lines


def discourse_columns(*keys: str) -> list[tuple[str, str, str]]:
    """``column_table`` columns of ``DISCOURSE_COLUMNS`` rows."""
    return [(DISCOURSE_COLUMNS[k][0], k, DISCOURSE_COLUMNS[k][1]) for k in keys]


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
