"""Recasing (data/casing.py): a table learnt from cased tokenized lines restores the case of a
lowercasing model's output, token for token; only the case changes."""
from __future__ import annotations

import json

import pytest

from doctrans.data.casing import Recaser
from doctrans.data.text import TextProcessor

CASED = [
    "so I saw Ross today .",
    "then Ross said no , I think .",
    "and I 'm Mr. Geller .",
    "talk to Mr. Geller , I said .",
    "we went to Paris .",              # seen once: under min_count 2
    "Okay . Okay .",                   # sentence-initial only: not evidence of a capital
]


def test_learn_keeps_words_whose_usual_spelling_has_a_capital():
    r = Recaser.learn(CASED, min_count=2)
    assert r.best == {"i": "I", "ross": "Ross", "mr.": "Mr.", "geller": "Geller"}
    assert r.lines == len(CASED) and len(r) == 4
    assert Recaser.learn(CASED, min_count=1).best["paris"] == "Paris"
    with pytest.raises(ValueError, match="min_count"):
        Recaser.learn(CASED, min_count=0)


def test_recase_restores_names_i_and_sentence_starts_and_keeps_tokens():
    r = Recaser.learn(CASED)
    lines = ["i saw ross . where is mr. geller ?", "", "okay , i 'm here ! paris ?", "- no ."]
    out = r.recase(lines)
    assert out[:3] == ["I saw Ross . Where is Mr. Geller ?", "", "Okay , I 'm here ! Paris ?"]
    for a, b in zip(out, lines):
        assert a.lower() == b and len(a.split()) == len(b.split())


def test_table_round_trips_and_bad_tables_are_named(tmp_path):
    r = Recaser.learn(CASED)
    path = tmp_path / "recaser.en.json"
    path.write_text(json.dumps(r.to_dict()), encoding="utf-8")
    back = Recaser.load(path)
    assert back.best == r.best and back.lines == r.lines and back.min_count == 2
    path.write_text("{", encoding="utf-8")
    with pytest.raises(ValueError, match="recaser.en.json: not JSON"):
        Recaser.load(path)
    with pytest.raises(ValueError, match="x.json: not a recaser table"):
        Recaser.from_dict({"version": 1}, "x.json")
    with pytest.raises(ValueError, match="newer than this doctrans"):
        Recaser.from_dict({**r.to_dict(), "version": 99})


def test_text_settings_carry_the_recaser_and_older_settings_have_none():
    proc = TextProcessor("en", bpe_codes_text="#version: 0.2\n", recaser=Recaser.learn(CASED))
    settings = proc.settings()
    back = TextProcessor.from_settings(settings)
    assert back.recaser.best == proc.recaser.best
    assert back.recase(["i 'm ross ."]) == ["I 'm Ross ."]
    older = {k: v for k, v in settings.items() if k != "recaser"}
    assert TextProcessor.from_settings(older).recaser is None
    with pytest.raises(RuntimeError, match="no recaser"):
        TextProcessor.from_settings(older).recase(["i ."])


def test_case_insensitive_scores_are_the_same_for_recased_output():
    from doctrans.evaluation.score import score_corpus

    refs = [["i saw ross today .", "where is mr. geller ?", "okay , i 'm here ."]]
    lower = ["i saw ross .", "where is geller ?", "okay , i 'm here !"]
    cased = Recaser.learn(CASED).recase(lower)
    assert cased != lower
    a, b = score_corpus(lower, refs, True, True), score_corpus(cased, refs, True, True)
    for metric in ("bleu_tok_lc", "sacrebleu", "chrf"):
        assert a[metric]["score"] == b[metric]["score"] > 0, metric
