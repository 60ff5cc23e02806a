"""Probe a running ``doctrans serve`` as a new user would, with the clients people have: LibreTranslate's
Python client (``libretranslatepy``: translate, languages, detect), a form-encoded body, an SRT file
through ``/translate_file`` and its download (cue count, timings kept), and the GETs of
``/languages``, ``/frontend/settings``, ``/translator/models`` and ``/`` (the page). Prints one line
per probe: OK and what came back, or the HTTP status and body.

Usage: python benchmarks/serve_probe.py URL SRT_FILE
  e.g. doctrans serve --port 5000 &  python benchmarks/serve_probe.py http://127.0.0.1:5000 ep.srt
"""
from __future__ import annotations

import json
import sys
import urllib.error
import urllib.request
import uuid


def show(name: str, f) -> None:
    try:
        print(f"{name}: OK {str(f())[:200]}")
    except urllib.error.HTTPError as e:
        print(f"{name}: HTTP {e.code} {e.read()[:200]!r}")
    except Exception as e:                      # noqa: BLE001 — reported, the next probe runs
        print(f"{name}: {type(e).__name__} {e}")


def main() -> None:
    url, srt = sys.argv[1].rstrip("/"), sys.argv[2]
    from libretranslatepy import LibreTranslateAPI

    lt = LibreTranslateAPI(url)
    show("libretranslatepy translate", lambda: lt.translate("他来了。", "zh", "en"))
    show("libretranslatepy languages", lambda: lt.languages())
    show("libretranslatepy detect", lambda: lt.detect("他来了。"))

    def form():
        req = urllib.request.Request(url + "/translate", b"q=%E4%BB%96%E6%9D%A5%E4%BA%86&source=zh&target=en",
                                     {"content-type": "application/x-www-form-urlencoded"})
        return urllib.request.urlopen(req, timeout=60).read().decode()

    show("form body /translate", form)

    def upload():
        b = uuid.uuid4().hex
        data = open(srt, "rb").read()
        head = "".join(f'--{b}\r\nContent-Disposition: form-data; name="{k}"\r\n\r\n{v}\r\n'
                       for k, v in (("source", "zh"), ("target", "en")))
        body = (head + f'--{b}\r\nContent-Disposition: form-data; name="file"; filename="{srt.split("/")[-1]}"\r\n'
                f"Content-Type: application/x-subrip\r\n\r\n").encode() + data + f"\r\n--{b}--\r\n".encode()
        req = urllib.request.Request(url + "/translate_file", body, {"content-type": f"multipart/form-data; boundary={b}"})
        ans = json.loads(urllib.request.urlopen(req, timeout=600).read())
        got = urllib.request.urlopen(ans["translatedFileUrl"], timeout=60).read().decode()
        src_t = [x for x in data.decode().splitlines() if "-->" in x]
        out_t = [x for x in got.splitlines() if "-->" in x]
        return f"{ans['translatedFileUrl']}: {len(out_t)} cues, timings identical: {src_t == out_t}"

    show("/translate_file " + srt, upload)
    for path in ("/languages", "/frontend/settings", "/translator/models", "/"):
        show("GET " + path, lambda: urllib.request.urlopen(url + path, timeout=10).read()[:120])


if __name__ == "__main__":
    main()
