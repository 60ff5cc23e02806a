"""Jean & Cho 2019's context ranking loss (training/loss.py: context_margin_loss; the random
context of data/context_usage.py: random_context): the swap, the hinge against a hand
computation at both levels for every per-sentence context model, the detached variant's
gradient, the bad configurations, and a few updates that widen the real-vs-random gap."""
from __future__ import annotations

import pytest
import torch

from doctrans.data.context_usage import random_context
from doctrans.data.documents import DocBatch
from doctrans.training.loss import context_margin_loss, forward_loss

from test_context_models import N, VARIANTS, model
from test_context_usage import _doc_batch, _real_batch

PER_SENTENCE = sorted(n for n in VARIANTS if model(n).document.context_block == 0)   # not HGC


def _sentence_logprobs(m, b) -> torch.Tensor:
    """(B,) log p(y | x, C) of every row, summed over its target tokens, straight from decode_train."""
    lp = torch.log_softmax(m.decode_train(m.encode(b), b.tgt_in).float(), -1)
    tok = lp.gather(2, b.tgt_out[..., None]).squeeze(2)
    return (tok * b.tgt_out.ne(0)).sum(1)


def _token_logprobs(m, b) -> torch.Tensor:
    lp = torch.log_softmax(m.decode_train(m.encode(b), b.tgt_in).float(), -1)
    return lp.gather(2, b.tgt_out[..., None]).squeeze(2)                  # (B, T)


def test_random_context_gives_each_row_another_rows_context():
    b = _doc_batch(rows=9)                            # row r reads row r − 1; row 0 context-only
    ctx_before = b.ctx.clone()
    out, rows = random_context(b)
    assert rows.tolist() == list(range(1, 9))         # every target row has context
    assert out.ctx[1:].squeeze(1).tolist() == [4, 5, 6, 7, 0, 1, 2, 3]     # half a batch away
    assert torch.equal(out.ctx[0], b.ctx[0]) and torch.equal(b.ctx, ctx_before)    # batch untouched
    assert out.src is b.src and out.tgt_out is b.tgt_out
    assert (out.ctx[1:].squeeze(1) != b.ctx[1:].squeeze(1)).all()
    again, _ = random_context(b)
    assert torch.equal(again.ctx, out.ctx)            # deterministic


def test_random_context_leaves_rows_without_context_and_refuses_sub_documents():
    b = _doc_batch(rows=5)
    ctx = b.ctx.clone()
    ctx[2] = -1                                       # a document start
    b = DocBatch(b.src, b.tgt_in, b.tgt_out, b.index, b.n_targets, b.is_target, ctx)
    out, rows = random_context(b)
    assert rows.tolist() == [1, 3, 4] and out.ctx[2].item() == -1
    assert out.is_target.nonzero().squeeze(1).tolist() == [1, 3, 4]    # row 2 is not decoded twice
    assert b.is_target[2]                                               # the real batch keeps its target
    assert out.ctx[[1, 3, 4]].squeeze(1).tolist() == [2, 3, 0]
    lone = DocBatch(b.src[:2], b.tgt_in[:2], b.tgt_out[:2], b.index[:2], 6, b.is_target[:2], b.ctx[:2])
    assert random_context(lone)[1].numel() == 0       # one row with context: nothing to swap with
    blocks = DocBatch(b.src, b.tgt_in, b.tgt_out, b.index, b.n_targets, b.is_target, b.ctx, torch.zeros(5).long())
    with pytest.raises(ValueError, match="sub-document"):
        random_context(blocks)


@pytest.mark.parametrize("level", ["sentence", "token"])
@pytest.mark.parametrize("name", PER_SENTENCE)
def test_margin_loss_equals_the_hinge_computed_by_hand(name, level):
    m, b = model(name), _real_batch(name)
    swapped, rows = random_context(b)
    assert rows.numel() == 2                          # rows 1 and 2 read context; row 3 is a lone document
    delta = 0.7
    with torch.no_grad():
        real = forward_loss(m, b, 0, 0.1, token_logprobs=True)
        got, pairs = context_margin_loss(m, b, real, 0, delta, level)
        if level == "sentence":
            gap = (_sentence_logprobs(m, b) - _sentence_logprobs(m, swapped))[rows]
        else:
            keep = b.tgt_out[rows].ne(0)
            gap = (_token_logprobs(m, b) - _token_logprobs(m, swapped))[rows][keep]
    want = torch.clamp(delta - gap, min=0).sum()
    assert pairs == gap.numel()
    assert torch.allclose(got, want, atol=1e-4), (float(got), float(want))
    if VARIANTS[name].get("query_guided", True):      # QCN's regularisation-only row reads no context
        assert gap.abs().max() > 1e-6                  # the swapped context changed the likelihoods


def test_detached_random_branch_only_raises_the_real_likelihood():
    m, b = model("han_encoder"), _real_batch("han_encoder")
    swapped, rows = random_context(b)
    delta = 5.0                                        # every pair inside the margin: the hinge is linear

    def grads(loss):
        m.zero_grad()
        loss.backward()
        return torch.cat([p.grad.flatten() for p in m.parameters() if p.grad is not None])

    real = forward_loss(m, b, 0, 0.1, token_logprobs=True)
    detached = grads(context_margin_loss(m, b, real, 0, delta, detach_random=True)[0])
    s_rand = _sentence_logprobs(m, swapped).detach()
    by_hand = grads(torch.clamp(delta - (_sentence_logprobs(m, b) - s_rand)[rows], min=0).sum())
    assert torch.allclose(detached, by_hand, atol=1e-5)
    real = forward_loss(m, b, 0, 0.1, token_logprobs=True)
    full = grads(context_margin_loss(m, b, real, 0, delta)[0])
    assert not torch.allclose(full, detached, atol=1e-5)   # the paper's loss also pushes log p(y|x,C̃) down


def test_a_few_updates_with_the_margin_widen_the_real_vs_random_gap():
    """The same tiny HAN encoder, 40 Adam updates on one batch, with and without the margin term:
    the margin is what makes the real context worth more than a random one."""
    def gap_after(margin: float) -> float:
        m = model("han_encoder", seed=1).train()
        b = _real_batch("han_encoder")
        opt = torch.optim.Adam(m.parameters(), lr=3e-3)
        for _ in range(40):
            out = forward_loss(m, b, 0, 0.0, token_logprobs=True)
            loss = out.total
            if margin:
                loss = loss + context_margin_loss(m, b, out, 0, margin)[0]
            opt.zero_grad()
            loss.backward()
            opt.step()
        m.eval()
        swapped, rows = random_context(b)
        with torch.no_grad():
            return float((_sentence_logprobs(m, b) - _sentence_logprobs(m, swapped))[rows].mean())

    plain, ranked = gap_after(0.0), gap_after(2.0)
    assert ranked > plain + 0.5, (plain, ranked)


def test_the_margin_is_refused_for_sentence_models_and_sub_documents(tmp_path):
    from doctrans.config import load_experiment
    from doctrans.training.train import DocNMTTask, NMTTask

    from conftest import REPO

    cfg = load_experiment(REPO / "pipelines" / "transformer" / "tiny.yaml", ["train.context_margin=0.5"])
    with pytest.raises(ValueError, match="sentence-level"):
        NMTTask(cfg, None, None, None, None, None, None, torch.device("cpu"))
    with pytest.raises(ValueError, match="sub-document"):
        DocNMTTask(cfg, None, None, None, None, None, None, torch.device("cpu"), 0, context_block=4)
    bad = load_experiment(REPO / "pipelines" / "transformer" / "tiny.yaml", ["train.context_margin_level=word"])
    with pytest.raises(ValueError, match="context_margin_level"):
        NMTTask(bad, None, None, None, None, None, None, torch.device("cpu"))
