"""Issue 75 item 6: subtitles laid out as subtitles — lines of at most 42 characters broken where
the lines balance (not in the source's line count), the characters-per-second report, the WebVTT
``Language:`` header, SDH labels and music notes kept, a directory's ``X.srt`` written as
``X.en.srt``. A stand-in translator gives each sentence a chosen translation."""
from __future__ import annotations

import logging

import pytest

from doctrans.inference.subtitle_layout import break_lines, chars_per_second
from doctrans.inference.subtitles import (SubtitleOptions, output_path, read_subtitles, split_cue, translate_directory,
                                          translate_file)


class Fixed:
    """Translates each sentence by the table given (else 'x'), recording what it was given."""

    def __init__(self, table=None):
        self.table, self.calls = table or {}, []

    def translate(self, lines, progress=False, name="", doc_ids=None, where=None):
        self.calls.append((list(lines), list(doc_ids or [])))
        return [self.table.get(x, "x") if x else "" for x in lines]


def _srt(*cues: list[str], seconds: float = 2.5) -> str:
    out = []
    for k, lines in enumerate(cues):
        a, b = k * 3, k * 3 + seconds
        out.append(f"{k + 1}\n00:00:{a:02d},000 --> 00:00:{int(b):02d},{int(b % 1 * 1000):03d}\n" + "\n".join(lines))
    return "\n\n".join(out) + "\n"


def _cues(tmp_path, table, *cues, options=SubtitleOptions(), name="a.srt"):
    src = tmp_path / name
    src.write_text(_srt(*cues), encoding="utf-8")
    tr = Fixed(table)
    translate_file(tr, src, tmp_path / f"out-{name}", options)
    return [c.text for c in read_subtitles(tmp_path / f"out-{name}").cues], tr


LONG = "I don't want my tombstone to say Ross Geller, divorced three times."          # 67 characters


def test_a_short_translation_of_a_wrapped_cue_is_one_line(tmp_path):
    """The issue's 'Okay, my / people.': a two-line source sentence whose translation fits one line."""
    texts, tr = _cues(tmp_path, {"好吧，我的人民。": "Okay, my people."}, ["好吧，", "我的人民。"])
    assert tr.calls[0][0] == ["好吧，我的人民。"]
    assert texts == [["Okay, my people."]]


def test_every_output_line_is_within_42_characters(tmp_path):
    """A one-line cue whose translation is 85 characters was written as one line of 85."""
    texts, _ = _cues(tmp_path, {"我不希望": LONG, "好": "Fine."}, ["我不希望"], ["好"], ["<i>我不希望</i>"])
    assert texts[0] == ["I don't want my tombstone to say", "Ross Geller, divorced three times."]
    assert texts[1] == ["Fine."]
    assert texts[2] == ["<i>I don't want my tombstone to say", "Ross Geller, divorced three times.</i>"]


def test_break_lines_balances_and_breaks_at_natural_points():
    assert break_lines("Okay, my people.") == ["Okay, my people."]
    two = break_lines("I went to the store yesterday. Then I came home and slept.")
    assert two == ["I went to the store yesterday.", "Then I came home and slept."]        # after the sentence end
    lines = break_lines("We should probably go and look at the car before it gets dark outside")
    assert len(lines) == 2 and all(len(x) <= 42 for x in lines)
    assert not lines[0].endswith((" the", " a", " to")) and len(lines[1].split()) > 1    # no article end, no orphan
    assert abs(len(lines[0]) - len(lines[1])) <= 12
    many = break_lines(" ".join(["word"] * 40))
    assert len(many) == 5 and all(len(x) <= 42 for x in many) and " ".join(many) == " ".join(["word"] * 40)
    assert break_lines("x" * 50 + " yes no") == ["x" * 50, "yes no"]                  # a long word: its own line
    assert [len(x) for x in break_lines("我" * 50, 16)] == [13, 13, 12, 12]         # no spaces: between characters
    assert break_lines("好" * 9 + "。" + "好" * 10, 16) == ["好" * 9 + "。", "好" * 10]    # after 。, never before


def test_dialogue_keeps_a_line_per_turn_and_markup_stays(tmp_path):
    table = {"你去哪儿？": "Where are you going?", "回家": LONG, "走吧": "Let's go.", "走吧。": "Let's go.",
             "好。": "Fine."}
    texts, _ = _cues(tmp_path, table, ["- 你去哪儿？", "- 回家"], ["{\\an8}走吧"], ["<i>走吧。</i>", "<i>好。</i>"])
    assert texts[0][0] == "- Where are you going?" and texts[0][1].startswith("- I don't want")
    assert len(texts[0]) == 3 and not texts[0][2].startswith("-")          # the long turn goes on below, no dash
    assert texts[1] == ["{\\an8}Let's go."]
    assert texts[2] == ["<i>Let's go.</i>", "<i>Fine.</i>"]                 # two sentences that fit: a line each


def test_ass_event_is_laid_out_with_line_breaks(tmp_path):
    src = tmp_path / "a.ass"
    src.write_text("[Script Info]\nScriptType: v4.00+\nLanguage: zh\n\n[Events]\nFormat: Layer, Start, End, Style, "
                   "Name, MarginL, MarginR, MarginV, Effect, Text\nDialogue: 0,0:00:01.00,0:00:06.00,Default,,0,0,0,,"
                   "{\\an8}我不希望\n", encoding="utf-8")
    out = translate_file(Fixed({"我不希望": LONG}), src, None, SubtitleOptions(language="en"))
    event = [x for x in out.splitlines() if x.startswith("Dialogue:")][0]
    text = event.split(",,", 1)[1].split(",,")[-1]
    assert text.startswith("{\\an8}") and text.count("\\N") == 1
    assert all(len(x) <= 42 for x in text.replace("{\\an8}", "").split("\\N"))
    assert "Language: en" in out


def test_cps_report_names_the_fast_cues(tmp_path, caplog):
    with caplog.at_level(logging.WARNING):
        _cues(tmp_path, {"我不希望": LONG, "好": "Fine."}, ["我不希望"], ["好"])
    assert "1 of 2 cues over --max-cps 20 characters per second" in caplog.text
    assert "cue 1 (00:00:00.000) 26.4" in caplog.text                  # 66 characters (a space became a break) in 2.5 s
    caplog.clear()
    with caplog.at_level(logging.WARNING):
        _cues(tmp_path, {"我不希望": LONG}, ["我不希望"], options=SubtitleOptions(max_cps=0), name="b.srt")
    assert "max-cps" not in caplog.text
    assert chars_per_second(["<i>Hello,</i>", "world."], 0, 2000) == 6.0 and chars_per_second(["x"], 5, 5) is None


def test_a_cue_that_cannot_fit_two_lines_keeps_its_words_and_is_reported(tmp_path, caplog):
    with caplog.at_level(logging.WARNING):
        texts, _ = _cues(tmp_path, {"长": " ".join([LONG] * 2)}, ["长"])
    assert len(texts[0]) == 4 and " ".join(texts[0]) == " ".join([LONG] * 2) and max(map(len, texts[0])) <= 42
    assert "1 cue(s) do not fit 2 lines of --max-line-length 42" in caplog.text


def test_vtt_language_header_names_the_target(tmp_path):
    src = tmp_path / "a.vtt"
    src.write_text("WEBVTT\nKind: captions\nLanguage: zh\n\n00:01.000 --> 00:02.000\n你好\n", encoding="utf-8")
    out = translate_file(Fixed({"你好": "Hello."}), src, None, SubtitleOptions(language="en"))
    assert out.startswith("WEBVTT\nKind: captions\nLanguage: en\n\n00:01.000 --> 00:02.000\nHello.\n")
    assert "Language: zh" in translate_file(Fixed(), src, None)             # no language known: as read


def test_sdh_labels_are_translated_alone_and_kept_in_brackets(tmp_path):
    table = {"笑声": "Laughter.", "我在开谁的玩笑啊": "Who am I kidding?", "音乐": '"Music."', "我们走": "Let's go"}
    texts, tr = _cues(tmp_path, table, ["[笑声]", "我在开谁的玩笑啊"], ["（笑声）我在开谁的玩笑啊"], ["♪ 我们走 ♪"],
                      ["【音乐】"], ["[Music] 我们走"])
    assert texts == [["[Laughter]", "Who am I kidding?"], ["(Laughter) Who am I kidding?"], ["♪ Let's go ♪"],
                     ["[Music]"], ["[Music] Let's go"]]
    lines, docs = tr.calls[0]
    assert lines == ["我在开谁的玩笑啊", "我在开谁的玩笑啊", "我们走", "我们走", "笑声", "笑声", "音乐"]
    assert docs[:4] == ["0"] * 4 and len(set(docs[4:])) == 3 and "0" not in docs[4:]   # labels: documents of their own
    assert split_cue(["[笑声]", "我今天", "去看电影"]).units == ["我今天去看电影"]
    texts, _ = _cues(tmp_path, {"笑声": "Laughter.", "我不希望": LONG}, ["[笑声]", "我不希望"], name="b.srt")
    assert texts == [["[Laughter] I don't want my tombstone", "to say Ross Geller, divorced three times."]]  # 2 lines


def test_directory_outputs_are_named_with_the_target_language(tmp_path):
    inp, out = tmp_path / "in", tmp_path / "out"
    (inp / "s1").mkdir(parents=True)
    for name in ("S01E01.srt", "s1/S01E02.zh.srt", "S01E03.chs.ass"):
        (inp / name).write_text(_srt(["你好"]) if name.endswith(".srt") else
                                "[Script Info]\nScriptType: v4.00+\n\n[Events]\nFormat: Layer, Start, End, Style, Name, "
                                "MarginL, MarginR, MarginV, Effect, Text\n", encoding="utf-8")
    translate_directory(Fixed({"你好": "Hello."}), inp, out, out_suffix=(".zh", ".en"))
    assert sorted(p.relative_to(out).as_posix() for p in out.rglob("*.*")) == [
        "S01E01.en.srt", "S01E03.en.ass", "s1/S01E02.en.srt"]
    assert output_path(inp / "a.srt", inp, out, ".fr") == out / "a.fr.srt"
    assert output_path(inp / "a.srt", inp, out, "") == out / "a.srt"
    (inp / "S01E01.zh.srt").write_text(_srt(["你好"]), encoding="utf-8")
    with pytest.raises(ValueError, match=r"S01E01\.srt and .*S01E01\.zh\.srt would both be translated to .*S01E01\.en\.srt"):
        translate_directory(Fixed(), inp, tmp_path / "out2", out_suffix=(".zh", ".en"))
