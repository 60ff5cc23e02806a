"""APT pronoun / noun accuracy (evaluation/apt.py, issue 17) with eflomal on hand-made lines."""
from __future__ import annotations

import pytest

from doctrans.evaluation.apt import apt, source_classes

SRC = ["我 爱 你", "他 不 在 家", "我们 走 吧", "你 的 猫 呢", "她 喜欢 音乐"] * 4
REF = ["i love you", "he is not home", "let us go", "where is your cat", "she likes music"] * 4


def test_source_classes():
    assert source_classes(["我们", "的", "猫", "走"]) == ["pronoun", None, "noun", None]
    assert source_classes(["您", "好"])[0] == "pronoun"          # overt-only forms count


def test_a_hypothesis_equal_to_the_reference_has_apt_one():
    r = apt(SRC, REF, REF)
    assert r["pronoun"]["apt"] == 1.0 and r["pronoun"]["counted"] > 0
    assert r["noun"]["correct"] == r["noun"]["counted"]


def test_a_hypothesis_sharing_no_word_has_apt_zero():
    hyp = ["x y z"] * len(SRC)
    r = apt(SRC, REF, hyp)
    assert r["pronoun"]["correct"] == 0 and r["pronoun"]["counted"] > 0
    with pytest.raises(ValueError, match="APT: 1 source"):
        apt(SRC[:1], REF, REF)
