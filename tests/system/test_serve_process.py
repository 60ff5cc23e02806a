"""`doctrans serve` as a real uvicorn process on a free local port: it answers concurrent
requests with the translations, refuses an oversize one, and exits 0 on SIGTERM (most of its
time is the process importing torch)."""
from __future__ import annotations

import json
import os
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


def test_real_uvicorn_process_serves_and_stops_on_sigterm(ckpt, expect):
    pytest.importorskip("uvicorn")
    port = _free_port()
    cmd = [sys.executable, "-m", "doctrans.cli", "serve", "-c", str(ckpt), "--port", str(port),
           "--input-format", "bpe", "--tokenized", "--beam", "2", "--threads", "1"]
    proc = subprocess.Popen(cmd, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=ENV)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.time() + 120
        while True:
            try:
                assert _get(f"{base}/health")["status"] == "ok"
                break
            except (urllib.error.URLError, ConnectionError):
                assert proc.poll() is None and time.time() < deadline, proc.stdout.read().decode()
                time.sleep(0.05)
        with ThreadPoolExecutor(4) as pool:
            outs = list(pool.map(lambda s: _post(f"{base}/translate", {"q": s, "source": "zh", "target": "en"}),
                                 SENTS * 2))
        assert [o["translatedText"] for o in outs] == expect * 2
        try:
            _post(f"{base}/translate/document", {"lines": ["w1"] * 300})
            raise AssertionError("an oversize request was answered")
        except urllib.error.HTTPError as e:
            assert e.code == 413 and json.loads(e.read())["status"] == 413
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 0
        assert "Finished server process" in proc.stdout.read().decode()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
