"""``ct2.prefix_free_best``: CTranslate2's finished hypotheses for a forced target prefix,
re-ranked by native's length normalisation (the prefix not counted)."""
from __future__ import annotations

import pytest

from doctrans.inference.ct2 import prefix_free_best


def test_reranks_by_native_normalisation():
    # CTranslate2 4.x's scores on the TVsub test, line 13 (prefix of 15 tokens, lenpen 1): the
    # sums of log-probabilities -9.037 (8 tokens) and -9.900 (9 tokens) divided by 15 + n + 1
    prefix = ["p"] * 15
    short, longer = prefix + ["w"] * 8, prefix + ["w"] * 9
    scores = [-9.037 / 24, -9.900 / 25]                       # CTranslate2 prefers the shorter
    assert prefix_free_best([short, longer], scores, 15, 1.0) is longer   # -9.900/10 > -9.037/9


def test_without_prefix_or_length_penalty_keeps_ctranslate2s_order():
    hyps = [["a"], ["a", "b", "c"]]
    assert prefix_free_best(hyps, [-1.0, -0.9], 0, 1.0) is hyps[0]
    assert prefix_free_best(hyps, [-1.0, -0.9], 2, 0.0) is hyps[0]


@pytest.mark.parametrize("lenpen", [0.6, 1.0, 2.0])
def test_ranking_equals_native_scores(lenpen):
    raw = {4: -3.0, 6: -4.1, 9: -6.5}                        # n tokens after the prefix → log p
    p = 7
    hyps = [["p"] * p + ["w"] * n for n in raw]
    ct2 = [raw[n] / (p + n + 1) ** lenpen for n in raw]
    native = {n: raw[n] / (n + 1) ** lenpen for n in raw}
    best = max(native, key=native.get)
    assert len(prefix_free_best(hyps, ct2, p, lenpen)) == p + best
