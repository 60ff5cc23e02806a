"""Teacher-forced scoring and CXMI (evaluation/cxmi.py, issue 17) on hand-made documents: the
scores are the loss's log-likelihood, empty context = no ctx pointers, contexts never cross or
stay inside a document as asked, word-level P-CXMI sums BPE units."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from doctrans.data.documents import DocData, DocBatchSpec, collate_doc
from doctrans.evaluation.cxmi import compute_cxmi, cxmi_report, word_pcxmi
from doctrans.data.documents import document_numbers
from doctrans.evaluation.forced import Item, previous_lines, random_context, score_items
from doctrans.training.loss import forward_loss

from test_context_models import VARIANTS, model

DOC = np.array([0, 0, 0, 1, 1, 2, 2, 2, 2])


def _data(seed: int = 0):
    rng = np.random.default_rng(seed)
    src = [np.r_[rng.integers(4, 20, rng.integers(1, 5)), 2] for _ in DOC]
    tgt = [np.r_[rng.integers(4, 20, rng.integers(1, 6)), 2] for _ in DOC]
    return src, tgt


def test_previous_lines_stay_in_the_document():
    assert previous_lines(DOC, 0, 2) == (-1, -1)
    assert previous_lines(DOC, 2, 2) == (0, 1)
    assert previous_lines(DOC, 3, 2) == (-1, -1)           # document 1 starts: nothing from document 0
    assert previous_lines(DOC, 4, 3) == (-1, -1, 3)


def test_random_context_comes_from_another_document():
    rng = np.random.default_rng(0)
    for line in range(len(DOC)):
        for _ in range(20):
            ctx = random_context(DOC, line, 2, rng)
            real = [c for c in ctx if c >= 0]
            assert real and all(DOC[c] != DOC[line] for c in real)
            assert len({DOC[c] for c in real}) == 1 and real == list(range(real[0], real[0] + len(real)))
    with pytest.raises(ValueError, match="two documents"):
        random_context(np.zeros(3, dtype=np.int64), 1, 1, rng)


def test_document_numbers_reject_a_split_document():
    assert document_numbers(["a", "a", "b"]).tolist() == [0, 0, 1]
    with pytest.raises(ValueError, match="x.docs:3: document a reappears"):
        document_numbers(["a", "b", "a"], "x.docs")


def test_word_pcxmi_sums_bpe_units():
    assert word_pcxmi(["he@@", "llo", "you", "."], np.array([0.5, 0.25, 1.0, 0.0, 9.0])) == [
        ("hello", 0.75), ("you", 1.0), (".", 0.0)]


@pytest.mark.parametrize("name", ["sentence", "han_encoder", "han_decoder", "concat"])
def test_scores_are_the_loss_log_likelihood(name):
    """Σ log q over every target token = −(the loss's NLL) of the same document batch."""
    m = model(name) if name != "sentence" else model("han_encoder").backbone
    n = VARIANTS["han_encoder"]["context_sents"] if name == "sentence" else m.context_sents
    src, tgt = _data()
    items = [Item(i, tgt[i], previous_lines(DOC, i, n)) for i in range(len(DOC))]
    real, empty = score_items(m, items, src, tgt, blank=(False, True), max_tokens=20)
    assert [len(x) for x in real] == [len(t) for t in tgt] and all((x <= 0).all() for x in real)
    data = DocData(src, tgt, DOC, np.array([0, 1, 2, 0, 1, 0, 1, 2, 3]), np.ones(len(DOC), bool), ["a", "b", "c"],
                   np.array([0, 3, 5, 9]))
    batch = collate_doc(data, DocBatchSpec(np.arange(len(DOC)), np.ones(len(DOC), bool), n), _Vocab())
    with torch.no_grad():
        nll = forward_loss(m.eval(), batch, 0, 0.0).terms["nll_nats"]
    assert -sum(x.sum() for x in real) == pytest.approx(nll, rel=1e-5)
    if name == "sentence":                      # ctx ignored: bitwise the same scores
        assert all((a == b).all() for a, b in zip(real, empty))
    else:                                       # the context is read: the scores move
        assert max(abs(a - b).max() for a, b in zip(real, empty)) > 1e-4


class _Vocab:
    pad_id, bos_id = 0, 1


def test_cxmi_report_by_hand():
    real = [np.array([-1.0, -0.5]), np.array([-2.0, -1.0, -0.1])]
    other = [np.array([-2.0, -0.5]), np.array([-2.0, -1.5, -0.1])]
    r = cxmi_report(real, other, ["you", "it@@ em ."], "empty")
    assert r["cxmi"] == pytest.approx((1.0 + 0.5) / 2)            # eq. 3: mean over sentences
    assert r["cxmi_per_token"] == pytest.approx(1.5 / 5)
    assert r["by_class"]["pronoun"] == {"words": 1, "mean_pcxmi": 1.0, "share_positive": 1.0}
    assert r["by_class"]["other"]["mean_pcxmi"] == pytest.approx(0.5)     # "item" = 0 + 0.5
    assert r["by_class"]["punctuation"]["words"] == 1
    with pytest.raises(ValueError):
        cxmi_report(real, other[:1], ["a", "b"])


def test_compute_cxmi_rejects_bad_input():
    src, tgt = _data()
    m = model("concat")
    with pytest.raises(ValueError, match="unknown CXMI condition"):
        compute_cxmi(m, src, tgt, DOC, ["x"] * len(DOC), conditions=("none",))
    with pytest.raises(ValueError, match="reference lines"):
        compute_cxmi(m, src, tgt, DOC, ["x"], conditions=("empty",))
