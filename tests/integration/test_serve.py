"""doctrans serve: the FastAPI app over a tiny model (TestClient) — OpenNMT-py and LibreTranslate
shapes, the document endpoint, concurrent requests answered correctly, oversize and malformed
requests refused with JSON errors (a real uvicorn process: tests/system/test_serve_process.py)."""
from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import pytest

pytest.importorskip("fastapi")
pytest.importorskip("httpx")
from fastapi.testclient import TestClient  # noqa: E402

from conftest import train_tiny  # noqa: E402
from doctrans.inference.translate import TranslateConfig, Translator  # noqa: E402
from doctrans.serve import create_app  # noqa: E402
from doctrans.serve.app import Limits  # noqa: E402

SENTS = ["w1 w2 w3", "w4 w5", "", "w6 w7 w8 w9", "w3 w1"]


@pytest.fixture(scope="module")
def ckpt(tmp_path_factory):
    return train_tiny(tmp_path_factory.mktemp("serve"), 20, "train.max_steps=3")


@pytest.fixture(scope="module")
def translator(ckpt):
    return Translator(TranslateConfig(checkpoint=str(ckpt), input_format="bpe", tokenized=True, beam=2))


@pytest.fixture(scope="module")
def client(translator):
    app = create_app(translator, Limits(max_lines=8, max_chars=200, max_body_bytes=4000), name="tiny")
    with TestClient(app, raise_server_exceptions=False) as c:
        yield c


def test_endpoints_give_the_translations(client, translator):
    expect = translator.translate(SENTS)
    r = client.post("/translator/translate", json=[{"src": s, "id": 100} for s in SENTS])
    assert r.status_code == 200
    assert [x["tgt"] for x in r.json()[0]] == expect and r.json()[0][0]["src"] == SENTS[0]
    r = client.post("/translate", json={"q": SENTS[0], "source": "zh", "target": "en"})
    assert r.status_code == 200 and r.json() == {"translatedText": expect[0]}
    r = client.post("/translate", json={"q": [SENTS[0], SENTS[1]], "source": "auto", "target": "en"})
    assert r.json() == {"translatedText": expect[:2]}
    r = client.post("/translate/document", json={"lines": SENTS})
    assert r.status_code == 200 and r.json() == {"lines": expect}
    h = client.get("/health").json()
    assert h["status"] == "ok" and h["model"] == "tiny" and h["limits"]["max_lines"] == 8


def test_concurrent_requests_each_get_their_own_answer(client, translator):
    items = [[f"w{1 + k % 9} w{1 + (k * 3) % 9}", f"w{1 + (k * 5) % 9}"] for k in range(8)]
    expect = [translator.translate(x) for x in items]

    def ask(k):
        return client.post("/translate/document", json={"lines": items[k]})

    with ThreadPoolExecutor(6) as pool:
        answers = list(pool.map(ask, range(len(items))))
    assert [a.status_code for a in answers] == [200] * len(items)
    assert [a.json()["lines"] for a in answers] == expect


@pytest.mark.parametrize("path, body, status, message", [
    ("/translate/document", {"lines": ["w1"] * 9}, 413, "9 lines in one request: at most 8"),
    ("/translate/document", {"lines": ["w1 " * 100]}, 413, "300 characters in one request: at most 200"),
    ("/translate/document", {"lines": ["w1 " * 1500]}, 413, "request body of"),
    ("/translate/document", {"text": "w1"}, 422, "malformed request: body.lines"),
    ("/translator/translate", {"src": "w1"}, 422, "malformed request"),
    ("/translate", {"q": "w1", "source": "fr", "target": "en"}, 400, "source language 'fr' is not supported"),
    ("/translate", {"q": "w1", "target": "de"}, 400, "target language 'de'"),
])
def test_bad_requests_get_json_errors(client, path, body, status, message):
    r = client.post(path, json=body)
    assert r.status_code == status and r.headers["content-type"] == "application/json"
    assert r.json()["status"] == status and message in r.json()["error"]


def test_malformed_json_unknown_path_and_method(client):
    r = client.post("/translate/document", content=b"{not json", headers={"content-type": "application/json"})
    assert r.status_code == 422 and "malformed request" in r.json()["error"]
    assert client.get("/nowhere").json() == {"error": "Not Found", "status": 404}
    assert client.get("/translate").json()["status"] == 405
