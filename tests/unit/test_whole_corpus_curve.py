"""benchmarks/whole_corpus_curve.py: the two-step projection on points whose answer is known, and a
malformed point refused naming its file and line."""
from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def curve():
    spec = importlib.util.spec_from_file_location("whole_corpus_curve", REPO / "benchmarks" / "whole_corpus_curve.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _rows(points):
    return [{"series": s, "updates": u, "dev_xent": x, "test_bleu": b, "source": "test"} for s, u, x, b in points]


def test_projection_through_dev_cross_entropy(curve):
    # BLEU = 100 - 35 * xent exactly; the GPU curve falls 0.05 nats per doubling at its end
    rows = _rows([("sentence, GPU", 1000, 2.20, 100 - 35 * 2.20), ("sentence, GPU", 2000, 2.10, None),
                  ("sentence, GPU", 4000, 2.05, 100 - 35 * 2.05), ("sentence, CPU", 4500, 2.04, 100 - 35 * 2.04),
                  ("document, CPU", 4500, 2.30, 10.0)])              # not a sentence checkpoint: not fitted
    p = curve.projection(rows, goal=100 - 35 * 2.00)
    assert p["n"] == 3 and p["slope"] == pytest.approx(-35) and p["r"] == pytest.approx(-1)
    assert p["goal_xent"] == pytest.approx(2.00)
    assert p["per_doubling"] == pytest.approx(0.05) and p["doublings"] == pytest.approx(1.0)
    assert p["updates"] == pytest.approx(8000) and p["reached"] == []
    assert p["closest"][:2] == (2.04, 4500)
    # a goal already reached by a measured checkpoint is named
    p = curve.projection(rows, goal=100 - 35 * 2.045)
    assert [(x, u) for x, u, *_ in p["reached"]] == [(2.04, 4500)] and p["doublings"] == pytest.approx(0.1)


def test_gains_per_doubling(curve):
    g = curve.gains_per_doubling([(1000, 24.0), (2000, 26.0), (8000, 28.0)])
    assert [(a, b, round(x, 6)) for a, b, x in g] == [(1000, 2000, 2.0), (2000, 8000, 1.0)]


def test_malformed_point_names_file_and_line(curve, tmp_path):
    f = tmp_path / "p.tsv"
    f.write_text("# comment\nseries\tupdates\tdev_xent\ttest_bleu\tsource\nsentence, GPU\t100\t2.1\t\tx\n"
                 "sentence, GPU\tmany\t2.0\t\tx\n", encoding="utf-8")
    with pytest.raises(SystemExit, match=r"p\.tsv:4: "):
        curve.read_points(f)
    f.write_text("series\tupdates\tdev_xent\ttest_bleu\tsource\nsentence, GPU\t100\t2.1\n", encoding="utf-8")
    with pytest.raises(SystemExit, match=r"p\.tsv:2: 3 fields, expected 5"):
        curve.read_points(f)
    f.write_text("series\tupdates\tdev_xent\ttest_bleu\tsource\nsentence, GPU\t100\t2.1\t\tx\n", encoding="utf-8")
    assert curve.read_points(f) == [{"series": "sentence, GPU", "updates": 100, "dev_xent": 2.1, "test_bleu": None,
                                     "source": "x"}]


def test_the_committed_points_read_and_project(curve):
    rows = curve.read_points(REPO / "benchmarks" / "plots" / "whole_corpus_curve.tsv")
    p = curve.projection(rows, goal=28.6)
    assert p["n"] >= 3 and p["slope"] < 0 and p["updates"] > 5684
