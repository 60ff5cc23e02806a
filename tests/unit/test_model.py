"""Backbones (every row of BACKBONES, from pipelines/<name>/tiny.yaml): shapes, padding masks,
incremental decoding; the Transformer's weight tying and config checks."""
from __future__ import annotations

import pytest
import torch

from conftest import backbones, tiny_backbone
from doctrans.models.backbones.transformer import Transformer, TransformerConfig
from doctrans.models.build import BACKBONES, build_model
from doctrans.models.interface import EncoderOutput, SearchBatch, Seq2SeqModel

H = 8


def tiny(norm: str = "pre") -> Transformer:
    torch.manual_seed(0)
    cfg = TransformerConfig(layers_enc=2, layers_dec=2, d_model=H, heads=2, d_ff=16, dropout=0.0, norm=norm)
    return Transformer(cfg, src_vocab=20, tgt_vocab=17).eval()


def tiny_of(backbone: str, *overrides: str):
    """(model from pipelines/<backbone>/tiny.yaml with 20 source / 17 target types, eval mode;
    the size of its encoder states)."""
    torch.manual_seed(0)
    cfg = tiny_backbone(backbone, *overrides).model
    m = build_model(cfg, src_vocab=20, tgt_vocab=17).eval()
    return m, m.encoder_size


@pytest.mark.parametrize("backbone", backbones())
def test_every_backbone_has_a_tiny_config(backbone):
    cfg_cls, model_cls = BACKBONES[backbone]
    cfg = tiny_backbone(backbone).model
    assert isinstance(cfg, cfg_cls)
    assert type(build_model(cfg, 20, 17)) is model_cls


@pytest.mark.parametrize("backbone, overrides", [pytest.param(b, (), id=b) for b in backbones()] +
                         [pytest.param("transformer", ("model.norm=post",), id="transformer-post-norm")])
def test_shapes(backbone, overrides):
    m, H = tiny_of(backbone, *overrides)
    src = torch.randint(4, 20, (3, 5))                       # (B, S)
    tgt = torch.randint(4, 17, (3, 7))                       # (B, T)
    assert isinstance(m, Seq2SeqModel)
    enc = m.encode(SearchBatch(src))
    assert enc.states.shape == (3, 5, H) and enc.src_pad_mask.shape == (3, 5)
    assert m.decode_train(enc, tgt).shape == (3, 7, 17)                    # (B, T, V)
    select = torch.zeros(3, 7, dtype=torch.bool)
    select[0, :2] = select[2, 5] = True
    picked = m.decode_train(enc, tgt, select=select)                     # (N, V)
    assert picked.shape == (3, 17)
    assert torch.allclose(picked, m.decode_train(enc, tgt)[select], atol=1e-6)


@pytest.mark.parametrize("backbone", backbones())
def test_padding_does_not_change_real_positions(backbone):
    m, _ = tiny_of(backbone)
    short = torch.tensor([[5, 6, 7, 2]])
    padded = torch.tensor([[5, 6, 7, 2, 0, 0], [5, 6, 7, 8, 9, 2]])
    enc_a = m.encode(SearchBatch(short))
    enc_b = m.encode(SearchBatch(padded))
    assert enc_b.src_pad_mask.tolist() == [[False] * 4 + [True] * 2, [False] * 6]
    assert torch.allclose(enc_a.states[0], enc_b.states[0, :4], atol=1e-6)
    tgt = torch.tensor([[1, 4, 5]])
    h_a = m.decode_train(enc_a, tgt)
    h_b = m.decode_train(enc_b.select(torch.tensor([0])), tgt)
    assert torch.allclose(h_a, h_b, atol=1e-5)


@pytest.mark.parametrize("backbone", backbones())
def test_causal_decoder_ignores_future_tokens(backbone):
    m, _ = tiny_of(backbone)
    enc = m.encode(SearchBatch(torch.tensor([[5, 6, 2]])))
    a = m.decode_train(enc, torch.tensor([[1, 4, 5, 6]]))
    b = m.decode_train(enc, torch.tensor([[1, 4, 9, 9]]))
    assert torch.allclose(a[:, :2], b[:, :2], atol=1e-6)
    assert not torch.allclose(a[:, 2:], b[:, 2:], atol=1e-4)


@pytest.mark.parametrize("backbone", backbones())
def test_incremental_decoding_matches_teacher_forcing(backbone):
    m, H = tiny_of(backbone)
    src = torch.tensor([[5, 6, 7, 2, 0], [8, 9, 10, 11, 2]])
    tgt_in = torch.tensor([[1, 4, 5, 6], [1, 7, 8, 9]])
    with torch.no_grad():
        enc = m.encode(SearchBatch(src))
        full = torch.log_softmax(m.decode_train(enc, tgt_in), -1)             # (B, T, V)
        state = m.init_state(enc)
        steps = []
        for t in range(tgt_in.size(1)):
            lp, state = m.decode_step(state, tgt_in[:, t])
            steps.append(lp)
        steps = torch.stack(steps, 1)
    assert state.step == 4
    assert torch.allclose(full, steps, atol=1e-5)


def test_transformer_cache_holds_every_step_per_head():
    m = tiny()
    with torch.no_grad():
        state = m.init_state(m.encode(SearchBatch(torch.tensor([[5, 6, 7, 2, 0], [8, 9, 10, 11, 2]]))))
        for t in range(4):
            _, state = m.decode_step(state, torch.tensor([1, 4 + t]))
    assert state.layers[0].self_k.shape == (2, 2, 4, H // 2)


def test_decoder_embeddings_are_tied():
    m = tiny()
    assert m.out_proj.weight.data_ptr() == m.tgt_embed.weight.data_ptr()
    untied = Transformer(TransformerConfig(d_model=H, heads=2, d_ff=16, share_dec_embeddings=False), 20, 17)
    assert untied.out_proj.weight.data_ptr() != untied.tgt_embed.weight.data_ptr()


def test_attention_projections_start_with_fairseqs_per_map_bound():
    # fairseq's MultiheadAttention draws q, k and v each as an (H, H) Xavier-uniform map with gain
    # 1/√2: bound sqrt(6 / 2H) / √2. The fused self-attention (3H, H) matrix has that bound by
    # Xavier's own fan; the cross-attention's q (H, H) and fused kv (2H, H) must be drawn per block
    # (plain Xavier would be 1.41× / 1.15× wider: 0.046 nats of dev xent at 400 updates).
    h = 256
    torch.manual_seed(0)
    m = Transformer(TransformerConfig(d_model=h, heads=4, d_ff=64, layers_enc=1, layers_dec=2), 30, 30)
    bound = (6 / (2 * h)) ** 0.5 / 2 ** 0.5
    for layer in m.decoder:
        k, v = layer.cross_attn.kv.weight.chunk(2, dim=0)
        blocks = {"self qkv": layer.self_attn.qkv.weight, "cross q": layer.cross_attn.q.weight, "cross k": k,
                  "cross v": v}
        for name, w in blocks.items():
            top = float(w.detach().abs().max())
            assert 0.99 * bound < top <= bound, (name, top, bound)       # 65,536+ draws reach the edge
            assert abs(float(w.detach().std()) - bound / 3 ** 0.5) < 0.02 * bound, name
    assert float(m.encoder[0].ffn.w1.weight.detach().abs().max()) <= (6 / (h + 64)) ** 0.5   # the rest: Xavier


def test_encoder_output_select_keeps_rows_aligned():
    m = tiny()
    enc = m.encode(SearchBatch(torch.tensor([[5, 6, 2, 0], [7, 8, 9, 2]])))
    sel = enc.select(torch.tensor([1, 1, 0]))
    assert isinstance(sel, EncoderOutput)
    assert torch.equal(sel.states[0], enc.states[1]) and torch.equal(sel.states[2], enc.states[0])
    assert sel.src_pad_mask.tolist() == [[False] * 4, [False] * 4, [False, False, False, True]]


def test_bad_config_is_rejected():
    with pytest.raises(ValueError, match="norm"):
        Transformer(TransformerConfig(d_model=H, heads=2, norm="sandwich"), 10, 10)
    with pytest.raises(ValueError, match="divisible"):
        Transformer(TransformerConfig(d_model=9, heads=2), 10, 10)
    with pytest.raises(ValueError, match="backbone"):
        Transformer(TransformerConfig(backbone="rnnsearch", d_model=H, heads=2), 10, 10)
    with pytest.raises(ValueError, match="joint vocabulary"):
        Transformer(TransformerConfig(d_model=H, heads=2, share_all_embeddings=True), 10, 12)
