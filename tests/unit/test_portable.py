"""``Seq2SeqModel.portable()`` (``models/portable.py: PortableTransformer``) describes the model
exactly: a plain re-implementation of the documented computation from the portable weights gives
the model's own logits (pre-/post-norm, tied/untied output layer, padded sources), without
CTranslate2; models that are no standard Transformer say so (None)."""
from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from doctrans.models.backbones.rnnsearch import RNNSearchConfig
from doctrans.models.backbones.transformer import TransformerConfig
from doctrans.models.build import build_model, portable_models
from doctrans.models.context.concat import ConcatConfig
from doctrans.models.context.han import HANConfig
from doctrans.models.interface import SearchBatch


def reference_logits(p, src: torch.Tensor, tgt_in: torch.Tensor, pad: int = 0) -> torch.Tensor:
    """The PortableTransformer docstring's computation, written out. src (B, S), tgt_in (B, T) → (B, T, V)."""
    w = p.weights
    heads = p.heads

    def lin(x, n):
        return F.linear(x, w[f"{n}.weight"], w.get(f"{n}.bias"))

    def ln(x, n):
        return F.layer_norm(x, x.shape[-1:], w[f"{n}.weight"], w[f"{n}.bias"], p.layer_norm_eps)

    def attend(q, k, v, keep):                       # (B, L, H) each; keep (B, Lq, Lk)
        b, lq, h = q.shape
        dk = h // heads
        split = [t.view(b, t.size(1), heads, dk).transpose(1, 2) for t in (q, k, v)]
        scores = split[0] @ split[1].transpose(-1, -2) / math.sqrt(dk)
        scores = scores.masked_fill(~keep[:, None], float("-inf"))
        return (scores.softmax(-1) @ split[2]).transpose(1, 2).reshape(b, lq, h)

    def sub(z, f, n):
        return z + f(ln(z, n)) if p.pre_norm else ln(z + f(z), n)

    def ffn(z, n):
        return lin(F.relu(lin(z, f"{n}.in")), f"{n}.out")

    src_keep = src.ne(pad)                           # (B, S)
    s, t = src.size(1), tgt_in.size(1)
    x = w["src_embed.weight"][src] * p.embed_scale + p.positions[:s]
    enc_keep = src_keep[:, None, :].expand(-1, s, -1)
    for i in range(p.layers_enc):
        x = sub(x, lambda z: lin(attend(*lin(z, f"enc.{i}.self.qkv").chunk(3, -1), enc_keep), f"enc.{i}.self.out"),
                f"enc.{i}.self.norm")
        x = sub(x, lambda z: ffn(z, f"enc.{i}.ffn"), f"enc.{i}.ffn.norm")
    if p.pre_norm:
        x = ln(x, "enc.norm")
    y = w["tgt_embed.weight"][tgt_in] * p.embed_scale + p.positions[:t]
    causal = torch.ones(t, t, dtype=torch.bool).tril()[None].expand(src.size(0), -1, -1)
    cross_keep = src_keep[:, None, :].expand(-1, t, -1)
    for i in range(p.layers_dec):
        y = sub(y, lambda z: lin(attend(*lin(z, f"dec.{i}.self.qkv").chunk(3, -1), causal), f"dec.{i}.self.out"),
                f"dec.{i}.self.norm")
        y = sub(y, lambda z: lin(attend(lin(z, f"dec.{i}.cross.q"), *lin(x, f"dec.{i}.cross.kv").chunk(2, -1),
                                        cross_keep), f"dec.{i}.cross.out"), f"dec.{i}.cross.norm")
        y = sub(y, lambda z: ffn(z, f"dec.{i}.ffn"), f"dec.{i}.ffn.norm")
    if p.pre_norm:
        y = ln(y, "dec.norm")
    return F.linear(y, w["out_proj.weight"])


@pytest.mark.parametrize("norm,tied", [("pre", True), ("post", False)])
def test_portable_weights_reproduce_the_model(norm, tied):
    torch.manual_seed(0)
    cfg = TransformerConfig(layers_enc=2, layers_dec=2, d_model=16, heads=2, d_ff=24, norm=norm,
                            share_dec_embeddings=tied, dropout=0.3)
    model = build_model(cfg, 23, 19).eval()
    with torch.no_grad():                            # LayerNorms away from their init, so their weights matter
        for m in model.modules():
            if isinstance(m, torch.nn.LayerNorm):
                m.weight.uniform_(0.5, 1.5)
                m.bias.uniform_(-0.2, 0.2)
    src = torch.tensor([[5, 6, 7, 8, 2], [9, 10, 2, 0, 0]])
    tgt_in = torch.tensor([[1, 4, 5, 6], [1, 7, 0, 0]])
    p = model.portable()
    assert (p.pre_norm, p.source_context, p.positions.shape) == (norm == "pre", 0, (cfg.max_positions, 16))
    assert ("enc.norm.weight" in p.weights) == (norm == "pre")
    with torch.no_grad():
        want = model.decode_train(model.encode(SearchBatch(src)), tgt_in)
        got = reference_logits(p, src, tgt_in)
    assert torch.allclose(got, want, atol=1e-5), (got - want).abs().max()
    p.weights["out_proj.weight"].add_(1.0)           # a copy: the model is untouched
    assert torch.equal(model.decode_train(model.encode(SearchBatch(src)), tgt_in), want)


def test_which_models_are_portable():
    t = TransformerConfig(layers_enc=1, layers_dec=1, d_model=16, heads=2, d_ff=16)
    concat = build_model(t, 20, 20, context=ConcatConfig(context_sents=2, max_context_tokens=7)).portable()
    assert (concat.source_context, concat.max_context_tokens) == (2, 7)
    assert build_model(t, 20, 20, context=HANConfig(context_sents=1, heads=2, d_ff=16)).portable() is None
    assert build_model(RNNSearchConfig(emb_size=8, rnn_size=8), 20, 20).portable() is None
    assert "transformer" in portable_models() and "concat" in portable_models() and "han" not in portable_models()
