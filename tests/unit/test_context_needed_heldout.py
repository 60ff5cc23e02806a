"""The held-out context-needed set (evaluation/context_needed.py, issue 52) on a hand-made TVsub
layout with a hand-made aligner: its items, their deciding context, determinism, the format
``doctrans score contrastive`` reads, and the LM-independence that lets it skip KenLM."""
from __future__ import annotations

import random

import pytest

from doctrans.dp.annotate import find_dps, parse_alignment
from doctrans.evaluation.context_needed import (
    build_heldout_set, check_against_hand, deciding_context, dropped_pronouns)
from doctrans.evaluation.contrastive import read_set

EPISODES = {
    "7": [("他 来 了", "he came ."), ("很 累", "he is tired ."),             # 他 one line back: agreement d=1
          ("你 好 吗", "how are you ?"), ("很 好", "i am fine ."),            # the reply rule
          ("她 走 了", "she left ."), ("下雨 了", "it rains ."), ("回来 了", "she came back .")],   # d=2
    "9": [("很 累", "he is tired ."),                                        # document start: nothing decides
          ("约翰 说", "john said he was late ."), ("很 晚", "he was late .")],   # the English line decides
}


def _corpus(tmp_path):
    (tmp_path / "train").mkdir()
    for ep, pairs in EPISODES.items():
        (tmp_path / "train" / f"{ep}.zh").write_text("".join(f"{z}\n" for z, _ in pairs), encoding="utf-8")
        (tmp_path / "train" / f"{ep}.en").write_text("".join(f"{e}\n" for _, e in pairs), encoding="utf-8")
    return tmp_path


def no_links(zh, en):
    """An aligner that links nothing: every English pronoun without an overt Chinese one is dropped."""
    return [""] * len(zh)


def test_items_and_their_deciding_context(tmp_path):
    data = _corpus(tmp_path)
    s = build_heldout_set(data, tmp_path / "set", ids=["7", "9"], max_distance=3, check_test=False, aligner=no_links)
    src, ref, docs, items = read_set(tmp_path / "set")               # the format score contrastive reads
    assert len(src) == 10 and docs[:7] == ["7"] * 7
    got = {(it["line"], it["pronoun"]): (it["rule"], it["distance"]) for it in items}
    assert got == {(1, "he"): ("agreement", 1), (3, "i"): ("reply", 1), (6, "she"): ("agreement", 2),
                   (8, "he"): ("agreement_en", 1), (9, "he"): ("agreement_en", 1)}   # 8: "he is tired" before
    assert s["items"] == 5 and s["by_distance"] == {"1": 4, "2": 1}
    for it in items:                                                  # the deciding line is in reach
        d = it["distance"]
        assert 1 <= d <= 3 and docs[it["line"] - d] == docs[it["line"]]
        assert it["kind"] == "dp" and it["context_needed"] and it["contrasts"] and it["pronoun"] not in it["contrasts"]
    build_heldout_set(data, tmp_path / "n1", ids=["7", "9"], max_distance=1, check_test=False, aligner=no_links)
    assert [it["line"] for it in read_set(tmp_path / "n1")[3]] == [1, 3, 8, 9]   # N = 1: what one line back decides


def test_build_is_deterministic_and_reuses_its_alignment(tmp_path):
    data = _corpus(tmp_path)
    calls = []

    def aligner(zh, en):
        calls.append(1)
        return no_links(zh, en)

    build_heldout_set(data, tmp_path / "a", ids=["7", "9"], check_test=False, aligner=aligner)
    build_heldout_set(data, tmp_path / "b", ids=["7", "9"], check_test=False, aligner=aligner)
    build_heldout_set(data, tmp_path / "a", ids=["7", "9"], check_test=False, aligner=aligner)   # rebuild
    assert len(calls) == 2
    for name in ("items.jsonl", "ref.en", "docs", "src.zh"):
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes()


def test_overt_pronoun_and_alignment_block_an_item():
    assert dropped_pronouns("他 来 了", "he came .", "") == []                 # overt 他 claims "he"
    assert dropped_pronouns("很 累", "he is tired .", "") == [0]
    assert dropped_pronouns("很 累", "he is tired .", "0-0") == []             # linked: strict_unaligned
    assert deciding_context(["他 来 了", "很 累"], ["he came .", "he is tired ."], ["a", "b"], 1, "3SGM") == {}


def test_which_pronouns_are_dropped_does_not_depend_on_the_lm():
    """The DP decision of Algorithm 1 is the alignment's and the overt pronouns'; the LM only
    places the inserted pronoun: two different LMs give the same dropped English tokens."""
    rng = random.Random(0)
    pairs = [("我 觉得 很 好", "i think it is good and you know it"), ("去 了 吗", "did she go ?"),
             ("他们 说 了", "they said he told them"), ("给 我", "give it to me")]
    for zh, en in pairs:
        links = parse_alignment(" ".join(f"{i}-{i}" for i in range(0, min(len(zh.split()), len(en.split())), 2)))
        a = find_dps(zh.split(), en.split(), links, lambda t: rng.random())
        b = find_dps(zh.split(), en.split(), links, lambda t: -len(t))
        assert [x.tgt_index for x in a.insertions] == [x.tgt_index for x in b.insertions]


def test_check_against_hand_counts_same_line_and_token():
    hand = [{"line": 1, "position": 0, "context_needed": True}, {"line": 4, "position": 2, "context_needed": True},
            {"line": 5, "position": 0, "context_needed": False}]
    auto = [{"line": 1, "position": 0}, {"line": 4, "position": 1}, {"line": 8, "position": 0}]
    assert check_against_hand(auto, hand) == {"hand_items": 2, "reproduced": 1, "share": 0.5,
                                              "automatic_items": 3, "automatic_in_hand": 1}


def test_errors_name_the_file(tmp_path):
    data = _corpus(tmp_path)
    (data / "train" / "9.en").write_text("one\n", encoding="utf-8")
    with pytest.raises(ValueError, match="9.zh has 3 lines"):
        build_heldout_set(data, tmp_path / "x", ids=["9"], check_test=False, aligner=no_links)
    with pytest.raises(FileNotFoundError, match="5.zh"):
        build_heldout_set(data, tmp_path / "x", ids=["5"], check_test=False, aligner=no_links)
    with pytest.raises(ValueError, match="max_distance"):
        build_heldout_set(data, tmp_path / "x", ids=["7"], max_distance=0, check_test=False, aligner=no_links)


def test_a_pronoun_without_contrasts_makes_no_item(tmp_path):
    """A dropped "yourselves" (a form of no case table: no contrast) made an item with no
    contrasts, and `score contrastive` then failed on the real held-out set with "zero-size array
    to reduction operation maximum"; such a pronoun makes no item, and a set that holds one is
    refused naming the file and line."""
    import json

    from doctrans.evaluation.context_needed import context_needed_items

    seg, ref = ["我 也 觉得", "介绍 一下"], ["me too .", "you should introduce yourselves ."]   # the real line
    items = context_needed_items(seg, ref, ["a", "a"], ["", ""], max_distance=3)
    assert [it["pronoun"] for it in items] == ["you"] and all(it["contrasts"] for it in items)
    data = _corpus(tmp_path)
    build_heldout_set(data, tmp_path / "set", ids=["7"], check_test=False, aligner=no_links)
    path = tmp_path / "set" / "items.jsonl"
    rows = [json.loads(x) for x in path.read_text(encoding="utf-8").splitlines()]
    rows[0]["contrasts"] = []
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    with pytest.raises(ValueError, match=r"items.jsonl:1: .*no contrast"):
        read_set(tmp_path / "set")
