"""Splitting over-long lines for the model (doctrans/inference/long_lines.py)."""
from __future__ import annotations

import logging

import pytest

from doctrans.inference.long_lines import chunk, split_line, split_long_lines, split_sentences


def test_sentences_end_after_sentence_punctuation():
    units = "今天 天气 很 好 。 你 呢 ? 我 ... 好".split()
    assert split_sentences(units) == [["今天", "天气", "很", "好", "。"], ["你", "呢", "?"], ["我", "..."], ["好"]]


def test_chunks_cut_at_word_ends_and_respect_the_limit():
    units = "a b@@ c@@ d e f@@ g".split()
    assert chunk(units, 3) == [["a"], ["b@@", "c@@", "d"], ["e", "f@@", "g"]]
    assert chunk(units + ["h"], 3) == [["a"], ["b@@", "c@@", "d"], ["e", "f@@", "g"], ["h"]]
    assert chunk(["e", "f@@", "g@@", "h"], 3) == [["e"], ["f@@", "g@@", "h"]]
    assert chunk(["x@@"] * 5 + ["y"], 2) == [["x@@", "x@@"], ["x@@", "x@@"], ["x@@", "y"]]
    with pytest.raises(ValueError):
        chunk(units, 0)


def test_a_line_within_the_limit_is_untouched():
    units = "a 。 b 。".split()
    assert split_line(units, 4) == [units]
    assert split_line(units, 3) == [["a", "。"], ["b", "。"]]


def test_split_long_lines_keeps_every_unit_and_owner_and_warns(caplog):
    long = " ".join(["今天 天气 很 好 。"] * 300)                 # 1,500 units
    nopunct = " ".join(f"w{i}" for i in range(2500))
    with caplog.at_level(logging.WARNING):
        s = split_long_lines(["a b", long, nopunct], 1023, "doc.zh", [1, 5, 9])
    assert all(len(p.split()) <= 1023 for p in s.pieces)
    for k, line in enumerate(["a b", long, nopunct]):
        assert " ".join(p for p, o in zip(s.pieces, s.owner) if o == k) == line
    assert s.owner.count(1) == 300 and s.owner.count(2) == 3
    assert "doc.zh:5: 1500 source tokens" in caplog.text and "doc.zh:9: 2500" in caplog.text
    assert "doc.zh:1:" not in caplog.text
    assert s.join([f"t{i}" for i in range(len(s.pieces))], 3)[0] == "t0"


def test_over_long_sentences_are_chunked_at_the_training_length():
    units = [f"w{i}" for i in range(250)] + ["。"] + ["x"] * 50 + ["。"]
    parts = split_line(units, 200, chunk_len=80)
    assert [len(p) for p in parts] == [80, 80, 80, 11, 51]              # the short sentence stays whole
    assert [len(p) for p in split_line(units, 200, chunk_len=0)] == [200, 51, 51]
    assert [len(p) for p in split_line(units, 200, chunk_len=500)] == [200, 51, 51]
