"""What the shipped models must not translate (inference/spans.py, issue 75): Latin-script names
kept verbatim, a glossary's targets in the output, lines without Chinese passed through — in the
Python API, the CLI (files, subtitles, --stream) and the server. The lines are constructed here
(no corpus text). Unprotected, the sentence model kept 6 of these 42 names and the document
model 4 ("Nancy Sinatra" → "the applause"), and translated "Hello, how are you?" as
"Howie-hoe-e-e-u?"."""
from __future__ import annotations

import logging

import pytest
from click.testing import CliRunner

import doctrans
from doctrans.cli import cli
from doctrans.runtime import shipped

SENTENCE = shipped.resolve(None, "sentence")
DOCUMENT = shipped.resolve(None, "document")

# (line, the Latin names it holds, |-separated)
NAMES = [("Dean和Jerry来了", "Dean|Jerry"), ("我们欢迎 Nancy Sinatra", "Nancy Sinatra"), ("Petruzzo的猫死了", "Petruzzo"),
         ("我跟Marco说过了", "Marco"), ("Hannah 你在哪里", "Hannah"), ("今天Oliver不来上班", "Oliver"),
         ("Sophia的生日是明天", "Sophia"), ("我同意 Gustavo", "Gustavo"), ("Brian和Janine结婚了", "Brian|Janine"),
         ("你见过Yackinelli先生吗", "Yackinelli"), ("Elena说她饿了", "Elena"), ("快点 Rodrigo 我们要迟到了", "Rodrigo"),
         ("这是Frank的车", "Frank"), ("Wilhelmina给我打电话了", "Wilhelmina"), ("我不认识Dmitri", "Dmitri"),
         ("Nadia和Ingrid去买东西了", "Nadia|Ingrid"), ("谢谢你 Beatrice", "Beatrice"), ("Kowalski在楼下等你", "Kowalski"),
         ("你告诉Priya了吗", "Priya"), ("我们明天去找Henrik", "Henrik"), ("Lucia 别哭了", "Lucia"),
         ("Theo是我的弟弟", "Theo"), ("这是Ramirez医生", "Ramirez"), ("Agnes把钥匙丢了", "Agnes"),
         ("我爱你 Matteo", "Matteo"), ("Fitzgerald先生来了", "Fitzgerald"), ("你和Svetlana吵架了吗", "Svetlana"),
         ("Pedro不喜欢吃鱼", "Pedro"), ("Chloe和Zoe是双胞胎", "Chloe|Zoe"), ("我在Bellweather酒店等你", "Bellweather"),
         ("Ignatius 你疯了吗", "Ignatius"), ("给Winston打个电话", "Winston"), ("Astrid已经走了", "Astrid"),
         ("那是Desmond的房子", "Desmond"), ("Mei Ling 你好", "Mei Ling"), ("我们去看Gordon吧", "Gordon"),
         ("Violetta很漂亮", "Violetta"), ("Quentin Blake在门外", "Quentin Blake")]
NAME_LIST = [n for _, ns in NAMES for n in ns.split("|")]

# (line, glossary term in it); the glossary gives each term's target
TERMS = {"马修": "Matthew", "珍珠港": "Pearl Harbor", "杰瑞米": "Jeremy", "老约翰": "Old John", "罗宾": "Robin",
         "葛兰特": "Grant", "哈特福德": "Hartford", "律师": "attorney", "艾米莉": "Emily", "桑托斯": "Santos",
         "布鲁克林": "Brooklyn", "汉娜": "Hannah", "麦肯锡": "McKinsey", "警长": "sheriff", "克劳蒂亚": "Claudia"}
GLOSSED = ["马修来了", "我们去珍珠港", "杰瑞米不在家", "老约翰死了", "罗宾 你在哪", "葛兰特是我哥哥", "他住在哈特福德",
           "我要找律师", "艾米莉很生气", "桑托斯先生 你好", "布鲁克林很远", "汉娜和马修结婚了", "他在麦肯锡上班",
           "警长来了", "克劳蒂亚 别走", "谢谢你 马修", "我给杰瑞米打电话", "罗宾的车坏了", "你见过葛兰特吗",
           "我们明天去布鲁克林", "律师说不行", "艾米莉和汉娜是朋友", "桑托斯不喜欢我", "警长在找你", "克劳蒂亚的妈妈病了",
           "老约翰的狗跑了", "哈特福德下雨了", "他是麦肯锡的人", "我爱你 汉娜", "马修 快点", "珍珠港很漂亮",
           "杰瑞米说他饿了", "葛兰特 别哭", "我们在布鲁克林见", "她的律师来了", "罗宾和艾米莉吵架了", "桑托斯在楼下",
           "警长 我们走吧", "克劳蒂亚很聪明", "麦肯锡的老板来了"]


@pytest.fixture(scope="module")
def sentence():
    return doctrans.Translator.load(SENTENCE, threads=1)


@pytest.fixture(scope="module")
def document():
    return doctrans.Translator.load(DOCUMENT, threads=1)


@pytest.fixture(scope="module")
def glossary(tmp_path_factory):
    f = tmp_path_factory.mktemp("g") / "terms.tsv"
    f.write_text("# constructed terms\n" + "".join(f"{s}\t{t}\n" for s, t in TERMS.items()), encoding="utf-8")
    return f


@pytest.mark.parametrize("which", ["sentence", "document"])
def test_latin_names_are_kept_verbatim(which, request):
    assert len(NAMES) >= 35 and len(NAME_LIST) == 42 and all(n in line for line, ns in NAMES for n in ns.split("|"))
    tr = request.getfixturevalue(which)
    lines = [line for line, _ in NAMES]
    out = tr.translate_sentences(lines) if which == "sentence" else \
        [d[0] for d in tr.translate_documents([[line] for line in lines])]
    kept = sum(1 for (_, ns), o in zip(NAMES, out) for n in ns.split("|") if n in o)
    assert kept >= 0.95 * len(NAME_LIST), list(zip(lines, out))
    # the model copied the placeholders: the names are where it put them, not added after it
    res = tr._engine.translate_detailed(lines)
    assert res.spans.spans["latin"] == len(NAME_LIST) and res.spans.lost <= 0.05 * len(NAME_LIST)


def test_glossary_targets_are_in_the_output(sentence, glossary, document):
    assert len(GLOSSED) == 40 and all(any(t in line for t in TERMS) for line in GLOSSED)
    for tr in (sentence, document):
        glossed = doctrans.Translator.load(tr.config.model.checkpoint, threads=1, glossary=str(glossary))
        res = glossed._engine.translate_detailed(GLOSSED, doc_ids=[str(k) for k in range(len(GLOSSED))])
        wanted = [(TERMS[t], o) for line, o in zip(GLOSSED, res.lines) for t in TERMS
                  if t in line and not any(t in u and t != u and u in line for u in TERMS)]
        honoured = sum(1 for t, o in wanted if t in o)
        assert honoured >= 0.95 * len(wanted), list(zip(GLOSSED, res.lines))
        assert res.spans.spans["glossary"] == len(wanted) and res.spans.lost <= 0.05 * len(wanted)
        # where no term occurs, the output is the one without a glossary
        plain = ["他来了。", "我不知道。", "我们明天见"]
        assert glossed.translate_sentences(plain) == tr.translate_sentences(plain)


def test_a_line_whose_own_translation_has_the_target_keeps_it(sentence, tmp_path):
    f = tmp_path / "g.tsv"
    f.write_text("谢谢\tthank you\n律师\tattorney\n", encoding="utf-8")
    glossed = doctrans.Translator.load(SENTENCE, threads=1, glossary=str(f))
    lines = ["谢谢你。", "我要找律师"]
    res = glossed._engine.translate_detailed(lines)
    own = sentence.translate_sentences(lines)
    assert "thank you" in own[0].lower() and "attorney" not in own[1]
    assert res.lines[0] == own[0] and "attorney" in res.lines[1]
    assert (res.spans.glossary_kept, res.spans.glossary_again) == (1, 1)


def test_lines_without_chinese_are_passed_through(document, caplog):
    lines = ["Hello, how are you?", "他来了。", "OK", "こんにちは、元気ですか", "東京へ行きます", "谢谢你。"]
    with caplog.at_level(logging.INFO, logger="doctrans.inference.translator"):
        out = document.translate_documents([lines])[0]
    assert [out[i] for i in (0, 2, 3, 4)] == [lines[i] for i in (0, 2, 3, 4)]
    assert out[1] and out[5] and out[1] != lines[1]
    assert "4 line(s) without Chinese passed through untranslated (2 kana: Japanese, 2 no Han" in caplog.text
    everything = doctrans.Translator.load(DOCUMENT, threads=1, translate_all=True)
    assert everything.translate_sentences(["Hello, how are you?"]) != ["Hello, how are you?"]


def test_cli_glossary_pass_through_and_translate_all(tmp_path, glossary):
    src = tmp_path / "in.zh"
    src.write_text("马修和Nancy Sinatra来了\nHello, how are you?\n他欠我1,500块\n", encoding="utf-8")
    base = ["translate", "--sentence", "--threads", "1", "-i", str(src)]
    r = CliRunner().invoke(cli, base + ["-o", str(tmp_path / "out.en"), "--glossary", str(glossary)])
    assert r.exit_code == 0, r.output
    out = (tmp_path / "out.en").read_text(encoding="utf-8").splitlines()
    assert "Matthew" in out[0] and "Nancy Sinatra" in out[0]
    assert out[1] == "Hello, how are you?" and "1,500" in out[2]
    r = CliRunner().invoke(cli, base + ["-o", str(tmp_path / "all.en"), "--translate-all", "--no-protect"])
    assert r.exit_code == 0, r.output
    assert (tmp_path / "all.en").read_text(encoding="utf-8").splitlines()[1] != "Hello, how are you?"
    bad = tmp_path / "bad.tsv"
    bad.write_text("马修\tMatthew\n律师 attorney\n", encoding="utf-8")
    r = CliRunner().invoke(cli, base + ["-o", str(tmp_path / "x.en"), "--glossary", str(bad)])
    assert r.exit_code != 0 and f"{bad}:2: expected 'source<TAB>target'" in r.output + str(r.exception)


def test_subtitle_tags_inside_the_text_are_kept(tmp_path):
    src = tmp_path / "a.srt"
    src.write_text("1\n00:00:01,000 --> 00:00:02,000\n我是<font color=\"red\">小明</font>，你好\n\n"
                   "2\n00:00:03,000 --> 00:00:04,000\n<i>Tony</i>，我们走吧\n", encoding="utf-8")
    r = CliRunner().invoke(cli, ["translate", "--sentence", "--threads", "1", "-i", str(src),
                                 "-o", str(tmp_path / "a.en.srt")])
    assert r.exit_code == 0, r.output
    out = (tmp_path / "a.en.srt").read_text(encoding="utf-8")
    first = out.split("\n\n")[0].splitlines()[2]
    assert first.index("<font color=\"red\">") < first.index("</font>"), out
    assert "<i>Tony</i>" in out


def test_stream_session_keeps_names_and_passes_english(document):
    session = document.document()
    assert "Jerry" in session.translate("Dean和Jerry来了") and "Dean" in session.history[-1].output
    assert session.translate("Hello, how are you?") == "Hello, how are you?"
    assert session.history[-1].tgt_ids is None                  # not context
    assert "Sophia" in session.translate("Sophia的生日是明天")


def test_serve_glossary_option(monkeypatch, glossary):
    pytest.importorskip("fastapi")
    import doctrans.serve.run as run

    seen = {}
    monkeypatch.setattr(run, "serve", lambda translator, *a, **k: seen.setdefault("tr", translator))
    r = CliRunner().invoke(cli, ["serve", "-c", SENTENCE, "--threads", "1", "--glossary", str(glossary)])
    assert r.exit_code == 0, r.output
    out = seen["tr"].default.translator.translate(["马修来了", "OK"], doc_ids=["0", "1"])   # (a ModelRegistry)
    assert "Matthew" in out[0] and out[1] == "OK"
