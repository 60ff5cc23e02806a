"""The context-needed pronoun items (evaluation/contrastive.py, issue 29): deterministic, from
the hand DP annotation, every antecedent inside the N sentences the model reads; McNemar's test."""
from __future__ import annotations

import json

import pytest

from doctrans.evaluation.contrastive import build_set, context_need, mcnemar, read_set


def test_agreement_rule_reads_the_nearest_third_person_mention():
    docs = ["a"] * 5
    seg = ["我 认识 他", "好 啊", "真的 吗", "来 了", "她 说 的"]
    assert context_need(seg, docs, 3, "3SGM") == ("agreement", 3)        # 他 three lines back
    assert context_need(seg, docs, 3, "3SGM", max_distance=2) is None     # beyond the reach counted
    assert context_need(seg, docs, 3, "3SGF") is None                     # the last mention is 他, not 她
    assert context_need(seg, docs, 4, "3SGM") is None                     # the current line names 她 itself
    assert context_need(seg, ["a", "b", "b", "b", "b"], 3, "3SGM") is None   # 他 is in another document
    mixed = ["他 和 她", "来 了"]
    assert context_need(mixed, ["a", "a"], 1, "3SGM") is None             # both genders mentioned: undecided


def test_reply_rule_flips_person_between_speakers():
    docs = ["a"] * 3
    seg = ["你 怕 吗 ?", "不怕", "我 去 你 也 去"]
    assert context_need(seg, docs, 1, "1SG") == ("reply", 1)
    assert context_need(seg, docs, 1, "2") is None                        # previous line has no overt 我
    assert context_need(seg, docs, 2, "1SG") is None                      # previous line's 你 but current has 你


def _write_tvsub(root, seg, oracle, refs, docs):
    d = root / "test"
    d.mkdir(parents=True)
    (d / "test.zh").write_text("".join(s.replace(" ", "") + "\n" for s in seg), encoding="utf-8")
    (d / "test.seg.zh").write_text("".join(s + "\n" for s in seg), encoding="utf-8")
    (d / "test.oracle-dp.seg.zh").write_text("".join(s + "\n" for s in oracle), encoding="utf-8")
    body = ['<refset setid="t" srclang="zh" trglang="en">']
    for doc in dict.fromkeys(docs):
        body.append(f'<DOC docid="{doc}" sysid="reference_1">')
        body += [f"<seg id={k + 1}> {r} </seg>" for k, (r, dd) in enumerate(zip(refs, docs)) if dd == doc]
        body.append("</DOC>")
    (d / "test.ref.sgm").write_text("\n".join(body + ["</refset>"]) + "\n", encoding="utf-8")


def test_build_marks_context_needed_items_deterministically_within_reach(tmp_path):
    seg = ["我 认识 他", "赚 的 越多 花 的 越 多", "你 怕 吗 ?", "不怕", "她 来 了", "好", "走 吧"]
    oracle = ["我 认识 他", "他 赚 的 越多 他 花 的 越 多", "你 怕 吗 ?", "我 不怕", "她 来 了", "好", "他 走 吧"]
    refs = ["i know him", "the more he makes , the more he spends .", "are you afraid ?", "i 'm not .",
            "she 's here", "ok", "he goes"]
    docs = ["A", "A", "A", "A", "B", "B", "B"]
    _write_tvsub(tmp_path / "tv", seg, oracle, refs, docs)
    s1 = build_set(tmp_path / "tv", "test", tmp_path / "s1")
    s2 = build_set(tmp_path / "tv", "test", tmp_path / "s2")
    assert (tmp_path / "s1" / "items.jsonl").read_text() == (tmp_path / "s2" / "items.jsonl").read_text()
    items = read_set(tmp_path / "s1")[3]
    needed = [(it["line"], it["pronoun"], it["rule"], it["distance"]) for it in items if it["context_needed"]]
    # line 1: both "he" (dropped 他 ×2, antecedent 他 one line back); line 3: "i" replying to 你;
    # line 6: dropped 他 but the last mention (line 4) is 她 → not an item
    assert needed == [(1, "he", "agreement", 1), (1, "he", "agreement", 1), (3, "i", "reply", 1)]
    assert s1["context_needed"] == {"items": 3, "max_distance": 3, "by_rule": {"agreement": 2, "reply": 1},
                                    "by_distance": {"1": 3}}
    for it in items:                                                      # the antecedent is inside the reach
        if it["context_needed"]:
            j = it["line"] - it["distance"]
            assert 1 <= it["distance"] <= 3 and docs[j] == docs[it["line"]]
    assert all(not it["context_needed"] for it in items if it["kind"] == "overt")
    with pytest.raises(ValueError, match="max_distance"):
        build_set(tmp_path / "tv", "test", tmp_path / "s3", max_distance=0)


def test_mcnemar_counts_discordant_pairs():
    r = mcnemar([1, 1, 1, 1, 1, 1, 1, 0, 1, 1], [0, 0, 0, 0, 0, 0, 0, 0, 1, 1])
    assert (r["a_only"], r["b_only"]) == (7, 0) and r["p_value"] == pytest.approx(2 / 2 ** 7)
    assert mcnemar([1, 0], [1, 0])["p_value"] == 1.0
    with pytest.raises(ValueError):
        mcnemar([1], [1, 0])
