"""doctrans serve: the FastAPI app over a tiny model (TestClient) — OpenNMT-py and LibreTranslate
shapes, the document endpoint, concurrent requests answered correctly, oversize and malformed
requests refused with JSON errors (a real uvicorn process: tests/system/test_serve_process.py)."""
from __future__ import annotations

import json
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
    assert r.json() == {"translatedText": expect[:2],                      # (toy 'w' lines: Latin letters)
                        "detectedLanguage": [{"confidence": 100.0, "language": "en"}] * 2}
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


def _asgi_post(app, path: str, chunks: list[bytes], headers: list[tuple[bytes, bytes]]):
    """POST ``chunks`` to the ASGI ``app`` one ``http.request`` message each (a streamed body, as
    uvicorn hands a chunked upload over) → (status, headers, JSON body, chunks the app read)."""
    import asyncio
    import json

    read, sent = [0], []

    async def receive():
        if read[0] < len(chunks):
            read[0] += 1
            return {"type": "http.request", "body": chunks[read[0] - 1], "more_body": read[0] < len(chunks)}
        return {"type": "http.disconnect"}

    async def send(message):
        sent.append(message)

    scope = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "POST", "scheme": "http",
             "path": path, "raw_path": path.encode(), "query_string": b"", "root_path": "",
             "headers": [(b"host", b"test"), (b"content-type", b"application/json"), *headers],
             "client": ("127.0.0.1", 5000), "server": ("127.0.0.1", 80)}
    asyncio.run(app(scope, receive, send))
    start = next(m for m in sent if m["type"] == "http.response.start")
    body = b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body")
    return start["status"], {k.decode(): v.decode() for k, v in start["headers"]}, json.loads(body), read[0]


def test_a_chunked_body_over_the_limit_is_refused_as_it_arrives(client):
    """A body without Content-Length (chunked) is counted as it arrives: the 413 comes once the
    count passes max_body_bytes (4000), the rest is never read; the connection is closed."""
    body = json.dumps({"lines": ["w1 w2"] * 100_000}).encode()            # 900 kB in 1 kB chunks
    chunks = [body[i:i + 1000] for i in range(0, len(body), 1000)]
    status, headers, data, read = _asgi_post(client.app, "/translate/document", chunks,
                                             [(b"transfer-encoding", b"chunked")])
    assert read == 5                                                       # 5,000 bytes read of 900,000
    assert status == 413 and data["status"] == 413 and "request body over 4000 bytes" in data["error"]
    assert headers["connection"] == "close"
    status, headers, data, read = _asgi_post(client.app, "/translate/document", chunks,
                                             [(b"content-length", str(len(body)).encode())])
    assert status == 413 and f"request body of {len(body)} bytes: at most 4000" in data["error"] and read == 0


def test_a_byte_order_mark_at_a_line_start_is_not_text(client, translator):
    expect = translator.translate(SENTS[:2])
    r = client.post("/translate", json={"q": "\ufeff" + SENTS[0] + "\n\ufeff" + SENTS[1]})
    assert r.json() == {"translatedText": "\n".join(expect)}
    r = client.post("/translate/document", json={"lines": ["\ufeff" + SENTS[0], SENTS[1]]})
    assert r.json() == {"lines": expect}
    r = client.post("/translator/translate", json=[{"src": "\ufeff" + SENTS[0]}])
    assert r.json()[0][0]["tgt"] == expect[0] and r.json()[0][0]["src"] == SENTS[0]


def test_unknown_request_fields_are_reported_not_silently_dropped(client, translator):
    """LibreTranslate clients send fields this server does not use (the web UI's ``secret``): the
    request is answered, and the answer names them (``ignored`` in an object answer, the
    Doctrans-Ignored-Fields header on every endpoint)."""
    expect = translator.translate(SENTS[:1])
    r = client.post("/translate", json={"q": SENTS[0], "source": "zh", "target": "en", "api_key": "k",
                                        "secret": "s", "format": "text"})
    assert r.status_code == 200
    assert r.json() == {"translatedText": expect[0], "ignored": ["secret"]}
    assert r.headers["doctrans-ignored-fields"] == "secret"
    r = client.post("/translate/document", json={"lines": SENTS[:1], "doc_id": "ep01", "context": 2})
    assert r.json() == {"lines": expect, "ignored": ["context", "doc_id"]}
    r = client.post("/translator/translate", json=[{"src": SENTS[0], "id": 100, "ref": "x"}, {"src": SENTS[0]}])
    assert r.json()[0][0]["tgt"] == expect[0] and r.headers["doctrans-ignored-fields"] == "ref"
    r = client.post("/translate", json={"q": SENTS[0]})
    assert r.json() == {"translatedText": expect[0]} and "doctrans-ignored-fields" not in r.headers
