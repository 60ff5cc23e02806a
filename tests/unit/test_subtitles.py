"""inference/subtitles.py with a recording stand-in translator: SRT / VTT / ASS read and written
with every cue's index, timing, settings and style kept, markup around the translation, dialogue
and wrapped two-line cues, empty cues, encodings and Traditional script, malformed files named."""
from __future__ import annotations

import re

import pytest

from doctrans.inference.subtitles import (SubtitleError, SubtitleOptions, output_path, read_subtitles,
                                          split_cue, subtitle_files, translate_directory, translate_file)

SRT = """5
00:00:01,000 --> 00:00:02,500 X1:100 X2:200 Y1:10 Y2:20
{\\an8}<i>你好</i>

6
00:00:03,000 --> 00:00:04,000


7
00:00:05,000 --> 00:00:06,000
- 你是谁？
-我是<font color="red">小明</font>。

8
00:00:07,000 --> 00:00:09,000
我今天下午
要去看电影

9
00:00:10,000 --> 00:00:11,000
<i>好的。</i>
"""

VTT = """WEBVTT
Kind: captions

NOTE a comment

intro
00:01.000 --> 00:02.000 align:start position:10%
<v Bob><i>你好</i>

00:00:03.000 --> 00:00:04.000
- 走吧！
- 好。
"""

ASS = """[Script Info]
ScriptType: v4.00+
PlayResX: 384

[V4+ Styles]
Format: Name, Fontname, Fontsize, PrimaryColour, SecondaryColour, OutlineColour, BackColour, Bold, Italic, Underline, StrikeOut, ScaleX, ScaleY, Spacing, Angle, BorderStyle, Outline, Shadow, Alignment, MarginL, MarginR, MarginV, Encoding
Style: Default,Arial,20,&H00FFFFFF,&H000000FF,&H00000000,&H00000000,0,0,0,0,100,100,0,0,1,2,2,2,10,10,10,1
Style: Top,Arial,20,&H00FFFFFF,&H000000FF,&H00000000,&H00000000,0,0,0,0,100,100,0,0,1,2,2,8,10,10,10,1

[Events]
Format: Layer, Start, End, Style, Name, MarginL, MarginR, MarginV, Effect, Text
Dialogue: 0,0:00:01.00,0:00:02.00,Top,,0,0,0,,{\\pos(10,20)}你好。\\N再见。
Dialogue: 0,0:00:03.00,0:00:04.00,Default,Bob,0,0,0,,
Comment: 0,0:00:03.00,0:00:04.00,Default,,0,0,0,,注释
Dialogue: 1,0:00:05.00,0:00:06.50,Default,,0,0,0,,{\\i1}我们走{\\i0}
"""


def _traditional(text):
    from opencc import OpenCC

    return OpenCC("s2t").convert(text)


class Recorder:
    """Translates each sentence to 'en(N words)' words and records what it was given."""

    def __init__(self):
        self.calls = []

    def translate(self, lines, progress=False, name="", doc_ids=None, where=None):
        self.calls.append((list(lines), list(doc_ids or []), list(where or [])))
        return [f"t{k} " + " ".join("w" for _ in range(len(x))) if x else "" for k, x in enumerate(lines)]


def _timings(text):
    return re.findall(r"\d[\d:.,]* --> [^\n]*", text)


def test_srt_round_trip_keeps_cues_and_markup(tmp_path):
    src = tmp_path / "ep01.srt"
    src.write_text(SRT, encoding="utf-8")
    tr = Recorder()
    out = translate_file(tr, src, tmp_path / "ep01.en.srt")
    assert out == (tmp_path / "ep01.en.srt").read_text(encoding="utf-8")
    lines, docs, where = tr.calls[0]
    # one document; the dialogue cue gives two sentences, the wrapped cue one, the empty cue none
    assert lines == ["你好", "你是谁？", "我是小明。", "我今天下午要去看电影", "好的。"]
    assert len(set(docs)) == 1 and where[1] == where[2] == f"{src}: cue 3 (line 9)"
    assert _timings(out) == _timings(SRT)                                   # timing lines verbatim, X1… kept
    assert re.findall(r"(?m)^\d+$", out) == ["5", "6", "7", "8", "9"]       # indices kept
    again = read_subtitles(tmp_path / "ep01.en.srt")
    assert len(again.cues) == 5 and again.cues[1].text == []               # empty cue stays empty
    assert again.cues[0].text == ["{\\an8}<i>t0 w w</i>"]
    assert again.cues[2].text == ["- t1 w w w w", "-t2 w w w w w"]           # two speakers, two lines
    assert again.cues[3].text == ["t3 " + " ".join(["w"] * 10)]             # one sentence: one line when it fits
    assert again.cues[4].text == ["<i>t4 w w w</i>"]


def test_bilingual_keeps_source_above(tmp_path):
    src = tmp_path / "a.srt"
    src.write_text(SRT, encoding="utf-8")
    out = read_subtitles_text = translate_file(Recorder(), src, None, SubtitleOptions(bilingual=True))
    tmp = tmp_path / "b.srt"
    tmp.write_text(read_subtitles_text, encoding="utf-8")
    cues = read_subtitles(tmp).cues
    assert cues[0].text == ["{\\an8}<i>你好</i>", "{\\an8}<i>t0 w w</i>"] and cues[1].text == []
    assert cues[2].text[:2] == ["- 你是谁？", '-我是<font color="red">小明</font>。'] and len(cues) == 5
    assert _timings(out) == _timings(SRT)


def test_vtt_keeps_header_notes_identifiers_settings(tmp_path):
    src = tmp_path / "e.vtt"
    src.write_text(VTT, encoding="utf-8")
    out = translate_file(Recorder(), src, None)
    assert out.startswith("WEBVTT\nKind: captions\n\nNOTE a comment\n\nintro\n00:01.000 --> 00:02.000 align:start "
                          "position:10%\n<v Bob><i>t0 w w</i>\n")
    assert out.endswith("00:00:03.000 --> 00:00:04.000\n- t1 w w w\n- t2 w w\n")


def test_ass_keeps_styles_events_and_tags(tmp_path):
    src = tmp_path / "e.ass"
    src.write_text(ASS, encoding="utf-8")
    tr = Recorder()
    out = translate_file(tr, src, None)
    assert tr.calls[0][0] == ["你好。", "再见。", "我们走"]                   # sentences ending lines: two
    assert "Style: Top,Arial,20" in out and "PlayResX: 384" in out
    assert "Dialogue: 0,0:00:01.00,0:00:02.00,Top,,0,0,0,,{\\pos(10,20)}t0 w w w\\Nt1 w w w" in out
    assert "Dialogue: 0,0:00:03.00,0:00:04.00,Default,Bob,0,0,0,," in out
    assert "Comment: 0,0:00:03.00,0:00:04.00,Default,,0,0,0,,注释" in out
    assert "Dialogue: 1,0:00:05.00,0:00:06.50,Default,,0,0,0,,{\\i1}t2 w w w{\\i0}" in out


@pytest.mark.parametrize("encoding", ["gbk", "big5", "utf-16", "utf-8-sig"])
def test_legacy_encodings_read_and_utf8_written(tmp_path, encoding):
    src, dest = tmp_path / "x.srt", tmp_path / "y.srt"
    text = _traditional(SRT) if encoding == "big5" else SRT
    src.write_bytes(text.replace("\n", "\r\n").encode(encoding))
    tr = Recorder()
    translate_file(tr, src, dest)
    out = dest.read_bytes()
    assert not out.startswith(b"\xef\xbb\xbf") and b"\r\n" in out
    assert _timings(out.decode("utf-8").replace("\r\n", "\n")) == _timings(SRT) and len(read_subtitles(dest).cues) == 5
    assert tr.calls[0][0][0] == "你好"


def test_traditional_file_reaches_the_model_simplified(tmp_path):
    src = tmp_path / "t.srt"
    src.write_bytes(_traditional(SRT).encode("big5"))
    tr = Recorder()
    translate_file(tr, src, None)
    assert tr.calls[0][0][1:4] == ["你是谁？", "我是小明。", "我今天下午要去看电影"]
    tr = Recorder()
    translate_file(tr, src, None, SubtitleOptions(script="simplified"))
    assert tr.calls[0][0][1] == "你是誰？" and _traditional(SRT) != SRT


@pytest.mark.parametrize("body, message", [
    ("1\n00:00:01,000 --> 00:00:02,000\na\n\n2\n00:00:0x,000 --> 00:00:04,000\nb\n",
     r"bad\.srt: cue 2 \(index 2, line 6\): bad timestamp line '00:00:0x,000 --> 00:00:04,000'"),
    ("1\n00:00:01,000 --> 00:00:02,000\na\n\n00:00:03,000 --> 00:00:04,000\nb\n",
     r"bad\.srt: cue 2 \(line 5\): missing cue index"),
    ("x1\n00:00:01,000 --> 00:00:02,000\na\n", r"bad\.srt: cue 1 \(line 1\): expected a cue index"),
])
def test_malformed_srt_names_file_and_cue(tmp_path, body, message):
    f = tmp_path / "bad.srt"
    f.write_text(body, encoding="utf-8")
    with pytest.raises(SubtitleError, match=message):
        read_subtitles(f)


def test_malformed_vtt_and_binary_refused(tmp_path):
    (tmp_path / "a.vtt").write_text("WEBVTT\n\n00:01.000 -> 00:02.000\nhi\n", encoding="utf-8")
    with pytest.raises(SubtitleError, match=r"a\.vtt: cue 1 \(line 3\): bad timestamp"):
        read_subtitles(tmp_path / "a.vtt")
    (tmp_path / "b.srt").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + bytes(range(256)))
    with pytest.raises(ValueError, match=r"b\.srt: a binary file"):
        read_subtitles(tmp_path / "b.srt")


def test_directory_is_a_collection_in_natural_order(tmp_path):
    inp, out = tmp_path / "in", tmp_path / "out"
    for name in ("ep10.srt", "ep2.srt", "ep1.srt", "notes.txt"):
        (inp / name).parent.mkdir(exist_ok=True)
        (inp / name).write_text(SRT if name.endswith(".srt") else "x", encoding="utf-8")
    (inp / "ep3.srt").write_text("1\nbroken\n", encoding="utf-8")
    assert [p.name for p in subtitle_files(inp)] == ["ep1.srt", "ep2.srt", "ep3.srt", "ep10.srt"]
    tr = Recorder()
    with pytest.raises(Exception, match=r"1 of 4 subtitle files failed.*ep3\.srt: cue 1"):
        translate_directory(tr, inp, out, out_suffix=".en")
    assert sorted(p.name for p in out.iterdir()) == ["ep1.en.srt", "ep10.en.srt", "ep2.en.srt"]
    lines, docs, _ = tr.calls[0]
    assert len(lines) == 15 and docs == ["0"] * 5 + ["1"] * 5 + ["2"] * 5      # each file its own document
    assert output_path(inp / "ep1.srt", inp, out, ".en") == out / "ep1.en.srt"


def test_cue_planning_and_wrapping():
    assert split_cue(["我今天", "去看电影"]).units == ["我今天去看电影"]
    assert split_cue(["I went", "home"]).units == ["I went home"]
    assert split_cue(["— 走！", "— 好"]).units == ["走！", "好"]
    assert split_cue(["{\\an8}", "你好"]).units == ["你好"]


@pytest.mark.parametrize("event, message", [                        # issue 73 item 2: nothing invented
    ("Dialogue: garbage", r"bad\.ass: event 2 \(line 13\): 1 field\(s\), expected 10 \(Layer, Start, End, .*Text\): "
                          r"'Dialogue: garbage'"),
    ("Dialogue: 0,0:00:03.00,xx,Default,,0,0,0,,坏", r"bad\.ass: event 2 \(line 13\): bad End time 'xx'"),
    ("Dialogue: 0,0:00:03.00,0:00:04.00", r"bad\.ass: event 2 \(line 13\): 3 field\(s\), expected 10"),
    ("Comment: x,0:00:03.00,0:00:04.00,Default,,0,0,0,,注", r"bad\.ass: line 13: bad Layer 'x' \(a number\)"),
])
def test_malformed_ass_event_names_file_and_line(tmp_path, event, message):
    lines = ASS.split("\n")
    f = tmp_path / "bad.ass"
    f.write_text("\n".join(lines[:12] + [event] + lines[12:]), encoding="utf-8")
    with pytest.raises(SubtitleError, match=message):
        translate_file(Recorder(), f, tmp_path / "out.ass")
    assert not (tmp_path / "out.ass").exists()


def test_ass_events_are_located_by_line(tmp_path):
    src = tmp_path / "e.ass"
    src.write_text(ASS, encoding="utf-8")
    tr = Recorder()
    translate_file(tr, src, None)
    assert tr.calls[0][2] == [f"{src}: event 1 (line 12)"] * 2 + [f"{src}: event 3 (line 15)"]


@pytest.mark.parametrize("fmt, text", [("srt", SRT), ("vtt", VTT), ("ass", ASS)])
def test_cr_only_line_ends_are_line_ends(tmp_path, fmt, text):
    """Classic Mac files (a lone \\r ends each line) read as their \\n twins, written with \\r."""
    lf, cr = tmp_path / f"lf.{fmt}", tmp_path / f"cr.{fmt}"
    lf.write_text(text, encoding="utf-8")
    cr.write_bytes(text.replace("\n", "\r").encode("utf-8"))
    tr_lf, tr_cr = Recorder(), Recorder()
    out_lf = translate_file(tr_lf, lf, tmp_path / f"lf.en.{fmt}")
    out_cr = translate_file(tr_cr, cr, tmp_path / f"cr.en.{fmt}")
    assert tr_cr.calls[0][0] == tr_lf.calls[0][0] and tr_cr.calls[0][0]
    assert out_cr == out_lf.replace("\n", "\r") and "\n" not in out_cr


@pytest.mark.parametrize("fmt", ["srt", "vtt", "ass", "ssa"])
@pytest.mark.parametrize("content", [b"", b"\xef\xbb\xbf", b"\n\r\n  \n"])
def test_an_empty_subtitle_file_gives_an_empty_output(tmp_path, caplog, fmt, content):
    """One rule for empty inputs (issue 73 item 9): empty in, empty out, as for text, logged."""
    import logging

    src = tmp_path / f"empty.{fmt}"
    src.write_bytes(content)
    tr = Recorder()
    with caplog.at_level(logging.INFO):
        assert translate_file(tr, src, tmp_path / f"out.{fmt}") == ""
    assert (tmp_path / f"out.{fmt}").read_bytes() == b"" and tr.calls == []
    assert f"{src}: empty input: the output is empty" in caplog.text
