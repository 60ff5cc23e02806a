"""Multi-encoder context (models/context/multi_encoder.py, docs/models.md §2.2): Enc'/ATT' by hand, the
first sentence = the backbone, incremental decoding with beam reordering, the frozen-baseline
starting point and the parameter count at the thesis' size (S2 Table 3.9: +20.0M)."""
from __future__ import annotations


import torch

from conftest import REPO, added_parameters, stepwise_equals_teacher_forcing
from conftest import DocBatchStub as Batch
from doctrans.config import load_experiment
from doctrans.models.backbones.rnnsearch import RNNSearch, RNNSearchConfig
from doctrans.models.build import build_model
from doctrans.models.context.multi_encoder import MultiEncoder, MultiEncoderConfig
from doctrans.models.interface import SearchBatch
from doctrans.models.rnn_hooks import StepInputs

V, E, H = 20, 6, 5


def batch() -> Batch:
    """Rows 0–2 one document (row 0 context only), row 3 a document of one sentence."""
    src = torch.tensor([[4, 5, 6, 2], [7, 2, 0, 0], [8, 9, 2, 0], [13, 2, 0, 0]])
    tgt_in = torch.tensor([[1, 4, 5, 0], [1, 6, 7, 8], [1, 9, 0, 0], [1, 12, 13, 14]])
    return Batch(src, tgt_in, torch.tensor([[-1], [0], [1], [-1]]), torch.tensor([False, True, True, True]))


def multi(seed: int = 0) -> MultiEncoder:
    torch.manual_seed(seed)
    backbone = RNNSearch(RNNSearchConfig(emb_size=E, rnn_size=H, dropout=0.0), V, V)
    return MultiEncoder(backbone, MultiEncoderConfig()).double().eval()


def test_context_attention_reads_the_previous_sentence_encoded_by_its_own_encoder():
    """c'_t of row 2 = ATT'(s̃_t) over Enc'(X_1) computed on its own; row 3 (no X_{m-1}): c'_t = 0."""
    m, b = multi(), batch()
    with torch.no_grad():
        enc = m.encode(b)
        hook = m.hook(enc)
        ref = m.ctx_encoder(m.backbone.src_embed(b.src[1:2, :2]))[0][0]           # (2, 2H): "t7 </s>"
        s_tilde = torch.randn(4, H).double()
        q = m.ctx_query(s_tilde[2])
        alpha = torch.softmax(m.ctx_v(torch.tanh(m.ctx_key(ref) + q)).squeeze(-1), 0)
        c_ref = alpha @ ref                                                         # (2H,)
        zero = torch.zeros(4, 2 * H).double()
        out = m.step(StepInputs(zero[:, :H], s_tilde, zero, torch.zeros(4, E).double(), hook.rows))
    assert torch.allclose(out.gru2[2], m.ctx_gru2(c_ref), atol=1e-12)
    assert torch.allclose(out.readout[2], m.ctx_readout(c_ref), atol=1e-12)
    assert out.gru2[3].eq(0).all() and out.readout[3].eq(0).all()


def test_new_parameters_zeroed_compute_the_backbone_and_first_sentences_always_do():
    m, b = multi(), batch()
    with torch.no_grad():
        ref = m.backbone.decode_train(m.backbone.encode(SearchBatch(b.src)), b.tgt_in)
        out = m.decode_train(m.encode(b), b.tgt_in)
        assert torch.allclose(out[3], ref[3], atol=1e-12)                           # no previous sentence
        assert not torch.allclose(out[1:3], ref[1:3], atol=1e-4)
        for name, p in m.named_parameters():
            if not name.startswith("backbone."):
                p.zero_()
        assert torch.allclose(m.decode_train(m.encode(b), b.tgt_in)[1:], ref[1:], atol=1e-12)


def test_incremental_decoding_with_reordering_matches_teacher_forcing():
    m, b = multi(), batch()
    assert stepwise_equals_teacher_forcing(m, b, torch.tensor([3, 1, 1, 2]))   # decode_step: float32


def test_parameters_added_at_the_thesis_size():
    """S2 Table 3.9: MULTI adds 20.0M (E 620, H 1000): Enc' 9.73M + ATT' 3.0M + GRU_2 input
    2H → 3H 6.0M + readout C'_o 1.24M = 19.97M (docs/models.md §2.2), within 1 %. Meta device."""
    exp = load_experiment(REPO / "pipelines" / "context" / "multi_encoder.yaml")
    base = load_experiment(REPO / "pipelines" / "rnnsearch" / "base.yaml").model
    with torch.device("meta"):
        model = build_model(base, 35000, 35000, 0, exp.context)
    added = added_parameters(model)
    e, h = 620, 1000
    parts = {"enc'": 2 * (3 * h * (e + h) + 6 * h), "att'": h * h + h + 2 * h * h + h, "gru2": 2 * h * 3 * h,
             "readout": 2 * h * e}
    assert added == sum(parts.values()) == 19_974_000
    assert abs(added - 20.0e6) / 20.0e6 < 0.01
