"""A sentence-boundary model for text without punctuation (issue 75, ``translate --segment model``).

Subtitle text runs sentences on without punctuation (79% of TVsub test lines end without any), so
a paragraph glued from such lines has boundaries the rules of ``sentences.py`` cannot see. The
corpus itself says where they are: every line of a TVsub training episode ends one. A logistic
regression over hashed n-gram features of the words around a candidate position (a word
boundary, after ``data.text.segment_zh`` — the words the model reads, BPE units merged) gives
P(a sentence ends here); a run of at least ``min_run`` words is cut wherever that probability
reaches the model's ``threshold``, each piece keeping at least ``min_words`` words. Shorter runs
are left whole: most TVsub lines hold one or two utterances (joined by a space, which the
tokenizer drops) that the translation models were trained to translate as one line, so only a
run longer than nearly every training line (``min_run``) is taken for several.

Features of the boundary before word k of ``ws`` (``features``): the two words on each side, the
pair across it, the last one and two characters before it and the first one and two after it,
the two three-character windows across it, and the number of words before and after it in the
run (in buckets). They are hashed (CRC-32) into ``2**bits`` weights, so the file holds weights,
not text. Trained by ``benchmarks/sentence_boundaries.py`` on TVsub training episodes (dev and test
never), its card ``doctrans/shipped/tvsub-boundaries.md`` gives its data and its precision and
recall on glued dev lines.
"""
from __future__ import annotations

import bisect
import zlib
from dataclasses import dataclass
from pathlib import Path

import numpy as np

SHIPPED = "tvsub-boundaries.npz"          # in doctrans/shipped/
BUCKETS = (1, 2, 3, 4, 6, 9, 14, 20)      # words before / after a candidate, bucketed (the last: ≥ 20)


def shipped_model() -> Path:
    """The shipped model's file (``doctrans/shipped/tvsub-boundaries.npz``)."""
    return Path(__file__).resolve().parents[1] / "shipped" / SHIPPED


def _bucket(n: int) -> int:
    return next((b for b in reversed(BUCKETS) if n >= b), 0)


def features(ws: list[str], k: int) -> list[str]:
    """The features of a boundary before word ``k`` (1 ≤ k < len(ws)) of the words ``ws`` (module doc)."""
    left, right = ws[k - 1], ws[k]
    l2 = ws[k - 2] if k >= 2 else "<s>"
    r2 = ws[k + 1] if k + 1 < len(ws) else "</s>"
    lc = (l2 + left)[-2:] if k >= 2 else left[-2:]
    rc = (right + r2)[:2] if k + 1 < len(ws) else right[:2]
    return ["b", f"L1={left}", f"R1={right}", f"L2={l2}", f"R2={r2}", f"LR={left}|{right}",
            f"l1={left[-1]}", f"l2={lc}", f"r1={right[0]}", f"r2={rc}", f"c3={lc}|{right[0]}",
            f"c3'={left[-1]}|{rc}", f"nl={_bucket(k)}", f"nr={_bucket(len(ws) - k)}",
            f"nlr={_bucket(k)}|{_bucket(len(ws) - k)}", f"L1nr={left}|{_bucket(len(ws) - k)}",
            f"R1nl={right}|{_bucket(k)}"]


def hashed(feats: list[str], bits: int) -> np.ndarray:
    """Feature strings → their indices into ``2**bits`` weights (CRC-32 of the UTF-8 text)."""
    mask = (1 << bits) - 1
    return np.fromiter((zlib.crc32(f.encode("utf-8")) & mask for f in feats), dtype=np.int64, count=len(feats))


@dataclass(frozen=True)
class BoundaryModel:
    """Weights (``2**bits``,) float32 and a bias of a logistic regression over hashed
    ``features``; ``threshold``: P at which a run is cut; ``min_words``: words each piece keeps;
    ``min_run``: the fewest words a run must have to be cut at all."""

    weights: np.ndarray
    bias: float
    threshold: float = 0.5
    min_words: int = 1
    min_run: int = 2

    @property
    def bits(self) -> int:
        return int(self.weights.size).bit_length() - 1

    @classmethod
    def load(cls, path: str | Path) -> "BoundaryModel":
        """A model written by ``save`` (``.npz``). Raises FileNotFoundError, ValueError naming the
        file for one that is not such a model."""
        path = Path(path)
        if not path.is_file():
            raise FileNotFoundError(f"sentence-boundary model not found: {path}")
        try:
            with np.load(path, allow_pickle=False) as z:
                w, meta = z["weights"].astype(np.float32), z["meta"].astype(np.float64)
        except (OSError, KeyError, ValueError) as e:
            raise ValueError(f"{path}: not a sentence-boundary model ({e})") from None
        if w.ndim != 1 or w.size & (w.size - 1) or meta.shape != (4,):
            raise ValueError(f"{path}: not a sentence-boundary model (weights {w.shape}, meta {meta.shape})")
        return cls(w, float(meta[0]), float(meta[1]), int(meta[2]), int(meta[3]))

    def save(self, path: str | Path) -> None:
        """Write the model as ``.npz`` (weights in float16, compressed)."""
        np.savez_compressed(path, weights=self.weights.astype(np.float16),
                            meta=np.array([self.bias, self.threshold, self.min_words, self.min_run], dtype=np.float64))

    def probabilities(self, ws: list[str]) -> np.ndarray:
        """P(a sentence ends before word k) for k = 1 … len(ws) − 1, shape (len(ws) − 1,)."""
        if len(ws) < 2:
            return np.zeros(0, dtype=np.float64)
        z = np.array([self.weights[hashed(features(ws, k), self.bits)].sum() for k in range(1, len(ws))])
        return 1.0 / (1.0 + np.exp(-(z + self.bias)))

    def cuts(self, ws: list[str]) -> list[int]:
        """Word indices k (ascending) before which ``ws`` is cut: none for fewer than ``min_run``
        words, else the most probable candidates first, each kept when its P reaches
        ``threshold`` and every piece keeps ``min_words``."""
        if len(ws) < max(2, self.min_run):
            return []
        p = self.probabilities(ws)
        bounds = [0, len(ws)]                       # sorted: the run's ends and the cuts so far
        for k in (np.argsort(-p, kind="stable") + 1).tolist():
            if p[k - 1] < self.threshold:
                break
            at = bisect.bisect(bounds, k)
            if k - bounds[at - 1] >= self.min_words and bounds[at] - k >= self.min_words:
                bounds.insert(at, k)
        return bounds[1:-1]
