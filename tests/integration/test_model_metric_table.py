"""A model metric of the metric table (``kind="model"``, issue 49 item 5): registered here, in the
test only, as one row, it is computed on every row's checkpoint of ``doctrans table context``,
compared with the first row, kept in WORK/rows.json and shown in the markdown — without a line of
``experiments/`` changed. A tiny Transformer trained one update on reversal pairs is the model."""
from __future__ import annotations

import json

import numpy as np

from conftest import reversal_pairs, train_tiny
from doctrans.evaluation.metrics import METRIC_TABLE
from doctrans.evaluation.metrics.base import Column, Metric, ModelInputs
from doctrans.experiments import context_table


def _ref_xent(inputs: ModelInputs) -> dict:
    """Teacher-forced cross-entropy of the test references (nats per target token)."""
    from doctrans.evaluation.forced import Item, model_context, score_items

    s = inputs.scoring_set
    items = [Item(i, s.tgt[i], model_context(s.model, s.doc, i)) for i in range(len(s.src))]
    logp, = score_items(s.model, items, s.src, s.tgt)
    return {"ref_xent": -float(np.concatenate(logp).mean()), "ref_lines": len(logp)}


XENT = Metric(name="ref_xent", title="reference cross-entropy", kind="model", needs=frozenset({"model"}),
              compute=_ref_xent, compare=lambda r, first, table: {"ref_xent_delta": r["ref_xent"] - first["ref_xent"]},
              views={"context_usage": (Column("ref xent (nats/token)", "ref_xent", ".3f"),
                                       Column("Δ ref xent", "ref_xent_delta", "+.3f"))})


def test_a_registered_model_metric_is_a_context_table_column(tmp_path, monkeypatch):
    ckpt = train_tiny(tmp_path, 16, "train.max_steps=1")
    prep = tmp_path / "prep"
    src, tgt = reversal_pairs(4, seed=3)
    for name, lines in (("test.tok.zh", src), ("test.tok.en", tgt), ("test.docs", [f"d0\t{i}" for i in range(4)])):
        (prep / name).write_text("".join(x + "\n" for x in lines), encoding="utf-8")
    (tmp_path / "ref.txt").write_text("".join(x + "\n" for x in tgt), encoding="utf-8")
    monkeypatch.delitem(METRIC_TABLE, "contrastive")         # (it builds its set from TVsub's test files)
    monkeypatch.setitem(METRIC_TABLE, "ref_xent", XENT)
    cfg = context_table.ContextTableConfig(prepared=str(prep), data=str(tmp_path / "no-data"),
                                           ref=str(tmp_path / "ref.txt"), out=str(tmp_path / "t.md"),
                                           work=str(tmp_path / "w"), beam=1, bootstrap=10, usage=True)
    run = ckpt.parent
    text = context_table.build_context_table([("A", run), ("B", run)], cfg).read_text(encoding="utf-8")
    rows = json.loads((tmp_path / "w" / "rows.json").read_text(encoding="utf-8"))
    assert [r["ref_lines"] for r in rows] == [4, 4] and 0 < rows[0]["ref_xent"] < 20
    assert rows[1]["ref_xent"] == rows[0]["ref_xent"] and rows[1]["ref_xent_delta"] == 0.0
    assert "ref_xent_delta" not in rows[0] and rows[0]["cxmi"] == 0.0    # the built-in model metric still runs
    header = next(x for x in text.splitlines() if "ref xent" in x)
    assert header == ("| system | DP recall | CXMI vs empty | CXMI vs random | ref xent (nats/token) | Δ ref xent "
                      "| lone-sentence BLEU |")                          # a metric not in VIEW_ORDER: last
    assert f"| A | — | +0.000 | +0.000 | {rows[0]['ref_xent']:.3f} | — | — |" in text
    assert f"| B | — | +0.000 | +0.000 | {rows[1]['ref_xent']:.3f} | +0.000 | — |" in text
