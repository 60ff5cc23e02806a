"""Every model trains under bf16 autocast (``train.autocast: bf16 | auto``), not only the
Transformer it was measured on: one training step of each pipelines/context YAML (tiny) and of
both backbones runs, its loss is finite and within bf16 rounding of the fp32 loss, and every
parameter that gets a gradient in fp32 gets a finite one in bf16."""
from __future__ import annotations

import pytest
import torch

from doctrans.config import load_experiment
from doctrans.models.build import build_model
from doctrans.training.loss import forward_loss

from conftest import REPO
from test_context_models import VARIANTS, N, doc_batch, model
from test_reconstructor import tiny_model, toy_batch


def _targets(b):
    b.tgt_out = torch.cat([b.tgt_in[:, 1:], torch.zeros(b.tgt_in.size(0), 1, dtype=torch.long)], 1)
    for r in range(b.tgt_in.size(0)):                                   # y… </s>
        b.tgt_out[r, int(b.tgt_in[r].ne(0).sum()) - 1] = 2
    return b


def _step(m, b, bf16: bool):
    m.zero_grad()
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
        out = forward_loss(m, b, 0, 0.1)
    (out.total / out.n_tokens).backward()
    return float(out.total.detach() / out.n_tokens), {k: p.grad.float().clone() for k, p in m.named_parameters()
                                               if p.grad is not None}


@pytest.mark.parametrize("name", sorted(VARIANTS))
def test_context_model_trains_under_bf16_autocast(name):
    m = model(name).train()
    b = _targets(doc_batch(N[name]))
    loss32, grads32 = _step(m, b, bf16=False)
    loss16, grads16 = _step(m, b, bf16=True)
    assert loss16 == pytest.approx(loss32, rel=0.03)
    assert set(grads16) == set(grads32)
    assert all(torch.isfinite(g).all() for g in grads16.values())


REC = [("transformer", {}), ("rnnsearch", {}),                          # the sentence backbones
       ("transformer", {"mode": "both"}), ("rnnsearch", {"mode": "both"}),
       ("transformer", {"mode": "shared", "attention": "enc2dec"}),
       ("transformer", {"mode": "shared", "attention": "dec2enc", "dp_head": "labeler", "target": "original"}),
       ("transformer", {"mode": "shared", "attention": "independent", "dp_head": "predictor", "target": "dpp"})]


@pytest.mark.parametrize("backbone,rec", REC, ids=[f"{b}-{'-'.join(map(str, r.values())) or 'plain'}" for b, r in REC])
def test_backbones_and_reconstructors_train_under_bf16_autocast(backbone, rec):
    if rec:
        m = tiny_model(backbone, **rec).train()
    else:
        torch.manual_seed(0)
        cfg = load_experiment(REPO / "pipelines" / backbone / "tiny.yaml", ["model.dropout=0.0"])
        m = build_model(cfg.model, 24, 24, 0).train()
    b = toy_batch()
    loss32, grads32 = _step(m, b, bf16=False)
    loss16, grads16 = _step(m, b, bf16=True)
    assert loss16 == pytest.approx(loss32, rel=0.03)
    assert set(grads16) == set(grads32)
    assert all(torch.isfinite(g).all() for g in grads16.values())
