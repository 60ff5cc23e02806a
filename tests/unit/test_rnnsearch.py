"""RNNSearch specifics (docs/models.md §1.2) beyond the backbone-parametrized tests of test_model.py:
the thesis-size parameter count, every option against incremental decoding and padding, the
y_0 = 0 convention, attention keys computed once per sentence, config checks."""
from __future__ import annotations

import pytest
import torch

from conftest import tiny_backbone
from doctrans.models.backbones.rnnsearch import RNNSearch, RNNSearchConfig
from doctrans.models.build import build_model
from doctrans.models.interface import SearchBatch

OPTIONS = [(), ("model.init=last",), ("model.maxout_part=2",), ("model.bos_zero=false",),
           ("model.share_dec_embeddings=true",), ("model.attn_size=12", "model.emb_size=16")]


def tiny(*overrides: str) -> RNNSearch:
    torch.manual_seed(0)
    return build_model(tiny_backbone("rnnsearch", *overrides).model, src_vocab=20, tgt_vocab=17).eval()


def test_thesis_size_has_86_6m_parameters():
    """E=620, H=1000, A=H, no maxout, 30K+1 source and target types (S2 ch.5 reports 86.7M):

    embeddings 2 × 30001·620 = 37.20M; bi-GRU encoder 2 × (3H·E + 3H·H + 6H) = 9.73M;
    W_init 2H·H + H = 2.00M; GRU_1 3H·E + 3H·H + 6H = 4.87M; attention W_a H·A + A, U_a 2H·A,
    v_a A = 3.00M; GRU_2 3H·2H + 3H·H + 6H = 9.01M; readout (H + 2H + E)·E + E = 2.25M;
    output layer E·V + V = 18.63M. Total 86.68M (PyTorch's GRU has two bias vectors per gate,
    +6H per cell over the Theano code). Built on the meta device: nothing is allocated.
    """
    with torch.device("meta"):
        m = RNNSearch(RNNSearchConfig(emb_size=620, rnn_size=1000, dropout=0.5), 30001, 30001)
    n = sum(p.numel() for p in m.parameters())
    assert abs(n - 86.6e6) <= 0.005 * 86.6e6, n
    assert n == 86_683_881


@pytest.mark.parametrize("overrides", OPTIONS, ids=lambda o: ",".join(o) or "default")
def test_every_option_decodes_incrementally_as_teacher_forcing(overrides):
    m = tiny(*overrides)
    src = torch.tensor([[5, 6, 7, 2, 0, 0], [8, 9, 10, 11, 12, 2]])
    tgt_in = torch.tensor([[1, 4, 5, 6, 7], [1, 7, 8, 9, 10]])
    with torch.no_grad():
        enc = m.encode(SearchBatch(src))
        full = torch.log_softmax(m.decode_train(enc, tgt_in), -1)                 # (B, T, V)
        state, steps = m.init_state(enc), []
        for t in range(tgt_in.size(1)):
            lp, state = m.decode_step(state, tgt_in[:, t])
            steps.append(lp)
        # padding invariance of the whole model: row 0 alone, unpadded
        alone = torch.log_softmax(m.decode_train(m.encode(SearchBatch(src[:1, :4])), tgt_in[:1]), -1)
    assert torch.allclose(full, torch.stack(steps, 1), atol=1e-5)
    assert torch.allclose(full[:1], alone, atol=1e-5)


def test_bos_zero_never_reads_the_bos_embedding():
    src, tgt_in = torch.tensor([[5, 6, 2]]), torch.tensor([[1, 4, 5]])
    for bos_zero in (True, False):
        m = tiny(f"model.bos_zero={str(bos_zero).lower()}")
        with torch.no_grad():
            enc = m.encode(SearchBatch(src))
            before = m.decode_train(enc, tgt_in)
            m.tgt_embed.weight[1].add_(1.0)                                       # <s>
            after = m.decode_train(enc, tgt_in)
        assert torch.allclose(before, after) == bos_zero


def test_attention_keys_are_projected_once_per_sentence():
    m = tiny()
    calls = []
    m.attn_key.register_forward_hook(lambda *_: calls.append(1))
    with torch.no_grad():
        enc = m.encode(SearchBatch(torch.tensor([[5, 6, 7, 2]])))
        m.decode_train(enc, torch.tensor([[1, 4, 5, 6, 7, 8]]))
        assert len(calls) == 1
        state = m.init_state(enc)
        for t in range(5):
            _, state = m.decode_step(state, torch.tensor([4 + t]))
    assert len(calls) == 2


def test_shapes_and_sizes():
    m = tiny("model.emb_size=16", "model.rnn_size=12", "model.maxout_part=2")
    enc = m.encode(SearchBatch(torch.tensor([[5, 6, 7, 2], [8, 2, 0, 0]])))
    assert enc.states.shape == (2, 4, 24) and m.encoder_size == 24                 # (B, S, 2H)
    assert torch.equal(enc.states[1, 2:], torch.zeros(2, 24))                     # zeros at padding
    hidden = m.decode_hidden(enc, torch.tensor([[1, 4, 5], [1, 6, 0]]))
    assert hidden.shape == (2, 3, 16) and m.hidden_size == 16                     # (B, T, E)
    assert m.output_logits(hidden).shape == (2, 3, 17)


def test_dropout_is_on_the_readout_only():
    m = tiny("model.dropout=0.5").train()
    enc = m.encode(SearchBatch(torch.tensor([[5, 6, 7, 2]])))
    torch.manual_seed(1)
    a = m.decode_hidden(enc, torch.tensor([[1, 4, 5]]))
    torch.manual_seed(2)
    b = m.decode_hidden(enc, torch.tensor([[1, 4, 5]]))
    assert torch.equal(a, b)                                                      # no dropout before o_t
    assert not torch.equal(m.output_logits(a), m.output_logits(a))


def test_bad_config_is_rejected():
    with pytest.raises(ValueError, match="init"):
        RNNSearch(RNNSearchConfig(init="first"), 10, 10)
    with pytest.raises(ValueError, match="maxout_part"):
        RNNSearch(RNNSearchConfig(maxout_part=0), 10, 10)
    with pytest.raises(ValueError, match="backbone"):
        RNNSearch(RNNSearchConfig(backbone="transformer"), 10, 10)


@pytest.mark.parametrize("context", ["{type: concat, context_sents: 2}",
                                     "{type: han, attach: both, context_sents: 2, heads: 2, d_ff: 16, dropout: 0.0}"])
def test_context_models_wrap_rnnsearch(context):
    """The context models use only the contract and ``BackboneParts`` (HAN: its encoder block at
    ``encoder_size`` = 2H, its decoder block at ``hidden_size`` = E): incremental decoding of a
    document batch equals teacher forcing, and a row without context is the plain backbone."""
    from dataclasses import dataclass

    @dataclass
    class DocBatch:
        src: torch.Tensor
        tgt_in: torch.Tensor
        ctx: torch.Tensor
        is_target: torch.Tensor

    torch.manual_seed(0)
    cfg = tiny_backbone("rnnsearch", f"context={context}")
    m = build_model(cfg.model, 20, 20, 0, cfg.context).eval()
    b = DocBatch(torch.tensor([[4, 5, 2, 0], [6, 7, 8, 2], [9, 2, 0, 0], [10, 11, 2, 0]]),
                 torch.tensor([[1, 12, 13, 0], [1, 14, 0, 0], [1, 15, 16, 17], [1, 18, 0, 0]]),
                 torch.tensor([[-1, -1], [-1, 0], [0, 1], [-1, -1]]), torch.tensor([False, True, True, True]))
    with torch.no_grad():
        enc = m.encode(b)
        full = torch.log_softmax(m.decode_train(enc, b.tgt_in), -1)
        state, steps = m.init_state(enc), []
        for t in range(b.tgt_in.size(1)):
            lp, state = m.decode_step(state, b.tgt_in[:, t])
            steps.append(lp)
        base = torch.log_softmax(m.backbone.decode_train(m.backbone.encode(b), b.tgt_in), -1)
    assert torch.allclose(full, torch.stack(steps, 1), atol=1e-5)
    assert torch.allclose(full[3], base[3], atol=1e-5)
    assert not torch.allclose(full[2], base[2], atol=1e-4)
