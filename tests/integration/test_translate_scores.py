"""Issue 75 item 7: `translate --scores FILE` — the log-probability the model gives each of its
translations (JSON lines per input line; per cue for subtitles), through real tiny models: a
sentence model's equals its beam score (--nbest), a context model's reads the document's
previous lines, and where no score can be made the option is refused before any work."""
from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from conftest import train_tiny
from doctrans.cli import cli

HAN = "context={type: han, context_sents: 2, attach: both, heads: 2, d_ff: 32, dropout: 0.0}"
LINES = ["w1 w2 w3", "", "w4 w5 w6 w7", "w8"]
SRT = ("1\n00:00:01,000 --> 00:00:02,000\n<i>w1 w2 w3</i>\n\n2\n00:00:03,000 --> 00:00:04,000\n\n\n"
       "3\n00:00:05,000 --> 00:00:07,000\n- w4 w5 w6 w7\n- w8\n")


@pytest.fixture(scope="module")
def sentence(tmp_path_factory):
    return train_tiny(tmp_path_factory.mktemp("scores_sent"), 20, "train.max_steps=3")


@pytest.fixture(scope="module")
def han(tmp_path_factory):
    return train_tiny(tmp_path_factory.mktemp("scores_han"), 20, "train.max_steps=3", HAN)


def _common(ckpt):
    return ["-q", "translate", "-c", str(ckpt), "--input-format", "bpe", "--tokenized", "--beam", "2", "--threads", "1"]


def _rows(path):
    return [json.loads(x) for x in path.read_text(encoding="utf-8").splitlines()]


def test_a_sentence_models_scores_are_its_beam_scores(sentence, tmp_path):
    src = tmp_path / "in.txt"
    src.write_text("".join(f"{x}\n" for x in LINES), encoding="utf-8")
    r = CliRunner().invoke(cli, [*_common(sentence), "-i", str(src), "-o", str(tmp_path / "out.txt"), "--nbest", "1",
                                 "--nbest-out", str(tmp_path / "nbest.jsonl"), "--scores", str(tmp_path / "s.jsonl")])
    assert r.exit_code == 0, r.output
    rows, nbest = _rows(tmp_path / "s.jsonl"), _rows(tmp_path / "nbest.jsonl")
    assert [x["line"] for x in rows] == [1, 2, 3, 4]
    assert rows[1] == {"line": 2, "score": None, "tokens": 0, "length_normalized": None}      # the empty line
    for row, nb in zip(rows, nbest):
        if nb["hypotheses"]:
            out_tokens = len(nb["hypotheses"][0]["text"].split()) + 1                         # + </s>
            assert row["tokens"] == out_tokens and row["score"] < 0
            assert row["length_normalized"] == pytest.approx(nb["hypotheses"][0]["score"], abs=2e-4)
            assert row["length_normalized"] == pytest.approx(row["score"] / row["tokens"], abs=1e-4)


def test_subtitle_scores_are_per_cue(sentence, tmp_path):
    (tmp_path / "ep.srt").write_text(SRT, encoding="utf-8")
    (tmp_path / "in.txt").write_text("w1 w2 w3\nw4 w5 w6 w7\nw8\n", encoding="utf-8")
    r = CliRunner().invoke(cli, [*_common(sentence), "-i", str(tmp_path / "ep.srt"), "-o", str(tmp_path / "ep.en.srt"),
                                 "--scores", str(tmp_path / "cues.jsonl")])
    assert r.exit_code == 0, r.output
    r = CliRunner().invoke(cli, [*_common(sentence), "-i", str(tmp_path / "in.txt"), "-o", str(tmp_path / "o.txt"),
                                 "--scores", str(tmp_path / "lines.jsonl")])
    assert r.exit_code == 0, r.output
    cues, lines = _rows(tmp_path / "cues.jsonl"), _rows(tmp_path / "lines.jsonl")
    assert [(c["cue"], c["start"], c["end"]) for c in cues] == [
        (1, "00:00:01.000", "00:00:02.000"), (2, "00:00:03.000", "00:00:04.000"), (3, "00:00:05.000", "00:00:07.000")]
    assert cues[1]["score"] is None and cues[1]["lines"] == []                     # the empty cue
    assert cues[0]["score"] == pytest.approx(lines[0]["score"], abs=1e-3)
    assert cues[2]["score"] == pytest.approx(lines[1]["score"] + lines[2]["score"], abs=1e-3)   # two turns
    assert cues[2]["tokens"] == lines[1]["tokens"] + lines[2]["tokens"]
    shown = sum(len(x) for x in cues[2]["lines"])
    assert cues[2]["cps"] == pytest.approx(shown / 2.0, abs=0.01)
    assert cues[0]["file"] == str(tmp_path / "ep.srt")
    r = CliRunner().invoke(cli, [*_common(sentence), "-i", str(tmp_path / "ep.srt"), "-o", str(tmp_path / "bi.srt"),
                                 "--bilingual", "--scores", str(tmp_path / "bi.jsonl")])
    assert r.exit_code == 0, r.output
    assert _rows(tmp_path / "bi.jsonl") == cues                                  # the translation's lines only


def test_a_context_models_scores_read_the_previous_lines(han, tmp_path):
    from doctrans.evaluation.confidence import line_scores
    from doctrans.inference.translate import TranslateConfig, Translation, Translator

    tr = Translator(TranslateConfig(checkpoint=str(han), input_format="bpe", tokenized=True, beam=2))
    res = tr.translate_detailed(["w1 w2 w3", "w4 w5", "", "w6 w7 w8"], doc_ids=["a"] * 4)
    in_doc = line_scores(tr, res, ["a"] * 4)
    alone = line_scores(tr, Translation([res.lines[3]], {0: res.bpe[3]}, {0: res.hyps[3]}), ["b"])
    assert in_doc[2] is None and all(x[0] < 0 for x in (in_doc[0], in_doc[1], in_doc[3], alone[0]))
    assert in_doc[3][1] == alone[0][1] == len(res.hyps[3].split()) + 1          # the same translation …
    assert in_doc[3][0] != pytest.approx(alone[0][0], abs=1e-6)                  # … in two contexts
    two = line_scores(tr, res, ["a", "a", "b", "b"])                             # another document from line 3 on
    assert two[3][0] == pytest.approx(alone[0][0], abs=1e-4) and two[0] == pytest.approx(in_doc[0], abs=1e-6)
    r = CliRunner().invoke(cli, [*_common(han), "--scores", str(tmp_path / "s.jsonl")], input="w1 w2\n\nw3\n")
    assert r.exit_code == 0, r.output
    assert [x["score"] is None for x in _rows(tmp_path / "s.jsonl")] == [False, True, False]


@pytest.mark.parametrize("extra, message", [
    (["--stream"], "--scores is not available with --stream"),
    (["--engine", "ctranslate2"], "--scores is not available with --engine ctranslate2"),
])
def test_scores_are_refused_where_none_can_be_made(sentence, tmp_path, extra, message):
    r = CliRunner().invoke(cli, [*_common(sentence), "--scores", str(tmp_path / "s.jsonl"), *extra], input="w1\n")
    assert r.exit_code != 0 and message in str(r.exception) + r.output
    assert not (tmp_path / "s.jsonl").exists()
