"""Golden tests for DP annotation (thesis §4.3.1, Algorithm 1) and the DP agreement scorer."""
from __future__ import annotations

import math

import pytest

from conftest import TVSUB, needs_tvsub
from doctrans.dp.annotate import (
    DPP_TOKEN,
    NO_DP_LABEL,
    candidate_gaps,
    corpus_statistics,
    explain_text,
    find_dps,
    parse_alignment,
)
from doctrans.dp.pronouns import (
    chinese_roots,
    roots_compatible,
    CHINESE_PRONOUNS,
    TRIGGERS,
    is_chinese_pronoun,
    pronoun_type,
    zh_candidates,
)
from doctrans.dp.agreement import (
    base_chars,
    dp_agreement,
    dp_agreement_files,
    dp_bootstrap,
    extract_dps,
    extract_dps_with_edits,
    project_offsets,
)


def lm_preferring(*ngrams: str):
    """A fake LM: +1 for every token n-gram of `ngrams` found in the sentence, else 0."""
    def score(tokens: list[str]) -> float:
        text = f" {' '.join(tokens)} "
        return float(sum(f" {g} " in text for g in ngrams))
    return score


FLAT_LM = lm_preferring()   # every candidate scores 0: ties decide

# The thesis' worked example (Figure 4.4): "my" is unaligned; anchors 准备 and 一辈子.
EX_SRC = "我 已经 准备 了 一辈子 了".split()
EX_TGT = "I 've been preparing all my life".split()
EX_LINKS = parse_alignment("0-0 1-1 2-3 4-6")


# ---------------------------------------------------------------- inventories (Tables 4.2/4.3)

@pytest.mark.parametrize("english, expected", [
    ("I", ("我",)), ("me", ("我",)), ("my", ("我的",)), ("mine", ("我的",)), ("myself", ("我自己",)),
    ("you", ("你", "你们")), ("your", ("你的", "你们的")), ("yours", ("你的", "你们的")),
    ("yourself", ("你自己",)), ("yourselves", ("你们自己",)),
    ("he", ("他",)), ("him", ("他",)), ("his", ("他的",)), ("himself", ("他自己",)),
    ("she", ("她",)), ("her", ("她", "她的")), ("hers", ("她的",)), ("herself", ("她自己",)),
    ("it", ("它",)), ("its", ("它的",)), ("itself", ("它自己",)),
    ("we", ("我们",)), ("us", ("我们",)), ("our", ("我们的",)), ("ours", ("我们的",)),
    ("ourselves", ("我们自己",)),
    ("they", ("他们", "她们", "它们")), ("them", ("他们", "她们", "它们")),
    ("their", ("他们的", "她们的", "它们的")), ("theirs", ("他们的", "她们的", "它们的")),
    ("themselves", ("他们自己", "她们自己", "它们自己")),
])
def test_candidate_map_table_4_3(english, expected):
    assert zh_candidates(english) == expected


def test_inventories():
    assert len(TRIGGERS) == 31                       # distinct forms of Table 4.2
    assert len(CHINESE_PRONOUNS) == len(set(CHINESE_PRONOUNS)) == 30
    assert all(is_chinese_pronoun(p) for p in ("我", "她们的", "它们自己", "你们"))
    assert not is_chinese_pronoun("自己") and not is_chinese_pronoun("的") and not is_chinese_pronoun("您")
    assert is_chinese_pronoun("您", extended=True)
    assert pronoun_type("They") == "subject" and pronoun_type("them") == "object"
    assert pronoun_type("her") == "object/possessive" and pronoun_type("you") == "subject/object"
    assert pronoun_type("mine") == "possessive" and pronoun_type("themselves") == "reflexive"
    with pytest.raises(KeyError):
        zh_candidates("the")


# ---------------------------------------------------------------- alignment input

def test_parse_alignment():
    assert parse_alignment("0-0 1-2  3-1\n") == {(0, 0), (1, 2), (3, 1)}
    assert parse_alignment("") == set()
    for bad in ("0-a", "1:2", "0-1-2", "-1-2", "0-0 x"):
        with pytest.raises(ValueError, match="bad alignment item"):
            parse_alignment(bad)


def test_bad_links_mode_and_nan_are_rejected():
    with pytest.raises(ValueError, match="outside"):
        find_dps(["我"], ["I"], {(1, 0)}, FLAT_LM)
    with pytest.raises(ValueError, match="unknown mode"):
        find_dps(["我"], ["I"], set(), FLAT_LM, mode="loose")
    with pytest.raises(ValueError, match="NaN"):
        find_dps(["走"], ["go", "it"], {(0, 0)}, lambda toks: math.nan)


# ---------------------------------------------------------------- Algorithm 1

@pytest.mark.parametrize("preferred, gap, dp", [
    ("了 我的 一辈子", 4, "我 已经 准备 了 我的 一辈子 了"),
    ("准备 我的 了", 3, "我 已经 准备 我的 了 一辈子 了"),
])
def test_worked_example_choice_follows_lm(preferred, gap, dp):
    res = find_dps(EX_SRC, EX_TGT, EX_LINKS, lm_preferring(preferred))
    (ins,) = res.insertions
    assert (ins.english, ins.pronoun, ins.pronoun_type) == ("my", "我的", "possessive")
    assert ins.tgt_anchors == (3, 6) and ins.src_anchors == (2, 4)      # preparing→准备, life→一辈子
    assert [(c.gap, c.pronoun) for c in ins.scores] == [(3, "我的"), (4, "我的")]   # around 了
    assert ins.gap == gap and " ".join(res.dp_tokens) == dp
    assert res.dp_tokens[ins.position] == "我的" and ins.orig_position == gap
    assert res.dpp_tokens[ins.position] == DPP_TOKEN
    assert " ".join(res.dpp_tokens) == dp.replace("我的", DPP_TOKEN)
    assert res.labels[gap] == "我的" and len(res.labels) == len(EX_SRC) + 1
    assert [lab for k, lab in enumerate(res.labels) if k != gap] == [NO_DP_LABEL] * len(EX_SRC)
    assert res.dpp_tags[gap] == "DP" and res.dpp_tags.count("NA") == len(EX_SRC)
    assert [(s.english, s.reason) for s in res.skipped] == [("i", "overt")]


def test_sentence_start_and_candidate_choice():
    # (你) 喜欢 这份 工作 吗 ? / Do you like this job ?  — no anchor on the left
    src, tgt = "喜欢 这份 工作 吗 ?".split(), "Do you like this job ?".split()
    links = parse_alignment("0-2 1-3 2-4 4-5")
    res = find_dps(src, tgt, links, lm_preferring("你们 喜欢"))
    (ins,) = res.insertions
    assert ins.tgt_anchors == (None, 2) and ins.src_anchors == (-1, 0)
    assert [(c.gap, c.pronoun) for c in ins.scores] == [(0, "你"), (0, "你们")]
    assert res.dp_tokens[0] == "你们" and res.labels[0] == "你们"
    assert find_dps(src, tgt, links, FLAT_LM).dp_tokens[0] == "你"        # tie → candidate order


def test_sentence_end_and_eos_label():
    src, tgt = ["谢谢"], ["Thank", "you"]
    res = find_dps(src, tgt, {(0, 0)}, FLAT_LM)
    (ins,) = res.insertions
    assert ins.tgt_anchors == (0, None) and ins.src_anchors == (0, 1)
    assert res.dp_tokens == ("谢谢", "你") and res.labels == ("N", "你")   # DP before </s>
    assert res.dpp_tokens == ("谢谢", DPP_TOKEN) and ins.orig_position == 1


def test_crossing_links_are_swapped():
    src, tgt = "甲 乙 丙 丁".split(), "x it y".split()
    links = {(3, 0), (0, 2)}                          # left anchor → 丁 (3), right anchor → 甲 (0)
    res = find_dps(src, tgt, links, lm_preferring("乙 它 丙"))
    (ins,) = res.insertions
    assert ins.src_anchors == (3, 0)
    assert [c.gap for c in ins.scores] == [1, 2, 3]   # the gaps between 甲 and 丁
    assert res.dp_tokens == ("甲", "乙", "它", "丙", "丁")
    assert "crossed" in explain_text(res, src, tgt, links)


def test_shared_anchor_gives_both_sides():
    assert candidate_gaps(1, 1) == [1, 2] and candidate_gaps(-1, 0) == [0] and candidate_gaps(0, 3) == [1, 2, 3]
    src, tgt = "甲 乙 丙".split(), "x it y".split()
    res = find_dps(src, tgt, {(1, 0), (1, 2)}, lm_preferring("乙 它"))
    assert [c.gap for c in res.insertions[0].scores] == [1, 2]
    assert res.dp_tokens == ("甲", "乙", "它", "丙")


def test_no_links_searches_whole_sentence_ties_to_earliest_gap():
    res = find_dps(["走", "吧"], ["let", "us", "go"], set(), FLAT_LM)
    assert [c.gap for c in res.insertions[0].scores] == [0, 1, 2]
    assert res.dp_tokens == ("我们", "走", "吧")


def test_overt_and_aligned_pronouns_are_not_annotated():
    src, tgt = "我 爱 她".split(), "I love her".split()
    res = find_dps(src, tgt, {(0, 0), (1, 1), (2, 2)}, FLAT_LM)
    assert res.insertions == () and res.dp_tokens == tuple(src) and set(res.labels) == {NO_DP_LABEL}
    assert [s.reason for s in res.skipped] == ["overt", "overt"]
    # "her" linked to a non-pronoun: skipped in strict mode, annotated in misaligned mode
    src2, links2 = "我 爱 了".split(), {(0, 0), (1, 1), (2, 2)}
    strict = find_dps(src2, tgt, links2, FLAT_LM)
    assert strict.insertions == () and strict.skipped[-1].reason == "aligned"
    mis = find_dps(src2, tgt, links2, lm_preferring("爱 她"), mode="misaligned")
    assert [(i.english, i.pronoun) for i in mis.insertions] == [("her", "她")]
    assert mis.dp_tokens == ("我", "爱", "她", "了")
    assert (2, 2) in mis.links and (3, 2) not in mis.links          # her re-linked to its DP


def test_chinese_roots_inside_jieba_words():
    assert chinese_roots("我爱你") == ["我", "你"]
    assert chinese_roots("我们的") == ["我们"] and chinese_roots("你们自己") == ["你们"]
    assert chinese_roots("其他人") == [] and chinese_roots("吉他手") == [] and chinese_roots("工作") == []
    assert roots_compatible("you", "你们") and roots_compatible("you", "您") and roots_compatible("my", "我")
    assert roots_compatible("them", "它们") and roots_compatible("we", "咱们")
    assert not roots_compatible("he", "她") and not roots_compatible("i", "我们")


def test_overt_match_skips_pronouns_the_alignment_missed():
    # jieba glues 我爱你 into one word; the intersection left everything unlinked
    src, tgt = ["我爱你"], "i love you".split()
    literal = find_dps(src, tgt, set(), FLAT_LM, overt_match=False)
    assert [i.english for i in literal.insertions] == ["i", "you"]          # Algorithm 1 as written
    res = find_dps(src, tgt, set(), FLAT_LM)
    assert res.insertions == () and [s.reason for s in res.skipped] == ["overt_unaligned"] * 2
    # one 你 in the source, two "you": the linked one claims it, the other is a DP
    src2, tgt2 = "你 说 走 吧".split(), "you said you go".split()
    res2 = find_dps(src2, tgt2, {(0, 0), (1, 1), (2, 3)}, lm_preferring("说 你"))
    assert [(i.english, i.pronoun) for i in res2.insertions] == [("you", "你")]
    assert res2.dp_tokens == ("你", "说", "你", "走", "吧")
    # a compatible root of another row does not count: 她 cannot stand for "he"
    res3 = find_dps(["她", "走"], ["he", "left"], {(1, 1)}, FLAT_LM)
    assert [i.english for i in res3.insertions] == ["he"]


def test_two_dps_order_links_and_label_conflict():
    # 给 / give me it: "me" lands at the end; "it" is then anchored on the DP 我 → after it
    src, tgt = ["给"], ["give", "me", "it"]
    res = find_dps(src, tgt, {(0, 0)}, FLAT_LM)
    assert res.dp_tokens == ("给", "我", "它")
    assert res.dpp_tokens == ("给", DPP_TOKEN, DPP_TOKEN)
    assert res.labels == ("N", "我") and res.label_conflicts == 1       # keep the first before </s>
    assert res.links == {(0, 0), (1, 1), (2, 2)}
    # without linking the DPs, "it" may go either side of 我: the LM decides
    res2 = find_dps(src, tgt, {(0, 0)}, lm_preferring("给 它"), link_inserted=False)
    assert [c.gap for c in res2.insertions[1].scores] == [1, 2]
    assert res2.dp_tokens == ("给", "它", "我")
    assert [i.position for i in res2.insertions] == [2, 1]            # final positions, shifted


def test_positions_shift_when_a_later_dp_goes_left():
    src, tgt = "甲 乙 丙".split(), "a him b it c".split()
    links = {(1, 0), (2, 2), (0, 4)}                  # a→乙, b→丙, c→甲 (crosses for "it")
    res = find_dps(src, tgt, links, lm_preferring("甲 它"))
    assert res.dp_tokens == ("甲", "它", "乙", "他", "丙")
    him, it = res.insertions
    assert (him.gap, him.position, him.orig_position) == (2, 3, 2)    # shifted by the later DP
    assert (it.gap, it.position, it.orig_position) == (1, 1, 1)
    assert res.labels == ("N", "它", "他", "N")


def test_explain_text_shows_anchors_scores_and_choice():
    res = find_dps(EX_SRC, EX_TGT, EX_LINKS, lm_preferring("了 我的 一辈子"))
    text = explain_text(res, EX_SRC, EX_TGT, EX_LINKS)
    assert "tgt[3] 'preparing' → src '准备'/2" in text and "tgt[6] 'life' → src '一辈子'/4" in text
    assert "gap 3 (准备 _ 了) 我的: 0.0000" in text
    assert "gap 4 (了 _ 一辈子) 我的: 1.0000  <- chosen" in text
    assert "skip  tgt[0] 'i'" in text and "DPP:   我 已经 准备 了 #DP# 一辈子 了" in text


def test_corpus_statistics():
    pairs = [
        (EX_SRC, EX_TGT, EX_LINKS),                                                   # my dropped
        (["谢谢"], ["Thank", "you"], {(0, 0)}),                                       # you dropped
        ("你 喜欢 它 吗 ?".split(), "Do you like it ?".split(), parse_alignment("0-1 1-2 2-3 4-4")),
    ]
    results = [find_dps(s, t, a, FLAT_LM) for s, t, a in pairs]
    stats = corpus_statistics(results, [" ".join(t) for _, t, _ in pairs])
    assert (stats["sentences"], stats["pronouns"], stats["dropped"]) == (3, 5, 2)
    assert stats["dropped_pct"] == pytest.approx(40.0)
    assert stats["by_pronoun"]["you"] == {"pronouns": 2, "dropped": 1, "dropped_pct": 50.0}
    assert stats["by_pronoun"]["i"]["dropped"] == 0 and stats["by_pronoun"]["my"]["dropped"] == 1
    assert stats["by_type"]["subject/object"] == {"pronouns": 3, "dropped": 1,
                                                  "dropped_pct": pytest.approx(100 / 3)}
    assert stats["by_type"]["possessive"]["dropped_pct"] == 100.0
    with pytest.raises(ValueError):
        corpus_statistics(results, [])


# ---------------------------------------------------------------- agreement scorer

@pytest.mark.parametrize("base, dp_line, expected", [
    ("没 问题 , 都 办好 了", "没 问题 , 它 都 办好 了", [(4, "它")]),
    ("罗斯 , 谢谢", "罗斯 , 谢谢 你", [(5, "你")]),
    ("要不要 去", "你们 要 不要 去", [(0, "你们")]),                  # other segmentation
    ("我 爱", "我 我 爱", [(0, "我")]),                              # next to an identical pronoun
    ("我 爱", "我 爱 我", [(2, "我")]),
    ("想 听 吗 ？", "你 想 听 吗 ?", [(0, "你")]),                   # ？ vs ?
    ("我们 走", "我 我们 走", [(0, "我")]),
    ("穿 毛衣", "穿 我的 毛衣 她", [(1, "我的"), (3, "她")]),
    ("说 &quot; 好 &quot;", "他 说 &quot; 好 &quot;", [(0, "他")]),
    ("谢谢", "谢谢", []),
])
def test_extract_dps(base, dp_line, expected):
    assert extract_dps(base, dp_line) == expected


def test_extract_dps_glued_and_other_edits():
    assert extract_dps_with_edits("不 知道 的 女生", "不 知道 它的 女生") == ([(3, "它")], 0)
    assert extract_dps_with_edits("谢谢", "谢谢你") == ([(2, "你")], 0)
    assert extract_dps_with_edits("完全 是", "这 完全 是") == ([], 1)     # not a pronoun
    assert extract_dps_with_edits("你 表弟", "你的 表弟") == ([], 1)      # changed, not inserted


def test_project_offsets():
    assert project_offsets("ab", "ab") == [0, 1, 2]
    assert base_chars("“ 好 ”") == "“好”" and base_chars("&quot; 好 &quot;") == '"好"'
    assert project_offsets("“好”吧", '"好"吧') == [0, 1, 2, 3, 4]
    assert project_offsets("好吧", "好了吧") == [0, 2, 3]          # "before 吧" stays before 吧


def test_dp_agreement_hand_example():
    base = ["喜欢 这份 工作 吗 ?", "很 喜欢 , 谢谢", "走 吧", "来 了"]
    sys = ["你 喜欢 这份 工作 吗 ?", "我 很 喜欢 , 谢谢 你", "走 吧", "它 来 了"]
    obase = ["喜欢 这 份 工作 吗 ？", "很 喜欢 , 谢谢", "走 吧", "来 了"]
    oracle = ["你 喜欢 这 份 工作 吗 ？", "我 很 喜欢 它 , 谢谢 你们", "我们 走 吧", "来 了"]
    r = dp_agreement(base, sys, obase, oracle)
    assert (r["lines"], r["sys_dps"], r["oracle_dps"], r["base_mismatch_lines"]) == (4, 4, 5, 0)
    assert r["position"]["matched"] == 3 and r["pronoun"]["matched"] == 2
    assert r["position"]["precision"] == pytest.approx(0.75) and r["position"]["recall"] == pytest.approx(0.6)
    assert r["position"]["f1"] == pytest.approx(2 / 3)
    assert r["pronoun"]["precision"] == pytest.approx(0.5) and r["pronoun"]["recall"] == pytest.approx(0.4)
    assert r["pronoun"]["f1"] == pytest.approx(4 / 9)
    # per-word tags (oracle words + </s>): 7 + 5 + 3 + 3 positions; line 2 disagrees on the DP
    # before "," (both tags) and on 你 vs 你们 at </s> (pronoun only); lines 3 and 4 at one position
    assert r["tag_accuracy"] == {"positions": 18, "detection": pytest.approx(15 / 18),
                                 "prediction": pytest.approx(14 / 18)}
    self_r = dp_agreement(obase, oracle, obase, oracle)
    assert self_r["position"]["f1"] == self_r["pronoun"]["f1"] == 1.0
    assert self_r["tag_accuracy"]["detection"] == self_r["tag_accuracy"]["prediction"] == 1.0
    with pytest.raises(ValueError, match="line counts differ"):
        dp_agreement(base, sys[:3], obase, oracle)


def test_dp_agreement_projects_differing_bases():
    r = dp_agreement(["说 “ 好 ”"], ["说 “ 好 ” 它"], ["说 &quot; 好 &quot;"], ["说 &quot; 好 &quot; 它"])
    assert r["base_mismatch_lines"] == 1 and r["pronoun"]["f1"] == 1.0


@needs_tvsub()
def test_tvsub_oracle_scores_itself():
    test = TVSUB / "test"
    r = dp_agreement_files(test / "test.seg.zh", test / "test.oracle-dp.seg.zh",
                           test / "test.seg.zh", test / "test.oracle-dp.seg.zh")
    assert r["lines"] == 1154 and 300 < r["oracle_dps"] < 800
    assert r["position"]["f1"] == r["pronoun"]["f1"] == 1.0


def test_score_dp_cli_matches_by_character_offset(tmp_path):
    """`doctrans score dp`: one DP right (offset and pronoun), one at the right offset with the
    wrong pronoun, one spurious; the oracle is segmented differently from the system's base."""
    import json

    from click.testing import CliRunner

    from doctrans.cli import cli

    base = tmp_path / "base.zh"
    base.write_text("准备 好 了 吗 ?\n吃饭 了\n今天 很 好\n", encoding="utf-8")
    system = tmp_path / "sys.zh"
    system.write_text("你 准备 好 了 吗 ?\n我 吃饭 了\n今天 它 很 好\n", encoding="utf-8")
    obase = tmp_path / "obase.zh"
    obase.write_text("准备好 了 吗 ？\n吃 饭 了\n今天 很好\n", encoding="utf-8")
    oracle = tmp_path / "oracle.zh"
    oracle.write_text("你 准备好 了 吗 ？\n你们 吃 饭 了\n今天 很好\n", encoding="utf-8")
    r = CliRunner().invoke(cli, ["score", "dp", str(system), "--base", str(base), "--oracle", str(oracle),
                                 "--oracle-base", str(obase), "--json"], catch_exceptions=False)
    assert r.exit_code == 0, r.output
    res = json.loads(r.output)
    assert (res["sys_dps"], res["oracle_dps"]) == (3, 2)
    assert res["position"]["matched"] == 2 and res["pronoun"]["matched"] == 1
    assert abs(res["position"]["precision"] - 2 / 3) < 1e-9 and res["position"]["recall"] == 1.0
    assert abs(res["pronoun"]["f1"] - 2 * (1 / 3) * 0.5 / (1 / 3 + 0.5)) < 1e-9
    lo, hi = res["bootstrap"]["pronoun"]["ci"]
    assert 0.0 <= lo <= res["pronoun"]["f1"] <= hi <= 1.0
    # the oracle itself as the baseline (same base): it is never worse than the system
    r = CliRunner().invoke(cli, ["score", "dp", str(system), "--base", str(base), "--oracle", str(oracle),
                                 "--oracle-base", str(obase), "--baseline", str(oracle),
                                 "--baseline-base", str(obase), "--bootstrap", "200"], catch_exceptions=False)
    assert r.exit_code == 0, r.output
    assert r.output.count("baseline 1.0000 [") == 2 and r.output.count("p(system <= baseline) = 1.000") == 2


def test_dp_bootstrap_intervals_and_paired_p_value():
    same = [(1, 1, 1, 0)] * 50                    # every line: one DP, right place, wrong pronoun
    bs = dp_bootstrap(same, n_samples=100)
    assert bs["position"]["ci"] == [1.0, 1.0] and bs["pronoun"]["ci"] == [0.0, 0.0]
    good = [(1, 1, 1, 1)] * 25 + [(0, 1, 0, 0)] * 25    # half the lines right, half missed
    bad = [(1, 1, 0, 0)] * 50
    bs = dp_bootstrap(good, bad, n_samples=300)
    assert bs["pronoun"]["p_value"] == 0.0 and dp_bootstrap(bad, good, n_samples=300)["pronoun"]["p_value"] == 1.0
    lo, hi = bs["pronoun"]["ci"]                  # point F = 2·25 / (25 + 50) = 2/3
    assert lo < 2 / 3 < hi and hi - lo < 0.3
    assert bs["pronoun"]["baseline_ci"] == [0.0, 0.0]
    assert dp_bootstrap(good, good, n_samples=50)["position"]["p_value"] == 1.0   # ties count as not better
    with pytest.raises(ValueError, match="50 lines, baseline 3"):
        dp_bootstrap(good, bad[:3])
