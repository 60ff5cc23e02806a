"""Where a line's sentences end (doctrans/inference/sentences.py, issue 75), on the BPE units the
model reads (after NFKC: ！？ → ! ?, … → ..., ） → ))."""
from __future__ import annotations

import pytest

from doctrans.inference.long_lines import split_line
from doctrans.inference.sentences import split_sentences, words


def cut(line: str) -> list[str]:
    return [" ".join(p) for p in split_sentences(line.split())]


@pytest.mark.parametrize("line, pieces", [
    ("什么 ? 我们 还是 夫妻 。 不要 告诉 瑞秋 , 待 会见 。",
     ["什么 ?", "我们 还是 夫妻 。", "不要 告诉 瑞秋 , 待 会见 。"]),
    ("他 说 : “ 你好 。 ” 然后 走 了 。", ["他 说 : “ 你好 。 ”", "然后 走 了 。"]),                   # closing quote kept
    ("「 真的 ? 」 他 问 。", ["「 真的 ? 」", "他 问 。"]),
    ("真的 吗 ? ! 太好了 ( 笑 ) 。", ["真的 吗 ? !", "太好了 ( 笑 ) 。"]),                          # a run of marks
    ("好 吧 ! ! 你 呢 ? ?", ["好 吧 ! !", "你 呢 ? ?"]),
    ("我 ..@@ .... 我 不 知道", ["我 ..@@ ....", "我 不 知道"]),                                     # …… as BPE units
    ("我 想 ... 算了 。 好", ["我 想 ...", "算了 。", "好"]),
    ("我 … 好 ; 走 吧", ["我 …", "好 ;", "走 吧"]),
    ('他 说 " 走 吧 ! " 然后 " 好 " 。 嗯', ['他 说 " 走 吧 ! "', '然后 " 好 " 。', "嗯"]),   # an ASCII quote that closes
    ('走 吧 ! " 好 " 。', ['走 吧 !', '" 好 " 。']),                                                # … and one that opens
    ("他 3@@ .5 岁 了 . 好 吧", ["他 3@@ .5 岁 了 .", "好 吧"]),
])
def test_sentences_end_after_final_punctuation_and_the_closing_marks_after_it(line, pieces):
    assert cut(line) == pieces


def test_what_is_not_a_sentence_end():
    assert cut("要 不要 去 看 电影 好 啊") == ["要 不要 去 看 电影 好 啊"]            # a space-joined utterance pair
    assert cut("罗斯 , 谢谢 , 待 会见") == ["罗斯 , 谢谢 , 待 会见"]                  # commas
    assert cut("m@@ r . s@@ mi@@ t@@ h 来 了 。") == ["m@@ r . s@@ mi@@ t@@ h 来 了 。"]  # Mr. Smith
    assert cut("a@@ 。 b") == ["a@@ 。 b"]                     # a unit that continues its word never ends one
    assert cut("你好 。") == ["你好 。"] and cut("") == []


def test_punctuation_only_pieces_stay_with_a_sentence():
    assert cut("! ! 好 的 。 你 呢") == ["! ! 好 的 。", "你 呢"]
    assert cut("好 。 ? !") == ["好 。 ? !"]
    assert cut("。 。") == ["。 。"]


def test_pieces_are_the_line_in_order():
    line = "“ 走 吧 ! ” 她 说 。 「 真的 ? 」 他 问 。 我 ..@@ .... 不 知道 ! ? 好"
    assert " ".join(cut(line)) == line and len(cut(line)) == 7


def test_words_group_bpe_units():
    assert words("a b@@ c d@@".split()) == [(0, 1), (1, 3), (3, 4)]


def test_split_line_segments_a_short_line_only_when_asked():
    units = "a 。 b 。".split()
    assert split_line(units, 100) == [units]
    assert split_line(units, 100, segment=True) == [["a", "。"], ["b", "。"]]
    long = ["w"] * 150 + ["。", "x"]
    assert [len(p) for p in split_line(long, 100, chunk_len=80, segment=True)] == [80, 71, 1]


# --- the boundary model (inference/boundaries.py) -------------------------------------------------

def _model(pairs: dict[tuple[str, str], float], threshold: float = 0.5, min_words: int = 1):
    """A BoundaryModel whose only weights are on the word pairs given (bias −5: P ≈ 0.007 elsewhere)."""
    import numpy as np

    from doctrans.inference.boundaries import BoundaryModel, hashed

    w = np.zeros(1 << 12, dtype=np.float32)
    for (a, b), v in pairs.items():
        w[hashed([f"LR={a}|{b}"], 12)] += v
    return BoundaryModel(w, -5.0, threshold, min_words)


def test_a_boundary_model_cuts_where_its_probability_reaches_the_threshold():
    m = _model({("吧", "我"): 10.0, ("好", "你"): 4.0})
    ws = "走 吧 我 很 好 你 呢".split()
    p = m.probabilities(ws)
    assert p.shape == (6,) and p[1] > 0.99 and 0.2 < p[4] < 0.3 and p[0] < 0.01
    assert m.cuts(ws) == [2]
    assert _model({("吧", "我"): 10.0, ("好", "你"): 4.0}, threshold=0.2).cuts(ws) == [2, 5]
    assert _model({("吧", "我"): 10.0, ("我", "很"): 9.0}, min_words=2).cuts(ws) == [2]   # 我 alone: too short
    assert m.cuts(["好"]) == [] and m.probabilities([]).shape == (0,)


def test_the_model_cuts_inside_the_rules_sentences_never_inside_a_word():
    m = _model({("吧", "我"): 10.0, ("我", "很"): 10.0})
    units = "走 吧 我@@ 很 好 ? 走 吧 我 很".split()         # 我@@ 很: one word, 我很 (no weight on 吧|我很)
    assert [" ".join(p) for p in split_sentences(units, m)] == ["走 吧 我@@ 很 好 ?", "走 吧", "我", "很"]
    assert [" ".join(p) for p in split_sentences(units)] == ["走 吧 我@@ 很 好 ?", "走 吧 我 很"]


def test_a_boundary_model_file_round_trips_and_a_bad_one_is_named(tmp_path):
    import numpy as np

    from doctrans.inference.boundaries import BoundaryModel, shipped_model

    m = _model({("吧", "我"): 10.0}, threshold=0.7, min_words=2)
    m.save(tmp_path / "b.npz")
    back = BoundaryModel.load(tmp_path / "b.npz")
    assert (back.threshold, back.min_words, back.bias, back.bits) == (0.7, 2, -5.0, 12)
    assert np.allclose(back.weights, m.weights, atol=1e-2)
    (tmp_path / "bad.npz").write_bytes(b"not a model")
    with pytest.raises(ValueError, match="bad.npz: not a sentence-boundary model"):
        BoundaryModel.load(tmp_path / "bad.npz")
    with pytest.raises(FileNotFoundError, match="gone.npz"):
        BoundaryModel.load(tmp_path / "gone.npz")
    shipped = BoundaryModel.load(shipped_model())
    assert shipped.bits >= 16 and 0 < shipped.threshold < 1
