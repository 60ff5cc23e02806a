"""A reconstructor over a context model (models/reconstructor.py, "Over a context model";
pipelines/dp/rec_joint_labeler_han.yaml): the wrapped HAN encoder's encoding, decoder states,
document spec and loss terms are what the reconstructors read and add to; the sentence weights sit
two prefixes deep; §2.12's own context beside a context model is refused."""
from __future__ import annotations

import pytest
import torch

from doctrans.config import load_experiment, to_dict
from doctrans.models.build import build_model
from doctrans.models.interface import DocumentSpec, Seq2SeqModel

from conftest import REPO, stepwise_equals_teacher_forcing
from test_context_models import VARIANTS, VOCAB, doc_batch

REC = to_dict(load_experiment(REPO / "pipelines" / "dp" / "rec_joint_labeler_han.yaml").model.reconstructor)


def _flow(d: dict) -> str:
    return str(d).replace("'", "").replace("True", "true").replace("False", "false")


def _build(name: str, rec: dict | None, seed: int = 0):
    torch.manual_seed(seed)
    over = ["model.dropout=0.0", f"context={_flow(VARIANTS[name])}"]
    if rec is not None:
        over.append(f"model.reconstructor={_flow({**rec, 'dp_vocab': ['他', '它']})}")
    cfg = load_experiment(REPO / "pipelines" / "transformer" / "tiny.yaml", over)
    return build_model(cfg.model, len(VOCAB), len(VOCAB), 0, cfg.context).eval()


def test_the_shipped_yaml_is_the_labeler_over_the_han_encoder():
    cfg = load_experiment(REPO / "pipelines" / "dp" / "rec_joint_labeler_han.yaml")
    assert cfg.context.type == "han" and cfg.context.attach == "encoder" and cfg.context.context_sents == 3
    assert cfg.model.reconstructor.dp_head == "labeler" and cfg.model.reconstructor.context_sents == 0


@pytest.mark.parametrize("name", ["han_encoder", "qcn"])
def test_the_wrapped_context_model_translates_and_the_reconstructor_reads_its_states(name):
    han = _build(name, None)
    rec = _build(name, REC)
    assert isinstance(rec, Seq2SeqModel)
    rec.backbone.load_state_dict(han.state_dict(), strict=True)                # the same context model inside
    b = doc_batch(2)
    assert rec.document == han.document == DocumentSpec(2)
    assert rec.sentence_weights_prefix == "backbone.backbone."
    with torch.no_grad():
        e1, e2 = han.encode(b), rec.encode(b)
        assert torch.equal(e1.states, e2.states)                              # the context reaches the states
        assert torch.equal(han.decode_train(e1, b.tgt_in), rec.decode_train(e2, b.tgt_in))
        alone = han.backbone.encode(b)
        assert not torch.allclose(alone.states[2], e2.states[2], atol=1e-4)   # row 2 reads rows 0, 1
    assert stepwise_equals_teacher_forcing(rec, b, atol=1e-5)
    names = {n for n, _ in rec.named_parameters()}
    assert "backbone.backbone.src_embed.weight" in names and any(n.startswith("rec_shared.") for n in names)
    assert rec.rec_shared.out.weight.shape[0] == len(VOCAB)             # x̂ over the source vocabulary
    assert not any(n.startswith("backbone.rec") for n in names)


def test_loss_terms_of_the_context_model_are_kept_beside_the_reconstructors():
    """QCN's PCC term (its ``auxiliary_losses``) survives the wrapper; the labeler adds rec and dp."""
    m = _build("qcn", REC).train()
    b = doc_batch(2)
    b.rec_tgt = torch.tensor([[4, 5, 2, 0], [6, 7, 8, 2], [9, 2, 0, 0], [10, 11, 2, 0]])
    b.dp_tgt = torch.tensor([[1, 0, 0, 0], [0, 0, 0, 2], [0, 0, 0, 0], [0, 0, 1, 0]])
    b.n_targets = 6
    enc = m.encode(b)
    m.decode_train(enc, b.tgt_in)
    inner = m.backbone.auxiliary_losses(enc, b)
    terms = m.auxiliary_losses(enc, b)
    assert inner and set(inner) < set(terms) and {"rec", "dp"} <= set(terms)
    assert all(torch.isfinite(v) for v in terms.values())


def test_own_cross_sentence_context_beside_a_context_model_is_refused():
    with pytest.raises(ValueError, match="context_sents > 0 cannot be combined with a context model"):
        _build("han_encoder", {**REC, "context_sents": 2})
