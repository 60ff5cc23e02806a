"""The tier markers that tests/conftest.py sets from a test's directory (and ``corpus`` for TVsub)."""
from __future__ import annotations

from pathlib import Path

import pytest

import conftest
from conftest import REPO, TIERS, needs_tvsub, oracle_insertions


def test_a_unit_test_carries_only_the_unit_marker(request):
    assert [t for t in TIERS if request.node.get_closest_marker(t)] == ["unit"]
    assert request.node.get_closest_marker("corpus") is None


class _Item:
    """What ``conftest.pytest_collection_modifyitems`` reads of a collected test, and the markers
    it adds."""

    def __init__(self, path: Path, skipif_reasons=(), fixturenames=()):
        self.path, self.fixturenames = path, tuple(fixturenames)
        self.skipifs = [pytest.mark.skipif(True, reason=r).mark for r in skipif_reasons]
        self.added: list[str] = []

    def iter_markers(self, name=None):
        return iter(m for m in self.skipifs if name in (None, m.name))

    def add_marker(self, marker):
        self.added.append(marker.mark.name)


def test_collection_marks_the_tier_and_corpus_needs(tmp_path):
    """The hook on synthetic items: the tier from the directory; ``corpus`` for a TVsub skipif
    (``needs_tvsub()``'s reason) or the ``tvsub_slice`` fixture, not for another skipif; nothing
    for a test outside tests/."""
    tests = Path(conftest.__file__).resolve().parent
    items = {
        "unit": _Item(tests / "unit" / "test_a.py"),
        "unit_other_skip": _Item(tests / "unit" / "test_a.py", skipif_reasons=["needs a GPU"]),
        "integration_tvsub": _Item(tests / "integration" / "test_b.py",
                                   skipif_reasons=[needs_tvsub().kwargs["reason"]]),
        "system_slice": _Item(tests / "system" / "test_c.py", fixturenames=("tmp_path", "tvsub_slice")),
        "outside": _Item(tmp_path / "test_d.py"),
    }
    conftest.pytest_collection_modifyitems(None, list(items.values()))
    assert {k: sorted(v.added) for k, v in items.items()} == {
        "unit": ["unit"], "unit_other_skip": ["unit"], "integration_tvsub": ["corpus", "integration"],
        "system_slice": ["corpus", "system"], "outside": []}


def test_tvsub_slice_is_complete_and_line_aligned(tvsub_slice):
    """What `doctrans preprocess --data-dir` and `annotate-dp` read from the test-time TVsub slice."""
    def n_lines(path):
        text = path.read_text(encoding="utf-8")
        assert text.endswith("\n"), path
        return text.count("\n")

    docs = sorted((tvsub_slice / "train").glob("*.zh"))
    assert len(docs) == 10
    for zh in docs:
        assert n_lines(zh) == n_lines(zh.with_suffix(".en")) == 15, zh
    for split in ("dev", "test"):
        d = tvsub_slice / split
        names = [f"{split}.zh", f"{split}.en", f"{split}.seg.zh", f"{split}.oracle-dp.seg.zh"]
        names += [f"{split}.auto-dp.seg.zh"] if split == "test" else []
        counts = {name: n_lines(d / name) for name in names}
        segs = (d / f"{split}.ref.sgm").read_text(encoding="utf-8").count("<seg ")
        n_refs = 3 if split == "test" else 1
        assert set(counts.values()) == {segs // n_refs} == {14} and segs % n_refs == 0, counts
        base, oracle = (d / f"{split}.seg.zh").read_text(encoding="utf-8").split("\n")[:-1], \
            (d / f"{split}.oracle-dp.seg.zh").read_text(encoding="utf-8").split("\n")[:-1]
        assert all(oracle_insertions(b, o) is not None for b, o in zip(base, oracle))


def test_no_corpus_text_is_tracked():
    """TVsub (CC BY-NC-ND) is never part of the repository: no tracked file looks like a corpus
    file (N.zh / N.en / *.sgm / *.zh / *.en) but the full table's kept translations (model output)."""
    import shutil
    import subprocess

    if shutil.which("git") is None or not (REPO / ".git").exists():
        pytest.skip("not a git checkout")
    files = subprocess.run(["git", "ls-files"], cwd=REPO, capture_output=True, text=True, check=True).stdout.split()
    # a model's translation of the TVsub test kept for re-scoring (issue 74: benchmarks/full_table/ROW.en)
    # is the model's text, not the corpus's: allowed there, and only as the small file a translation is
    translations = [f for f in files if f.startswith("benchmarks/full_table/") and f.endswith(".en")]
    assert all((REPO / f).stat().st_size < 100_000 for f in translations), translations
    assert [f for f in files if f.endswith((".zh", ".en", ".sgm")) and f not in translations] == []


def test_every_test_module_lives_in_a_tier_directory():
    """A test file directly under tests/ gets no tier marker: move it into unit/, integration/ or system/."""
    loose = sorted(p.name for p in (REPO / "tests").glob("test_*.py"))
    assert loose == [], loose
