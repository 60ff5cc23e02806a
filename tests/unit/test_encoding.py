"""data/encoding.py: legacy encodings detected or given, binary / mixed / undecidable input
refused naming the file, Traditional script recognised and converted (OpenCC t2s)."""
from __future__ import annotations

import logging

import pytest

from doctrans.data.encoding import EncodingError, decode_text, is_traditional, read_text, to_simplified

SIMPLIFIED = "我们今天去看电影。\n他说他很累了，头发也乱了。\n"
TRADITIONAL = "我們今天去看電影。\n他說他很累了，頭髮也亂了。\n"


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

    from doctrans.inference.stream import _Mapped, _script_converter

    lines = _Mapped(io.StringIO("我們今天去看電影。\n我们走\n\n"), _script_converter("auto"))
    assert [lines.readline() for _ in range(4)] == ["我们今天去看电影。\n", "我们走\n", "\n", ""]
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
    s = translate_group(Echo(), inp, out, [inp / "a.zh"])            # a plain mode string: UTF-8 only, as before
    assert s.translated == 0 and "not valid UTF-8" in s.failed[0][1]
