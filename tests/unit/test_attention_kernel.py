"""The explicit attention form (``layers.attention``, taken for bf16 on CPU) gives SDPA's
outputs and gradients: masks, causal, rows without keys, and the dispatch by dtype."""
import pytest
import torch
import torch.nn.functional as F

from doctrans.layers.attention import attention


def _inputs(b=3, h=2, lq=5, lk=5, d=8, seed=0):
    g = torch.Generator().manual_seed(seed)
    return [torch.randn(b, h, n, d, generator=g, dtype=torch.float64, requires_grad=True)
            for n in (lq, lk, lk)]


def _both(q, k, v, **kw):
    outs = []
    for explicit in (False, True):
        qq, kk, vv = (t.detach().clone().requires_grad_(True) for t in (q, k, v))
        o = attention(qq, kk, vv, explicit=explicit, **kw)
        (o * torch.arange(o.numel(), dtype=o.dtype).reshape(o.shape).sin()).sum().backward()
        outs.append((o.detach(), qq.grad, kk.grad, vv.grad))
    return outs


@pytest.mark.parametrize("case", ["plain", "mask", "causal", "void_row", "cross"])
def test_explicit_form_equals_sdpa_values_and_gradients(case):
    lq = 3 if case == "cross" else 5
    q, k, v = _inputs(lq=lq, lk=5)
    kw = {}
    if case in ("mask", "void_row", "cross"):
        keep = torch.ones(3, 1, 1, 5, dtype=torch.bool)
        keep[0, ..., 3:] = False                      # a padded row
        if case == "void_row":
            keep[2] = False                           # a row with no key at all: SDPA gives 0
        kw["keep"] = keep
    if case == "causal":
        kw["causal"] = True
    sdpa, explicit = _both(q, k, v, **kw)
    for a, b in zip(sdpa, explicit):
        assert torch.allclose(a, b, atol=1e-10), case
    if case == "void_row":
        assert explicit[0][2].abs().max() == 0 and torch.isfinite(explicit[1]).all()


def test_bf16_on_cpu_takes_the_explicit_form_and_stays_close_to_fp32():
    q, k, v = (t.detach() for t in _inputs(b=4, lq=7, lk=7, d=16, seed=1))
    keep = torch.ones(4, 1, 1, 7, dtype=torch.bool)
    keep[1, ..., 5:] = False
    ref = F.scaled_dot_product_attention(q.float(), k.float(), v.float(), attn_mask=keep)
    qb, kb, vb = (t.to(torch.bfloat16) for t in (q, k, v))
    auto = attention(qb, kb, vb, keep)
    assert torch.equal(auto, attention(qb, kb, vb, keep, explicit=True))   # the dispatch
    assert auto.dtype == torch.bfloat16
    assert (auto.float() - ref).abs().max() < 0.05


def test_causal_with_a_mask_is_refused():
    q, k, v = _inputs()
    with pytest.raises(ValueError, match="causal"):
        attention(q, k, v, torch.ones(3, 1, 1, 5, dtype=torch.bool), causal=True)


def test_dropout_on_the_weights_keeps_the_expectation():
    torch.manual_seed(0)
    q, k, v = (t.detach() for t in _inputs(b=1, h=1, lq=1, lk=4, d=4))
    v = torch.eye(4, dtype=q.dtype)[None, None]       # output = the weights themselves
    runs = torch.stack([attention(q, k, v, dropout_p=0.5, explicit=True) for _ in range(4000)])
    full = attention(q, k, v, explicit=True)
    assert ((runs == 0).float().mean() - 0.5).abs() < 0.03
    assert torch.allclose(runs.mean(0), full, atol=0.03)
