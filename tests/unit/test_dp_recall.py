"""DP translation recall (evaluation/dp_recall.py, issue 17) on hand-made lines."""
from __future__ import annotations

import math

import pytest

from doctrans.evaluation.dp_recall import dp_recall

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
