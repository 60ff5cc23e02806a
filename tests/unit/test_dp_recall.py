"""DP translation recall (evaluation/dp_recall.py, issue 17) on hand-made lines."""
from __future__ import annotations

import math

import pytest

from doctrans.evaluation.dp_recall import dp_recall, dp_recall_bootstrap

BASE = ["没 问题 , 都 办好 了", "罗斯 , 谢谢", "我 去 穿 毛衣", "走 吧"]
ORACLE = ["没 问题 , 它 都 办好 了", "罗斯 , 谢谢 你", "我 去 穿 我的 毛衣", "走 吧"]
REF = ["no problems . it 's all taken care of .", "ross , thank you .", "i 'll get my sweater .", "let 's go ."]


def test_a_hypothesis_equal_to_the_reference_realises_every_dp():
    r = dp_recall(REF, REF, BASE, ORACLE)
    assert (r["dps"], r["in_reference"], r["realised"], r["recall"]) == (3, 3, 3, 1.0)
    assert r["by_class"]["1SG"] == {"dps": 1, "in_reference": 1, "realised": 1, "recall": 1.0}


def test_dropped_pronouns_lower_recall_and_extra_ones_do_not_raise_it():
    hyp = ["no problems . all taken care of .",          # "it" lost
           "ross , thank you you you .",                   # extra pronouns: capped at the reference's 1
           "i 'll get the sweater .",                      # my → the: only the overt 我 is translated
           "we go ."]                                      # no DP on this line: not counted
    r = dp_recall(hyp, REF, BASE, ORACLE)
    assert (r["in_reference"], r["realised"]) == (3, 1) and r["recall"] == pytest.approx(1 / 3)
    assert r["by_class"]["2"]["realised"] == 1 and r["by_class"]["3SGN"]["realised"] == 0


def test_a_dp_the_reference_does_not_realise_is_not_expected():
    r = dp_recall(["ross , thanks ."], ["ross , thanks ."], ["罗斯 , 谢谢"], ["罗斯 , 谢谢 你"])
    assert (r["dps"], r["in_reference"]) == (1, 0) and math.isnan(r["recall"])
    with pytest.raises(ValueError, match="2 hypothesis, 1 reference"):
        dp_recall(["a", "b"], ["a"], ["x"], ["x"])


def _realising(k: int) -> list[str]:
    """The four hand lines repeated 10 times; the first k of the 30 reference-realised DPs
    translated, the others lost."""
    lost = ["no problems . all taken care of .", "ross , thanks .", "i 'll get the sweater .", "let 's go ."]
    out, n = [], 0
    for _ in range(10):
        for ref, bad in zip(REF, lost):
            keep = ref if n < k or ref == REF[3] else bad
            n += ref != REF[3]
            out.append(keep)
    return out


def test_recall_bootstrap_finds_a_real_gain_and_none_between_equals():
    refs, base, oracle = REF * 10, BASE * 10, ORACLE * 10
    assert dp_recall(_realising(30), refs, base, oracle)["recall"] == 1.0
    assert dp_recall(_realising(6), refs, base, oracle)["recall"] == pytest.approx(0.2)
    better = dp_recall_bootstrap(_realising(30), _realising(6), refs, base, oracle, samples=500)
    assert better["delta"] == pytest.approx(0.8) and better["p_value"] < 0.01
    assert 0.6 < better["ci95"][0] <= 0.8 <= better["ci95"][1] <= 1.0
    worse = dp_recall_bootstrap(_realising(6), _realising(30), refs, base, oracle, samples=500)
    assert worse["delta"] == pytest.approx(-0.8) and worse["p_value"] < 0.01 and worse["ci95"][1] < 0
    same = dp_recall_bootstrap(_realising(12), _realising(12), refs, base, oracle, samples=200)
    assert same["delta"] == 0 and same["ci95"] == [0.0, 0.0] and same["p_value"] == 1.0
    close = dp_recall_bootstrap(_realising(13), _realising(12), refs, base, oracle, samples=500)
    assert close["delta"] == pytest.approx(1 / 30) and close["p_value"] > 0.05     # one DP of 30: noise
    with pytest.raises(ValueError, match="40 hypothesis, 4 baseline"):
        dp_recall_bootstrap(_realising(1), REF, refs, base, oracle)


def test_the_tables_show_the_recall_difference_and_its_p():
    from doctrans.experiments import context_table, rec_table
    row = {"run": "r", "updates": 1, "bleu": 10.0, "pronouns": 5, "ref_pronouns": [5, 5, 5], "params_m": 1.0,
           "train_tok_s": 1.0, "decode_sent_s": 1.0, "reranked": False, "sacrebleu": 9.0, "cxmi_random": 0.0}
    rows = [{**row, "system": "base", "dp_recall": 0.30},
            {**row, "system": "new", "run": "s", "dp_recall": 0.35, "dp_recall_p": 0.01, "bootstrap_p": 0.2, "sign_p": 0.3},
            {**row, "system": "old", "run": "t", "dp_recall": 0.29}]
    for text in (context_table.render(rows), rec_table.render(rows)):
        lines = {ln.split(" | ")[0]: ln for ln in text.splitlines() if ln.startswith("| ") and "%" in ln}
        assert "35.0% (+5.0, p 0.010)" in lines["| new"]
        assert "(" not in lines["| base"].split("30.0%")[1].split("|")[0] and "29.0% |" in lines["| old"]
