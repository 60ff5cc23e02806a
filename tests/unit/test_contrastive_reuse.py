"""The contrastive columns of the experiment tables are kept per (checkpoint, set, source) and
reused: a table re-run after adding one row scores only that row (doctrans.evaluation.contrastive
.table_columns, ``reuse``)."""
from __future__ import annotations

import json
import math
import os

import doctrans.evaluation.contrastive as contrastive


def _set(tmp_path):
    d = tmp_path / "set"
    d.mkdir()
    (d / "items.jsonl").write_text(json.dumps({"line": 1, "kind": "dp"}) + "\n", encoding="utf-8")
    (d / "summary.json").write_text(json.dumps({"context_needed": 0}), encoding="utf-8")
    return d


def _fake_scorer(monkeypatch):
    calls = []

    def score_set(checkpoint, set_dir, source=None):
        calls.append((checkpoint, None if source is None else tuple(source)))
        return {"accuracy": 0.5 + 0.1 * len(calls), "by_kind": {"dp": {"accuracy": 0.25}},
                "context_needed": {"accuracy": float("nan"), "items": 0}, "items": 1, "per_item": [1]}

    monkeypatch.setattr(contrastive, "score_set", score_set)
    return calls


def test_a_second_call_reuses_the_scores(tmp_path, monkeypatch):
    calls = _fake_scorer(monkeypatch)
    d, ck = _set(tmp_path), tmp_path / "last.pt"
    ck.write_bytes(b"weights")
    first = contrastive.table_columns(str(ck), d, tmp_path)
    second = contrastive.table_columns(str(ck), d, tmp_path)
    assert len(calls) == 1
    assert second["contrastive"] == first["contrastive"] == 0.6 and second["contrastive_per_item"] == [1]
    assert math.isnan(second["contrastive_overt"]) and math.isnan(second["contrastive_context_needed"])
    assert len(list((d / "scores").glob("*.json"))) == 1


def test_another_source_checkpoint_or_set_is_scored_again(tmp_path, monkeypatch):
    calls = _fake_scorer(monkeypatch)
    d, ck = _set(tmp_path), tmp_path / "last.pt"
    ck.write_bytes(b"weights")
    contrastive.table_columns(str(ck), d, tmp_path, source=["他 来 了"])
    contrastive.table_columns(str(ck), d, tmp_path, source=["他 来 了"])
    assert len(calls) == 1
    contrastive.table_columns(str(ck), d, tmp_path, source=["她 来 了"])         # another source
    assert len(calls) == 2
    ck.write_bytes(b"weights, trained further")                                  # the checkpoint rewritten
    contrastive.table_columns(str(ck), d, tmp_path, source=["他 来 了"])
    assert len(calls) == 3
    st = (d / "items.jsonl").stat()                                              # the set rebuilt
    (d / "items.jsonl").write_text(json.dumps({"line": 2, "kind": "dp"}) + "\n", encoding="utf-8")
    os.utime(d / "items.jsonl", ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))
    contrastive.table_columns(str(ck), d, tmp_path, source=["他 来 了"])
    assert len(calls) == 4


def test_reuse_off_always_scores(tmp_path, monkeypatch):
    calls = _fake_scorer(monkeypatch)
    d, ck = _set(tmp_path), tmp_path / "last.pt"
    ck.write_bytes(b"weights")
    contrastive.table_columns(str(ck), d, tmp_path, reuse=False)
    contrastive.table_columns(str(ck), d, tmp_path, reuse=False)
    assert len(calls) == 2 and not (d / "scores").exists()
