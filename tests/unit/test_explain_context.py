"""Context-attention pictures (evaluation/explain_context.py, issue 17) on a tiny HAN joint model:
the recorded weights are distributions over the right context, the pictures are written, and
recording changes nothing."""
from __future__ import annotations

import numpy as np
import pytest

from doctrans.evaluation.forced import Item, previous_lines, score_items
from doctrans.evaluation.explain_context import context_weights, explain_lines

from test_context_models import VOCAB, model

DOC = np.array([0, 0, 0, 1])
SRC = [np.array([4, 5, 2]), np.array([6, 7, 8, 2]), np.array([9, 2]), np.array([10, 11, 2])]
HYP = [np.array([12, 13, 2]), np.array([14, 2]), np.array([15, 16, 17, 2]), np.array([18, 2])]


@pytest.mark.parametrize("name", ["han_joint", "han_decoder", "han_encoder"])
def test_weights_are_distributions_over_the_existing_context(name):
    m = model(name)
    n = m.context_sents                                 # 2 in the tiny variants
    out = context_weights(m, SRC, HYP, DOC, 2)          # line 2: context lines 0 and 1
    assert [e["block"] for e in out] == [b for b, _, _ in m.explain_blocks()]
    for e in out:
        t = len(SRC[2]) if e["side"] == "source" else len(HYP[2])
        assert e["sentence"].shape == (t, n) and e["context"] == [0, 1]
        assert np.allclose(e["sentence"].sum(1), 1.0, atol=1e-5)
        assert np.allclose(e["word"].sum(2), 1.0, atol=1e-5)               # (N, T): each slot's words
        ctx_len = [len(SRC[c]) if e["side"] == "source" else len(HYP[c]) for c in (0, 1)]
        for j, length in enumerate(ctx_len):                               # no weight past the sentence
            assert np.allclose(e["word"][j, :, length:], 0.0)
    first = context_weights(m, SRC, HYP, DOC, 1)        # line 1: one context sentence (m−2 missing)
    for e in first:
        assert np.allclose(e["sentence"][:, 0], 0.0) and np.allclose(e["sentence"][:, 1], 1.0)
    assert all(b.recorder is None for _, b, _ in m.explain_blocks())


def test_recording_changes_no_score():
    m = model("han_joint")
    items = [Item(2, HYP[2], previous_lines(DOC, 2, m.context_sents))]
    before, = score_items(m, items, SRC, HYP)
    context_weights(m, SRC, HYP, DOC, 2)
    after, = score_items(m, items, SRC, HYP)
    assert np.array_equal(before[0], after[0])


def test_pictures_are_written(tmp_path):
    paths = explain_lines(model("han_joint"), SRC, HYP, DOC, VOCAB, VOCAB, 5, tmp_path)
    assert sorted(p.name for p in paths) == ["line2.han_decoder.png", "line2.han_encoder.png",
                                             "line3.han_decoder.png", "line3.han_encoder.png"]
    assert all(p.stat().st_size > 1000 for p in paths) and (tmp_path / "weights.json").is_file()
    assert explain_lines(model("concat"), SRC, HYP, DOC, VOCAB, VOCAB, 5, tmp_path / "none") == []
