"""The table-builder base (``doctrans/experiments/base.py``, issue 49 item 6): one set of shared
settings, scoring by the metric table, one renderer of the discourse columns, and every table —
``table dp`` too, which had none — ends with the provenance line naming the commit and the command."""
from __future__ import annotations

from pathlib import Path

from doctrans.evaluation.metrics.base import Column
from doctrans.experiments import base, dp_table
from doctrans.experiments.context_table import ContextTableConfig
from doctrans.experiments.rec_table import RecTableConfig
from doctrans.utils.provenance import command_line, git_commit


def test_command_line_is_what_a_shell_takes():
    assert command_line(["/x/.venv/bin/doctrans", "table", "dp", "--out", "a b.md"]) == \
        "doctrans table dp --out 'a b.md'"
    assert command_line(["/x/doctrans/cli/__main__.py", "score", "h"]) == "python -m doctrans score h"


def test_the_three_configs_share_the_base_fields():
    shared = {"prepared", "data", "out", "work", "beam", "bootstrap", "discourse", "contrastive"}
    fields = {c: set(c.__dataclass_fields__) for c in (dp_table.DPTableConfig, ContextTableConfig, RecTableConfig)}
    assert all(shared <= f for f in fields.values())
    assert {"ref", "checkpoint"} <= fields[ContextTableConfig] & fields[RecTableConfig]
    assert ContextTableConfig(ref="r.sgm").references() == "r.sgm"
    assert RecTableConfig(data="D").references() == str(Path("D") / "test" / "test.ref.sgm")
    assert (ContextTableConfig().out, RecTableConfig().out) == ("results/context_table.md", "results/rec_table.md")


def test_dp_table_ends_with_commit_and_command(tmp_path, monkeypatch):
    prep, data = tmp_path / "prep", tmp_path / "data"
    (prep / "dp").mkdir(parents=True)
    (data / "test").mkdir(parents=True)
    for path, text in ((prep / "test.tok.zh", "我 去 。\n他 来\n"), (prep / "test.docs", "d\t0\nd\t1\n"),
                       (prep / "dp" / "test.dp.zh", "我 去 。\n他 来\n"),
                       (data / "test" / "test.seg.zh", "去 。\n他 来\n"),
                       (data / "test" / "test.oracle-dp.seg.zh", "我 去 。\n他 来\n")):
        path.write_text(text, encoding="utf-8")
    seen = []

    def fake_score(args, hyp, metrics=("bleu_tok_lc",), baseline=None, dp=True, text=False):
        seen.append((Path(hyp).name, baseline is not None, dp, text))
        res = {"bleu_tok_lc": {"score": 10.0 + len(seen)}, "pronouns": {"hyp": 3, "refs": [4, 4, 4]}}
        if baseline is not None:
            res["significance"] = {"paired_bootstrap": {"p_value": 0.01}, "sign_test": {"p_value": 0.02}}
        return res

    monkeypatch.setattr(dp_table, "translate_row", lambda loaded, cfg, lines: ["i go .", "he comes"])
    monkeypatch.setattr(dp_table, "score", fake_score)
    monkeypatch.setattr("sys.argv", ["/venv/bin/doctrans", "table", "dp", "--baseline", "B.pt"])
    cfg = dp_table.DPTableConfig(baseline="B.pt", dp="D.pt", generator="G.pt", nbest=(), prepared=str(prep),
                                 data=str(data), out=str(tmp_path / "t.md"), work=str(tmp_path / "w"))
    text = dp_table.build_dp_table(cfg).read_text(encoding="utf-8")
    assert [s[1] for s in seen] == [False, True, True, True] and not any(s[3] for s in seen)
    assert "| Baseline | 11.00 | +0.00 | — | — | 3 |" in text
    assert "| +DPs, generator 1-best | 12.00* | +1.00 |" in text
    last = text.rstrip("\n").split("\n")[-1]
    assert last.startswith(f"Made by doctrans at commit {git_commit()} on ")
    assert last.endswith("Command: `doctrans table dp --baseline B.pt`.")
    assert (tmp_path / "w" / "rows.json").is_file()


def test_column_table_reference_row_and_joined_cells():
    rows = [{"system": "A", "pronouns": 5, "ref_pronouns": [7], "dp_recall": 0.5, "ref_cohesion": 0.4, "x": 0.1},
            {"system": "B", "pronouns": 6, "dp_recall": 0.6, "dp_recall_p": 0.03, "x": 0.2, "y": 0.3}]
    named = {c.key: c for c in base.view_columns("context_discourse")}
    cols = [named["pronouns"], named["dp_recall"], named["cohesion"], Column("x / y", "x / y", ".2f")]
    assert base.column_table(rows, cols, reference=True) == [
        "| system | EN pronouns | DP recall | cohesion | x / y |", "| --- | ---: | ---: | ---: | ---: |",
        "| A | 5 | 50.0% | — | 0.10 / — |", "| B | 6 | 60.0% (+10.0, p 0.030) | — | 0.20 / 0.30 |",
        "| reference 1 | 7 | — | 0.4000 | — |"]


def test_the_views_lay_out_the_metric_rows_columns():
    """The markdown columns of each view come from the metric table's rows (``Metric.views``) in
    ``VIEW_ORDER``: the headers of the tables before the model metrics were rows."""
    headers = {v: [c.header for c in base.view_columns(v)] for v in base.VIEW_ORDER}
    assert headers["context_usage"] == ["DP recall", "contrastive all", "DP", "overt", "context-needed",
                                        "McNemar p DP / context-needed", "CXMI vs empty", "CXMI vs random"]
    assert headers["context_discourse"] == [
        "EN pronouns", "DP recall", "contrastive DP", "contrastive overt", "contrastive all", "APT pronouns",
        "APT nouns", "CXMI (nats/sent)", "P-CXMI pronouns (nats/word)", "cohesion", "coherence (LSA)"]
    assert headers["dp_discourse"] == ["contrastive DP", "contrastive overt", "contrastive all", "APT pronouns",
                                       "APT nouns", "cohesion", "coherence (LSA)"]
    assert headers["rec"] == ["DP recall", "contrastive DP", "contrastive overt"]
