"""The tier markers that tests/conftest.py sets from a test's directory (and ``corpus`` for TVsub)."""
from __future__ import annotations

from conftest import REPO, TIERS, TOY, needs_tvsub


def test_a_unit_test_carries_only_the_unit_marker(request):
    assert [t for t in TIERS if request.node.get_closest_marker(t)] == ["unit"]
    assert request.node.get_closest_marker("corpus") is None


@needs_tvsub()
def test_a_test_needing_tvsub_is_marked_corpus(request):
    assert request.node.get_closest_marker("corpus") is not None


def test_toy_corpus_is_complete_and_line_aligned():
    """What `doctrans preprocess --data-dir` and `annotate-dp` read from tests/data/toy."""
    def n_lines(path):
        text = path.read_text(encoding="utf-8")
        assert text.endswith("\n") and "\r" not in text, path
        return text.count("\n")

    docs = sorted((TOY / "train").glob("*.zh"))
    assert len(docs) >= 8
    for zh in docs:
        assert 10 <= n_lines(zh) == n_lines(zh.with_suffix(".en")) <= 20, zh
    for split in ("dev", "test"):
        d = TOY / split
        names = [f"{split}.zh", f"{split}.en", f"{split}.seg.zh", f"{split}.oracle-dp.seg.zh"]
        names += [f"{split}.auto-dp.seg.zh"] if split == "test" else []
        counts = {name: n_lines(d / name) for name in names}
        segs = (d / f"{split}.ref.sgm").read_text(encoding="utf-8").count("<seg ")
        n_refs = 3 if split == "test" else 1
        assert set(counts.values()) == {segs // n_refs} and segs % n_refs == 0, counts


def test_every_test_module_lives_in_a_tier_directory():
    """A test file directly under tests/ gets no tier marker: move it into unit/, integration/ or system/."""
    loose = sorted(p.name for p in (REPO / "tests").glob("test_*.py"))
    assert loose == [], loose
