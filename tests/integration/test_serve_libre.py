"""doctrans serve as LibreTranslate's and OpenNMT-py's clients call it (TestClient; a real process and
the real clients: tests/system/test_serve_clients.py): form bodies, language codes, auto detection,
HTML, alternatives (n-best), /languages, /detect, /frontend/settings, /translate_file with the CLI's
output, API keys and the rate limit, several models, OpenNMT-py's n_best / pred_score / models."""
from __future__ import annotations

import re
from types import SimpleNamespace

import pytest

pytest.importorskip("fastapi")
pytest.importorskip("httpx")
pytest.importorskip("multipart")
from fastapi.testclient import TestClient  # noqa: E402

from conftest import train_tiny  # noqa: E402
from doctrans.inference.subtitles import translate_file  # noqa: E402
from doctrans.inference.translate import TranslateConfig, Translator  # noqa: E402
from doctrans.serve import create_app  # noqa: E402
from doctrans.serve.access import Access  # noqa: E402
from doctrans.serve.app import Limits  # noqa: E402
from doctrans.serve.models import FIRST_MODEL_ID, ModelRegistry, ServedModel  # noqa: E402

SENTS = ["w1 w2 w3", "w4 w5", "", "w6 w7 w8 w9", "w3 w1"]


@pytest.fixture(scope="module")
def translator(tmp_path_factory):
    ckpt = train_tiny(tmp_path_factory.mktemp("libre"), 20, "train.max_steps=3")
    return Translator(TranslateConfig(checkpoint=str(ckpt), input_format="bpe", tokenized=True, beam=4))


@pytest.fixture(scope="module")
def client(translator):
    with TestClient(create_app(translator, Limits(max_lines=8, max_file_lines=300), name="tiny"),
                    raise_server_exceptions=False) as c:
        yield c


class Echo:
    """A stand-in model: each line with a tag, the lines it was given kept (``seen``); its n-best
    list is that one line, score -1."""

    def __init__(self, tag: str = "", reads_documents: bool = False):
        self.tag, self.reads_documents, self.seen = tag, reads_documents, []
        self.cfg = TranslateConfig(f"{tag or 'echo'}.pt", beam=4)      # (the file is never read)

    def translate(self, lines, doc_ids=None):
        self.seen.append(list(lines))
        return [f"{self.tag}{x}" if x.strip() else "" for x in lines]

    def with_config(self, cfg):
        return self

    def translate_detailed(self, lines, doc_ids=None):
        out = self.translate(lines)
        return SimpleNamespace(lines=out, nbest={i: [(t, -1.0)] for i, t in enumerate(out) if t})


def echo_client(*translators, access=None, **limits):
    models = ModelRegistry([ServedModel(f"m{k}", FIRST_MODEL_ID + k, t.cfg.model.checkpoint,
                                        "document" if t.reads_documents else "sentence", translator=t)
                            for k, t in enumerate(translators)])
    return TestClient(create_app(models, Limits(**limits), access=access), raise_server_exceptions=False)


def test_a_form_body_is_read_as_json_is(client, translator):
    """libretranslatepy and HTML forms send application/x-www-form-urlencoded (a 422 before)."""
    expect = translator.translate(SENTS[:2])
    r = client.post("/translate", data={"q": SENTS[0], "source": "zh", "target": "en"})
    assert r.status_code == 200 and r.json() == {"translatedText": expect[0]}
    r = client.post("/translate", data={"q": [SENTS[0], SENTS[1]], "source": "zh", "target": "en"})
    assert r.json() == {"translatedText": expect}
    r = client.post("/translate", files={"q": (None, SENTS[0]), "source": (None, "zh")})      # multipart
    assert r.json() == {"translatedText": expect[0]}


def test_a_form_body_of_utf_8_not_escaped_is_read_as_utf_8():
    """``curl -d 'q=他来了'`` sends the UTF-8 bytes as they are (Starlette's form parser read them as
    Latin-1: mojibake translated, no error); %-escaped as browsers send it, the same text."""
    tr = Echo()
    with echo_client(tr) as c:
        for body in ("q=他来了。&source=zh".encode(), b"q=%E4%BB%96%E6%9D%A5%E4%BA%86%E3%80%82&source=zh"):
            r = c.post("/translate", content=body, headers={"content-type": "application/x-www-form-urlencoded"})
            assert r.json() == {"translatedText": "他来了。"}
        r = c.post("/translate", content='{"q": "他来了。"}'.encode(),          # curl -d '{…}' without -H
                   headers={"content-type": "application/x-www-form-urlencoded"})
        assert r.json() == {"translatedText": "他来了。"}
        r = c.post("/translate", content=b"q=\xff", headers={"content-type": "application/x-www-form-urlencoded"})
        assert r.status_code == 400 and "the form body is not UTF-8" in r.json()["error"]


def test_source_codes_traditional_converted_and_auto_detected():
    tr = Echo()
    with echo_client(tr) as c:
        assert c.post("/translate", json={"q": "他來了。", "source": "zh-Hant", "target": "en"}).json() == \
            {"translatedText": "他来了。"}
        assert c.post("/translate", json={"q": "他來了。", "source": "zh-Hans", "target": "en-US"}).json() == \
            {"translatedText": "他來了。"}                                 # said Simplified: kept as sent
        r = c.post("/translate", json={"q": ["头发很长。", "OK"], "source": "auto", "target": "en"}).json()
        assert r["translatedText"] == ["头发很长。", "OK"]
        assert r["detectedLanguage"] == [{"confidence": 100.0, "language": "zh"},
                                         {"confidence": 100.0, "language": "en"}]
        r = c.post("/translate", json={"q": "他来了", "source": "auto", "target": "en"}).json()
        assert r["detectedLanguage"] == {"confidence": 100.0, "language": "zh"}
        r = c.post("/translate", json={"q": "x", "source": "ja", "target": "en"})
        assert r.status_code == 400 and "source language 'ja' is not supported" in r.json()["error"]


def test_html_keeps_the_markup_and_translates_the_text_nodes():
    tr = Echo("T:")
    with echo_client(tr) as c:
        q = '<p class="green">你好！<br/><b>他 &amp; 我</b></p><script>var a = "中";</script><!-- 注释 -->'
        r = c.post("/translate", json={"q": q, "source": "zh", "target": "en", "format": "html"})
    assert r.json() == {"translatedText": '<p class="green">T:你好！<br/><b>T:他 &amp; 我</b></p>'
                                          '<script>var a = "中";</script><!-- 注释 -->'}
    assert tr.seen == [["你好！", "他 & 我"]]                             # one document, entities decoded


def test_alternatives_come_from_the_n_best_list(client, translator):
    expect = translator.translate(SENTS[:1])[0]
    nbest = translator.with_config(translator.cfg.__class__(**{**translator.cfg.__dict__, "nbest": 4}))
    hyps = [h for h, _ in nbest.translate_detailed(SENTS[:1]).nbest[0]]
    r = client.post("/translate", json={"q": SENTS[0], "source": "zh", "target": "en", "alternatives": 2}).json()
    assert r["translatedText"] == expect == hyps[0]
    assert r["alternatives"] == [h for h in dict.fromkeys(hyps[1:3]) if h != expect]
    r = client.post("/translate", data={"q": [SENTS[0], SENTS[1]], "source": "zh", "alternatives": "1"}).json()
    assert len(r["alternatives"]) == 2 and all(len(a) <= 1 for a in r["alternatives"])


def test_languages_detect_and_frontend_settings(client):
    assert client.get("/languages").json() == [
        {"code": "zh", "name": "Chinese", "targets": ["en"]},
        {"code": "zh-Hans", "name": "Chinese (Simplified)", "targets": ["en"]},
        {"code": "zh-Hant", "name": "Chinese (Traditional)", "targets": ["en"]},
        {"code": "en", "name": "English", "targets": []}]
    assert client.post("/detect", data={"q": "他来了。"}).json() == [{"confidence": 100.0, "language": "zh"}]
    assert client.post("/detect", json={"q": "他来了 OK"}).json() == [{"confidence": 60.0, "language": "zh"},
                                                                   {"confidence": 40.0, "language": "en"}]
    s = client.get("/frontend/settings").json()
    assert s["language"] == {"source": {"code": "zh", "name": "Chinese"}, "target": {"code": "en", "name": "English"}}
    assert s["apiKeys"] is False and ".srt" in s["supportedFilesFormat"] and s["models"][0]["name"] == "tiny"


def _srt(n: int) -> str:
    return "".join(f"{k + 1}\n00:00:{k // 10:02d},{k % 10}00 --> 00:00:{k // 10:02d},{k % 10}50\n"
                   f"{SENTS[k % 5] or 'w2'}\n\n" for k in range(n))


def test_translate_file_gives_the_cli_s_file(client, translator, tmp_path):
    src = tmp_path / "ep.srt"
    src.write_text(_srt(200), encoding="utf-8")
    cli = translate_file(translator, src, None)
    r = client.post("/translate_file", data={"source": "zh", "target": "en"},
                    files={"file": ("ep.srt", src.read_bytes(), "application/x-subrip")})
    assert r.status_code == 200 and set(r.json()) == {"translatedFileUrl"}
    url = r.json()["translatedFileUrl"]
    assert re.fullmatch(r"http://testserver/download_file/[0-9a-f]{32}\.ep\.en\.srt", url)
    got = client.get(url)
    assert got.status_code == 200 and got.text == cli
    assert 'filename="ep.en.srt"' in got.headers["content-disposition"]
    timings = [x for x in got.text.splitlines() if "-->" in x]
    assert len(timings) == 200 and timings == [x for x in _srt(200).splitlines() if "-->" in x]
    text = "\n".join(SENTS) + "\n"
    r = client.post("/translate_file", files={"file": ("a.txt", text.encode("gb18030"))}, data={"bilingual": "1"})
    assert r.json()["bilingual"] == [[s, t] for s, t in zip(SENTS, translator.translate(SENTS))]
    assert client.get(r.json()["translatedFileUrl"]).text == "".join(f"{x}\n" for x in translator.translate(SENTS))


@pytest.mark.parametrize("name, data, status, message", [
    ("a.doc", b"w1", 400, "file format not supported (.doc"),
    ("a.srt", b"1\n00:00:01,000 --> nonsense\nw1\n", 400, "Invalid request: a.srt"),
    ("big.srt", _srt(301).encode(), 413, "301 sentences in one file: at most 300"),
])
def test_translate_file_refusals(client, name, data, status, message):
    r = client.post("/translate_file", files={"file": (name, data)}, data={"source": "zh", "target": "en"})
    assert r.status_code == status and message in r.json()["error"], r.json()


def test_downloads_only_from_the_store(client):
    assert client.get("/download_file/..%2F..%2Fetc%2Fpasswd").status_code == 404
    assert client.get("/download_file/" + "0" * 32 + ".x.srt").status_code == 404


def test_libre_errors_have_its_shape(client):
    for body, message in (({"source": "zh"}, "Invalid request: missing q parameter"),
                          ({"q": "w1", "format": "xml"}, "format 'xml' is not supported")):
        r = client.post("/translate", json=body)
        assert r.status_code == 400 and message in r.json()["error"]
    r = client.post("/translate", content=b"[1, 2]", headers={"content-type": "application/json"})
    assert r.status_code == 400 and r.json()["error"].startswith("Invalid JSON format")
    r = client.post("/translate", json={"q": ["w1"] * 9})
    assert r.status_code == 413 and "9 lines in one request: at most 8" in r.json()["error"]


def test_api_keys_and_the_rate_limit():
    with echo_client(Echo(), access=Access({"good": 0, "slow": 2}, req_limit=5)) as c:
        assert c.post("/translate", json={"q": "a"}).status_code == 403
        r = c.post("/translate", json={"q": "a", "api_key": "bad"})
        assert r.status_code == 403 and r.json() == {"error": "Invalid API key", "status": 403}
        assert c.post("/translate", data={"q": "a", "api_key": "good"}).json() == {"translatedText": "a"}
        assert c.post("/translator/translate?api_key=good", json=[{"src": "a"}]).status_code == 200
        assert c.post("/translate/document", json={"lines": ["a"]},
                      headers={"Authorization": "Bearer good"}).status_code == 200
        assert c.get("/languages").status_code == 200 and c.get("/frontend/settings").json()["keyRequired"]
        codes = [c.post("/detect", json={"q": "a", "api_key": "slow"}).status_code for _ in range(3)]
        assert codes == [200, 200, 429]
        r = c.post("/detect", json={"q": "a", "api_key": "slow"})
        assert r.json()["error"] == "Slowdown: 2 per 1 minute" and 1 <= int(r.headers["retry-after"]) <= 60
        # "good" has no limit of its own: --req-limit's 5 a minute, 3 of them used above
        assert [c.post("/detect", json={"q": "a", "api_key": "good"}).status_code for _ in range(3)] == [200, 200, 429]


def test_several_models_chosen_by_request_and_loaded_on_first_use():
    doc, loads = Echo("D:", reads_documents=True), []

    def load():
        loads.append(1)
        return Echo("S:")

    models = ModelRegistry([ServedModel("doc", 100, "doc.pt", "document", translator=doc),
                            ServedModel("sent", 101, "sent.pt", "sentence", load=load)])
    with TestClient(create_app(models), raise_server_exceptions=False) as c:
        listed = c.get("/translator/models").json()
        assert [(m["model_id"], m["name"], m["kind"], m["loaded"], m["default"]) for m in listed] == \
            [(100, "doc", "document", True, True), (101, "sent", "sentence", False, False)]
        assert c.post("/translate", json={"q": "a"}).json() == {"translatedText": "D:a"}
        assert loads == []
        assert c.post("/translate", json={"q": "a", "model": "sentence"}).json() == {"translatedText": "S:a"}
        assert c.post("/translate/document", json={"lines": ["a"], "model": "sent"}).json() == {"lines": ["S:a"]}
        assert c.post("/translator/translate", json=[{"src": "a", "id": 101}]).json()[0][0]["tgt"] == "S:a"
        assert loads == [1] and c.get("/translator/models").json()[1]["loaded"] is True
        r = c.post("/translator/translate", json=[{"src": "a", "id": 7}])
        assert r.status_code == 400 and "no model 7 on this server: it serves 100 (doc, document)" in r.json()["error"]
        r = c.post("/translator/translate", json=[{"src": "a", "n_best": 2}])
        assert r.status_code == 400 and "reads documents and has no n-best" in r.json()["error"]
        assert c.post("/translator/translate", json=[{"src": "a"}]).json()[0][0]["pred_score"] is None


def test_opennmt_n_best_and_pred_score(client, translator):
    nb = translator.with_config(translator.cfg.__class__(**{**translator.cfg.__dict__, "nbest": 3}))
    res = nb.translate_detailed(SENTS).nbest
    r = client.post("/translator/translate", json=[{"src": s, "id": 100, "n_best": 3} for s in SENTS])
    assert r.status_code == 200 and len(r.json()) == 3
    for rank, results in enumerate(r.json()):
        for i, (s, x) in enumerate(zip(SENTS, results)):
            assert x["src"] == s and x["n_best"] == 3
            if s:
                hyp = res[i][min(rank, len(res[i]) - 1)]
                assert (x["tgt"], x["pred_score"]) == (hyp[0], pytest.approx(hyp[1]))
                assert isinstance(x["pred_score"], float)
    r = client.post("/translator/translate", json=[{"src": "w1", "n_best": 5}])
    assert r.status_code == 400 and "n_best 5 exceeds the beam size 4" in r.json()["error"]
    assert client.get("/translator/models").json() == [
        {"model_id": 100, "name": "tiny", "kind": "sentence", "loaded": True, "default": True, "scores": True,
         "checkpoint": "last.pt", "beam": 4, "engine": "native"}]


def test_the_page_is_served(client):
    page = client.get("/")
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    for asset in re.findall(r'(?:src|href)="(/static/[^"]+)"', page.text):
        assert client.get(asset).status_code == 200
    assert "http" not in client.get("/static/app.js").text.replace("https?", "")   # nothing fetched elsewhere


def test_progress_of_an_upload(client):
    """The page polls /progress/TOKEN while its upload is translated (a file is one call)."""
    assert client.get("/progress/abcdefgh1234").json() == {"state": "unknown"}
    r = client.post("/translate_file", files={"file": ("a.srt", _srt(12).encode())}, data={"progress": "abcdefgh1234"})
    assert r.status_code == 200
    p = client.get("/progress/abcdefgh1234").json()
    assert p["state"] == "done" and p["lines"] == 12 and p["lines_ahead"] == 0 and p["rate"] > 0


def test_an_empty_q_is_a_blank_line(client):
    assert client.post("/translate", json={"q": "", "source": "zh"}).json() == {"translatedText": ""}
    assert client.post("/translate", json={"q": [], "source": "zh"}).json() == {"translatedText": []}
