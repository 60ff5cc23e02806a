"""The Python API (``doctrans.Translator``, doctrans/api.py): sentences and documents in, the
same counts and shapes out, empty lines kept, per-call search options, the CLI's translations,
the engine chosen by what is loaded, and clear errors for wrong input."""
from __future__ import annotations

import pytest
from click.testing import CliRunner

import doctrans
from conftest import reversal_pairs, train_tiny
from doctrans.cli import cli
from doctrans.inference.translate import TranslateConfig, Translator as EngineTranslator

SRC = reversal_pairs(9, seed=5)[0]
HAN = "context={type: han, context_sents: 1, attach: encoder, heads: 2, d_ff: 32}"
BPE = {"input_format": "bpe", "tokenized": True}


@pytest.fixture(scope="module")
def sentence_model(tmp_path_factory):
    return train_tiny(tmp_path_factory.mktemp("s"), 30, "train.max_steps=40")


@pytest.fixture(scope="module")
def context_model(tmp_path_factory):
    return train_tiny(tmp_path_factory.mktemp("c"), 30, "train.max_steps=40", HAN)


def test_sentences_keep_count_and_empty_lines(sentence_model):
    tr = doctrans.Translator.load(sentence_model, beam_size=2, **BPE)
    lines = [SRC[0], "", "   ", SRC[1], SRC[2] + "\n" + SRC[3]]
    out = tr.translate_sentences(lines)
    assert len(out) == 5 and out[1] == "" and out[2] == "" and all(out[i] for i in (0, 3, 4))
    assert all("\n" not in o for o in out)
    assert tr.translate_sentences([]) == []
    engine = EngineTranslator(TranslateConfig(checkpoint=str(sentence_model), beam=2, **BPE))
    assert out[:4] == engine.translate(lines[:4])               # the same translations as the CLI's Translator
    # per-call search options equal a translator loaded with them, and leave the defaults alone
    greedy = doctrans.Translator.load(sentence_model, beam_size=1, **BPE).translate_sentences(SRC)
    assert tr.translate_sentences(SRC, beam_size=1) == greedy
    assert tr.config.search.beam == 2 and not tr.reads_documents
    assert tr.translate(SRC[0]) == out[0] and tr.translate(["", SRC[1]]) == ["", out[3]]     # fairseq hub style


def test_documents_keep_shape_and_match_the_cli(context_model, tmp_path):
    tr = doctrans.Translator.load(context_model, beam_size=2, **BPE)
    assert tr.reads_documents
    docs = [SRC[:3], [], ["", SRC[3], ""], SRC[4:9]]
    out = tr.translate_documents(docs)
    assert [len(d) for d in out] == [len(d) for d in docs]
    assert out[2][0] == "" and out[2][2] == "" and out[2][1] and all(out[3])
    # `doctrans translate -i DIR` on the same documents, one file each, gives the same lines
    inp = tmp_path / "in"
    inp.mkdir()
    for k, d in enumerate(docs):
        (inp / f"{k}.zh").write_text("".join(f"{x}\n" for x in d), encoding="utf-8")
    r = CliRunner().invoke(cli, ["translate", "-c", str(context_model), "--input-format", "bpe", "--tokenized",
                                 "--beam", "2", "-i", str(inp), "-o", str(tmp_path / "out")])
    assert r.exit_code == 0, r.output
    for k, d in enumerate(out):
        assert (tmp_path / "out" / f"{k}.en").read_text(encoding="utf-8") == "".join(f"{x}\n" for x in d)
    # sentences are translated without context: each equals its own one-sentence document
    alone = tr.translate_sentences(SRC[:3])
    assert alone == [tr.translate_documents([[s]])[0][0] for s in SRC[:3]]


def test_bad_input_and_options_are_clear_errors(sentence_model, tmp_path):
    tr = doctrans.Translator.load(sentence_model, **BPE)
    with pytest.raises(TypeError, match="must be a list"):
        tr.translate_sentences("w1 w2")
    with pytest.raises(TypeError, match=r"sentences\[1\] is a int"):
        tr.translate_sentences(["w1", 3])
    with pytest.raises(TypeError, match=r"documents\[0\] must be a list"):
        tr.translate_documents(["w1 w2"])
    with pytest.raises(TypeError, match="unknown option.*beem"):
        doctrans.Translator.load(sentence_model, beem=3)
    with pytest.raises(FileNotFoundError, match="model not found"):
        doctrans.Translator.load(tmp_path / "nope.pt")


def test_exported_directory_loads_with_ctranslate2(sentence_model, tmp_path):
    pytest.importorskip("ctranslate2")
    r = CliRunner().invoke(cli, ["export", "-c", str(sentence_model), "-o", str(tmp_path / "ct2")])
    assert r.exit_code == 0, r.output
    tr = doctrans.Translator.load(tmp_path / "ct2", beam_size=1, **BPE)
    assert tr.config.model.engine == "ctranslate2"
    native = doctrans.Translator.load(sentence_model, beam_size=1, **BPE)
    lines = [SRC[0], "", SRC[1]]
    assert tr.translate_sentences(lines) == native.translate_sentences(lines)
    assert tr.translate_documents([lines, []]) == [native.translate_sentences(lines), []]
