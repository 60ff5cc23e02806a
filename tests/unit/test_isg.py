"""Inter-sentence gate, NMT_ISG (models/context/inter_sentence_gate.py, docs/models.md §2.4, S3): c^a_t by
hand over the shared encoder, the gate's extremes (z = 0: the backbone, A ignored; z = 1: c^b_t
out of GRU_2), eos³ at document starts and for +NULL, the RV ablation, incremental decoding with
beam reordering, both ``gate_on`` variants, S3's tuple filter in the data path and the
translate-time ablation switch (``--context-option``) through ``Translator``."""
from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
import torch
from click.testing import CliRunner

from doctrans.cli import cli
from doctrans.config import ConfigError, load_experiment, override_context, to_dict
from doctrans.data.documents import DocData, filter_context_tuples
from doctrans.data.text import TextProcessor
from doctrans.data.vocab import Vocab
from doctrans.inference.translate import TranslateConfig, Translator
from doctrans.models.backbones.rnnsearch import RNNSearch, RNNSearchConfig
from doctrans.models.build import build_model
from doctrans.models.context.inter_sentence_gate import EOS3, InterSentenceGate, ISGConfig
from doctrans.models.interface import SearchBatch
from doctrans.models.rnn_hooks import StepInputs

from conftest import REPO, added_named_parameters, stepwise_equals_teacher_forcing
from conftest import DocBatchStub as Batch

V, E, H = 20, 6, 5


def batch() -> Batch:
    """Rows 0–2 one document (row 0 context only), row 3 a document of one sentence."""
    src = torch.tensor([[4, 5, 6, 2], [7, 2, 0, 0], [8, 9, 2, 0], [13, 2, 0, 0]])
    tgt_in = torch.tensor([[1, 4, 5, 0], [1, 6, 7, 8], [1, 9, 0, 0], [1, 12, 13, 14]])
    return Batch(src, tgt_in, torch.tensor([[-1], [0], [1], [-1]]), torch.tensor([False, True, True, True]))


def isg(seed: int = 0, **cfg) -> InterSentenceGate:
    torch.manual_seed(seed)
    backbone = RNNSearch(RNNSearchConfig(emb_size=E, rnn_size=H, dropout=0.0), V, V)
    return InterSentenceGate(backbone, ISGConfig(**cfg)).double().eval()


def logits(m, b) -> torch.Tensor:
    with torch.no_grad():
        return m.decode_train(m.encode(b), b.tgt_in)


def test_previous_sentence_attention_uses_the_shared_encoder_and_eos3_at_document_start():
    """c^a_t of row 2 = ATT_a(s̃_t) over the *backbone's* Enc(X_1); rows 1 (X_0) and 3 (document
    start: A = eos³ encoded normally) likewise."""
    m, b = isg(), batch()
    with torch.no_grad():
        rows = m.hook(m.encode(b)).rows
        s_tilde = torch.randn(4, H).double()
        c_a = m.attend_previous(s_tilde, rows)
        for r, a in ((1, b.src[0:1, :4]), (2, b.src[1:2, :2]), (3, torch.tensor([EOS3]))):
            h_a = m.backbone.encode(SearchBatch(a)).states[0]                      # (L, 2H)
            alpha = torch.softmax(m.att_a_v(torch.tanh(m.att_a_key(h_a) + m.att_a_query(s_tilde[r]))).squeeze(-1), 0)
            assert torch.allclose(c_a[r], alpha @ h_a, atol=1e-12), r


def test_eos3_is_the_empty_context_and_null_ablation_reads_it_everywhere():
    """A document start = a row whose previous sentence is literally "eos eos eos"; +NULL
    (A := eos³ for every row) = that for every row, and differs from reading the real A."""
    m, b = isg(), batch()
    explicit = Batch(torch.tensor([[2, 2, 2, 0], [7, 2, 0, 0], [2, 2, 2, 0], [8, 9, 2, 0], [2, 2, 2, 0],
                                   [13, 2, 0, 0]]),
                     b.tgt_in[[0, 1, 0, 2, 0, 3]], torch.tensor([[-1], [0], [-1], [2], [-1], [4]]),
                     torch.tensor([False, True, False, True, False, True]))
    out, ref = logits(m, b), logits(m, explicit)
    assert torch.allclose(out[3], ref[5], atol=1e-12)                             # document start
    null = logits(replace_cfg(m, test_ablation="null"), b)
    for r, e in ((1, 1), (2, 3), (3, 5)):
        assert torch.allclose(null[r], ref[e], atol=1e-12)
    assert not torch.allclose(null[1:3], out[1:3], atol=1e-4)


def replace_cfg(m: InterSentenceGate, **changes) -> InterSentenceGate:
    """The same weights under a changed config (what ``--context-option`` does to a checkpoint)."""
    other = InterSentenceGate(RNNSearch(m.backbone.cfg, V, V), replace(m.cfg, **changes)).double().eval()
    other.load_state_dict(m.state_dict())
    return other


@pytest.mark.parametrize("gate_on", ["context", "projected"])
def test_z_zero_ignores_the_previous_sentence_and_is_the_backbone(gate_on):
    m = isg(gate_on=gate_on)
    zero = replace_cfg(m, test_ablation="zero")
    b, other = batch(), batch()
    other.src[0, :3] = torch.tensor([15, 16, 17])                                 # another X_0
    out = logits(zero, b)
    assert torch.allclose(out[1:], logits(zero, other)[1:], atol=1e-12)          # (row 0: context only)
    with torch.no_grad():
        base = m.backbone.decode_train(m.backbone.encode(SearchBatch(b.src)), b.tgt_in)
    assert torch.allclose(out[1:], base[1:], atol=1e-12)
    assert not torch.allclose(logits(m, b)[1], logits(m, other)[1], atol=1e-4)  # the gate on: row 1 reads X_0


@pytest.mark.parametrize("gate_on", ["context", "projected"])
def test_z_one_takes_the_current_sentence_out_of_gru2(gate_on):
    """z_t = 1 (gate weights 0, bias +50): GRU_2's input is C_1 c^a_t whatever c^b_t is; the
    gate has the width of c (2H) or of one GRU block (H)."""
    m = isg(gate_on=gate_on)
    assert m.gate.out_features == (2 * H if gate_on == "context" else H)
    with torch.no_grad():
        m.gate.weight.zero_()
        m.gate.bias.fill_(50.0)
        rows = m.hook(m.encode(batch())).rows
        s, s_tilde, emb = torch.randn(4, H).double(), torch.randn(4, H).double(), torch.randn(4, E).double()
        outs = [m.step(StepInputs(s, s_tilde, torch.randn(4, 2 * H).double(), emb, rows)).gru2_input
                for _ in range(2)]
        c_a = m.attend_previous(s_tilde, rows)
    assert torch.allclose(outs[0], outs[1], atol=1e-12)
    assert torch.allclose(outs[0], m.ctx_gru2(c_a), atol=1e-12)


def test_gate_interpolates_the_two_contexts_as_eq10():
    """``context``: W_ih((1 − z) ⊙ c^b) + C_1(z ⊙ c^a); ``projected``: (1 − z̄) ⊙ W_ih c^b + z̄ ⊙ C_1 c^a."""
    for gate_on in ("context", "projected"):
        m = isg(gate_on=gate_on)
        with torch.no_grad():
            rows = m.hook(m.encode(batch())).rows
            x = StepInputs(torch.randn(4, H).double(), torch.randn(4, H).double(), torch.randn(4, 2 * H).double(),
                           torch.randn(4, E).double(), rows)
            c_a = m.attend_previous(x.s_tilde, rows)
            z = torch.sigmoid(m.gate(torch.cat([x.s_prev, x.emb, x.c, c_a], -1)))
            w = m.backbone.gru2.weight_ih
            if gate_on == "context":
                ref = ((1 - z) * x.c) @ w.T + (z * c_a) @ m.ctx_gru2.weight.T
            else:
                z3 = torch.cat([z, z, z], -1)
                ref = (1 - z3) * (x.c @ w.T) + z3 * (c_a @ m.ctx_gru2.weight.T)
            assert torch.allclose(m.step(x).gru2_input, ref, atol=1e-12), gate_on


def test_readout_keeps_the_current_context_only():
    """Eq. 11: o_t reads c^b_t; the model adds no readout term."""
    m = isg()
    with torch.no_grad():
        rows = m.hook(m.encode(batch())).rows
        extra = m.step(StepInputs(torch.randn(4, H).double(), torch.randn(4, H).double(),
                                  torch.randn(4, 2 * H).double(), torch.randn(4, E).double(), rows))
    assert extra.readout is None and extra.gru2 is None and extra.keep is None


def test_random_vector_ablation_is_seeded_and_changes_the_output():
    m = isg()
    rv = replace_cfg(m, test_ablation="random")
    b = batch()
    with torch.no_grad():
        enc = rv.encode(b)
    v = enc.extra["isg_rv"]
    assert v.shape == (4, 2 * H) and v.abs().max() <= 1 and v.min() < 0 < v.max()
    out = logits(rv, b)
    assert torch.equal(out, logits(rv, b))                                         # deterministic per call
    assert not torch.allclose(out[1:], logits(m, b)[1:], atol=1e-4)
    assert not torch.allclose(out[1:], logits(replace_cfg(m, test_ablation="random", random_seed=1), b)[1:],
                              atol=1e-4)
    other = batch()
    other.src[0, :3] = torch.tensor([15, 16, 17])
    assert torch.allclose(out[1:], logits(rv, other)[1:], atol=1e-12)              # A no longer read


@pytest.mark.parametrize("cfg", [{}, {"gate_on": "projected"}, {"test_ablation": "random"},
                                 {"test_ablation": "null"}, {"test_ablation": "zero"}])
def test_incremental_decoding_with_reordering_matches_teacher_forcing(cfg):
    m, b = isg(**cfg), batch()
    assert stepwise_equals_teacher_forcing(m, b, torch.tensor([3, 1, 1, 2]))   # decode_step: float32


def test_gradients_reach_the_shared_encoder_through_the_previous_sentence():
    """A is read by the backbone's encoder with gradient (nothing frozen, S3): a context-only
    row's tokens get gradient through h^a."""
    m, b = isg(), batch()
    m.train()
    emb = m.backbone.src_embed.weight
    loss = m.decode_train(m.encode(b), b.tgt_in)[1].sum()                          # row 1 reads row 0
    grad = torch.autograd.grad(loss, emb)[0]
    assert grad[[4, 5, 6]].abs().sum() > 0                                         # tokens of row 0 only


def test_bad_configs_are_refused():
    backbone = RNNSearch(RNNSearchConfig(emb_size=E, rnn_size=H), V, V)
    for bad in ({"context_sents": 2}, {"gate_on": "both"}, {"test_ablation": "rv"}, {"empty_context": "mask"},
                {"max_len": -1}):
        with pytest.raises(ValueError):
            InterSentenceGate(backbone, ISGConfig(**bad))


def test_tuple_filter_drops_long_and_mismatched_tuples_in_the_data_path(caplog):
    """S3 footnote 1: x, A or y over max_len, or |x| and |A| more than max_len_ratio apart (only
    where A exists); each rule's count logged; a dropped line stays as context."""
    lens = [(3, 3), (4, 4), (13, 4), (4, 60), (2, 2), (7, 7)]      # (|x|, |y|) without </s>; docs 0–3, 4–5
    data = DocData([np.arange(4, 5 + n) for n, _ in lens], [np.arange(4, 5 + n) for _, n in lens],
                   np.array([0, 0, 0, 0, 1, 1]), np.array([0, 1, 2, 3, 0, 1]), np.ones(6, dtype=bool),
                   ["a", "b"], np.array([0, 4, 6]))
    m = isg(max_len=50, max_len_ratio=3.0)
    with caplog.at_level("INFO"):
        counts = filter_context_tuples(data, m.context_filter, 1)
    # line 2: 13 vs A = 4 (3.25 > 3); line 3: y of 60 and 4 vs A = 13; line 5: 7 vs 2 (3.5);
    # lines 0, 4: document starts (eos³ not compared), though 7 / 2 would fail
    assert counts == {"max_len": 1, "len_ratio": 3}
    assert data.is_target.tolist() == [True, True, False, False, True, False]
    assert "len_ratio: 3 of 6" in caplog.text
    data.is_target[:] = True
    assert filter_context_tuples(data, isg(max_len=0, max_len_ratio=0).context_filter, 1) == {}


def test_yaml_starts_from_the_backbone_and_freezes_nothing():
    exp = load_experiment(REPO / "pipelines" / "context" / "isg.yaml")
    assert exp.context.type == "isg" and exp.model.backbone == "rnnsearch"
    assert exp.train.init_from.endswith("rnnsearch-small/last.pt") and not exp.train.freeze
    with torch.device("meta"):
        model = build_model(exp.model, 100, 100, 0, exp.context)
    new = {n.split(".")[0] for n, _ in added_named_parameters(model)}
    assert new == {"att_a_query", "att_a_key", "att_a_v", "gate", "ctx_gru2"}   # S3's gate-related parts


def test_context_option_overrides_the_checkpoint_config(tmp_path):
    """``Translator(context_options=…)`` (``doctrans translate --context-option``) rebuilds the
    checkpoint's context config: the ablation reaches the model, which translates the second
    sentence of a document the same whatever the first is under z = 0; unknown keys fail."""
    vocab = Vocab(["<pad>", "<s>", "</s>", "<unk>"] + [f"t{i}" for i in range(V - 4)])
    exp = load_experiment(REPO / "pipelines" / "rnnsearch" / "tiny.yaml",
                          ["context={type: isg}", "model.dropout=0.0"])
    torch.manual_seed(0)
    model = build_model(exp.model, V, V, 0, exp.context)
    text = TextProcessor("en", bpe_codes_text="#version: 0.2\n").settings()
    ck = tmp_path / "isg.pt"
    torch.save({"model": model.state_dict(), "config": to_dict(exp), "vocab": {"src": vocab.tokens, "tgt": vocab.tokens},
                "text": {"src": text, "tgt": text}}, ck)

    def translator(*options):
        return Translator(TranslateConfig(checkpoint=str(ck), input_format="bpe", tokenized=True, beam=2,
                                          max_len_extra=3, context_options=options))

    assert translator().model.cfg.test_ablation == "none"
    zero = translator("test_ablation=zero", "random_seed=3")
    assert (zero.model.cfg.test_ablation, zero.model.cfg.random_seed) == ("zero", 3)
    docs = [["t1 t2 t3", "t4 t5"], ["t9 t9 t8 t7 t6", "t4 t5"]]
    outs = [zero.translate(d, doc_ids=["d", "d"])[1] for d in docs]
    assert outs[0] == outs[1]
    assert override_context(exp.context, ["test_ablation=null"]).test_ablation == "null"   # not YAML's None
    with pytest.raises(ConfigError, match="unknown key 'ablation'.*test_ablation"):
        translator("ablation=zero")
    with pytest.raises(ValueError, match="test_ablation"):
        translator("test_ablation=rv")                                              # the model refuses it
    with pytest.raises(ConfigError, match="type"):
        override_context(exp.context, ["type=hrnn"])
    with pytest.raises(ConfigError, match="no context model"):
        override_context(None, ["test_ablation=zero"])
    assert override_context(exp.context, []) is exp.context
    src = tmp_path / "in.txt"
    src.write_text("t1 t2 t3\nt4 t5\n", encoding="utf-8")
    args = ["translate", "-c", str(ck), "-i", str(src), "-o", str(tmp_path / "out.txt"), "--input-format", "bpe",
            "--tokenized", "--beam", "1", "--threads", "1", "--max-len-extra", "3"]
    res = CliRunner().invoke(cli, args + ["--context-option", "test_ablation=null"])
    assert res.exit_code == 0, res.output
    assert len((tmp_path / "out.txt").read_text(encoding="utf-8").splitlines()) == 2
    res = CliRunner().invoke(cli, args + ["--context-option", "ablation=null"])
    assert isinstance(res.exception, ConfigError) and "unknown key 'ablation'" in str(res.exception)
