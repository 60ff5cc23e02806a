"""Significance (paired bootstrap, sign test) and the pronoun counter on hand-made examples."""
from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from doctrans.cli import cli
from doctrans.evaluation.significance import (count_pronouns, count_pronouns_by_class, paired_bootstrap, sign_test,
                                              sign_test_p)


def test_sign_test_p_values():
    assert sign_test_p(9, 1) == pytest.approx(2 * 11 / 1024)
    assert sign_test_p(5, 5) == 1.0 and sign_test_p(0, 0) == 1.0
    assert sign_test_p(0, 12) == pytest.approx(2 / 4096)


def test_sign_test_counts_wins_losses_ties():
    refs = [["the cat sat on the mat", "i love you", "where are we going"]]
    base = ["a cat sat", "i love you", "where we go"]
    system = ["the cat sat on the mat", "i love you", "no"]
    r = sign_test(base, system, refs)
    assert (r["wins"], r["losses"], r["ties"]) == (1, 1, 1) and r["p_value"] == 1.0


def test_paired_bootstrap_detects_a_clear_improvement():
    refs = [[f"he said that we will go to school on day {i}" for i in range(60)]]
    base = [f"said go school {i}" for i in range(60)]
    system = [f"he said that we will go to school on day {i}" for i in range(60)]
    r = paired_bootstrap(base, system, refs, n_samples=200)
    assert r["system"] > r["baseline"] and r["p_value"] < 0.01


def test_paired_bootstrap_of_identical_outputs_is_not_significant():
    refs = [[f"he said that we will go to school on day {i}" for i in range(60)]]
    same = [f"said go school {i}" for i in range(60)]
    r = paired_bootstrap(same, list(same), refs, n_samples=200)
    assert r["p_value"] == 1.0 and r["system"] == r["baseline"] > 0
    r = paired_bootstrap([f"x {i}" for i in range(60)], [f"y {i}" for i in range(60)], refs, n_samples=200)
    assert r["p_value"] == 1.0 and r["system"] == r["baseline"] == 0.0                  # both BLEU 0


def test_count_pronouns_hand_example():
    assert count_pronouns(["I told him , you know .", "it 's hers and theirs", "the dog"]) == 6   # I him you it hers theirs


def test_count_pronouns_by_class_hand_example():
    lines = ["I told him , you know .", "it 's hers and theirs", "We saw YOURSELVES and me , myself", "the dog"]
    by = count_pronouns_by_class(lines)
    assert by == {"1SG": 3, "1PL": 1, "2": 2, "3SGM": 1, "3SGF": 1, "3SGN": 1, "3PL": 1}
    assert list(by) == ["1SG", "1PL", "2", "3SGM", "3SGF", "3SGN", "3PL"] and sum(by.values()) == count_pronouns(lines)
    assert count_pronouns_by_class([]) == dict.fromkeys(by, 0)


def test_score_cli_with_baseline(tmp_path):
    ref = tmp_path / "ref.txt"
    ref.write_text("i love you .\nwhere are we going ?\nhe is here .\n", encoding="utf-8")
    hyp = tmp_path / "hyp.txt"
    hyp.write_text("i love you .\nwhere are we going ?\nhe is here .\n", encoding="utf-8")
    base = tmp_path / "base.txt"
    base.write_text("love .\nwhere going ?\nis here .\n", encoding="utf-8")
    r = CliRunner().invoke(cli, ["score", str(hyp), "-r", str(ref), "--baseline", str(base), "--bootstrap", "100",
                                 "--json"], catch_exceptions=False)
    assert r.exit_code == 0, r.output
    res = json.loads(r.output)
    by = res["pronouns"].pop("by_class")
    assert res["pronouns"] == {"hyp": 4, "refs": [4], "baseline": 0}
    assert by["hyp"] == by["refs"][0] == {"1SG": 1, "1PL": 1, "2": 1, "3SGM": 1, "3SGF": 0, "3SGN": 0, "3PL": 0}
    assert sum(by["baseline"].values()) == 0
    text = CliRunner().invoke(cli, ["score", str(hyp), "-r", str(ref), "--baseline", str(base)]).output
    assert "by class (hyp / refs / baseline): 1SG 1 / 1 / 0; 1PL 1 / 1 / 0; 2 1 / 1 / 0; 3SGM 1 / 1 / 0; 3SGF 0" in text
    st = res["significance"]["sign_test"]
    assert (st["wins"], st["losses"]) == (3, 0)
    assert res["significance"]["paired_bootstrap"]["system"] == pytest.approx(100.0)


def test_manual_oracle_moves_onto_our_segmentation():
    from doctrans.experiments.dp_table import oracle_onto_tokens
    # the oracle's base is segmented differently (这 份 vs 这份) and uses a full-width ？
    assert oracle_onto_tokens("喜欢 这份 工作 吗 ?".split(), "喜欢 这 份 工作 吗 ？", "你 喜欢 这 份 工作 吗 ？") == \
        ["你", "喜欢", "这份", "工作", "吗", "?"]
    # a DP inside one of our tokens splits it; DPs at the end and in the middle
    assert oracle_onto_tokens(["去了"], "去 了", "去 他 了") == ["去", "他", "了"]
    assert oracle_onto_tokens("很 喜欢 , 谢谢".split(), "很 喜欢 , 谢谢", "我 很 喜欢 它 , 谢谢 你们") == \
        ["我", "很", "喜欢", "它", ",", "谢谢", "你们"]


def _ci_files(tmp_path, n):
    """n reference lines and a hypothesis that gets some right, some half right, some wrong."""
    ref = tmp_path / f"ref{n}.txt"
    hyp = tmp_path / f"hyp{n}.txt"
    ref.write_text("".join(f"he said that we will go to school on day {i} .\n" for i in range(n)), encoding="utf-8")
    hyp.write_text("".join(f"he said that we will go to school on day {i} .\n" if i % 3 == 0 else
                           f"he said we go to the school {i} .\n" if i % 3 == 1 else f"no {i} .\n"
                           for i in range(n)), encoding="utf-8")
    return hyp, ref


def test_score_confidence_is_sacrebleus_bootstrap_interval_of_the_thesis_bleu(tmp_path):
    from sacrebleu.metrics import BLEU

    hyp, ref = _ci_files(tmp_path, 60)
    r = CliRunner().invoke(cli, ["score", str(hyp), "-r", str(ref), "--confidence", "--bootstrap", "300", "--json"],
                           catch_exceptions=False)
    assert r.exit_code == 0, r.output
    res = json.loads(r.output)
    ci = res["bleu_ci"]
    assert ci["score"] == pytest.approx(res["bleu_tok_lc"]["score"]) and ci["n_samples"] == 300
    own = BLEU(tokenize="none", lowercase=True, force=True).corpus_score(
        hyp.read_text(encoding="utf-8").splitlines(), [ref.read_text(encoding="utf-8").splitlines()], n_bootstrap=300)
    assert ci["mean"] == pytest.approx(own._mean) and ci["ci95"] == pytest.approx(own._ci)
    assert 0 < ci["ci95"] < 30 and abs(ci["mean"] - ci["score"]) < ci["ci95"]
    # a test set 8 times as large (the same kind of lines) gives a narrower interval
    big = json.loads(CliRunner().invoke(cli, ["score", str(_ci_files(tmp_path, 480)[0]), "-r",
                                              str(_ci_files(tmp_path, 480)[1]), "--confidence", "--bootstrap",
                                              "300", "--json"], catch_exceptions=False).output)["bleu_ci"]
    assert big["ci95"] < 0.6 * ci["ci95"]
    text = CliRunner().invoke(cli, ["score", str(hyp), "-r", str(ref), "--confidence", "--bootstrap", "300"]).output
    assert f"BLEU (thesis setting) {ci['score']:.2f}: μ = {ci['mean']:.2f} ± {ci['ci95']:.2f}" in text


def test_score_confidence_is_off_by_default_and_needs_two_samples(tmp_path):
    hyp, ref = _ci_files(tmp_path, 12)
    res = json.loads(CliRunner().invoke(cli, ["score", str(hyp), "-r", str(ref), "--json"]).output)
    assert "bleu_ci" not in res and "bleu_tok_lc" in res
    r = CliRunner().invoke(cli, ["score", str(hyp), "-r", str(ref), "--confidence", "--bootstrap", "1"])
    assert r.exit_code == 2 and "--confidence needs at least 2 bootstrap samples" in r.output
