"""`doctrans translate` on subtitle files and on legacy-encoded / Traditional plain text: the
file is translated as one document with its cues kept; bad files are one-line errors."""
from __future__ import annotations

import sys

import pytest
from click.testing import CliRunner

from conftest import train_tiny
from doctrans.cli import cli, main
from doctrans.inference.subtitles import read_subtitles
from doctrans.inference.translate import TranslateConfig, Translator, read_documents

SRT = "1\n00:00:01,000 --> 00:00:02,000\n<i>w1 w2 w3</i>\n\n2\n00:00:03,000 --> 00:00:04,000\n\n\n" \
      "3\n00:00:05,000 --> 00:00:06,500 X1:1 X2:2 Y1:3 Y2:4\n- w4 w5\n- w6\n"


@pytest.fixture(scope="module")
def ckpt(tmp_path_factory):
    return train_tiny(tmp_path_factory.mktemp("subs"), 20, "train.max_steps=3")


def test_translate_srt_file_and_bilingual(ckpt, tmp_path):
    src = tmp_path / "ep01.srt"
    src.write_bytes(SRT.encode("utf-16"))
    common = ["translate", "-c", str(ckpt), "--input-format", "bpe", "--tokenized", "--beam", "2"]
    r = CliRunner().invoke(cli, [*common, "-i", str(src), "-o", str(tmp_path / "ep01.en.srt")])
    assert r.exit_code == 0, r.output
    expect = Translator(TranslateConfig(checkpoint=str(ckpt), input_format="bpe", tokenized=True, beam=2)).translate(
        ["w1 w2 w3", "w4 w5", "w6"])
    out = read_subtitles(tmp_path / "ep01.en.srt")
    assert out.encoding == "utf-8" and [" ".join(c.text) for c in out.cues] == [
        f"<i>{expect[0]}</i>", "", f"- {expect[1]} - {expect[2]}"]
    assert all(len(x.replace("<i>", "").replace("</i>", "")) <= 42 for c in out.cues for x in c.text)
    assert [c.header for c in out.cues] == [c.header for c in read_subtitles(src).cues]
    r = CliRunner().invoke(cli, [*common, "-i", str(src), "-o", str(tmp_path / "one.srt"), "--max-line-length", "200"])
    assert [c.text for c in read_subtitles(tmp_path / "one.srt").cues] == [
        [f"<i>{expect[0]}</i>"], [], [f"- {expect[1]}", f"- {expect[2]}"]]
    common += ["--max-line-length", "200"]
    r = CliRunner().invoke(cli, [*common, "-i", str(src), "-o", str(tmp_path / "bi.srt"), "--bilingual"])
    assert r.exit_code == 0, r.output
    assert read_subtitles(tmp_path / "bi.srt").cues[2].text == ["- w4 w5", "- w6", f"- {expect[1]}", f"- {expect[2]}"]


def test_bad_subtitle_file_is_a_one_line_error(ckpt, tmp_path, monkeypatch, capsys):
    bad = tmp_path / "bad.srt"
    bad.write_text("1\n00:00:01,000 --> 00:00:02,000\nw1\n\n2\n00:00:xx,000 --> 00:00:04,000\nw2\n", encoding="utf-8")
    monkeypatch.setattr(sys, "argv", ["doctrans", "-q", "translate", "-c", str(ckpt), "-i", str(bad),
                                      "-o", str(tmp_path / "o.srt")])
    with pytest.raises(SystemExit) as e:
        main()
    err = capsys.readouterr().err
    assert e.value.code == 1 and "Traceback" not in err and not (tmp_path / "o.srt").exists()
    assert f"error: {bad}: cue 2 (index 2, line 6): bad timestamp line" in err


@pytest.mark.parametrize("name", ["empty.txt", "empty.srt", "empty.vtt", "empty.ass"])
def test_an_empty_input_gives_an_empty_output_whatever_its_format(ckpt, tmp_path, caplog, name):
    """Issue 73 item 9: one rule for empty files (an empty .vtt was refused, an empty .srt gave a
    blank line)."""
    from doctrans.stages import translate

    src = tmp_path / name
    src.write_bytes(b"")
    with caplog.at_level("INFO"):
        translate(TranslateConfig(checkpoint=str(ckpt), input=str(src), output=str(tmp_path / f"out-{name}"),
                                  input_format="bpe", tokenized=True, beam=2, threads=1))
    assert (tmp_path / f"out-{name}").read_bytes() == b""
    assert f"{src}: empty input: the output is empty" in caplog.text


def test_stream_command_flushes_each_line(ckpt):
    lines = ["w1 w2 w3", "w4 w5", "", "w6 w7 w8 w9"]
    r = CliRunner().invoke(cli, ["translate", "--stream", "-c", str(ckpt), "--input-format", "bpe", "--tokenized",
                                 "--beam", "2"], input="".join(f"{x}\n" for x in lines))
    assert r.exit_code == 0, r.output
    tr = Translator(TranslateConfig(checkpoint=str(ckpt), input_format="bpe", tokenized=True, beam=2))
    assert r.output.split("\n")[:-1] == tr.translate(lines)
    r = CliRunner().invoke(cli, ["translate", "--stream", "-c", str(ckpt), "-o", "out.en"])
    assert r.exit_code != 0 and "--stream reads stdin and writes stdout" in str(r.exception)


def test_stream_drops_a_byte_order_mark_as_the_file_readers_do(ckpt):
    """Issue 73 item 6: '\\ufeffw1 w2 w3' on stdin is 'w1 w2 w3'."""
    lines = ["w1 w2 w3", "w4 w5", "", "w6 w7 w8 w9"]
    data = "".join(f"{x}\n" for x in lines).encode("utf-8")
    r = CliRunner().invoke(cli, ["translate", "--stream", "-c", str(ckpt), "--input-format", "bpe", "--tokenized",
                                 "--beam", "2"], input=b"\xef\xbb\xbf" + data + b"\xef\xbb\xbf" + data)
    assert r.exit_code == 0, r.output
    tr = Translator(TranslateConfig(checkpoint=str(ckpt), input_format="bpe", tokenized=True, beam=2))
    assert r.output.split("\n")[:-1] == tr.translate(lines) * 2          # (a mark at each `cat`-joined start)


def test_stream_applies_the_encoding_errors_policy(ckpt, caplog):
    """Issue 73 item 7: strict (the default) stops at the first undecodable line naming it, after
    the lines before it were written; replace gives U+FFFD with a warning naming the line."""
    common = ["translate", "--stream", "-c", str(ckpt), "--input-format", "bpe", "--tokenized", "--beam", "2"]
    data = b"w1 w2 w3\nw4 \xff\xfe w5\nw6\n"
    tr = Translator(TranslateConfig(checkpoint=str(ckpt), input_format="bpe", tokenized=True, beam=2))
    r = CliRunner().invoke(cli, common, input=data)
    assert r.exit_code != 0 and r.output.split("\n")[:-1] == tr.translate(["w1 w2 w3"])
    assert str(r.exception).startswith("<stdin>:2: not valid UTF-8 (byte 0xff at byte 3 of the line)")
    with caplog.at_level("WARNING"):
        r = CliRunner().invoke(cli, [*common, "--encoding-errors", "replace"], input=data)
    assert r.exit_code == 0, r.output
    assert r.output.split("\n")[:-1] == tr.translate(["w1 w2 w3", "w4 \ufffd\ufffd w5", "w6"])
    assert "<stdin>:2: 2 undecodable byte sequence(s) replaced by U+FFFD" in caplog.text


def test_run_stream_writes_and_flushes_before_reading_on(ckpt):
    from doctrans.inference.stream import run_stream

    events = []

    class In:
        def __init__(self, lines):
            self.lines = iter(lines)

        def readline(self):
            events.append("read")
            return next(self.lines, "")

    class Out:
        def write(self, s):
            events.append("write")

        def flush(self):
            events.append("flush")

    tr = Translator(TranslateConfig(checkpoint=str(ckpt), input_format="bpe", tokenized=True, beam=2))
    assert run_stream(tr, In(["w1 w2\n", "w3\n"]), Out()) == 2
    assert events == ["read", "write", "flush", "read", "write", "flush", "read"]


def test_plain_text_encoding_and_script(tmp_path):
    f = tmp_path / "in.zh"
    f.write_bytes("我們今天去看電影。\n\n他說他很累了。\n".encode("big5"))
    cfg = TranslateConfig(checkpoint="unused", input=str(f), encoding="auto")
    assert read_documents(cfg)[0] == ["我们今天去看电影。", "", "他说他很累了。"]
    from dataclasses import replace

    assert read_documents(replace(cfg, script="simplified"))[0][0] == "我們今天去看電影。"
    assert read_documents(replace(cfg, encoding=""))[0][0] == "我们今天去看电影。"   # no --encoding: wholly Big5
    f.write_bytes("好\n".encode() + b"\x80\n")
    with pytest.raises(ValueError, match="not valid UTF-8"):          # ... else UTF-8, as before
        read_documents(replace(cfg, encoding=""))


def test_a_directory_of_subtitles_is_named_and_labelled_in_the_target_language(ckpt, tmp_path):
    """Issue 75 item 6: a directory's S01E01.srt was translated to OUT/S01E01.srt, and a WebVTT
    header kept 'Language: zh'; now OUT/S01E01.en.srt and 'Language: en' (the model's languages)."""
    inp = tmp_path / "season"
    inp.mkdir()
    (inp / "S01E01.srt").write_text(SRT, encoding="utf-8")
    (inp / "S01E02.zh.vtt").write_text("WEBVTT\nLanguage: zh\n\n00:01.000 --> 00:02.000\nw1 w2\n", encoding="utf-8")
    common = ["translate", "-c", str(ckpt), "--input-format", "bpe", "--tokenized", "--beam", "2"]
    r = CliRunner().invoke(cli, [*common, "-i", str(inp), "-o", str(tmp_path / "out")])
    assert r.exit_code == 0, r.output
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["S01E01.en.srt", "S01E02.en.vtt"]
    assert (tmp_path / "out" / "S01E02.en.vtt").read_text(encoding="utf-8").startswith("WEBVTT\nLanguage: en\n\n")
    r = CliRunner().invoke(cli, [*common, "-i", str(inp), "-o", str(tmp_path / "out2"), "--out-suffix", ""])
    assert r.exit_code == 0, r.output
    assert sorted(p.name for p in (tmp_path / "out2").iterdir()) == ["S01E01.srt", "S01E02.zh.vtt"]
