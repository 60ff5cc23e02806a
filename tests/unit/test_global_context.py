"""HGC (docs/models.md §2.7): the global context on hand-sized examples, the reduction to the
sentence encoder + gate, sub-document isolation, and sub-document batches."""
from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from conftest import REPO, added_parameters
from doctrans.config import load_experiment
from doctrans.data.documents import DocData, collate_doc, make_block_batches, make_doc_batches
from doctrans.models.build import build_model
from doctrans.models.context.global_context import HGC, SubDocuments, global_context


class _Batch:
    def __init__(self, src, block=None):
        self.src, self.block = src, block


def _softmax(x):
    e = np.exp(x - x.max())
    return e / e.sum()


def test_hadamard_combine_equals_a_hand_computation():
    """Two sentences (2 and 1 words) in one sub-document, H = 2, sentence vectors given."""
    s = torch.tensor([[[1.0, 0.0], [0.0, 2.0]], [[1.0, 1.0], [0.0, 0.0]]])     # (B=2, S=2, H=2); row 1 pads at 1
    pad = torch.tensor([[False, False], [False, True]])
    v = torch.tensor([[0.5, 1.0], [1.0, 1.0]])
    docs = SubDocuments.of(pad, torch.tensor([7, 7]))
    words = [np.array([1.0, 0.0]), np.array([0.0, 2.0]), np.array([1.0, 1.0])]  # sentence 0, 0, 1
    sent_of = [0, 0, 1]
    sv = [v[0].numpy(), v[1].numpy()]
    expect = []
    for q in words:
        z = _softmax(np.array([q @ k for k in words]) / math.sqrt(2))
        u = _softmax(np.array([q @ x for x in sv]) / math.sqrt(2))
        w = z * u[sent_of]                                                     # Q = U ⊙ Z, not renormalised
        expect.append(sum(wi * k for wi, k in zip(w, words)))
    c = global_context(s, v, docs)
    np.testing.assert_allclose(c[0, 0].numpy(), expect[0], rtol=1e-5)
    np.testing.assert_allclose(c[0, 1].numpy(), expect[1], rtol=1e-5)
    np.testing.assert_allclose(c[1, 0].numpy(), expect[2], rtol=1e-5)
    assert c[1, 1].abs().sum() == 0                                             # padding stays zero
    word_level = global_context(s, v, docs, hierarchical=False)                 # Q = Z
    z = _softmax(np.array([words[2] @ k for k in words]) / math.sqrt(2))
    np.testing.assert_allclose(word_level[1, 0].numpy(), sum(zi * k for zi, k in zip(z, words)), rtol=1e-5)
    renorm = global_context(s, v, docs, renormalise=True)
    q = words[0]
    w = _softmax(np.array([q @ k for k in words]) / math.sqrt(2)) * _softmax(np.array([q @ x for x in sv]) / math.sqrt(2))[sent_of]
    np.testing.assert_allclose(renorm[0, 0].numpy(), sum(wi / w.sum() * k for wi, k in zip(w, words)), rtol=1e-5)
    chunked = global_context(s, v, docs, query_chunk=1)
    torch.testing.assert_close(chunked, c)


def _tiny_hgc(*overrides):
    cfg = load_experiment(REPO / "pipelines" / "transformer" / "tiny.yaml",
                          ["context={type: hgc, block: 4, gate_bias: 0.5}", *overrides])
    torch.manual_seed(0)
    return build_model(cfg.model, 30, 25, 0, cfg.context).eval()


def _src(rows: int = 5, width: int = 7, seed: int = 1) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    src = torch.randint(4, 30, (rows, width), generator=g)
    lengths = torch.randint(2, width + 1, (rows,), generator=g)
    for r, n in enumerate(lengths.tolist()):
        src[r, n - 1], src[r, n:] = 2, 0
    return src


@pytest.mark.parametrize("hierarchical", [True, False])
def test_one_sentence_sub_documents_reduce_to_the_sentence_encoder_and_gate(hierarchical):
    """No ``block``: each row is its own sub-document, so C is attention over the sentence's own
    normalised states (U = 1 with one sentence) and each layer's output is the gate of eq. 10."""
    m = _tiny_hgc(f"context.hierarchical={str(hierarchical).lower()}")
    src = _src()
    got = m.encode(_Batch(src)).states
    bb = m.backbone
    pad = src.eq(0)
    keep = (~pad)[:, None, None, :]
    x = bb.embed_source(src)
    for k, layer in enumerate(bb.encoder):
        s = layer.attention_sublayer(x, keep)
        h = layer.ffn_sublayer(s)
        sn = layer.ffn_input(s)
        scores = (sn @ sn.transpose(1, 2) / math.sqrt(sn.size(-1))).masked_fill(pad[:, None, :], float("-inf"))
        c = torch.softmax(scores, -1) @ sn * (~pad)[..., None]
        lam = torch.sigmoid(m.global_layers[k].gate(torch.cat([h, c], -1)))
        x = lam * h + (1 - lam) * c
    want = bb.enc_norm(x)
    real = ~pad
    torch.testing.assert_close(got[real], want[real], rtol=1e-4, atol=1e-5)


def test_sub_documents_see_each_other_and_nothing_else():
    m = _tiny_hgc()
    src = _src(6)
    block = torch.tensor([3, 3, 3, 9, 9, 1])
    both = m.encode(_Batch(src, block)).states
    first = m.encode(_Batch(src[:3], torch.zeros(3, dtype=torch.long))).states
    torch.testing.assert_close(both[:3], first, rtol=1e-4, atol=1e-5)       # other sub-documents: no effect
    alone = m.encode(_Batch(src[:1])).states
    assert (both[0] - alone[0]).abs().max() > 1e-3                          # its sub-document: an effect
    perm = torch.tensor([5, 3, 0, 4, 2, 1])                                  # row order inside a batch: no effect
    shuffled = m.encode(_Batch(src[perm], block[perm])).states
    torch.testing.assert_close(shuffled, both[perm], rtol=1e-4, atol=1e-5)
    wider = torch.nn.functional.pad(src, (0, 3))                             # extra padding: no effect
    torch.testing.assert_close(m.encode(_Batch(wider, block)).states[:, :7], both, rtol=1e-4, atol=1e-5)


def test_layers_last_adds_one_block_and_parameters_match_the_formula():
    h = 32
    m_all, m_last = _tiny_hgc(), _tiny_hgc("context.layers=last")
    assert added_parameters(m_all) == 2 * (3 * h * h + 3 * h)                 # W_1 + b, w_2, W^G + b per layer
    assert added_parameters(m_last) == 3 * h * h + 3 * h
    assert isinstance(m_all, HGC) and m_all.context_block == 4 and m_all.context_sents == 0


def _doc_data(lengths=(5, 9, 2), target_every=1) -> DocData:
    src, tgt, doc, pos = [], [], [], []
    rng = np.random.default_rng(0)
    for d, n in enumerate(lengths):
        for p in range(n):
            src.append(rng.integers(4, 20, rng.integers(2, 6)).astype(np.int64))
            tgt.append(rng.integers(4, 20, rng.integers(2, 6)).astype(np.int64))
            doc.append(d)
            pos.append(p)
    doc, pos = np.asarray(doc), np.asarray(pos)
    is_target = (np.arange(len(src)) % target_every) == 0
    start = np.searchsorted(doc, np.arange(len(lengths) + 1))
    return DocData(src, tgt, doc, pos, is_target, [f"d{i}" for i in range(len(lengths))], start)


def test_block_batches_hold_whole_sub_documents_and_every_target_once():
    data = _doc_data(target_every=2)
    for budget in ("tokens", "padded"):
        batches = make_block_batches(data, 40, 4, seed=3, epoch=1, budget=budget)
        assert _rows(batches) == _rows(make_doc_batches(data, 40, 0, 3, 1, budget=budget, block=4))
        seen = np.concatenate([b.rows for b in batches])
        dropped = [13]                                                         # doc 1, pos 8: a sub-document without target
        assert sorted(seen.tolist()) == [r for r in range(len(data)) if r not in dropped]
        targets = np.concatenate([b.rows[b.is_target] for b in batches])
        assert sorted(targets.tolist()) == np.flatnonzero(data.is_target).tolist()
        for spec in batches:
            keys = {(int(data.doc[r]), int(data.pos[r]) // 4) for r in spec.rows}
            for d, k in keys:                                                  # whole sub-documents only
                unit = [r for r in range(len(data)) if data.doc[r] == d and data.pos[r] // 4 == k]
                assert set(unit) <= set(spec.rows.tolist())
            batch = collate_doc(data, spec, _Vocab())
            ids = batch.block.tolist()
            for r, i in zip(spec.rows, ids):
                same = [spec.rows[j] for j, x in enumerate(ids) if x == i]
                assert {(int(data.doc[x]), int(data.pos[x]) // 4) for x in same} == {(int(data.doc[r]), int(data.pos[r]) // 4)}
    assert _rows(make_block_batches(data, 40, 4, 3, 1)) == _rows(make_block_batches(data, 40, 4, 3, 1))
    assert _rows(make_block_batches(data, 40, 4, 3, 1)) != _rows(make_block_batches(data, 40, 4, 3, 2))


def _rows(batches) -> list[list[int]]:
    return [b.rows.tolist() for b in batches]


class _Vocab:
    pad_id, bos_id = 0, 1


def test_forced_scoring_reads_the_sub_document():
    """CXMI's scoring path (``evaluation.forced``) gives a sub-document model each item's whole
    sub-document: the same log-probabilities as encoding the sub-document in one batch."""
    from doctrans.evaluation.forced import Item, model_context, score_items, sub_document
    from doctrans.training.loss import target_logits

    doc = np.array([0, 0, 0, 0, 0, 1, 1])
    assert sub_document(doc, 1, 4) == (0, 2, 3) and sub_document(doc, 4, 4) == () and sub_document(doc, 6, 4) == (5,)
    m = _tiny_hgc()                                   # block 4
    src = [_src(7, seed=3)[r][_src(7, seed=3)[r].ne(0)].numpy() for r in range(7)]
    tgt = [np.asarray([5 + r, 6, 2]) for r in range(7)]
    items = [Item(i, tgt[i], model_context(m, doc, i)) for i in range(7)]
    real, alone = score_items(m, items, src, tgt, blank=(False, True))
    spec_rows = [0, 1, 2, 3]                          # the first sub-document, encoded together
    from doctrans.data.batching import pad_sequences
    from doctrans.data.documents import DocBatch
    batch = DocBatch(src=pad_sequences([src[r] for r in spec_rows], 0),
                     tgt_in=pad_sequences([tgt[r] for r in spec_rows], 0, prefix=1, drop_last=True),
                     tgt_out=pad_sequences([tgt[r] for r in spec_rows], 0), index=np.arange(4), n_targets=12,
                     is_target=torch.ones(4, dtype=torch.bool), ctx=torch.zeros((4, 0), dtype=torch.long),
                     block=torch.zeros(4, dtype=torch.long))
    with torch.no_grad():
        for rows, logits, gold, keep in target_logits(m, m.encode(batch), batch, 0):
            lp = torch.log_softmax(logits, -1).gather(1, gold[:, None]).squeeze(1)
            for r, piece in zip(rows.tolist(), lp.split(keep.sum(1).tolist())):
                np.testing.assert_allclose(real[r], piece.double().numpy(), rtol=1e-4, atol=1e-5)
    assert max(abs(real[i] - alone[i]).max() for i in range(4)) > 1e-4      # the context changes scores
    np.testing.assert_allclose(real[4], alone[4], rtol=1e-5)                # a one-line sub-document: no context
