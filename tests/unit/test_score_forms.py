"""Tokenization and case of hypothesis and references are detected, stated and reconciled
(issue 31 item 1: a Moses-tokenized hypothesis scored without --hyp-tokenized gave a wrong BLEU)."""
from __future__ import annotations

import pytest

from doctrans.evaluation import score as S


@pytest.mark.parametrize("lines, tokenized", [
    (["no problems . it &apos;s all taken care of .", "ross , thank you ."], True),      # TVsub refs
    (["I didn 't get the annulment .", "do you want to go ? yeah , why not ?"], True),
    (["it 's fine", "see you"], True),                                                    # clitics only
    (["No problems. It's all taken care of.", "Ross, thank you."], False),
    (["do you want to go? yeah, why not?", "i didn't get it."], False),
    (["a b c", "see you"], None),                                                         # no evidence
    (["Mr. Smith , hello .", "it 's 3.5 , ok ."], True),                                  # abbreviation, number
    (["ok .", "ok.", "fine ,", "fine, yes"], None),                                       # half and half
])
def test_tokenization_is_detected(lines, tokenized):
    assert S.detect_form(lines).tokenized is tokenized


@pytest.mark.parametrize("lines, lowercase", [
    (["i &apos;ll get my sweater .", "ross , thank you ."], True),
    (["I &apos;ll get my sweater .", "Ross , thank you ."], False),
    (["", "123 ..."], True),                                                               # no letters
    (["我 很 好"], True),
])
def test_case_is_detected(lines, lowercase):
    assert S.detect_form(lines).lowercase is lowercase


def test_detected_tokenization_matches_the_right_flags():
    hyps = ["it &apos;s fine , ross .", "see you later , okay ?"]
    refs = [["It's fine, Ross.", "See you later, okay?"]]
    auto = S.score_corpus(hyps, refs, None, None)
    right = S.score_corpus(hyps, refs, True, False)
    for m in S.METRICS:
        assert auto[m]["score"] == right[m]["score"] == pytest.approx(100.0), m
    assert auto["hyp_tokenized"] is True and auto["refs_tokenized"] is False
    assert auto["form"]["hyp"]["how"] == "detected" and auto["form"]["hyp"]["lowercase"]
    assert "case:lc" in auto["sacrebleu"]["signature"]            # lowercase system: case-insensitive
    assert any("Moses-tokenized and the references are detokenized" in n for n in auto["notes"])
    assert any("hypothesis is lowercase and the references are mixed case" in n for n in auto["notes"])


def test_given_flags_win_and_a_contradiction_is_noted():
    hyps, refs = ["it &apos;s fine , ross ."], [["it 's fine , ross ."]]
    res = S.score_corpus(hyps, refs, False, True)
    assert res["hyp_tokenized"] is False and res["form"]["hyp"]["how"] == "given"
    assert any("scored as detokenized (given) but looks Moses-tokenized" in n for n in res["notes"])
    assert S.score_corpus(hyps, refs, None, None)["notes"] == []   # both tokenized, both lowercase: nothing to say


def test_explicit_mixed_case_of_lowercase_system_is_noted():
    res = S.score_corpus(["it's fine, ross."], [["It's fine, Ross."]], False, False, lowercase_detok=False)
    assert "case:mixed" in res["sacrebleu"]["signature"] and res["sacrebleu"]["score"] < 100
    assert any("every capital" in n for n in res["notes"])


def test_case_notes_only_where_sacrebleu_or_chrf_are_computed():
    hyps, refs = ["it &apos;s fine , ross ."], [["It &apos;s fine , Ross ."]]
    assert S.score_corpus(hyps, refs, True, True, metrics=("bleu_tok_lc",))["notes"] == []   # dev BLEU: quiet
    assert S.score_corpus(hyps, refs, True, True)["notes"]
