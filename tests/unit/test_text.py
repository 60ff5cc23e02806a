"""Text processing: normalisation, segmentation, Moses round trips, BPE apply/merge."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from doctrans.data.text import (
    TextProcessor,
    detokenize_en,
    merge_bpe,
    normalize_zh,
    segment_zh,
    tokenize_en,
)


@pytest.mark.parametrize("raw, expected", [
    ("确定要这么做？", "确定要这么做?"),
    ("好  就是它了", "好 就是它了"),                   # TVsub's two-space utterance separator
    ("  ＡＢＣ１２３，！　天哪  ", "ABC123,! 天哪"),    # full-width ASCII, ideographic space
    ("", ""),
])
def test_normalize_zh(raw, expected):
    assert normalize_zh(raw) == expected


def test_segment_zh_tokens_nonempty_and_parts_kept():
    lines = ["好 就是它了", "我的天 真不幸的名字", "在eBay买的 只花了50美分", ""]
    out = segment_zh(lines)
    assert len(out) == len(lines) and out[-1] == ""
    for line in out[:-1]:
        assert line and "  " not in line and line == line.strip()
    assert out[0].split()[0] == "好"                    # no word spans the utterance boundary
    assert "".join(out[1].split()) == "我的天真不幸的名字"  # segmentation only adds spaces
    assert segment_zh(lines) == out                     # deterministic


@pytest.mark.parametrize("text", [
    "Oh, my goodness. What an unfortunate name.",
    "I can't believe it, woo-hoo!",
    "\"Quote\" me: 3.5 dollars (or more)?",
])
def test_moses_round_trip(text):
    tok = tokenize_en([text], lowercase=False)[0]
    assert tok != text and "  " not in tok
    assert detokenize_en([tok]) == [text]


def test_tokenize_en_lowercases_after_tokenizing():
    # Moses splits a sentence-internal "." only before an upper-case word.
    assert tokenize_en(["Ross. Woo-hoo!"]) == ["ross . woo @-@ hoo !"]


def test_tokenize_en_unescapes_pretokenized_lines():
    # TVsub dev/test .en lines are Moses-tokenized with XML escapes already.
    lines = ["don &apos;t you give me any of your Hey ! ", "are you asking me to have a &quot; frienaissance &quot; ?"]
    assert tokenize_en(lines) == ["don 't you give me any of your hey !",
                                  'are you asking me to have a " frienaissance " ?']
    assert tokenize_en(["I don 't know &amp; well-known"], lowercase=False) == ["I don 't know & well @-@ known"]


def test_merge_bpe():
    assert merge_bpe("un@@ believ@@ able .") == "unbelievable ."
    assert merge_bpe("a@@") == "a"
    assert merge_bpe("") == ""


@pytest.fixture
def tiny_prepared(tmp_path: Path) -> Path:
    """Hand-written codes (merges "t h", "th e</w>") and meta, as preprocess writes them."""
    (tmp_path / "bpe.codes.en").write_text("#version: 0.2\nt h\nth e</w>\n", encoding="utf-8")
    (tmp_path / "bpe.codes.zh").write_text("#version: 0.2\n", encoding="utf-8")
    meta = {"version": 1, "src": "zh", "tgt": "en", "lowercase": True, "bpe": {"merges": 2, "joint": False}}
    (tmp_path / "meta.json").write_text(json.dumps(meta), encoding="utf-8")
    return tmp_path


def test_text_processor_bpe_round_trip(tiny_prepared):
    en = TextProcessor.from_prepared(tiny_prepared, "en")
    tok = en.tokenize(["The other one, there.", ""])
    assert tok == ["the other one , there .", ""]
    bpe = en.apply_bpe(tok)
    assert bpe[0].split()[0] == "the" and "@@ " in bpe[0] and bpe[1] == ""
    assert [en.merge_bpe(b) for b in bpe] == tok
    assert en.encode(["The other one, there.", ""]) == bpe
    assert en.detokenize([en.merge_bpe(b) for b in bpe]) == ["the other one, there.", ""]


def test_text_processor_zh_and_errors(tiny_prepared):
    zh = TextProcessor.from_prepared(tiny_prepared, "zh")
    assert zh.encode(["在ＥＢＡＹ买的？", ""]) == ["在 ebay 买 的 ?", ""]  # no merges: tokens whole
    with pytest.raises(ValueError, match="only defined for 'en'"):
        zh.detokenize(["在 ebay"])
    with pytest.raises(ValueError, match="no side 'de'"):
        TextProcessor.from_prepared(tiny_prepared, "de")
    with pytest.raises(FileNotFoundError, match="meta.json"):
        TextProcessor.from_prepared(tiny_prepared / "nowhere", "en")
    with pytest.raises(RuntimeError, match="no BPE codes"):
        TextProcessor("en").apply_bpe(["x"])
