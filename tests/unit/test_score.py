"""Tests for ``doctrans score`` (doctrans/evaluation/score.py): golden values and I/O."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
import sacrebleu
from click.testing import CliRunner

from doctrans.cli import cli
from doctrans.evaluation import score as S

TVSUB = Path(__file__).resolve().parents[2] / ".." / "shared" / "corpora" / "tvsub"
TEST_REF_SGM = TVSUB / "test" / "test.ref.sgm"

# Hand-checked: 1-4-gram precisions 5/6, 3/5, 2/4, 1/3, BP 1 -> 100 * (1/12) ** 0.25.
CAT_HYP, CAT_REF, CAT_BLEU = "the cat sat on the mat", "the cat sat on a mat", 53.7285

TINY_SGML = """<refset setid="t" srclang="zh" trglang="en">
<DOC docid="D1" sysid="reference_1">
<seg id=1> it &apos;s fine .</seg>
<seg id=2> see you .</seg>
</DOC>
<DOC docid="D1" sysid="reference_2">
<seg id=1> it is fine .</seg>
<seg id=2> see you later .</seg>
</DOC>
<DOC docid="D1" sysid="reference_3">
<seg id=1> that &apos;s okay .</seg>
<seg id=2> bye .</seg>
</DOC>
</refset>
"""


def _write(path: Path, lines: list[str]) -> str:
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return str(path)


# ------------------------------------------------------------------------------ golden values


def test_identical_scores_100():
    lines = ["it 's fine .", "see you later .", ""]
    res = S.score_corpus(lines, [lines], hyp_tokenized=True, refs_tokenized=True)
    for m in S.METRICS:
        assert res[m]["score"] == pytest.approx(100.0)
        assert res[m]["signature"].startswith("nrefs:1|")
    assert (res["n_refs"], res["n_lines"]) == (1, 3)


def test_hand_computed_bleu():
    assert S.bleu_tok_lc([CAT_HYP], [[CAT_REF]]) == pytest.approx(CAT_BLEU, abs=1e-3)
    own = sacrebleu.corpus_bleu([CAT_HYP], [[CAT_REF]], tokenize="none", lowercase=True).score
    assert S.bleu_tok_lc([CAT_HYP], [[CAT_REF]]) == pytest.approx(own)


def test_multi_reference_not_below_single():
    hyps = [CAT_HYP, "see you later ."]
    ref1 = [CAT_REF, "see you ."]
    ref2 = ["a cat sat on the mat", "see you later !"]
    single = S.bleu_tok_lc(hyps, [ref1])
    multi = S.bleu_tok_lc(hyps, [ref1, ref2])
    assert multi > single
    res = S.score_corpus(hyps, [ref1, ref2], True, True)
    assert res["n_refs"] == 2 and res["bleu_tok_lc"]["signature"].startswith("nrefs:2|")


def test_thesis_setting_is_case_insensitive():
    upper = S.bleu_tok_lc([CAT_HYP.upper()], [[CAT_REF]])
    assert upper == pytest.approx(CAT_BLEU, abs=1e-3)
    assert S.bleu_tok_lc([CAT_HYP], [[CAT_REF.title()]]) == pytest.approx(upper)


@pytest.mark.parametrize("hyp, ref", [
    ("it's fine.", "it 's fine ."),                                  # detok hyp gets tokenized
    ("it's fine.", "it &apos;s fine ."),                             # Moses escapes in refs
    ("No problems. it's all taken care of.", "no problems . it 's all taken care of ."),
    ("what was that? sorry. mix-up.", "what was that ? sorry . mix @-@ up ."),
])
def test_detok_hypothesis_is_tokenized(hyp, ref):
    res = S.score_corpus([hyp], [[ref]], hyp_tokenized=False, refs_tokenized=True)
    assert res["bleu_tok_lc"]["score"] == pytest.approx(100.0)


def test_tokenized_hypothesis_is_detokenized_for_sacrebleu():
    # (13a needs >= 4 tokens for a non-zero BLEU-4)
    res = S.score_corpus(["It &apos;s fine , Ross ."], [["It's fine, Ross."]], hyp_tokenized=True,
                         refs_tokenized=False)
    assert res["sacrebleu"]["score"] == pytest.approx(100.0)
    assert "tok:13a" in res["sacrebleu"]["signature"]
    assert "case:mixed" in res["sacrebleu"]["signature"]      # refs are not all lowercase


def test_detok_metrics_lowercase_only_for_lowercase_refs():
    hyp, ref = ["It's fine, Ross."], [["it 's fine , ross ."]]
    res = S.score_corpus(hyp, ref, hyp_tokenized=False, refs_tokenized=True)
    assert "case:lc" in res["sacrebleu"]["signature"] and "case:lc" in res["chrf"]["signature"]
    assert res["sacrebleu"]["score"] == pytest.approx(100.0)
    forced = S.score_corpus(hyp, ref, False, True, lowercase_detok=False)
    assert "case:mixed" in forced["sacrebleu"]["signature"] and forced["sacrebleu"]["score"] < 100


def test_empty_hypothesis_lines_are_fine():
    res = S.score_corpus(["", "see you later ."], [["bye .", "see you later ."]], True, True)
    assert 0 < res["bleu_tok_lc"]["score"] < 100 and res["n_lines"] == 2


def test_flat_reference_list_is_a_type_error():
    with pytest.raises(TypeError, match="list of reference streams"):
        S.score_corpus(["a b"], ["a b"], True, True)


def test_unknown_metric_rejected():
    with pytest.raises(ValueError, match="unknown"):
        S.ScoreConfig(hyp="h", refs=("r",), metrics=("bleu",))


# ----------------------------------------------------------------------------------- files


def test_tiny_sgml_gives_three_references(tmp_path):
    sgm = tmp_path / "ref.sgm"
    sgm.write_text(TINY_SGML, encoding="utf-8")
    refs, tokenized = S.load_references([sgm])
    assert tokenized is True
    assert len(refs) == 3 and all(len(r) == 2 for r in refs)
    assert refs[0][0] == "it 's fine ."
    hyp = _write(tmp_path / "hyp.txt", ["it's fine.", "see you later."])
    res = S.score_translation(S.ScoreConfig(hyp=hyp, refs=(str(sgm),)))
    assert res["n_refs"] == 3 and res["bleu_tok_lc"]["score"] == pytest.approx(100.0)


@pytest.mark.skipif(not TEST_REF_SGM.exists(), reason="TVsub corpus not available")
def test_real_tvsub_test_refs():
    refs, tokenized = S.load_references([TEST_REF_SGM])
    assert tokenized and len(refs) == 3 and all(len(r) == 1154 for r in refs)


def test_line_count_mismatch_names_files(tmp_path):
    hyp = _write(tmp_path / "short.hyp", ["a b c"])
    ref = _write(tmp_path / "long.ref", ["a b c", "d e f"])
    with pytest.raises(ValueError) as e:
        S.score_translation(S.ScoreConfig(hyp=hyp, refs=(ref,)))
    assert "short.hyp" in str(e.value) and "long.ref" in str(e.value)
    assert "1 lines" in str(e.value) and "2 lines" in str(e.value)
    ref3 = _write(tmp_path / "three.ref", ["a", "b", "c"])
    with pytest.raises(ValueError, match="three.ref.*3 lines.*long.ref.*2"):
        S.load_references([ref, ref3])


def test_mixed_sgml_and_plain_is_detected_or_needs_explicit_flag(tmp_path):
    sgm = tmp_path / "ref.sgm"
    sgm.write_text(TINY_SGML, encoding="utf-8")
    plain = _write(tmp_path / "ref.txt", ["it is fine .", "bye ."])
    assert S.load_references([sgm, plain])[1] is True            # both look tokenized
    detok = _write(tmp_path / "detok.txt", ["It is fine.", "Bye."])
    with pytest.raises(ValueError, match="ref.sgm looks tokenized.*detok.txt looks detokenized"):
        S.load_references([sgm, detok])
    refs, tokenized = S.load_references([sgm, detok], tokenized=True)
    assert len(refs) == 4 and tokenized
    sgm_none = tmp_path / "none.sgm"                             # no evidence either way
    sgm_none.write_text(TINY_SGML.replace(" .<", "<").replace(" &apos;s", " is"), encoding="utf-8")
    words = _write(tmp_path / "words.txt", ["it is fine", "bye"])
    with pytest.raises(ValueError, match="mix SGML and plain"):
        S.load_references([sgm_none, words])


def test_cli_json_and_out(tmp_path):
    hyp = _write(tmp_path / "hyp.txt", [CAT_HYP, "It's fine."])
    ref = _write(tmp_path / "ref.txt", [CAT_REF, "it 's fine ."])
    out = tmp_path / "sub" / "scores.json"
    r = CliRunner().invoke(cli, ["score", hyp, "-r", ref, "--refs-tokenized", "--json", "--out", str(out)])
    assert r.exit_code == 0, r.output
    res = json.loads(r.stdout)
    assert set(S.METRICS) <= set(res) and res["n_refs"] == 1 and res["n_lines"] == 2
    assert all(res[m]["signature"].startswith("nrefs:1|") for m in S.METRICS)
    assert json.loads(out.read_text(encoding="utf-8")) == res
    assert [p.name for p in out.parent.iterdir()] == ["scores.json"]      # no tmp file left


def test_cli_table_and_metrics_subset(tmp_path):
    hyp = _write(tmp_path / "hyp.txt", [CAT_HYP])
    ref = _write(tmp_path / "ref.txt", [CAT_REF])
    r = CliRunner().invoke(cli, ["score", hyp, "-r", ref, "--metrics", "bleu_tok_lc"])
    assert r.exit_code == 0, r.output
    assert "53.73" in r.stdout and "tok:moses-sacremoses-" in r.stdout and "chrf" not in r.stdout.split("\n\n")[0]


def test_cli_help_explains_both_bleu_settings():
    r = CliRunner().invoke(cli, ["score", "--help"])
    assert r.exit_code == 0
    assert "bleu_tok_lc" in r.output and "tokenize=13a" in r.output and "case-insensitive" in r.output
