"""Shared fixtures: a hand-made prepared dataset (no BPE merges), the TVsub location, the toy corpus.

Tiers are directories, and each test gets its directory's marker here (``pytest -m unit``):

* ``tests/unit/``         fast tests of pure functions and small modules;
* ``tests/integration/``  several components together: small models trained a few steps,
                          eflomal/KenLM, CliRunner on hand-made prepared data;
* ``tests/system/``       end-to-end CLI runs (the toy corpus in ``tests/data/toy``), overfitting.

A test that needs the TVsub corpus (a ``skipif`` whose reason names TVsub, e.g. ``needs_tvsub()``)
also gets the ``corpus`` marker wherever it lives: ``pytest -m "not corpus"`` is what CI without
``../shared`` runs in full. Test modules import these helpers with ``from conftest import …``
(``tests/`` is on ``pythonpath``, setup.cfg).
"""
from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

REPO = Path(__file__).resolve().parents[1]
TVSUB = (REPO / ".." / "shared" / "corpora" / "tvsub").resolve()
TOY = REPO / "tests" / "data" / "toy"      # made-up documents in the TVsub layout (README.md there)
TIERS = ("unit", "integration", "system")


def pytest_collection_modifyitems(config, items):
    """Mark every test with its tier (its directory under tests/) and ``corpus`` if it needs TVsub."""
    tests_dir = Path(__file__).resolve().parent
    for item in items:
        try:
            tier = Path(item.path).resolve().relative_to(tests_dir).parts[0]
        except ValueError:
            continue
        if tier in TIERS:
            item.add_marker(getattr(pytest.mark, tier))
        if any("TVsub" in str(m.kwargs.get("reason", "")) for m in item.iter_markers("skipif")):
            item.add_marker(pytest.mark.corpus)


def backbones() -> list[str]:
    """The names of the backbone table ``doctrans.models.build.BACKBONES``, sorted.

    Model-level tests are parametrized over these, each with its ``pipelines/<name>/tiny.yaml``
    (``tiny_backbone``), so a new backbone is tested by adding its row and a tiny YAML.
    """
    from doctrans.models.build import BACKBONES

    return sorted(BACKBONES)


def tiny_backbone(name: str, *overrides: str):
    """The ExperimentConfig of ``pipelines/<name>/tiny.yaml`` with ``key=value`` overrides."""
    from doctrans.config import load_experiment

    return load_experiment(REPO / "pipelines" / name / "tiny.yaml", list(overrides))


def needs_tvsub():
    return pytest.mark.skipif(not (TVSUB / "train").is_dir(), reason=f"TVsub corpus not at {TVSUB}")


def reversal_pairs(n: int, seed: int = 0, vocab: int = 30) -> tuple[list[str], list[str]]:
    """Source: random 'w<i>' words; target: the same words reversed and renamed 'v<i>'."""
    rng = np.random.default_rng(seed)
    src, tgt = [], []
    for _ in range(n):
        words = rng.integers(0, vocab, rng.integers(3, 8))
        src.append(" ".join(f"w{i}" for i in words))
        tgt.append(" ".join(f"v{i}" for i in reversed(words)))
    return src, tgt


def write_prepared(out: Path, train: tuple[list[str], list[str]], dev: tuple[list[str], list[str]]) -> Path:
    """A prepared dataset in `doctrans preprocess`'s layout whose BPE has no merges."""
    out.mkdir(parents=True, exist_ok=True)
    for split, (src, tgt) in (("train", train), ("dev", dev)):
        for lang, lines in (("zh", src), ("en", tgt)):
            for kind in ("tok", "bpe"):
                (out / f"{split}.{kind}.{lang}").write_text("".join(f"{x}\n" for x in lines), encoding="utf-8")
        (out / f"{split}.docs").write_text("".join(f"d0\t{i}\n" for i in range(len(src))), encoding="utf-8")
    for lang, lines in (("zh", train[0]), ("en", train[1])):
        counts = Counter(t for line in lines for t in line.split())
        (out / f"vocab.{lang}.txt").write_text("".join(f"{t}\t{c}\n" for t, c in counts.most_common()),
                                               encoding="utf-8")
        (out / f"bpe.codes.{lang}").write_text("#version: 0.2\n", encoding="utf-8")
    meta = {"version": 1, "src": "zh", "tgt": "en", "lowercase": True, "bpe": {"merges": 0, "joint": False},
            "splits": {"train": {"sentences": len(train[0])}, "dev": {"sentences": len(dev[0])}}}
    (out / "meta.json").write_text(json.dumps(meta), encoding="utf-8")
    return out


@pytest.fixture
def reversal_prepared(tmp_path: Path) -> Path:
    pairs = reversal_pairs(20)
    return write_prepared(tmp_path / "prep", pairs, pairs)
