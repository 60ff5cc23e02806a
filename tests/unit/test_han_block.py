"""HANBlock (doctrans/models/context/han_block.py, docs/models.md §2.5): shapes, masking,
empty-context handling, stop-gradient, the gate equation (HAN paper eq. 7–8)."""
from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from doctrans.models.context.han_block import HANBlock, HANBlockConfig

H, HEADS, D_FF = 16, 4, 32
B, T, N, L = 4, 5, 3, 6


def _block(seed: int = 0, **kw) -> HANBlock:
    torch.manual_seed(seed)
    kw = {"heads": HEADS, "d_ff": D_FF, "dropout": 0.0, **kw}
    return HANBlock(H, HANBlockConfig(**kw)).eval()


def _inputs(seed: int = 1):
    """Row 0: full context with some PAD; row 1: slot 0 missing; row 2: all slots missing;
    row 3: every word of every slot masked (slots 'exist' but are void)."""
    g = torch.Generator().manual_seed(seed)
    h = torch.randn(B, T, H, generator=g)                               # (B,T,H)
    ctx = torch.randn(B, N, L, H, generator=g)                          # (B,N,L,H)
    word_mask = torch.zeros(B, N, L, dtype=torch.bool)                  # True = masked word
    word_mask[0, :, 4:] = True
    word_mask[1, 2, 1:] = True
    word_mask[3] = True
    slot_missing = torch.zeros(B, N, dtype=torch.bool)                  # True = no slot
    slot_missing[1, 0] = True
    slot_missing[2] = True
    return h, ctx, word_mask, slot_missing


def _ln_out(block: HANBlock, x: torch.Tensor) -> torch.Tensor:
    ln = block.ln_out
    return F.layer_norm(x, (H,), ln.weight, ln.bias, ln.eps)


def _probe() -> torch.Tensor:
    """Fixed weights for a scalar loss: the plain sum of a LayerNorm output is constant (its
    gradient is 0), so losses are ⟨output, probe⟩."""
    return torch.randn(B, T, H, generator=torch.Generator().manual_seed(7))


@pytest.mark.parametrize("mode", ["passthrough", "zero"])
@pytest.mark.parametrize("train", [False, True])
def test_shape_and_no_nan_under_every_masking(mode, train):
    block = _block(empty_context=mode, dropout=0.3).train(train)
    h, ctx, word_mask, slot_missing = _inputs()
    h.requires_grad_(True)
    out = block(h, ctx, word_mask, slot_missing)
    assert out.shape == (B, T, H)
    assert torch.isfinite(out).all()
    (out * _probe()).sum().backward()
    assert torch.isfinite(h.grad).all()
    assert all(torch.isfinite(p.grad).all() for p in block.parameters() if p.grad is not None)


def test_passthrough_returns_h_exactly_for_rows_without_context():
    block = _block()
    h, ctx, word_mask, slot_missing = _inputs()
    out = block(h, ctx, word_mask, slot_missing)
    assert torch.equal(out[2], h[2])        # all slots missing
    assert torch.equal(out[3], h[3])        # all words masked
    for r in (0, 1):
        assert not torch.allclose(out[r], h[r], atol=1e-3)
    everything_missing = torch.ones(B, N, dtype=torch.bool)
    assert torch.equal(block(h, ctx, word_mask, everything_missing), h)


def test_zero_mode_rows_without_context_are_ln_out_of_gate_with_d_zero():
    block = _block(empty_context="zero")
    h, ctx, word_mask, slot_missing = _inputs()
    out = block(h, ctx, word_mask, slot_missing)
    W, b = block.gate_proj.weight, block.gate_proj.bias                 # (H,2H), (H,)
    for r in (2, 3):
        lam = torch.sigmoid(h[r] @ W[:, :H].T + b)                      # (T,H), W_d·0 = 0
        expected = _ln_out(block, lam * h[r])                           # + (1 − λ)·0
        torch.testing.assert_close(out[r], expected)
    assert not torch.allclose(out[0], _ln_out(block, torch.sigmoid(h[0] @ W[:, :H].T + b) * h[0]))


@pytest.mark.parametrize("mode", ["passthrough", "zero"])
def test_no_slots_at_all(mode):
    block = _block(empty_context=mode)
    h = torch.randn(2, T, H)
    out = block(h, torch.randn(2, 0, L, H), torch.zeros(2, 0, L, dtype=torch.bool),
                torch.zeros(2, 0, dtype=torch.bool))
    expected = h if mode == "passthrough" else _ln_out(block, block.gate(h, torch.zeros_like(h)))
    torch.testing.assert_close(out, expected)


def test_masked_words_and_missing_slots_do_not_change_the_output():
    block = _block()
    h, ctx, word_mask, slot_missing = _inputs()
    out = block(h, ctx, word_mask, slot_missing)
    ctx2 = ctx.clone()
    ctx2[word_mask] = 100.0 * torch.randn(int(word_mask.sum()), H)      # masked words
    ctx2[slot_missing] = 100.0 * torch.randn(int(slot_missing.sum()), L, H)  # missing slots
    torch.testing.assert_close(block(h, ctx2, word_mask, slot_missing), out, rtol=0, atol=1e-6)
    ctx3 = ctx.clone()
    ctx3[0, 1, 2] += 1.0                                                # an unmasked word
    out3 = block(h, ctx3, word_mask, slot_missing)
    assert not torch.allclose(out3[0], out[0], atol=1e-4)
    torch.testing.assert_close(out3[1:], out[1:], rtol=0, atol=0)       # other rows untouched


def test_slot_with_all_words_masked_counts_as_missing():
    block = _block()
    h, ctx, word_mask, slot_missing = _inputs()
    void = word_mask.clone()
    void[0, 1] = True                                                   # exists, all masked
    missing = slot_missing.clone()
    missing[0, 1] = True
    torch.testing.assert_close(block(h, ctx, void, slot_missing),
                               block(h, ctx, word_mask, missing), rtol=0, atol=1e-6)


def _grads(detach: bool):
    block = _block(detach_context=detach)
    h, ctx, word_mask, slot_missing = _inputs()
    h.requires_grad_(True)
    ctx.requires_grad_(True)
    (block(h, ctx, word_mask, slot_missing) * _probe()).sum().backward()
    return block, h, ctx, word_mask, slot_missing


def test_detach_context_gradient_reaches_h_only_through_the_gate():
    block, h, ctx, word_mask, slot_missing = _grads(detach=True)
    assert ctx.grad is None or not ctx.grad.any()
    assert h.grad[:2].abs().sum() > 0                                   # the gate path
    # the gate-only path: d is a constant, h enters through λ(h, d) ⊙ h and LN_out
    h2 = h.detach().clone().requires_grad_(True)
    d = block.context_vector(h2, ctx, word_mask, slot_missing)
    assert torch.autograd.grad(d.sum(), h2, allow_unused=True)[0] is None
    gated = _ln_out(block, block.gate(h2, d))
    keep = ~(slot_missing | word_mask.all(-1)).all(-1)                  # rows with context
    loss = (torch.where(keep[:, None, None], gated, h2) * _probe()).sum()
    expected = torch.autograd.grad(loss, h2)[0]
    torch.testing.assert_close(h.grad, expected)


def test_without_detach_gradient_reaches_ctx_and_the_query():
    block, h, ctx, word_mask, slot_missing = _grads(detach=False)
    assert ctx.grad is not None and ctx.grad[0].abs().sum() > 1e-3
    assert not ctx.grad[word_mask].any()                                # masked words: none
    _, h_det, *_ = _grads(detach=True)
    assert not torch.allclose(h.grad[:2], h_det.grad[:2], atol=1e-6)    # query path adds grad
    torch.testing.assert_close(h.grad[2:], h_det.grad[2:])              # empty rows: identity


@pytest.mark.parametrize("bias, target", [(30.0, "h"), (-30.0, "d")])
def test_gate_extremes(bias, target):
    block = _block()
    with torch.no_grad():
        block.gate_proj.weight.zero_()
        block.gate_proj.bias.fill_(bias)
    h, ctx, word_mask, slot_missing = _inputs()
    out = block(h, ctx, word_mask, slot_missing)[:2]                    # rows with context
    d = block.context_vector(h, ctx, word_mask, slot_missing)[:2]
    expected = _ln_out(block, h[:2] if target == "h" else d)
    torch.testing.assert_close(out, expected, rtol=1e-4, atol=1e-4)


def test_word_summaries_keep_slots_apart():
    block = _block()
    h, ctx, word_mask, _ = _inputs()
    s = block.word_summaries(h, ctx, word_mask)                         # (B,N,T,H)
    assert s.shape == (B, N, T, H)
    ctx2 = ctx.clone()
    ctx2[:, 1, :3] += torch.randn(B, 3, H)                              # slot 2 (index 1)
    s2 = block.word_summaries(h, ctx2, word_mask)
    assert not torch.allclose(s2[:3, 1], s[:3, 1], atol=1e-4)
    torch.testing.assert_close(s2[:, [0, 2]], s[:, [0, 2]], rtol=0, atol=0)
    assert not s[3].any()                                               # void slots are 0


def test_batched_word_attention_equals_one_slot_at_a_time():
    block = _block()
    h, ctx, word_mask, _ = _inputs()
    s = block.word_summaries(h, ctx, word_mask)
    for j in range(N):
        one = block.word_summaries(h, ctx[:, j:j + 1], word_mask[:, j:j + 1])[:, 0]
        torch.testing.assert_close(s[:, j], one)


@pytest.mark.parametrize("kw", [{"heads": 0}, {"d_ff": 0}, {"dropout": 1.0},
                                {"dropout": -0.1}, {"empty_context": "skip"}])
def test_config_rejects_bad_values(kw):
    with pytest.raises(ValueError):
        HANBlockConfig(**kw)


def test_d_model_must_divide_into_heads():
    with pytest.raises(ValueError):
        HANBlock(10, HANBlockConfig(heads=4))


@pytest.mark.parametrize("which", ["h", "ctx_b", "ctx_h", "word_mask", "slot_missing", "dtype"])
def test_shape_mismatch_raises(which):
    block = _block()
    h, ctx, word_mask, slot_missing = _inputs()
    bad = {"h": (h[0], ctx, word_mask, slot_missing),
           "ctx_b": (h, ctx[:2], word_mask, slot_missing),
           "ctx_h": (h, ctx[..., :8], word_mask, slot_missing),
           "word_mask": (h, ctx, word_mask[:, :, :2], slot_missing),
           "slot_missing": (h, ctx, word_mask, slot_missing[:, :2]),
           "dtype": (h, ctx, word_mask.float(), slot_missing)}[which]
    with pytest.raises(ValueError):
        block(*bad)


def test_memory_from_projected_rows_equals_memory_from_gathered_context():
    """``project_rows`` + ``gather_memory`` (keys/values once per context sentence, as the
    models use it) = ``prepare`` on the per-reader copies of the context."""
    block = _block(detach_context=False)
    g = torch.Generator().manual_seed(3)
    states = torch.randn(5, L, H, generator=g, requires_grad=True)     # 5 batch rows
    masked = torch.zeros(5, L, dtype=torch.bool)
    masked[1, 3:] = True
    masked[4] = True                                                   # a void row
    rows = torch.tensor([[-1, 0, 1], [0, 1, 2], [-1, -1, -1], [2, 4, 3]])   # (B=4, N=3)
    h = torch.randn(4, T, H, generator=g)
    k, v = block.project_rows(states, masked)
    assert not k[1, :, 3:].any() and not v[4].any()                    # masked words: not projected
    out = block.forward_memory(h, block.gather_memory(k, v, masked, rows))
    ctx = states[rows.clamp(min=0)]                                    # (B,N,L,H)
    word_mask = masked[rows.clamp(min=0)] | rows.lt(0)[..., None]
    ref = block(h, ctx, word_mask, rows.lt(0))
    torch.testing.assert_close(out, ref, rtol=1e-5, atol=1e-5)
    (grad_a,) = torch.autograd.grad((out * _probe()[:4]).sum(), states)
    (grad_b,) = torch.autograd.grad((ref * _probe()[:4]).sum(), states)
    torch.testing.assert_close(grad_a, grad_b, rtol=1e-4, atol=1e-5)


def test_word_attention_equals_a_hand_computation():
    """s^j_t (eq. 4) for one row, slot and position, computed by hand from the block's weights:
    per head softmax(q·k/√D) over the slot's unmasked words, values summed, out-projected, LN_w."""
    block = _block()
    h, ctx, word_mask, _ = _inputs()
    s = block.word_summaries(h, ctx, word_mask)                        # (B,N,T,H)
    w = block.attn_w
    b, j, t = 1, 2, 3                                                  # row 1, slot 2: only word 0 kept
    q = w.q_proj(block.ln_qw(h[b, t]))                                 # (H,)
    words = ctx[b, j][~word_mask[b, j]]                                # (L',H)
    k, v = w.k_proj(words), w.v_proj(words)
    dh = H // HEADS
    heads = []
    for a in range(HEADS):
        sl = slice(a * dh, (a + 1) * dh)
        p = torch.softmax(k[:, sl] @ q[sl] / dh ** 0.5, 0)
        heads.append(p @ v[:, sl])
    ref = block.ln_w(w.out_proj(torch.cat(heads)))
    torch.testing.assert_close(s[b, j, t], ref, rtol=1e-5, atol=1e-5)
    b, j = 0, 1                                                        # 4 words kept
    words = ctx[b, j][~word_mask[b, j]]
    k, v = w.k_proj(words), w.v_proj(words)
    q = w.q_proj(block.ln_qw(h[b, t]))
    heads = [torch.softmax(k[:, a * dh:(a + 1) * dh] @ q[a * dh:(a + 1) * dh] / dh ** 0.5, 0) @ v[:, a * dh:(a + 1) * dh]
             for a in range(HEADS)]
    torch.testing.assert_close(s[b, j, t], block.ln_w(w.out_proj(torch.cat(heads))), rtol=1e-5, atol=1e-5)


def test_recorder_keeps_the_gate_that_made_the_output():
    # benchmarks/context_gate.py reads ("gate", (λ, h, d)) from the recorder: they must be the
    # eq. 7–8 terms of the returned states, LN_out(λ ⊙ h + (1 − λ) ⊙ d), for the rows with context
    block = _block(empty_context="zero")
    h, ctx, word_mask, slot_missing = _inputs()
    block.recorder = []
    with torch.no_grad():
        out = block(h, ctx, word_mask, slot_missing)
    gates = [v for kind, v in block.recorder if kind == "gate"]
    assert len(gates) == 1
    lam, h_rec, d = gates[0]
    assert lam.shape == h_rec.shape == d.shape == (B, T, H)
    assert ((lam > 0) & (lam < 1)).all()
    assert torch.allclose(h_rec, h)
    assert torch.allclose(d, block.context_vector(h, ctx, word_mask, slot_missing), atol=1e-6)
    assert torch.allclose(_ln_out(block, lam * h + (1 - lam) * d), out, atol=1e-5)
    block.recorder = None
    with torch.no_grad():
        block(h, ctx, word_mask, slot_missing)          # recorder off: nothing kept, no error


@pytest.mark.parametrize("train", [False, True])
def test_sentence_attention_equals_projected_keys_and_values(train):
    """d_t (eq. 5–6), the block's written-out sentence-level attention, equals a multi-head
    attention computed by hand over the N projected summaries W_k s_j + b_k, W_v s_j + b_v
    (biases non-zero), values and gradients, for every row kind of ``_inputs``."""
    block = _block(detach_context=False)
    with torch.no_grad():
        for p in (block.attn_s.k_proj.bias, block.attn_s.v_proj.bias):
            p.copy_(torch.linspace(-1.0, 1.0, H))
    block.train(train)                                                 # dropout 0: the same either way
    h, ctx, word_mask, slot_missing = _inputs()
    h.requires_grad_(True)
    mem = block.prepare(ctx, word_mask, slot_missing)
    got = block.context_vector_memory(h, mem)
    s = block.word_summaries_memory(h, mem)                            # (B,N,T,H)
    mha, dh = block.attn_s, H // HEADS
    q = mha.heads_of(mha.q_proj(block.ln_qs(h)))                       # (B,T,A,D)
    k, v = mha.heads_of(mha.k_proj(s)), mha.heads_of(mha.v_proj(s))    # (B,N,T,A,D)
    scores = torch.einsum("btad,bntad->btan", q, k) / dh ** 0.5
    keep = ~mem.slot_gone | mem.no_context[:, None]
    p = scores.masked_fill(~keep[:, None, None, :], float("-inf")).softmax(-1)
    a = torch.einsum("btan,bntad->btad", p, v).reshape(B, T, H)
    ref = block.ffn(mha.out_proj(a)).masked_fill(mem.no_context[:, None, None], 0.0)
    torch.testing.assert_close(got, ref, rtol=1e-5, atol=1e-5)
    probe = _probe()
    g_got = torch.autograd.grad((got * probe).sum(), [h, mha.q_proj.weight, mha.k_proj.weight, mha.v_proj.weight,
                                                      mha.v_proj.bias, block.attn_w.q_proj.weight])
    g_ref = torch.autograd.grad((ref * probe).sum(), [h, mha.q_proj.weight, mha.k_proj.weight, mha.v_proj.weight,
                                                      mha.v_proj.bias, block.attn_w.q_proj.weight])
    for x, y in zip(g_got, g_ref):
        torch.testing.assert_close(x, y, rtol=1e-4, atol=1e-5)
