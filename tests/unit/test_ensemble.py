"""Decoding-time ensembles (models/ensemble.py, ``translate --ensemble``): the mixture rules, a
model ensembled with itself, a weight of 0 removing a member, and a document model with a
sentence model — each member reads what it reads alone (the context model its document batch,
the sentence model its sentences)."""
from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from doctrans.config import load_experiment
from doctrans.data.vocab import Vocab
from doctrans.inference.beam_search import beam_search
from doctrans.inference.documents import translate_documents
from doctrans.models.build import build_model
from doctrans.models.ensemble import Ensemble
from doctrans.models.interface import missing_members, Seq2SeqModel
from doctrans.inference.config import SearchOptions

from conftest import REPO

VOCAB = Vocab(["<pad>", "<s>", "</s>", "<unk>"] + [f"t{i}" for i in range(16)])
KW = SearchOptions(beam=3, lenpen=1.0, max_len_ratio=1.5, max_len_extra=4, batch_sentences=8, history_chunk=0)


def _model(seed: int, context: str = ""):
    torch.manual_seed(seed)
    over = ["model.dropout=0.0"] + ([f"context={{{context}}}"] if context else [])
    cfg = load_experiment(REPO / "pipelines" / "transformer" / "tiny.yaml", over)
    return build_model(cfg.model, len(VOCAB), len(VOCAB), 0, cfg.context).eval()


def _docs(seed: int = 0):
    rng = np.random.default_rng(seed)
    return [[np.r_[rng.integers(4, 20, int(rng.integers(2, 6))), 2] for _ in range(n)] for n in (4, 3)]


def test_mixture_rules_on_hand_set_distributions():
    a, b = torch.log(torch.tensor([[0.5, 0.5, 0.0]])), torch.log(torch.tensor([[0.1, 0.3, 0.6]]))
    lin = Ensemble([_model(0), _model(1)], [0.25, 0.75], "linear")._combine([a, b])
    assert torch.allclose(lin.exp(), torch.tensor([[0.2, 0.35, 0.45]]))
    log = Ensemble([_model(0), _model(1)], [0.5, 0.5], "loglinear")._combine([a, b])
    p = torch.tensor([math.sqrt(0.05), math.sqrt(0.15), 0.0])
    assert torch.allclose(log.exp(), (p / p.sum())[None], atol=1e-6)


def test_contract_and_bad_settings():
    m = Ensemble([_model(0), _model(1)], [1, 1])
    assert missing_members(m, Seq2SeqModel) == [] and m.weights == [0.5, 0.5]
    with pytest.raises(ValueError, match="at least two"):
        Ensemble([_model(0)], [1])
    with pytest.raises(ValueError, match="weights"):
        Ensemble([_model(0), _model(1)], [1])
    with pytest.raises(ValueError, match="≥ 0"):
        Ensemble([_model(0), _model(1)], [1, -1])
    with pytest.raises(ValueError, match="mode"):
        Ensemble([_model(0), _model(1)], [1, 1], "max")
    with pytest.raises(ValueError, match="decoder state"):
        m.decode_hidden(None, None)


@pytest.mark.parametrize("mode", ["linear", "loglinear"])
def test_a_model_with_itself_and_a_zero_weight_member_translate_as_the_model(mode):
    a, b = _model(0), _model(1)
    src = torch.tensor([[4, 5, 6, 2], [7, 8, 2, 0], [9, 10, 11, 2]])
    alone = beam_search(a, src, VOCAB, KW)
    twice = beam_search(Ensemble([a, a], [0.3, 0.7], mode), src, VOCAB, KW)
    assert twice.tokens == alone.tokens
    assert np.allclose(twice.scores, alone.scores, atol=1e-5)
    if mode == "linear":                      # log 0 = −inf: the member drops out exactly
        assert beam_search(Ensemble([b, a], [0.0, 1.0], mode), src, VOCAB, KW).tokens == alone.tokens


def test_document_model_with_sentence_model_each_reads_its_own_input():
    """A target-side context model ensembled with a sentence model: the ensemble reads documents
    as the context model does; with all weight on one member it translates as that member alone
    — the context model's document translation, or the sentence model's sentence by sentence —
    and in between it differs from both."""
    doc = _model(3, "type: tgt_concat, context_sents: 1")
    sent = _model(4)
    docs = _docs()
    assert Ensemble([doc, sent], [1, 1]).document == doc.document
    alone_doc = translate_documents(doc, docs, VOCAB, KW)
    only_doc = translate_documents(Ensemble([doc, sent], [1.0, 0.0]), docs, VOCAB, KW)
    assert only_doc == alone_doc
    src = torch.nn.utils.rnn.pad_sequence([torch.tensor(x) for d in docs for x in d], batch_first=True)
    alone_sent = [VOCAB.decode(t) for t in beam_search(sent, src, VOCAB, KW).tokens]
    only_sent = translate_documents(Ensemble([doc, sent], [0.0, 1.0]), docs, VOCAB, KW)
    assert [h for d in only_sent for h in d] == alone_sent
    mixed = translate_documents(Ensemble([doc, sent], [0.5, 0.5]), docs, VOCAB, KW)
    assert mixed != alone_doc and [h for d in mixed for h in d] != alone_sent


def test_teacher_forcing_gives_the_mixture_of_the_members():
    a, b = _model(0), _model(1)
    src = torch.tensor([[4, 5, 6, 2], [7, 8, 2, 0]])
    tgt_in = torch.tensor([[1, 9, 10], [1, 11, 0]])
    from doctrans.models.interface import SearchBatch

    ens = Ensemble([a, b], [0.4, 0.6])
    got = ens.decode_train(ens.encode(SearchBatch(src)), tgt_in)
    pa = torch.softmax(a.decode_train(a.encode(SearchBatch(src)), tgt_in), -1)
    pb = torch.softmax(b.decode_train(b.encode(SearchBatch(src)), tgt_in), -1)
    assert torch.allclose(got.exp(), 0.4 * pa + 0.6 * pb, atol=1e-5)
    assert torch.allclose(torch.log_softmax(got, -1), got, atol=1e-5)


def test_members_of_another_dataset_and_bad_weights_are_refused(tmp_path):
    """``translate --ensemble``: a model whose vocabularies differ from -c's is refused naming its
    file; a weight count that is not one per model, or weights that are not numbers, are usage
    errors naming --ensemble-weights."""
    from click.testing import CliRunner

    from doctrans.cli import cli
    from doctrans.inference.translate import LoadedModel, TranslateConfig
    from doctrans.runtime.checkpoint import load_checkpoint
    from doctrans.runtime.checkpoint_digest import with_digest
    from doctrans.runtime.shipped import default_model

    sent = default_model("sentence").verify()
    ck = load_checkpoint(sent)
    ck["vocab"]["tgt"] = list(reversed(ck["vocab"]["tgt"]))
    other = tmp_path / "other.pt"
    torch.save(with_digest(ck), other)                     # an edited copy, saved as doctrans saves
    with pytest.raises(ValueError, match=f"{other}.*vocabularies"):
        LoadedModel.load(TranslateConfig(checkpoint=str(sent), ensemble=(str(other),)).model)
    for weights in ("0.5", "a,b"):
        r = CliRunner().invoke(cli, ["translate", "--sentence", "--ensemble", str(sent), "--ensemble-weights", weights],
                               input="你好\n")
        assert r.exit_code == 2 and "--ensemble-weights" in r.output, r.output
