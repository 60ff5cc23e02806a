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
from doctrans.inference.config import SearchOptions

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


class _Recorder:
    """A ``documents.DocumentReranker`` that records each call of the wrapped reranker."""

    def __init__(self, inner):
        self.inner, self.k, self.calls = inner, inner.k, []

    def __call__(self, batch, encoded, chunk, nbest, states):
        chosen = self.inner(batch, encoded, chunk, nbest, states)
        self.calls.append((batch, list(chunk), nbest, chosen, self.inner.scores(batch, encoded, chunk, nbest, states)))
        return chosen


def test_reranking_documents_scores_each_candidate_with_its_document_context():
    """`translate --rerank reconstructor` on a model that reads documents: every candidate of a
    sentence is scored s_beam + λ·log R(x̂ | s(y)) / |x̂| with the encoder states of its own document
    batch (the previous sentences read) — recomputed here teacher-forced, without the beam's kept
    decoder states — the best one is the translation, and k = 1 gives the plain translation."""
    import numpy as np

    from doctrans.inference.documents import translate_documents
    from doctrans.inference.reconstruction import DocumentRerank
    from doctrans.models.interface import SearchBatch

    m = _build("han_encoder", REC, seed=3)
    gen = torch.Generator().manual_seed(0)
    docs = [[np.array([*torch.randint(4, len(VOCAB), (int(n),), generator=gen).tolist(), 2]) for n in lens]
            for lens in ([3, 4, 2, 5], [4, 3])]
    targets = [list(d) for d in docs]                              # x̂ = the source (the joint labeler's)
    args = (VOCAB, SearchOptions(4, 1.0, 1.5, 3, 8, history_chunk=0))
    plain = translate_documents(m, docs, *args)
    assert translate_documents(m, docs, *args, rerank=DocumentRerank(m, targets, 0.3, 1, 0, 1)) == plain
    rec = _Recorder(DocumentRerank(m, targets, 5.0, 4, 0, 1))      # λ large: log R decides
    out = translate_documents(m, docs, *args, rerank=rec)
    assert sum(len(c[1]) for c in rec.calls) == 6
    moved = 0
    with torch.no_grad():
        for batch, chunk, nbest, chosen, scores in rec.calls:
            enc = m.encode(batch)
            for r, (d, i) in enumerate(chunk):
                rows = enc.select(torch.tensor([r] * len(nbest[r])))
                tgt_in = torch.nn.utils.rnn.pad_sequence([torch.tensor([1, *ids]) for _, ids in nbest[r]],
                                                         batch_first=True)
                x_hat = torch.tensor(targets[d][i]).expand(len(nbest[r]), -1)
                log_r = m.reconstruction_score(rows, tgt_in, x_hat)
                combined = [s + 5.0 * float(lr) / len(targets[d][i]) for (s, _), lr in zip(nbest[r], log_r)]
                assert np.allclose(scores[r], combined, atol=1e-4)   # states kept by the beam = teacher-forced
                assert chosen[r] == int(np.argmax(combined))
                assert out[d][i] == VOCAB.decode(nbest[r][chosen[r]][1])
                moved += chosen[r] != 0
                alone = m.encode(SearchBatch(torch.tensor(docs[d][i])[None]))    # no context: other states
                if i > 0:
                    assert not torch.allclose(alone.states[0], enc.states[r, :len(docs[d][i])], atol=1e-4)
    assert moved > 0                                               # the reconstructor changed some choice


def test_reranking_sub_document_models_is_refused_clearly():
    import numpy as np

    from doctrans.inference.documents import translate_documents

    class Any:
        k = 2

        def __call__(self, *a):
            return [0]

    hgc = _build("hgc", None)
    docs = [[np.array([4, 5, 2]), np.array([6, 2])]]
    with pytest.raises(ValueError, match="sub-document"):
        translate_documents(hgc, docs, VOCAB, SearchOptions(beam=2, lenpen=1.0, max_len_ratio=1.5, max_len_extra=3, batch_sentences=8, history_chunk=0, warmup_beam=0), rerank=Any())
