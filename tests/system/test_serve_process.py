"""`doctrans serve` as a real uvicorn process on a free local port: it answers concurrent
requests with the translations, refuses an oversize one (a chunked upload as soon as it passes
the limit, the rest never sent), and on SIGTERM exits 0 — with requests in flight, once those it
could not finish in its drain time were refused with a JSON 503 (most of the time is the process
importing torch)."""
from __future__ import annotations

import http.client
import json
import os
import re
import select
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor

import pytest

from conftest import REPO, train_tiny
from doctrans.inference.translate import TranslateConfig, Translator

SENTS = ["w1 w2 w3", "w4 w5", "", "w6 w7 w8 w9", "w3 w1"]
ENV = {**os.environ, "PYTHONPATH": str(REPO)}


@pytest.fixture(scope="module")
def ckpt(tmp_path_factory):
    return train_tiny(tmp_path_factory.mktemp("serve"), 20, "train.max_steps=3")


@pytest.fixture(scope="module")
def expect(ckpt):
    return Translator(TranslateConfig(checkpoint=str(ckpt), input_format="bpe", tokenized=True, beam=2)).translate(SENTS)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _get(url):
    with urllib.request.urlopen(url, timeout=5) as r:
        return json.loads(r.read())


def _post(url, body):
    req = urllib.request.Request(url, json.dumps(body).encode(), {"content-type": "application/json"})
    with urllib.request.urlopen(req, timeout=30) as r:
        return json.loads(r.read())


TOY = ("--input-format", "bpe", "--tokenized", "--beam", "2")       # the tiny model's toy input


def _start(ckpt, *options, toy=TOY):
    """A ``doctrans serve`` process on a free port, up (GET /health answered) → (process, base URL)."""
    pytest.importorskip("uvicorn")
    port = _free_port()
    cmd = [sys.executable, "-m", "doctrans.cli", "serve", "-c", str(ckpt), "--port", str(port),
           *toy, "--threads", "1", *options]
    proc = subprocess.Popen(cmd, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=ENV)
    base = f"http://127.0.0.1:{port}"
    deadline = time.time() + 120
    while True:
        try:
            assert _get(f"{base}/health")["status"] == "ok"
            return proc, base
        except (urllib.error.URLError, ConnectionError):
            if proc.poll() is not None or time.time() > deadline:
                proc.kill()
                raise AssertionError(proc.stdout.read().decode()) from None
            time.sleep(0.05)


def _chunked_upload(base: str, path: str, total: int, chunk: int = 65536):
    """POST ``total`` bytes to ``path`` in chunks (Transfer-Encoding: chunked), sending only while
    the server has not answered → (status, JSON body, bytes of the body sent)."""
    host, port = base.rsplit("/", 1)[1].split(":")
    s = socket.create_connection((host, int(port)), timeout=30)
    s.sendall(f"POST {path} HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\n"
              f"Transfer-Encoding: chunked\r\n\r\n".encode())
    frame = b"%x\r\n%s\r\n" % (chunk, b" " * chunk)
    sent, pending = 0, b""
    while sent < total or pending:
        readable, writable, _ = select.select([s], [s], [], 30)
        if readable or not writable:
            break
        if not pending:
            pending, sent = frame, sent + chunk
        try:
            pending = pending[s.send(pending):]
        except (BrokenPipeError, ConnectionResetError):
            break
    else:
        s.sendall(b"0\r\n\r\n")
    r = http.client.HTTPResponse(s)
    r.begin()
    out = r.status, json.loads(r.read()), sent
    s.close()
    return out


def test_real_uvicorn_process_serves_and_stops_on_sigterm(ckpt, expect):
    proc, base = _start(ckpt, "--max-body-bytes", "100000")
    try:
        with ThreadPoolExecutor(4) as pool:
            outs = list(pool.map(lambda s: _post(f"{base}/translate", {"q": s, "source": "zh", "target": "en"}),
                                 SENTS * 2))
        assert [o["translatedText"] for o in outs] == expect * 2
        try:
            _post(f"{base}/translate/document", {"lines": ["w1"] * 300})
            raise AssertionError("an oversize request was answered")
        except urllib.error.HTTPError as e:
            assert e.code == 413 and json.loads(e.read())["status"] == 413
        status, data, sent = _chunked_upload(base, "/translate/document", 256 << 20)
        assert status == 413 and "request body over 100000 bytes" in data["error"]
        assert sent < 64 << 20                     # a 256 MB upload stopped (socket buffers hold some MB)
        assert _get(f"{base}/health")["status"] == "ok"
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 0
        assert "Finished server process" in proc.stdout.read().decode()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_sigterm_with_requests_in_flight_refuses_what_the_drain_time_leaves_and_exits(ckpt):
    """20 documents of 256 lines in flight (10 batches of about 2 s here), SIGTERM with
    --drain-timeout 1: every request is answered — translated, or a JSON 503 with Retry-After —
    and the process exits 0 with no traceback, abandoning the translation still running if there
    is one (on a loaded machine the batch running at the deadline may end before the server does:
    its answers were already refused, the worker stops, and the plain "server stopped" is logged)."""
    proc, base = _start(ckpt, "--drain-timeout", "1")
    doc = [" ".join(f"w{1 + (k * 7 + j) % 29}" for j in range(20)) for k in range(256)]

    def ask(_):
        req = urllib.request.Request(f"{base}/translate/document", json.dumps({"lines": doc}).encode(),
                                     {"content-type": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=60) as r:
                return r.status, json.loads(r.read()), None
        except urllib.error.HTTPError as e:
            return e.code, json.loads(e.read()), e.headers.get("retry-after")

    try:
        with ThreadPoolExecutor(20) as pool:
            answers = [pool.submit(ask, k) for k in range(20)]
            deadline = time.time() + 120
            while _get(f"{base}/health")["queued_requests"] + sum(a.done() for a in answers) < 20:
                assert time.time() < deadline, "the requests did not all reach the server"
                time.sleep(0.01)
            proc.send_signal(signal.SIGTERM)
            answers = [a.result() for a in answers]
        assert proc.wait(timeout=30) == 0
        log = proc.stdout.read().decode()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    refused = [a for a in answers if a[0] == 503]
    assert refused and all(a[0] == 200 and len(a[1]["lines"]) == 256 for a in answers if a[0] != 503)
    assert all(body == {"error": "the server is shutting down: not translated, retry later", "status": 503}
               and retry.isdigit() for _, body, retry in refused)
    assert "Traceback" not in log, log
    assert re.search(r"\bserver stopped( \(the translation still running was abandoned\))?$", log.rstrip()), log
