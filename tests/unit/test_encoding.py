"""data/encoding.py: legacy encodings detected on the whole file or given (a given one that
reads implausibly is warned about), binary / mixed / undecidable input refused naming the file,
Traditional script recognised and converted (OpenCC t2s). The real-size tests build GBK,
GB18030 and Big5 episodes from the TVsub corpus at test time (``corpus``)."""
from __future__ import annotations

import logging
from pathlib import Path

import pytest

from conftest import TVSUB, needs_tvsub
from doctrans.data.encoding import EncodingError, decode_text, is_traditional, read_text, to_simplified

SIMPLIFIED = "我们今天去看电影。\n他说他很累了，头发也乱了。\n"
TRADITIONAL = "我們今天去看電影。\n他說他很累了，頭髮也亂了。\n"
# subtitle-like lines; in GBK, 十一 谢谢 什么 为什么 are also valid UTF-8 (ʮһ лл ʲô Ϊʲô)
PHRASES = ("他说他很累了，头发也乱了。", "你知道他在哪儿吗？", "我不知道", "快走吧 他们来了", "没有 我会联系你的",
           "我的天 真不幸的名字", "我知道 你已经尽力了", "一周后我们一起吃饭", "我们现在可以讨论了 对吧",
           "还可以骂街 想做什么都行", "她就是那男的妻子 对吧", "要不要先投个票", "你在说辩护律师啊", "明天见",
           "这是我的朋友", "别担心 一切都会好的", "你为什么不早点告诉我？", "我们得谈谈", "好吧 听你的",
           "谢谢你来看我", "我想回家", "你疯了吗", "等一下", "我爱你", "对不起", "没关系")
SHORT_UTF8_IN_GBK = ("十一", "谢谢", "什么", "为什么")


def synthetic_episode(lines: int = 300) -> str:
    """A few hundred subtitle-like lines, the short ones that GBK writes as valid UTF-8 among them."""
    out = []
    for k in range(lines):
        if k % 50 == 7:
            out.append(SHORT_UTF8_IN_GBK[k // 50 % len(SHORT_UTF8_IN_GBK)])
        else:
            out.append(PHRASES[k * 7 % len(PHRASES)] + (" " + PHRASES[k * 11 % len(PHRASES)] if k % 3 else ""))
    return "\n".join(out) + "\n"


@pytest.mark.parametrize("enc, found", [("gbk", "gb18030"), ("gb18030", "gb18030"), ("utf-16", "utf-16"),
                                        ("utf-8-sig", "utf-8-sig"), ("utf-8", "utf-8")])
def test_simplified_encodings_detected(enc, found, caplog):
    with caplog.at_level(logging.INFO):
        text, used = decode_text(SIMPLIFIED.encode(enc), "ep01.srt")
    assert text == SIMPLIFIED and used == found
    assert f"ep01.srt: encoding {found}" in caplog.text          # the choice is logged


def test_big5_detected_and_given_encoding_used(tmp_path):
    f = tmp_path / "ep.srt"
    f.write_bytes(TRADITIONAL.encode("big5"))
    assert read_text(f) == (TRADITIONAL, "big5")
    assert read_text(f, "big5") == (TRADITIONAL, "big5")
    with pytest.raises(EncodingError, match=r"ep\.srt:1: not valid utf-8"):
        read_text(f, "utf-8")
    with pytest.raises(ValueError, match="unknown encoding 'nope'"):
        read_text(f, "nope")


def test_binary_mixed_and_undecidable_refused():
    png = b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + bytes(range(256))
    with pytest.raises(EncodingError, match=r"^movie\.srt: a binary file"):
        decode_text(png, "movie.srt")
    with pytest.raises(EncodingError, match=r"^bad\.srt: looks like a binary file"):
        decode_text(b"1\n\x01\x02\x03\x04\x05\x06\x07\x08 text\n", "bad.srt")
    mixed = "你好\n".encode() + "第二行\n".encode("gbk")
    with pytest.raises(EncodingError, match=r"^m\.srt: mixed encodings: line 1 is UTF-8, line 2 is not"):
        decode_text(mixed, "m.srt")


def test_traditional_detected_and_converted(caplog):
    assert is_traditional(TRADITIONAL) and not is_traditional(SIMPLIFIED) and not is_traditional("hello")
    lines = TRADITIONAL.splitlines() + [""]
    with caplog.at_level(logging.INFO):
        out, converted = to_simplified(lines, "t.srt")
    assert converted and out == SIMPLIFIED.splitlines() + [""] and "Traditional script detected" in caplog.text
    assert to_simplified(SIMPLIFIED.splitlines(), "s") == (SIMPLIFIED.splitlines(), False)
    assert to_simplified(lines, "t", "simplified") == (lines, False)           # forced: kept as is
    assert to_simplified(["頭髮"], "t", "traditional") == (["头发"], True)       # forced, below the share
    with pytest.raises(ValueError, match="script must be one of"):
        to_simplified(lines, "t", "cyrillic")


def test_stream_lines_converted_one_by_one():
    import io

    from doctrans.inference.stream import _script_converter, decoded_lines

    convert = _script_converter("auto")
    lines = decoded_lines(io.BytesIO("我們今天去看電影。\n我们走\n\n".encode("utf-8")))
    assert [convert(x) for x in lines] == ["我们今天去看电影。", "我们走", ""]
    assert _script_converter("simplified") is None and _script_converter("traditional")("頭髮") == "头发"


def test_directory_documents_read_with_encoding_and_script(tmp_path):
    from doctrans.inference.collection import TextReading, translate_group

    class Echo:
        def __init__(self):
            self.lines = []

        def translate(self, lines, name="", doc_ids=None, where=None):
            self.lines += lines
            return lines

    inp, out = tmp_path / "in", tmp_path / "out"
    inp.mkdir()
    (inp / "a.zh").write_bytes(TRADITIONAL.encode("big5"))
    (inp / "b.zh").write_bytes(SIMPLIFIED.encode("gbk"))
    tr = Echo()
    s = translate_group(tr, inp, out, [inp / "a.zh", inp / "b.zh"], errors=TextReading("strict", "auto", "auto"))
    assert s.translated == 2 and tr.lines == SIMPLIFIED.splitlines() * 2
    assert (out / "a.zh").read_text(encoding="utf-8") == SIMPLIFIED
    s = translate_group(Echo(), inp, out, [inp / "a.zh"])            # a plain mode string: UTF-8, or wholly Big5
    assert s.translated == 1 and (out / "a.zh").read_text(encoding="utf-8") == TRADITIONAL
    (inp / "c.zh").write_bytes("你好\n".encode() + "第二行\n".encode("gbk"))   # ... not a mixture
    s = translate_group(Echo(), inp, out, [inp / "c.zh"])
    assert s.translated == 0 and "mixed encodings" in s.failed[0][1]


def test_a_gbk_file_whose_short_lines_are_valid_utf8_is_gbk(caplog):
    """Issue 75: 十一 in GBK is the UTF-8 bytes of ʮһ; a file that decodes wholly as GB18030 and
    not as UTF-8 was refused as 'mixed encodings' all the same."""
    text = synthetic_episode()
    data = text.encode("gbk")
    assert "十一".encode("gbk").decode("utf-8") == "ʮһ"                     # the case itself
    with caplog.at_level(logging.INFO):
        assert decode_text(data, "ep.srt") == (text, "gb18030")
        from doctrans.data.encoding import text_lines

        assert text_lines(data, "ep.zh") == text.splitlines()              # the text default ("" = UTF-8)
    assert "ep.srt: encoding gb18030 (not UTF-8" in caplog.text and "ep.zh: encoding gb18030" in caplog.text
    four = "♪ 我们在𠮷野家见面 ♪\n" + text                               # 𠮷 (U+20BB7): a 4-byte GB18030 sequence
    assert b"\x95\x34\xb2\x35" in four.encode("gb18030")
    assert decode_text(four.encode("gb18030"), "ep.srt") == (four, "gb18030")
    from doctrans.data.encoding import opencc

    big5 = opencc("s2tw").convert(text)
    big5.encode("big5").decode("gb18030")                                  # GB18030 decodes it too ...
    assert decode_text(big5.encode("big5"), "tw.srt") == (big5, "big5")    # ... but reads as rare characters


def test_true_mixtures_still_refused_naming_the_lines():
    text = synthetic_episode(40)
    half = text.splitlines(keepends=True)
    data = "".join(half[:20]).encode("utf-8") + "".join(half[20:]).encode("gbk")
    with pytest.raises(EncodingError, match=r"^m\.srt: mixed encodings: line 1 is UTF-8, line 21 is not"):
        decode_text(data, "m.srt")
    # UTF-8 lines whose bytes happen to be valid GB18030 too (浣犲ソ): the whole file decodes as
    # GB18030, but line 2 reads as UTF-8 (common characters) and not as GB18030 (rare ones)
    data = "hello\n你好\n".encode("utf-8") + text.encode("gbk")
    data.decode("gb18030")
    with pytest.raises(EncodingError, match=r"^m\.srt: mixed encodings: line 2 is UTF-8, line 3 is not"):
        decode_text(data, "m.srt")


def test_an_undecidable_file_names_the_lines_where_each_encoding_fails():
    lines = synthetic_episode(20).splitlines(keepends=True)
    data = "".join(lines[:4]).encode("gbk") + b"\xff" + "".join(lines[4:]).encode("gbk")    # a stray byte, line 5
    with pytest.raises(EncodingError, match=r"^x\.srt: undecidable: .*\(utf-8 fails on line 1, gb18030 fails on line 5, "
                                            r"big5 fails on line \d+\)"):
        decode_text(data, "x.srt")


def test_the_text_default_reads_utf8_or_a_whole_legacy_file(caplog):
    from doctrans.data.encoding import text_lines
    from doctrans.utils.io import TextDecodeError

    assert text_lines(TRADITIONAL.encode("big5"), "tw.zh") == TRADITIONAL.splitlines()
    mixed = "你好\n".encode() + "第二行\n".encode("gbk")
    with pytest.raises(EncodingError, match=r"^m\.zh: mixed encodings: line 1 is UTF-8, line 2 is not"):
        text_lines(mixed, "m.zh")
    assert text_lines(mixed, "m.zh", "replace")[0] == "你好"                 # replace: UTF-8 with U+FFFD, as asked
    assert "\ufffd" in text_lines(mixed, "m.zh", "replace")[1]
    with pytest.raises(TextDecodeError, match=r"^bad\.zh:2: not valid UTF-8"):
        text_lines("好\n".encode() + b"\xff\xfe\x80\n", "bad.zh")


def test_a_given_encoding_that_reads_implausibly_is_warned_about(caplog):
    """Issue 73: ``--encoding big5`` on a GBK file translated mojibake without a word."""
    text = "\n".join(PHRASES[1:13]) + "\n"                      # these lines of GBK are valid Big5 as well
    data = text.encode("gbk")
    with caplog.at_level(logging.WARNING):
        mojibake, used = decode_text(data, "ep.zh", "big5")
    assert used == "big5" and mojibake == data.decode("big5") != text  # decoded as asked ...
    assert "ep.zh: the text decoded as big5 (given) looks implausible" in caplog.text     # ... with a warning
    assert "rare or private-use" in caplog.text and "pass --encoding gb18030" in caplog.text
    caplog.clear()
    with caplog.at_level(logging.WARNING):
        assert decode_text(data, "ep.zh", "gbk") == (text, "gbk")
        assert decode_text(TRADITIONAL.encode("big5") * 5, "tw.zh", "big5")[1] == "big5"
    assert caplog.text == ""
    with caplog.at_level(logging.WARNING):                       # valid UTF-8, but only short GBK lines
        assert decode_text("\n".join(SHORT_UTF8_IN_GBK * 3).encode("gbk"), "s.srt")[1] == "utf-8"
    assert "s.srt: the text decoded as utf-8 (valid UTF-8) looks implausible" in caplog.text
    assert "pass --encoding gb18030" in caplog.text


def _episodes(n: int = 100) -> list[str]:
    return [(TVSUB / "train" / f"{i}.zh").read_text(encoding="utf-8") for i in range(n)]


@needs_tvsub()
def test_100_gbk_and_gb18030_episodes_read_without_an_encoding(tmp_path):
    """Issue 75: 100 of 100 TVsub episodes in GBK (40 of 40 in GB18030) stopped with 'mixed
    encodings'; the text default and auto read them (directory reader and subtitle decoder)."""
    from doctrans.inference.collection import TextReading

    for enc in ("gbk", "gb18030"):
        for i, text in enumerate(_episodes()):
            if enc == "gb18030":
                text = text.replace("\n", "\n♪ 𠮷 ♪\n", 1)             # a 4-byte sequence in each
            f = tmp_path / f"{enc}-{i}.zh"
            f.write_bytes(text.encode(enc, errors="replace"))          # (a ♪ GBK has not: ?)
            want = f.read_bytes().decode(enc)
            assert TextReading().read(f) == want.splitlines(), f
            assert read_text(f) == (want, "gb18030"), f


@needs_tvsub()
def test_100_big5_episodes_detected_and_a_wrong_given_encoding_warned(tmp_path, caplog):
    from doctrans.data.encoding import opencc

    episodes = _episodes()
    chars = sorted(set("".join(episodes)) - {"\n"})       # Traditional character by character (fast)
    trad = opencc("s2tw").convert("\n".join(chars)).split("\n")
    assert len(trad) == len(chars)
    s2tw = str.maketrans({c: t for c, t in zip(chars, trad) if len(t) == 1})
    for i, text in enumerate(episodes):
        data = text.translate(s2tw).encode("big5", errors="replace")
        assert decode_text(data, f"{i}.srt") == (data.decode("big5"), "big5"), i
    with caplog.at_level(logging.WARNING):
        assert decode_text(data, "99.srt", "gb18030")[1] == "gb18030"
    assert "99.srt: the text decoded as gb18030 (given) looks implausible" in caplog.text
    assert "pass --encoding big5" in caplog.text
