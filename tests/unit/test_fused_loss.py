"""The fused label-smoothed cross-entropy (``training.loss._SmoothedNLL``) gives the values and
gradients of the log_softmax → gather / mean formula it replaces, for the summed loss and for
the per-token log-probabilities the context margin differentiates."""
import pytest
import torch
import torch.nn.functional as F

from doctrans.training import loss
from doctrans.training.loss import label_smoothed_xent


def _reference(logits, target, eps):
    lprobs = F.log_softmax(logits, dim=-1)
    nll = -lprobs.gather(1, target[:, None]).squeeze(1)
    smooth = -lprobs.mean(dim=-1)
    return ((1 - eps) * nll + eps * smooth).sum(), nll


@pytest.mark.parametrize("chunk", [1 << 21, 25])          # one chunk; chunks of 2 rows and a last of 1
def test_values_and_gradients_equal_the_unfused_formula(monkeypatch, chunk):
    monkeypatch.setattr(loss, "_CHUNK_ELEMENTS", chunk)
    g = torch.Generator().manual_seed(0)
    base = torch.randn(7, 11, generator=g, dtype=torch.float64) * 3
    target = torch.tensor([0, 3, 10, 3, 5, 1, 9])
    weights = torch.randn(7, generator=g, dtype=torch.float64)
    for eps in (0.0, 0.1):
        a = base.clone().requires_grad_(True)
        out = label_smoothed_xent(a, target, eps, token_logprobs=True)
        (out.total + (out.token_logprobs * weights).sum()).backward()
        b = base.clone().requires_grad_(True)
        total, nll = _reference(b, target, eps)
        (total + (-nll * weights).sum()).backward()
        assert torch.allclose(out.total, total, atol=1e-12)
        assert abs(out.terms["nll_nats"] - float(nll.sum())) < 1e-9
        assert torch.allclose(out.token_logprobs, -nll, atol=1e-12)
        assert torch.allclose(a.grad, b.grad, atol=1e-12), eps
        # F.cross_entropy's label smoothing is the same loss (ε/V on every type)
        assert torch.allclose(out.total, F.cross_entropy(base, target, label_smoothing=eps, reduction="sum"))


@pytest.mark.parametrize("chunk", [1 << 21, 20])
def test_bf16_logits_get_a_bf16_gradient_close_to_fp32(monkeypatch, chunk):
    monkeypatch.setattr(loss, "_CHUNK_ELEMENTS", chunk)
    g = torch.Generator().manual_seed(1)
    base = torch.randn(5, 9, generator=g)
    target = torch.tensor([1, 2, 3, 4, 8])
    a = base.to(torch.bfloat16).requires_grad_(True)
    out = label_smoothed_xent(a, target, 0.1)
    out.total.backward()
    b = base.to(torch.bfloat16).float().requires_grad_(True)
    ref, _ = _reference(b, target, 0.1)
    ref.backward()
    assert a.grad.dtype == torch.bfloat16
    assert abs(float(out.total.detach()) - float(ref.detach())) < 1e-4
    assert (a.grad.float() - b.grad).abs().max() < 1e-2
