"""`doctrans serve` (a real process on a free local port, the tiny model) used by the clients people
have: LibreTranslate's own Python client (``libretranslatepy``: form bodies), a 200-cue SRT through
``/translate_file`` and its download, an OpenNMT-py-style request with ``n_best``, and a server
with ``--api-keys`` (403 without a key)."""
from __future__ import annotations

import json
import signal
import urllib.error
import urllib.request
import uuid

import pytest

from test_serve_process import SENTS, _start, ckpt, expect  # noqa: F401 — the module's fixtures

pytest.importorskip("multipart")
libretranslatepy = pytest.importorskip("libretranslatepy")


def _stop(proc):
    proc.send_signal(signal.SIGTERM)
    try:
        assert proc.wait(timeout=30) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def _upload(base: str, name: str, data: bytes, **fields) -> dict:
    """POST a multipart form with ``file`` (as LibreTranslate's web page and clients send it)."""
    b = uuid.uuid4().hex
    parts = [f'--{b}\r\nContent-Disposition: form-data; name="{k}"\r\n\r\n{v}\r\n'.encode() for k, v in fields.items()]
    parts.append(f'--{b}\r\nContent-Disposition: form-data; name="file"; filename="{name}"\r\n'
                 f"Content-Type: application/octet-stream\r\n\r\n".encode() + data + b"\r\n")
    req = urllib.request.Request(f"{base}/translate_file", b"".join(parts) + f"--{b}--\r\n".encode(),
                                 {"content-type": f"multipart/form-data; boundary={b}"})
    with urllib.request.urlopen(req, timeout=60) as r:
        return json.loads(r.read())


def test_libretranslate_client_files_and_opennmt_requests(ckpt, expect):  # noqa: F811
    proc, base = _start(ckpt)
    try:
        lt = libretranslatepy.LibreTranslateAPI(base)
        assert lt.translate(SENTS[0], "zh", "en") == expect[0]
        assert lt.translate(SENTS[3], "zh-Hans", "en") == expect[3]
        assert {"code": "zh", "name": "Chinese", "targets": ["en"]} in lt.languages()
        assert lt.detect("他来了。") == [{"confidence": 100.0, "language": "zh"}]

        srt = "".join(f"{k + 1}\n00:{k // 60:02d}:{k % 60:02d},000 --> 00:{k // 60:02d}:{k % 60:02d},900\n"
                      f"{SENTS[k % 5] or 'w2 w3'}\n\n" for k in range(200))
        url = _upload(base, "ep01.srt", srt.encode(), source="zh", target="en")["translatedFileUrl"]
        assert url.startswith(f"{base}/download_file/") and url.endswith(".ep01.en.srt")
        with urllib.request.urlopen(url, timeout=30) as r:
            got = r.read().decode("utf-8")
        timings = [x for x in got.splitlines() if "-->" in x]
        assert len(timings) == 200 and timings == [x for x in srt.splitlines() if "-->" in x]
        assert " ".join(got.split("\n\n")[0].splitlines()[2:]) == expect[0]     # (laid out in lines of ≤ 42)

        req = urllib.request.Request(f"{base}/translator/translate",
                                     json.dumps([{"src": s, "id": 100, "n_best": 2} for s in SENTS[:2]]).encode(),
                                     {"content-type": "application/json"})
        with urllib.request.urlopen(req, timeout=30) as r:
            ranks = json.loads(r.read())
        assert len(ranks) == 2 and [x["tgt"] for x in ranks[0]] == expect[:2]
        assert all(isinstance(x["pred_score"], float) and x["n_best"] == 2 for rank in ranks for x in rank)
        assert ranks[0][0]["pred_score"] >= ranks[1][0]["pred_score"]
    finally:
        _stop(proc)


def test_api_keys_file(ckpt, expect, tmp_path):  # noqa: F811
    keys = tmp_path / "keys.txt"
    keys.write_text("# one key a line\nk-123 60\n", encoding="utf-8")
    proc, base = _start(ckpt, "--api-keys", str(keys))
    try:
        with pytest.raises(urllib.error.HTTPError) as e:
            libretranslatepy.LibreTranslateAPI(base).translate(SENTS[0], "zh", "en")
        assert e.value.code == 403 and "API key" in json.loads(e.value.read())["error"]
        assert libretranslatepy.LibreTranslateAPI(base, api_key="k-123").translate(SENTS[0], "zh", "en") == expect[0]
        assert libretranslatepy.LibreTranslateAPI(base).languages()[0]["code"] == "zh"     # no key needed
    finally:
        _stop(proc)
