"""inference/spans.py: which lines are Chinese, the spans a Chinese line keeps through translation
(placeholders in, the spans back out), the glossary file and its errors — with a stand-in for the
model (a function of the masked text), so each rule is seen on its own."""
from __future__ import annotations

import pytest

from doctrans.inference.spans import (NAME_PLACEHOLDERS, Glossary, GlossaryError, SpanProtector, SpanStats,
                                      is_chinese, script_of)


def through(p: SpanProtector, line: str, model) -> str:
    """``line`` masked, 'translated' by ``model`` (masked text → output), restored."""
    m = p.mask(line)
    return p.restore(m, model(m.text))


@pytest.mark.parametrize("line, script", [
    ("他来了。", "zh"), ("Dean和Jerry来了", "zh"), ("迈克尔・杰克逊来了", "zh"), ("好ー", "zh"),
    ("Hello, how are you?", "other"), ("OK", "other"), ("555-3147", "other"), ("<i>...</i>", "other"), ("", "other"),
    ("こんにちは", "ja"), ("東京へ行きます", "ja"), ("ｶﾀｶﾅ", "ja"), ("안녕하세요", "ko"), ("韓國어", "ko")])
def test_a_line_is_chinese_when_it_has_han_and_no_kana_or_hangul(line, script):
    assert script_of(line) == script
    assert is_chinese(line) == (script == "zh")


def test_lines_without_chinese_are_passed_through_and_counted():
    p, stats = SpanProtector(), SpanStats()
    for line in ("Hello, how are you?", "こんにちは 日本", "OK"):
        m = p.mask(line, stats)
        assert m.passed and m.text == ""                    # nothing for the model
        assert p.restore(m, "anything") == line             # the output is the line, unchanged
    assert stats.passed == {"other": 2, "ja": 1}
    everything = SpanProtector(translate_all=True)
    assert everything.mask("Hello, how are you?").text == "Hello, how are you?"   # sent as it is
    blank = p.mask("   ")
    assert not blank.passed and blank.text == "   "        # a blank line stays the translator's (empty output)


def test_latin_names_get_distinct_placeholders_and_come_back():
    p = SpanProtector()
    m = p.mask("Dean和Jerry来了")
    assert m.text == "tony和phil来了" and [s.source for s in m.spans] == ["Dean", "Jerry"]
    assert p.restore(m, "Tony and Phil are here.") == "Dean and Jerry are here."
    assert p.restore(m, "phil saw tony 's car .") == "Jerry saw Dean 's car ."     # any case, any order
    # replaced at once: a span's text is never read as another placeholder
    m = p.mask("Phil和Tony")
    assert p.restore(m, "Tony and Phil.") == "Phil and Tony."
    # a run of Latin words is one span; the punctuation that ends it stays with the sentence
    m = p.mask("各位给掌声 Nancy Sinatra。他说Hello, how are you? 我同意 Jim.")
    assert [s.source for s in m.spans] == ["Nancy Sinatra", "Hello, how are you", "Jim"]
    assert m.text == "各位给掌声 tony。他说phil? 我同意 john."


def test_a_name_spelled_in_chinese_in_the_line_is_not_a_placeholder():
    m = SpanProtector().mask("东尼和Phil")                 # 东尼 is Tony: "Tony" in the output would be ambiguous
    assert m.text == "东尼和phil"


def test_more_spans_than_placeholders_are_left_as_they_are():
    stats = SpanStats()
    line = "、".join(f"N{k}x" for k in range(len(NAME_PLACEHOLDERS) + 2)) + "都来了"
    m = SpanProtector().mask(line, stats)
    assert len(m.spans) == len(NAME_PLACEHOLDERS) and stats.unprotected == 2
    assert m.text.endswith("N5x、N6x都来了")


def test_numbers_of_two_or_more_digits_get_number_placeholders():
    p = SpanProtector()
    m = p.mask("我有2个苹果，他欠我1,500块，电话555-3147，10:30见")
    assert m.text == "我有2个苹果,他欠我301块,电话302,303见"       # (NFKC: full-width comma → ',')
    assert p.restore(m, "I have two apples, he owes me $301, phone 302, see you at 303.") == \
        "I have two apples, he owes me $1,500, phone 555-3147, see you at 10:30."
    m = p.mask("第23次了")
    assert p.restore(m, "The 301st time.") == "The 23rd time."     # an ordinal suffix follows the number
    assert p.restore(p.mask("第11次"), "the 301st") == "the 11th"


def test_urls_emails_and_tags():
    p = SpanProtector()
    m = p.mask("请访问 https://example.com/a?b=1。写信给 bob@example.org")
    assert m.text == "请访问 tony。写信给 phil"
    assert p.restore(m, "Visit Tony. Write to Phil.") == "Visit https://example.com/a?b=1. Write to bob@example.org."
    # tags at the ends are set aside; a tag touching a Latin word travels with it
    m = p.mask("{\\an8}<i>你好 <b>Tony</b></i>")
    assert m.text == "你好 tony" and m.lead == "{\\an8}<i>" and m.trail == "</b></i>"
    assert p.restore(m, "Hello, Tony.") == "{\\an8}<i>Hello, <b>Tony.</b></i>"
    m = p.mask("<b>Tony</b>来了")
    assert m.text == "tony来了" and p.restore(m, "Tony's here.") == "<b>Tony</b>'s here."
    # tags inside Chinese text: out of the model's text, back at their relative position, in order
    m = p.mask("我{\\i1}真的{\\i0}很喜欢")
    assert m.text == "我真的很喜欢"
    out = p.restore(m, "I really like it.")
    assert out.replace("{\\i1}", "").replace("{\\i0}", "") == "I really like it."
    assert out.index("{\\i1}") < out.index("{\\i0}")


def test_a_lost_placeholder_puts_its_span_at_its_relative_position():
    p, stats = SpanProtector(), SpanStats()
    m = p.mask("Dean和Jerry来了")
    out = p.restore(m, "Tony is here now.", stats=stats)
    assert out == "Dean Jerry is here now." and stats.lost == 1
    assert p.restore(p.mask("我同意 Jim"), "I agree.") == "I agree. Jim"


def test_no_protect_keeps_only_the_glossary():
    g = Glossary.from_pairs([("克里斯", "Chris")])
    m = SpanProtector(g, protect=False).mask("克里斯和Tony有555个")
    assert m.text == "phil和Tony有555个" and [s.target for s in m.spans] == ["Chris"]   # (not tony: in the line)
    assert SpanProtector(protect=False).mask("Tony来了").text == "Tony来了"


def test_tokenized_output_renders_the_spans():
    p = SpanProtector(Glossary.from_pairs([("梅朵", "Meadow's Mom")]))
    m = p.mask("梅朵和Nancy Sinatra")
    assert p.restore(m, "tony and phil .", render=str.lower) == "meadow's mom and nancy sinatra ."
    spaced = SpanProtector(spaced=True).mask("他 说 hello , how are you")       # tok input: placeholders as words
    assert spaced.text == "他 说 tony"


def test_glossary_longest_match_first_and_case_of_latin_terms(tmp_path):
    f = tmp_path / "terms.tsv"
    f.write_text("\ufeff# names\n克里斯\tChris\n克里斯多佛\tChristopher\n\nFBI\tthe Bureau\n", encoding="utf-8")
    g = Glossary.load(f)
    assert len(g) == 3
    p = SpanProtector(g)
    m = p.mask("克里斯多佛和克里斯在fbi, FBIX不是")
    assert [(s.source, s.target) for s in m.spans] == [("克里斯多佛", "Christopher"), ("克里斯", "Chris"),
                                                       ("fbi", "the Bureau"), ("FBIX", "FBIX")]
    assert p.restore(m, "Tony and Phil are at John, Garcia isn't.") == \
        "Christopher and Chris are at the Bureau, FBIX isn't."


@pytest.mark.parametrize("text, message", [
    ("克里斯\tChris\nno tab here\n", ":2: expected 'source<TAB>target'"),
    ("克里斯\tChris\ta third\n", ":1: expected 'source<TAB>target'"),
    ("\tChris\n", ":1: an empty source term"),
    ("克里斯\t \n", ":1: an empty target term"),
    ("克里斯\tChris\n\n克里斯\tKris\n", ":3: '克里斯' → 'Kris', but line 1 gives 'Chris'"),
])
def test_a_malformed_glossary_names_the_file_and_line(tmp_path, text, message):
    f = tmp_path / "bad.tsv"
    f.write_text(text, encoding="utf-8")
    with pytest.raises(GlossaryError, match=str(f).replace("\\", "\\\\") + message.replace("?", r"\?")):
        Glossary.load(f)


def test_a_glossary_that_is_not_utf8_names_the_line(tmp_path):
    f = tmp_path / "gbk.tsv"
    f.write_bytes("克里斯\tChris\n".encode("utf-8") + "梅朵\tMeadow\n".encode("gbk"))
    with pytest.raises(GlossaryError, match=r"gbk.tsv:2: not UTF-8"):
        Glossary.load(f)
