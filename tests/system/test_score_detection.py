"""README's scoring examples on tiny files: `doctrans score HYP -r REF.sgm` and `-r REF.en` with a
Moses-tokenized lowercase hypothesis (as `translate --tokenized` and the quickstart write it) give
the number of the right flags without any flag, and say what they detected (issue 31 item 1)."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from doctrans.cli import cli

SGML = """<refset setid="t" srclang="zh" trglang="en">
<DOC docid="D1" sysid="reference_1">
<seg id=1> no problems . it &apos;s all taken care of .</seg>
<seg id=2> ross , thank you .</seg>
<seg id=3> i didn &apos;t get the annulment .</seg>
<seg id=4> do you want to go see a movie ? yeah , why not ?</seg>
</DOC>
</refset>
"""
PLAIN_TOK = ["no problems . it &apos;s all taken care of .", "Ross , thank you .",      # as TVsub's test.en
             "I didn &apos;t get the annulment .", "do you want to go see a movie ? yeah , why not ?"]
HYP_TOK = ["no problem . it &apos;s all taken care of .", "ross , thank you very much .",
           "i didn &apos;t get the divorce .", "do you want to see a movie ? yeah , why not ?"]


def _score(*args: str) -> dict:
    r = CliRunner().invoke(cli, ["score", *args, "--json"])
    assert r.exit_code == 0, r.output
    return json.loads(r.stdout)


@pytest.fixture
def files(tmp_path: Path) -> dict[str, str]:
    out = {"sgm": tmp_path / "test.ref.sgm", "plain": tmp_path / "test.en", "hyp": tmp_path / "test.hyp.tok",
           "detok": tmp_path / "test.hyp"}
    out["sgm"].write_text(SGML, encoding="utf-8")
    out["plain"].write_text("".join(x + "\n" for x in PLAIN_TOK), encoding="utf-8")
    out["hyp"].write_text("".join(x + "\n" for x in HYP_TOK), encoding="utf-8")
    from doctrans.evaluation.score import moses_detokenize
    out["detok"].write_text("".join(x + "\n" for x in moses_detokenize(HYP_TOK)), encoding="utf-8")
    return {k: str(v) for k, v in out.items()}


def _scores(res: dict) -> dict:
    return {m: round(res[m]["score"], 6) for m in ("bleu_tok_lc", "sacrebleu", "chrf")}


def test_tokenized_hypothesis_against_sgml_refs(files):
    auto = _score(files["hyp"], "-r", files["sgm"])
    given = _score(files["hyp"], "-r", files["sgm"], "--hyp-tokenized")
    assert _scores(auto) == _scores(given)
    assert auto["hyp_tokenized"] and auto["refs_tokenized"] and auto["notes"] == []
    detok = _score(files["detok"], "-r", files["sgm"])             # what plain `translate` writes
    assert not detok["hyp_tokenized"]
    assert detok["bleu_tok_lc"]["score"] == pytest.approx(auto["bleu_tok_lc"]["score"])


def test_tokenized_hypothesis_against_plain_tokenized_mixed_case_refs(files):
    auto = _score(files["hyp"], "-r", files["plain"])
    given = _score(files["hyp"], "-r", files["plain"], "--hyp-tokenized", "--refs-tokenized", "--detok-case", "lc")
    assert _scores(auto) == _scores(given)
    assert "case:lc" in auto["sacrebleu"]["signature"]             # lowercase system, mixed-case refs
    assert any("hypothesis is lowercase" in n for n in auto["notes"])
    same_as_sgml = _score(files["hyp"], "-r", files["sgm"])        # same references, other spelling
    assert _scores(auto) == _scores(same_as_sgml)


def test_table_states_what_was_detected(files):
    r = CliRunner().invoke(cli, ["score", files["hyp"], "-r", files["plain"]])
    assert r.exit_code == 0, r.output
    assert "hypothesis: looks Moses-tokenized" in r.stdout and "lowercase" in r.stdout
    assert "references: looks Moses-tokenized" in r.stdout and "mixed case" in r.stdout
    assert "NOTE: the hypothesis is lowercase and the references are mixed case" in r.stdout
