"""Dropped-pronoun translation recall: of the pronouns the Chinese source drops (the hand
annotation ``*.oracle-dp.seg.zh`` of TVsub), how many does a translation realise in English?

Counted per line and pronoun class (``evaluation.contrastive``: Table 4.2 rows, 2SG and 2PL
merged), with Chinese pronoun roots found inside tokens (``dp.pronouns.chinese_roots``):

* dropped_c = roots of class c in the oracle line − roots in the source line (≥ 0);
* in_reference_c = min(dropped_c, English pronouns of class c in the reference − overt_c),
  floored at 0: the reference pronouns of the class beyond those the source states overtly,
  at most as many as were dropped — the reference's realisations of the DPs;
* realised_c = min(in_reference_c, the same count in the hypothesis).

recall = Σ realised / Σ in_reference, overall and by class. A translation that drops pronouns
scores low whatever its BLEU; one that adds pronouns everywhere is capped by the reference
count (its over-production shows in the pronoun counts next to it). [I: counting per class
instead of aligning the oracle-completed source to the reference (eflomal) keeps the metric
exact on a line with one pronoun per class, the common case in subtitles, and needs no
aligner; a line with the same class twice is matched by count, not position.]

``dp_recall_bootstrap`` compares two translations of the same source: a paired bootstrap over
lines (Koehn 2004's resampling, as the BLEU test) of the recall difference, with its 95% interval.
"""
from __future__ import annotations

from collections import Counter
from typing import Sequence

import numpy as np

from doctrans.dp.pronouns import ENGLISH_PRONOUNS
from doctrans.evaluation.contrastive import english_class, root_counts


def english_counts(line: str) -> Counter:
    """Class → English central pronouns in a tokenized, lower-cased line."""
    return Counter(english_class(t) for t in line.split() if t in ENGLISH_PRONOUNS)


def _line_dps(h: str, r: str, b: str, o: str):
    """One line's dropped pronouns per class: yields (class, dropped, in_reference, realised) for
    every class the oracle line ``o`` drops relative to the source line ``b`` (module doc)."""
    overt, full = root_counts(b), root_counts(o)
    eh, er = english_counts(h), english_counts(r)
    for c in full:
        dropped = max(0, full[c] - overt[c])
        if dropped:
            in_ref = max(0, min(dropped, er[c] - overt[c]))
            yield c, dropped, in_ref, max(0, min(in_ref, eh[c] - overt[c]))


def dp_recall(hyps: Sequence[str], refs: Sequence[str], base: Sequence[str], oracle: Sequence[str]) -> dict:
    """hyps / refs: tokenized lower-cased lines; base / oracle: the segmented source without /
    with the hand-inserted DPs (same line count) → {dps, in_reference, realised, recall,
    by_class: {class: {dps, in_reference, realised, recall}}}. Raises ValueError on line
    counts that differ."""
    if not len(hyps) == len(refs) == len(base) == len(oracle):
        raise ValueError(f"dp recall: {len(hyps)} hypothesis, {len(refs)} reference, {len(base)} source and "
                         f"{len(oracle)} oracle lines")
    tot: dict[str, Counter] = {}
    for h, r, b, o in zip(hyps, refs, base, oracle):
        for c, dropped, in_ref, got in _line_dps(h, r, b, o):
            t = tot.setdefault(c, Counter())
            t["dps"] += dropped
            t["in_reference"] += in_ref
            t["realised"] += got

    def entry(t: Counter) -> dict:
        return {"dps": t["dps"], "in_reference": t["in_reference"], "realised": t["realised"],
                "recall": t["realised"] / t["in_reference"] if t["in_reference"] else float("nan")}

    return {**entry(sum(tot.values(), Counter())), "by_class": {c: entry(t) for c, t in sorted(tot.items())}}


def _line_counts(hyps: Sequence[str], refs: Sequence[str], base: Sequence[str],
                 oracle: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
    """Per line: (DPs the reference realises, of them the ones the hypothesis realises), summed
    over classes as in ``dp_recall``."""
    counts = [[(n, g) for _, _, n, g in _line_dps(*line)] for line in zip(hyps, refs, base, oracle)]
    return (np.array([sum(n for n, _ in x) for x in counts], dtype=np.int64),
            np.array([sum(g for _, g in x) for x in counts], dtype=np.int64))


def dp_recall_bootstrap(hyps: Sequence[str], baseline: Sequence[str], refs: Sequence[str], base: Sequence[str],
                        oracle: Sequence[str], samples: int = 1000, seed: int = 12345) -> dict:
    """Paired bootstrap of DP recall(hyps) − DP recall(baseline): test lines resampled with
    replacement, both systems on the same sample (Koehn 2004, "Statistical significance tests for
    machine translation evaluation", as sacreBLEU's paired test for BLEU). Inputs as ``dp_recall``,
    plus the baseline's translation → {delta: the observed difference (recall
    points as a fraction), ci95: [low, high] of the resampled differences (percentiles),
    p_value: (1 + resamples whose difference does not keep the observed sign) / (1 + samples),
    samples}. A resample without any reference-realised DP counts as a difference of 0. Raises
    ValueError on line counts that differ or ``samples`` < 1."""
    if not len(hyps) == len(baseline) == len(refs) == len(base) == len(oracle):
        raise ValueError(f"dp recall bootstrap: {len(hyps)} hypothesis, {len(baseline)} baseline, {len(refs)} "
                         f"reference, {len(base)} source and {len(oracle)} oracle lines")
    if samples < 1:
        raise ValueError(f"dp recall bootstrap: samples must be ≥ 1, got {samples}")
    in_ref, got_h = _line_counts(hyps, refs, base, oracle)
    _, got_b = _line_counts(baseline, refs, base, oracle)
    total = in_ref.sum()
    delta = float((got_h.sum() - got_b.sum()) / total) if total else 0.0
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, len(hyps), size=(samples, len(hyps)))
    n = in_ref[idx].sum(axis=1)
    d = np.where(n > 0, (got_h[idx].sum(axis=1) - got_b[idx].sum(axis=1)) / np.maximum(n, 1), 0.0)
    worse = int((d <= 0).sum()) if delta > 0 else int((d >= 0).sum())
    lo, hi = np.percentile(d, [2.5, 97.5])
    return {"delta": delta, "ci95": [float(lo), float(hi)], "p_value": (1 + worse) / (1 + samples),
            "samples": samples}
