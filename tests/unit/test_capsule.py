"""QCN (doctrans/models/context/capsule.py, docs/models.md §2.6): squash, PCC, both routings
(empty context, permutation invariance, masking), the batched capsules against a literal
per-row construction, the model's encode conventions and the training-only PCC term."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pytest
import torch

from doctrans.config import load_experiment
from doctrans.models.build import build_model
from doctrans.models.context.capsule import (QCNConfig, dynamic_routing, pcc, query_guided_routing, squash)
from doctrans.models.interface import SearchBatch
from doctrans.training.loss import forward_loss

from conftest import REPO

H, J, R, V = 8, 3, 4, 20


def _routing_inputs(seed: int = 0, b: int = 2, i: int = 5):
    g = torch.Generator().manual_seed(seed)
    u = torch.randn(b, i, H, generator=g)                                       # (B, I, H)
    u_hat = torch.randn(b, i, J, H, generator=g)                                # (B, I, J, H)
    query = torch.randn(b, H, generator=g)                                      # (B, H)
    pad = torch.zeros(b, i, dtype=torch.bool)
    return u, u_hat, query, pad


def test_pcc_equals_numpy_corrcoef():
    g = torch.Generator().manual_seed(0)
    a, b = torch.randn(4, 3, 16, generator=g, dtype=torch.float64), torch.randn(4, 3, 16, generator=g,
                                                                               dtype=torch.float64)
    got = pcc(a, b, eps=0.0)                                                    # (4, 3)
    want = [[np.corrcoef(a[i, j].numpy(), b[i, j].numpy())[0, 1] for j in range(3)] for i in range(4)]
    assert np.allclose(got.numpy(), want, atol=1e-12)
    assert torch.allclose(pcc(a, a), torch.ones(4, 3, dtype=torch.float64))
    assert torch.allclose(pcc(a, -2 * a + 1), -torch.ones(4, 3, dtype=torch.float64))
    assert torch.allclose(pcc(a[:, :1], b), pcc(a[:, :1].expand_as(b), b))   # broadcasts


def test_squash_keeps_direction_with_norm_below_one():
    s = torch.randn(6, H) * torch.tensor([1e-3, 0.1, 1.0, 3.0, 30.0, 1e3])[:, None]
    v = squash(s, eps=0.0)
    n_s, n_v = s.norm(dim=-1), v.norm(dim=-1)
    assert bool((n_v < 1).all())
    assert torch.allclose(n_v, n_s ** 2 / (1 + n_s ** 2), rtol=1e-5)
    assert torch.allclose(torch.cosine_similarity(v, s, dim=-1), torch.ones(6), atol=1e-5)
    z = torch.zeros(2, H, requires_grad=True)
    squash(z).sum().backward()                                                   # finite at 0
    assert torch.equal(squash(z.detach()), z.detach()) and bool(torch.isfinite(z.grad).all())


@pytest.mark.parametrize("update", ["replace", "add"])
def test_no_context_tokens_route_the_query_alone(update):
    """Every context token masked (a document start): every s_j = q_j in every iteration, so
    after one iteration s = the tiled query; the capsules follow the query path only."""
    u, u_hat, query, _ = _routing_inputs()
    pad = torch.ones(2, 5, dtype=torch.bool)
    out = query_guided_routing(u, u_hat, query, pad, R, query_update=update)
    assert torch.equal(out.s, out.q) and torch.equal(out.v, squash(out.s))
    q = query[:, None].expand(2, J, H)                                          # the path by hand
    for _ in range(R - 1):
        q = squash(q) if update == "replace" else q + squash(q)
    assert torch.allclose(out.s, q, atol=1e-6)
    one = query_guided_routing(u, u_hat, query, pad, 1, query_update=update)
    assert torch.equal(one.s, query[:, None].expand(2, J, H))
    real = query_guided_routing(u, u_hat, query, torch.zeros_like(pad), R, query_update=update)
    assert not torch.allclose(real.s, real.q, atol=1e-3)                        # tokens do count


def _both_routings(u, u_hat, query, pad, **kw):
    return (query_guided_routing(u, u_hat, query, pad, R, **kw).v, dynamic_routing(u_hat, pad, R))


@pytest.mark.parametrize("kw", [{}, {"pcc_target": "prediction", "agreement_mod": "add", "query_update": "add"},
                                {"agreement_mod": "one_plus"}])
def test_routing_is_invariant_to_token_order_and_ignores_padding(kw):
    u, u_hat, query, pad = _routing_inputs(1)
    ref = _both_routings(u, u_hat, query, pad, **kw)
    perm = torch.randperm(5, generator=torch.Generator().manual_seed(3))
    for got, want in zip(_both_routings(u[:, perm], u_hat[:, perm], query, pad, **kw), ref):
        assert torch.allclose(got, want, atol=1e-6)
    g = torch.Generator().manual_seed(4)                                         # + 3 padded junk tokens
    u2 = torch.cat([u, 50 * torch.randn(2, 3, H, generator=g)], 1)
    u_hat2 = torch.cat([u_hat, 50 * torch.randn(2, 3, J, H, generator=g)], 1)
    pad2 = torch.cat([pad, torch.ones(2, 3, dtype=torch.bool)], 1)
    for got, want in zip(_both_routings(u2, u_hat2, query, pad2, **kw), ref):
        assert torch.allclose(got, want, atol=1e-6)


def test_routing_options_change_the_capsules():
    u, u_hat, query, pad = _routing_inputs(2)
    ref = query_guided_routing(u, u_hat, query, pad, R).v
    for kw in ({"pcc_target": "prediction"}, {"agreement_mod": "add"}, {"agreement_mod": "one_plus"},
               {"query_update": "add"}):
        assert not torch.allclose(query_guided_routing(u, u_hat, query, pad, R, **kw).v, ref, atol=1e-4), kw


# -- the model ---------------------------------------------------------------------------------
@dataclass
class DocBatchStub:
    src: torch.Tensor
    tgt_in: torch.Tensor
    tgt_out: torch.Tensor
    ctx: torch.Tensor
    is_target: torch.Tensor


def doc_batch() -> DocBatchStub:
    """Document rows 0–2 (row 0 context-only), a 1-sentence document in row 3; N = 2."""
    src = torch.tensor([[4, 5, 2, 0], [6, 7, 8, 2], [9, 2, 0, 0], [10, 11, 2, 0]])
    tgt_in = torch.tensor([[1, 12, 13, 0], [1, 14, 0, 0], [1, 15, 16, 17], [1, 18, 0, 0]])
    tgt_out = torch.tensor([[12, 13, 2, 0], [14, 2, 0, 0], [15, 16, 17, 2], [18, 2, 0, 0]])
    ctx = torch.tensor([[-1, -1], [-1, 0], [0, 1], [-1, -1]])
    return DocBatchStub(src, tgt_in, tgt_out, ctx, torch.tensor([False, True, True, True]))


def qcn(seed: int = 0, **ctx):
    torch.manual_seed(seed)
    ctx = {"type": "qcn", "context_sents": 2, "capsules": J, "heads": 2, "dropout": 0.0, **ctx}
    spec = "{" + ", ".join(f"{k}: {str(v).lower() if isinstance(v, bool) else v}" for k, v in ctx.items()) + "}"
    cfg = load_experiment(REPO / "pipelines" / "transformer" / "tiny.yaml", ["model.dropout=0.0", f"context={spec}"])
    assert isinstance(cfg.context, QCNConfig)
    return build_model(cfg.model, V, V, 0, cfg.context).eval()


def test_batched_capsules_equal_a_literal_per_row_construction():
    """u_i = W_u[E[w_i]; onehot_N(dist_i)] + b_u, û_{j|i} = W_j u_i, q = W_q mean_k E[x_k] + b_q
    (§2.6), built word by word for each row, routed alone = the batched, gathered capsules."""
    m, b = qcn(), doc_batch()
    targets = torch.tensor([1, 2, 3])
    with torch.no_grad():
        got = m.context_capsules(b.src, targets, b.ctx[targets])
        emb = m.backbone.source_embedding.weight
        for k, row in enumerate(targets.tolist()):
            us = []
            for n, r in enumerate(b.ctx[row].tolist()):
                for w in (b.src[r][b.src[r] != 0].tolist() if r >= 0 else []):
                    us.append(m.w_u(torch.cat([emb[w], torch.nn.functional.one_hot(torch.tensor(1 - n), 2).float()])))
            words = b.src[row][b.src[row] != 0]
            q = m.w_q(emb[words].mean(0))
            u = torch.stack(us)[None] if us else torch.zeros(1, 1, m.backbone.hidden_size)
            pad = torch.zeros(1, u.size(1), dtype=torch.bool) if us else torch.ones(1, 1, dtype=torch.bool)
            u_hat = m.w_j(u).unflatten(-1, (J, -1))
            want = query_guided_routing(u, u_hat, q[None], pad, m.cfg.iterations)
            assert torch.allclose(got.v[k], want.v[0], atol=1e-5), row
    assert got.v.shape == (3, J, 32) and bool((got.v.norm(dim=-1) < 1).all())


def test_encode_reads_context_and_a_sentence_batch_is_the_empty_context_path():
    m, b = qcn(), doc_batch()
    with torch.no_grad():
        enc = m.encode(b)
        plain = m.encode(SearchBatch(b.src))                                     # no ctx: empty context
        empty = m.encode(DocBatchStub(b.src, b.tgt_in, b.tgt_out, torch.full((4, 2), -1), torch.ones(4).bool()))
        base = m.backbone.encode(b)
    assert torch.allclose(plain.states, empty.states, atol=1e-6)
    assert torch.allclose(enc.states[3], plain.states[3], atol=1e-6)            # row 3 has no context
    for r in (1, 2):                                                             # rows with context
        assert not torch.allclose(enc.states[r], plain.states[r], atol=1e-4)
    assert torch.equal(enc.states[0], torch.zeros_like(enc.states[0])) and bool(enc.src_pad_mask[0].all())
    assert torch.equal(enc.src_pad_mask, base.src_pad_mask | torch.tensor([True, False, False, False])[:, None])


def test_incremental_decoding_matches_teacher_forcing():
    m, b = qcn(), doc_batch()
    with torch.no_grad():
        enc = m.encode(b)
        full = torch.log_softmax(m.decode_train(enc, b.tgt_in), -1)             # (B, T, V)
        state, steps = m.init_state(enc), []
        for t in range(b.tgt_in.size(1)):
            lp, state = m.decode_step(state, b.tgt_in[:, t])
            steps.append(lp)
    assert torch.allclose(full, torch.stack(steps, 1), atol=1e-5)


@pytest.mark.parametrize("capsule_input", ["embedding", "encoder_input"])
def test_word_order_of_the_context_reaches_the_capsules_only_with_positions(capsule_input):
    """§2.6's capsules are a bag of (word, sentence distance): reordering the previous sentence's
    words changes nothing; ``capsule_input: encoder_input`` (positions added) does see it."""
    m, b = qcn(capsule_input=capsule_input), doc_batch()
    swapped = doc_batch()
    swapped.src[0, :2] = torch.tensor([5, 4])                                   # row 0: context of 1, 2
    with torch.no_grad():
        ref, got = m.encode(b).states, m.encode(swapped).states
    assert torch.allclose(ref[1], got[1], atol=1e-6) == (capsule_input == "embedding")


def test_context_words_get_gradient_through_the_capsules():
    m, b = qcn(regularise=False).train(), doc_batch()
    forward_loss(m, b, 0, 0.0).total.backward()
    g = m.backbone.source_embedding.weight.grad
    assert float(g[4].abs().sum()) > 0 and float(g[5].abs().sum()) > 0         # row 0: context only


def test_pcc_term_in_training_only_and_equal_to_beta_one_minus_rho():
    """β(1 − ρ), ρ = mean_j PCC(v^src_j, v^tgt_j) per target sentence, averaged over sentences,
    enters the training loss as value × n_tokens (the trainer divides by target tokens) and is
    reported as terms["pcc"]; β = 0 leaves the cross-entropy; eval / no_grad: no term at all."""
    b = doc_batch()
    out1 = forward_loss(qcn(beta=1.0).train(), b, 0, 0.1)
    out0 = forward_loss(qcn(beta=0.0).train(), b, 0, 0.1)
    m = qcn(beta=1.0).train()
    with torch.no_grad():
        rows = torch.tensor([1, 2, 3])
        src, tgt = b.src[rows], b.tgt_in[rows]
        v_src = m.caps_src(m.backbone.embed_source(src), src.eq(0))
        v_tgt = m.caps_tgt(m.backbone.embed_target(tgt), tgt.eq(0))
        want = float(np.mean([1 - np.mean([np.corrcoef(v_src[i, j].numpy(), v_tgt[i, j].numpy())[0, 1]
                                           for j in range(4)]) for i in range(3)]))   # reg_capsules 4
    n = out1.n_tokens
    assert n == 8 and out1.terms["nll_nats"] == pytest.approx(out0.terms["nll_nats"], rel=1e-6)
    assert out1.terms["pcc"] == pytest.approx(want * n, rel=1e-4) and out0.terms["pcc"] == 0.0
    assert float((out1.total - out0.total).detach()) == pytest.approx(want * n, rel=1e-4)
    assert 0.0 < want < 2.0 and out1.total.requires_grad
    ev = qcn(beta=1.0).eval()
    out_eval = forward_loss(ev, b, 0, 0.1)
    with torch.no_grad():
        out_nograd = forward_loss(ev.train(), b, 0, 0.1)
    for out in (out_eval, out_nograd):
        assert set(out.terms) == {"nll_nats"}
        assert float(out.total.detach()) == pytest.approx(float(out0.total.detach()), rel=1e-6)


def test_regularisation_only_is_the_backbone_plus_the_term():
    m, b = qcn(query_guided=False), doc_batch()
    with torch.no_grad():
        enc, base = m.encode(b), m.backbone.encode(b)
    assert torch.allclose(enc.states[1:], base.states[1:], atol=1e-6)
    assert not any(n.startswith(("w_u", "w_q", "w_j", "attn", "subs")) for n, _ in m.named_parameters())
    assert "pcc" in forward_loss(m.train(), b, 0, 0.1).terms


@pytest.mark.parametrize("bad", [{"pcc_target": "output"}, {"agreement_mod": "max"}, {"query_update": "keep"},
                                 {"capsule_input": "states"}, {"capsules": 0},
                                 {"query_guided": False, "regularise": False}])
def test_bad_options_raise(bad):
    with pytest.raises(ValueError):
        qcn(**bad)


def test_factored_predictions_route_as_the_dense_tensor():
    """``LinearPredictions`` (û = W_j x never built) gives the dense routing's capsules and
    gradients; ``pcc_pairs`` = the broadcast ``pcc``."""
    from doctrans.models.context.capsule import LinearPredictions, pcc_pairs

    torch.manual_seed(0)
    b, i, j, h = 3, 5, 4, 6
    x = torch.randn(b, i, h, requires_grad=True)
    w = torch.randn(j * h, h, requires_grad=True)
    pad = torch.tensor([[False] * 5, [False, False, True, True, True], [True] * 5])
    q = torch.randn(b, h)
    dense = torch.nn.functional.linear(x, w).unflatten(-1, (j, h))
    qj = q[:, None].expand(b, j, h) + torch.randn(b, j, h)                  # J different queries
    torch.testing.assert_close(pcc_pairs(qj, x), pcc(qj[:, None], x[:, :, None]), rtol=1e-5, atol=1e-6)
    for fn in (lambda u: dynamic_routing(u, pad, 4, capsules=j),
               lambda u: query_guided_routing(x, u, q, pad, 4, capsules=j).v,
               lambda u: query_guided_routing(x, u, q, pad, 4, pcc_target="prediction", agreement_mod="one_plus",
                                              query_update="add", capsules=j).v):
        got, want = fn(LinearPredictions(x, w)), fn(dense)
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-6)
        g1 = torch.autograd.grad(got.sum(), (x, w), retain_graph=True)
        g2 = torch.autograd.grad(want.sum(), (x, w), retain_graph=True)
        for a, c in zip(g1, g2):
            torch.testing.assert_close(a, c, rtol=1e-4, atol=1e-5)


def test_folded_capsule_attention_is_multihead_attention():
    """``capsule_attention`` (query and output projections folded into the J keys / values)
    = ``nn.MultiheadAttention(z, caps, caps)``: outputs and every gradient; with dropout in
    training it still returns (B, S, H) and differs from eval."""
    from doctrans.models.context.capsule import capsule_attention

    torch.manual_seed(0)
    mha = torch.nn.MultiheadAttention(12, 3, 0.5, batch_first=True)
    torch.nn.init.normal_(mha.in_proj_bias)                                   # non-zero biases
    torch.nn.init.normal_(mha.out_proj.bias)
    z, caps = torch.randn(2, 5, 12, requires_grad=True), torch.randn(2, 4, 12, requires_grad=True)
    want = mha.eval()(z, caps, caps, need_weights=False)[0]
    got = capsule_attention(z, caps, mha, training=False)
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-6)
    inputs = (z, caps, *mha.parameters())
    w = torch.randn_like(want)
    for a, c in zip(torch.autograd.grad((got * w).sum(), inputs), torch.autograd.grad((want * w).sum(), inputs)):
        torch.testing.assert_close(a, c, rtol=1e-4, atol=1e-5)
    dropped = capsule_attention(z, caps, mha, training=True)
    assert dropped.shape == want.shape and not torch.allclose(dropped, want)


def test_gram_routing_is_dynamic_routing():
    """``_gram_routing`` (routing in x's space through G_j = W_jᵀ W_j, what ``dynamic_routing``
    uses for factored predictions on many rows) = routing over the dense û_{j|i} = W_j x_i:
    capsules and gradients, a fully padded row included (zeros, no NaN)."""
    from doctrans.models.context.capsule import LinearPredictions, _gram_routing

    torch.manual_seed(0)
    b, i, j, h = 12, 6, 3, 5
    x = torch.randn(b, i, h, requires_grad=True)
    w = (0.5 * torch.randn(j * h, h)).requires_grad_()
    pad = torch.rand(b, i) < 0.3
    pad[2] = True
    assert b * 3 > h                                                       # dynamic_routing takes the Gram path
    for got in (_gram_routing(LinearPredictions(x, w), pad, 4, 1e-8, j),
                dynamic_routing(LinearPredictions(x, w), pad, 4, capsules=j)):
        want = dynamic_routing(torch.nn.functional.linear(x, w).unflatten(-1, (j, h)), pad, 4)
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-6)
        assert bool(got[2].eq(0).all())
        weights = torch.randn_like(want)
        g1 = torch.autograd.grad((got * weights).sum(), (x, w))
        g2 = torch.autograd.grad((want * weights).sum(), (x, w))
        for a, c in zip(g1, g2):
            assert bool(torch.isfinite(a).all())
            torch.testing.assert_close(a, c, rtol=1e-4, atol=1e-5)


def test_bucketed_capsnet_is_the_capsnet_on_the_padded_batch():
    """``CapsNet.forward_bucketed`` (rows routed in length groups, one embedding call, shared
    Gram matrices) = ``CapsNet`` over the whole padded batch, with a position-dependent
    embedding: capsules and gradients."""
    from doctrans.models.context.capsule import CapsNet

    torch.manual_seed(0)
    h = 6
    net, table = CapsNet(h, 3, 4, 1e-8), torch.nn.Embedding(20, h)

    def embed(tokens):                                                     # positions count from 0 per row
        return table(tokens) + 0.1 * torch.arange(tokens.size(1))[:, None]

    lengths = torch.randint(1, 12, (100,))
    tokens = torch.zeros(100, 12, dtype=torch.long)
    for r, n in enumerate(lengths.tolist()):
        tokens[r, :n] = torch.randint(4, 20, (n,))
    got = net.forward_bucketed(embed, tokens, 0, buckets=3)
    want = net(embed(tokens), tokens.eq(0))
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-6)
    weights = torch.randn_like(want)
    params = (net.w.weight, table.weight)
    for a, c in zip(torch.autograd.grad((got * weights).sum(), params), torch.autograd.grad((want * weights).sum(), params)):
        torch.testing.assert_close(a, c, rtol=1e-4, atol=1e-5)


def test_routing_in_groups_of_context_size_gives_the_capsules_of_one_group(monkeypatch):
    """``context_capsules`` routes the target rows in ``ROUTING_GROUPS`` groups of similar
    context size (each cut to its own most context words): the same v, s, q and gradients as
    all rows in one group, on a 90-sentence document with sentences of 1–12 words."""
    from doctrans.models.context import capsule

    torch.manual_seed(1)
    n = 90
    src = torch.zeros(n, 13, dtype=torch.long)
    for r in range(n):
        k = int(torch.randint(1, 13, ()))
        src[r, :k] = torch.randint(4, V, (k,))
        src[r, k] = 2
    ctx = torch.tensor([[r - 2 if r >= 2 else -1, r - 1 if r >= 1 else -1] for r in range(n)])
    targets = torch.arange(2, n)
    results = []
    for groups in (2, 1):
        monkeypatch.setattr(capsule, "ROUTING_GROUPS", groups)
        m = qcn()
        out = m.context_capsules(src, targets, ctx[targets])
        loss = sum((f * torch.linspace(-1, 1, f.numel()).view_as(f)).sum() for f in out)
        results.append((out, torch.autograd.grad(loss, [p for p in m.parameters() if p.requires_grad],
                                                 allow_unused=True)))
    (got, g1), (want, g2) = results
    for a, b in zip(got, want):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6)
    assert any(a is not None for a in g1)
    for a, b in zip(g1, g2):
        assert (a is None) == (b is None)
        if a is not None:                                                  # float summation order only
            torch.testing.assert_close(a, b, rtol=1e-3, atol=2e-4)
