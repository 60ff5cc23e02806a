"""Subtitle files and streams through real (tiny, barely trained) models: an SRT file is one
document whose context comes from its previous cues; a stream gives the batch translations
line by line, with a context model's rolling context (its own previous translations included)."""
from __future__ import annotations

import pytest

import doctrans.inference.documents as documents
from conftest import train_tiny
from doctrans.inference.stream import DocumentSession, stream_lines
from doctrans.inference.subtitles import SubtitleOptions, read_subtitles, translate_file
from doctrans.inference.translate import TranslateConfig, Translator

HAN_DEC = "context={type: han, context_sents: 2, attach: both, heads: 2, d_ff: 32, dropout: 0.0}"
SRT = """1
00:00:01,000 --> 00:00:02,000
<i>w1 w2 w3</i>

2
00:00:02,500 --> 00:00:03,000
- w4 w5
- w6

3
00:00:03,500 --> 00:00:04,000


4
00:00:05,000 --> 00:00:06,000
{\\an8}w7 w8
w9 w1
"""
UNITS = ["w1 w2 w3", "w4 w5", "w6", "w7 w8 w9 w1"]
LINES = ["w1 w2 w3", "w4 w5", "w6 w7", "", "w8 w9 w1 w2", "w3"]


@pytest.fixture(scope="module")
def han(tmp_path_factory):
    ckpt = train_tiny(tmp_path_factory.mktemp("han"), 20, "train.max_steps=3", HAN_DEC)
    return Translator(TranslateConfig(checkpoint=str(ckpt), input_format="bpe", tokenized=True, beam=2))


@pytest.fixture(scope="module")
def sentence(tmp_path_factory):
    ckpt = train_tiny(tmp_path_factory.mktemp("sent"), 20, "train.max_steps=3")
    return Translator(TranslateConfig(checkpoint=str(ckpt), input_format="bpe", tokenized=True, beam=2))


def _record_batches(monkeypatch, tr):
    """Per target row of every document batch: (its source, its context rows' sources, their tgt_in)."""
    seen = []
    build = documents.build_batch

    def spy(*args, **kwargs):
        batch = build(*args, **kwargs)
        dec = lambda row: tr.src_vocab.decode(batch.src[row].tolist())
        for r in range(int(batch.is_target.sum())):
            ctx = [c for c in batch.ctx[r].tolist() if c >= 0]
            seen.append((dec(r), [dec(c) for c in ctx], [batch.tgt_in[c].tolist() for c in ctx]))
        return batch

    monkeypatch.setattr(documents, "build_batch", spy)
    return seen


def test_srt_is_one_document_with_the_previous_cues_as_context(han, tmp_path, monkeypatch):
    assert han.model.document.context_sents == 2
    src = tmp_path / "ep01.srt"
    src.write_text(SRT, encoding="utf-8")
    seen = _record_batches(monkeypatch, han)
    translate_file(han, src, tmp_path / "ep01.en.srt", SubtitleOptions(max_line_length=1000))   # a line per sentence
    context = {s: c for s, c, _ in seen}
    assert context == {"w1 w2 w3": [], "w4 w5": ["w1 w2 w3"], "w6": ["w1 w2 w3", "w4 w5"],
                       "w7 w8 w9 w1": ["w4 w5", "w6"]}                   # the empty cue is not context
    expect = han.translate(UNITS, doc_ids=["d"] * 4)
    cues = read_subtitles(tmp_path / "ep01.en.srt").cues
    assert len(cues) == 4 and cues[2].text == []
    assert cues[0].text == [f"<i>{expect[0]}</i>"]
    assert [x.removeprefix("- ") for x in cues[1].text] == expect[1:3]
    assert " ".join(cues[3].text).removeprefix("{\\an8}") == expect[3]


def test_stream_equals_batch_for_a_sentence_model_and_arrives_line_by_line(sentence):
    batch = sentence.translate(LINES)
    read = []

    def source():
        for line in LINES:
            read.append(line)
            yield line

    outs = []
    for out in stream_lines(sentence, source()):
        outs.append(out)
        assert len(read) == len(outs)               # yielded before the next line was read
    assert outs == batch and outs[3] == ""


def test_context_session_uses_its_previous_lines_and_own_translations(han, monkeypatch):
    doc = [x for x in LINES if x]
    batch = han.translate(doc, doc_ids=["d"] * len(doc))
    seen = _record_batches(monkeypatch, han)
    recorded = []
    session = DocumentSession(han, on_translated=recorded.append)
    outs = [session.translate(x) for x in doc]
    assert outs == batch                            # the same as the whole document at once
    assert [e.output for e in recorded] == outs == session.outputs
    targets = [s for s in seen if s[0] in doc]
    assert [c for _, c, _ in targets] == [doc[max(0, k - 2):k] for k in range(len(doc))]
    # the context rows carry the model's own previous 1-best (<s> + ids), as in the batch path
    bos, pad = han.tgt_vocab.bos_id, han.tgt_vocab.pad_id
    rows = [[t for t in row if t != pad] for row in targets[-1][2]]
    assert rows == [[bos] + e.tgt_ids for e in recorded[-3:-1]] and all(e.tgt_ids for e in recorded)
    # a blank line ends the document: the next line has no context
    seen.clear()
    assert list(stream_lines(han, ["w1 w2", "", "w3"]))[1] == ""
    assert [c for s, c, _ in seen if s == "w3"] == [[]]


def test_public_api_stream_and_document(sentence, han):
    from doctrans.api import Translator as Public

    assert list(Public(sentence).stream(iter(LINES))) == sentence.translate(LINES)
    doc = [x for x in LINES if x][:3]
    session = Public(han).document()
    assert [session.translate(x) for x in doc] == han.translate(doc, doc_ids=["d"] * 3)
    assert len(session.history) == 3
