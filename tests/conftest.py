"""Shared fixtures: a hand-made prepared dataset (no BPE merges) and the TVsub location."""
from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

REPO = Path(__file__).resolve().parents[1]
TVSUB = (REPO / ".." / "shared" / "corpora" / "tvsub").resolve()


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
