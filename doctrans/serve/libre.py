"""LibreTranslate's API as its clients call it (its API docs and ``libretranslatepy``), and the page.

Request bodies: JSON (``Content-Type: application/json``) or a form (urlencoded or multipart, as
``libretranslatepy`` and HTML forms send them; a repeated ``q`` is a list), as LibreTranslate
reads them. A missing ``q`` is a 400 ("Invalid request: missing q parameter"; an empty ``q`` is
translated as a blank line is, ""), JSON that is not
an object a 400 ("Invalid JSON format").

* ``POST /translate`` — ``q`` (a string, or a list of strings), ``source`` (``models.Languages``:
  ``zh``, ``zh-Hans``, ``zh-Hant`` (converted to Simplified), ``auto``; default ``auto``),
  ``target`` (``en``), ``format`` (``text``: each line of a ``q`` is a sentence, the lines of one
  ``q`` one document, lines kept; ``html``: the markup kept, its text nodes translated, ``markup.py``),
  ``alternatives`` (N: up to N other translations of each ``q`` from the n-best list, in
  ``"alternatives"``; [] from a context model, which has none; at most the beam − 1),
  ``api_key``, and doctrans's ``model`` (``models.py``) → ``{"translatedText": …[,
  "alternatives": […]][, "detectedLanguage": {"confidence", "language"}]}`` (``source: auto``:
  the text is translated from the model's source language whatever ``/detect`` finds, and
  ``detectedLanguage`` says what it found; for a list, one per ``q``).
* ``POST /detect`` — ``q`` → ``[{"confidence", "language"}, …]`` (``Languages.detect``).
* ``GET /languages`` → ``[{"code", "name", "targets"}, …]``; ``GET /frontend/settings`` →
  LibreTranslate's front-end settings (``charLimit``, ``apiKeys``, ``keyRequired``,
  ``filesTranslation``, ``supportedFilesFormat``, ``language``) and ``models`` (the page's list).
* ``POST /translate_file`` — multipart ``file`` (``.txt``, ``.srt``, ``.vtt``, ``.ass``,
  ``.ssa``), ``source``, ``target``, ``api_key``[, ``model``, ``progress`` (a token the page polls
  ``GET /progress/TOKEN`` with), ``bilingual`` (1: the answer also has ``"bilingual"``: per cue or
  line [source, translation])] → ``{"translatedFileUrl": URL}``, the file translated as
  ``doctrans translate`` translates it (``files.py``), kept in the bounded file store;
  ``GET /download_file/NAME`` sends it (as an attachment named ``STEM.TARGET.SUFFIX``).
* ``GET /progress/TOKEN`` → ``{"state": queued | translating | done | failed | unknown, "lines",
  "lines_ahead", "elapsed_s", "rate"}`` (``rate``: lines per second of the server's recent
  translate calls: the page's estimate of the time left; a file is translated in one call, so
  there is no finer progress to report).
* ``GET /`` — the page, ``GET /static/…`` its files (``static/``: no build step, no network).
"""
from __future__ import annotations

import json
import re
import time
import urllib.parse
from pathlib import Path

from fastapi import FastAPI, Request, Response
from fastapi.responses import FileResponse, JSONResponse
from starlette.concurrency import run_in_threadpool
from starlette.staticfiles import StaticFiles

from doctrans.serve.server import ApiError, Server, no_bom
from doctrans.serve.batcher import Progress
from doctrans.serve.files import SUFFIXES, safe_name, translate_upload
from doctrans.serve.markup import split_html

STATIC = Path(__file__).resolve().parent / "static"
LIBRE_FIELDS = {"q", "source", "target", "format", "api_key", "alternatives", "model"}
FILE_FIELDS = {"file", "source", "target", "api_key", "model", "progress", "bilingual"}
_TOKEN = re.compile(r"^[A-Za-z0-9_-]{8,64}$")
MAX_PROGRESS = 256                  # progress records kept (the latest)
MEDIA = {".vtt": "text/vtt; charset=utf-8", ".srt": "application/x-subrip; charset=utf-8"}


async def body_of(request: Request) -> dict:
    """The request's fields: a form's (a field given several times: a list) or a JSON object's (also
    when a body sent as a urlencoded form is a JSON object: curl -d without a Content-Type)."""
    ctype = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if ctype == "multipart/form-data":
        form = await request.form()
        return {k: (v if len(v) > 1 else v[0]) for k in form.keys() for v in [form.getlist(k)]}
    raw = await request.body()
    if ctype == "application/x-www-form-urlencoded" and raw.lstrip().startswith(b"{"):
        ctype = "application/json"          # `curl -d '{"q": …}'` without -H (curl says urlencoded)
    if ctype == "application/x-www-form-urlencoded":
        # parsed here, not by Starlette's form parser, which reads bytes that are not %-escaped as
        # Latin-1: `curl -d 'q=他来了'` sends UTF-8 as is (LibreTranslate reads it as UTF-8)
        try:
            pairs = urllib.parse.parse_qsl(raw.decode("utf-8"), keep_blank_values=True, errors="strict")
        except UnicodeDecodeError as e:
            raise ApiError(400, f"Invalid request: the form body is not UTF-8 ({e})") from None
        fields: dict = {}
        for k, v in pairs:
            fields.setdefault(k, []).append(v)
        return {k: (v if len(v) > 1 else v[0]) for k, v in fields.items()}
    if not raw.strip():
        return {}
    try:
        data = json.loads(raw)
    except ValueError:
        raise ApiError(400, "Invalid JSON format") from None
    if not isinstance(data, dict):
        raise ApiError(400, "Invalid JSON format: expected an object")
    return data


def _field(data: dict, name: str, default=None):
    v = data.get(name, default)
    if isinstance(v, list) and name != "q":
        v = v[0] if v else default
    return v


def _count(data: dict, name: str) -> int:
    v = _field(data, name, 0)
    try:
        n = int(v or 0)
    except (TypeError, ValueError):
        raise ApiError(400, f"Invalid request: {name} must be a whole number, got {v!r}") from None
    if n < 0:
        raise ApiError(400, f"Invalid request: {name} must be ≥ 0, got {n}")
    return n


def _languages(srv: Server, data: dict) -> str:
    """The ``to_simplified`` script of the request's source (400 for a pair this server lacks)."""
    src, tgt = str(_field(data, "source", "auto") or "auto"), str(_field(data, "target", "") or "")
    langs = srv.languages
    script = langs.script(src)
    if script is None:
        raise ApiError(400, f"source language {src!r} is not supported: this model translates "
                            f"{langs.source} to {langs.target} (GET /languages)")
    if tgt and not langs.takes_target(tgt):
        raise ApiError(400, f"target language {tgt!r} is not supported: this model translates "
                            f"{langs.source} to {langs.target} (GET /languages)")
    return script


def translate_texts(srv: Server, data: dict) -> dict:
    """``POST /translate``'s answer for the request fields ``data`` (module doc)."""
    from doctrans.data.encoding import to_simplified

    q = data.get("q")
    if q is None:                       # ("" is translated as "", as a blank line is)
        raise ApiError(400, "Invalid request: missing q parameter")
    texts = [q] if isinstance(q, str) else q
    if not isinstance(texts, list) or not all(isinstance(t, str) for t in texts):
        raise ApiError(400, "Invalid request: q must be a string or a list of strings")
    script = _languages(srv, data)
    fmt = str(_field(data, "format", "text") or "text")
    if fmt not in ("text", "html"):
        raise ApiError(400, f"format {fmt!r} is not supported: text or html")
    alternatives = _count(data, "alternatives")
    model = srv.model(_field(data, "model"))
    if fmt == "html":
        pages = [split_html(t) for t in texts]
        docs = [p.units for p in pages]
    else:
        docs = [[no_bom(x.rstrip("\r")) for x in t.split("\n")] for t in texts]
    docs = [to_simplified(d, "<request>", script)[0] for d in docs]
    lines = [x for d in docs for x in d]
    ids = [str(k) for k, d in enumerate(docs) for _ in d]
    n = 0
    if alternatives and model.scores:
        n = min(alternatives + 1, model.translator.cfg.search.beam)
    out = srv.run(lines, ids, model, n=n)
    best = [h[0][0] if h else "" for h in out] if n else out
    alts: list[list[str]] = []
    k = 0
    joined = []
    for d, t in zip(docs, texts):
        mine, hyps = best[k:k + len(d)], out[k:k + len(d)]
        k += len(d)
        joined.append(pages[len(joined)].render(mine) if fmt == "html" else "\n".join(mine))
        if alternatives:
            others: list[str] = []
            for r in range(1, n):
                rank = [h[r][0] if len(h) > r else (h[0][0] if h else "") for h in hyps]
                alt = pages[len(joined) - 1].render(rank) if fmt == "html" else "\n".join(rank)
                if alt != joined[-1] and alt not in others:
                    others.append(alt)
            alts.append(others[:alternatives])
    single = isinstance(q, str)
    answer: dict = {"translatedText": joined[0] if single else joined}
    if alternatives:
        answer["alternatives"] = alts[0] if single else alts
    if str(_field(data, "source", "") or "").lower() == "auto":
        found = [srv.languages.detect(t)[0] for t in texts]
        answer["detectedLanguage"] = found[0] if single else found
    return answer


def add_libre_routes(app: FastAPI, srv: Server) -> None:
    """LibreTranslate's endpoints, the progress endpoint and the page on ``app`` (module doc)."""

    def answer(path: str, data: dict, known: set, body: dict | list) -> JSONResponse:
        resp = JSONResponse(body)
        names = srv.ignored(path, resp, [k for k in data if k not in known])
        if names and isinstance(body, dict):
            resp = JSONResponse({**body, "ignored": names}, headers={"Doctrans-Ignored-Fields": ", ".join(names)})
        return resp

    @app.post("/translate")
    async def libre(request: Request):
        data = await body_of(request)
        srv.check(request, _field(data, "api_key"))
        return answer("/translate", data, LIBRE_FIELDS, await run_in_threadpool(translate_texts, srv, data))

    @app.post("/detect")
    async def detect(request: Request):
        data = await body_of(request)
        srv.check(request, _field(data, "api_key"))
        q = data.get("q")
        if not q:
            raise ApiError(400, "Invalid request: missing q parameter")
        text = "\n".join(q) if isinstance(q, list) else str(q)
        return answer("/detect", data, {"q", "api_key"}, srv.languages.detect(text))

    @app.get("/languages")
    def languages():
        return srv.languages.listing()

    @app.get("/frontend/settings")
    def settings():
        langs = srv.languages
        return {"charLimit": srv.limits.max_chars, "frontendTimeout": 500, "apiKeys": srv.access.required,
                "keyRequired": srv.access.required, "suggestions": False, "filesTranslation": True,
                "supportedFilesFormat": list(SUFFIXES),
                "language": {"source": {"code": langs.source, "name": langs.listing()[0]["name"]},
                             "target": {"code": langs.target, "name": langs.listing()[-1]["name"]}},
                "maxLines": srv.limits.max_lines, "maxFileLines": srv.limits.max_file_lines,
                "maxBodyBytes": srv.limits.max_body_bytes, "models": srv.models.describe()}

    def translate_file_now(data: dict, name: str, raw: bytes, progress: Progress | None) -> dict:
        script = _languages(srv, data)
        model = srv.model(_field(data, "model"))

        def run(lines: list[str], doc_ids: list[str]) -> list[str]:
            if progress is not None:
                progress.lines = len(lines)
            return srv.run(lines, doc_ids, model, max_lines=srv.limits.max_file_lines, progress=progress)

        try:
            done = translate_upload(name, raw, run, script, model.target_language)
        except ValueError as e:
            raise ApiError(400, f"Invalid request: {e}") from None
        stem, suffix = Path(safe_name(name)).stem, Path(name).suffix.lower()
        stored = srv.store.put(f"{stem}.{srv.languages.target}{suffix}", done.text)
        result = {"stored": stored, "cues": done.cues}
        if str(_field(data, "bilingual", "") or "") in ("1", "true", "yes"):
            result["bilingual"] = done.pairs
        return result

    @app.post("/translate_file")
    async def translate_file(request: Request):
        data = await body_of(request)
        srv.check(request, _field(data, "api_key"))
        upload = data.get("file")
        if upload is None or isinstance(upload, (str, list)):
            raise ApiError(400, "Invalid request: missing file parameter")
        name = upload.filename or ""
        if not name:
            raise ApiError(400, "Invalid request: empty file")
        if Path(name).suffix.lower() not in SUFFIXES:
            raise ApiError(400, f"Invalid request: file format not supported ({Path(name).suffix or 'no suffix'}; "
                                f"one of {', '.join(SUFFIXES)})")
        raw = await upload.read()
        token = str(_field(data, "progress", "") or "")
        progress = None
        if _TOKEN.match(token):
            progress = srv.progress[token] = Progress(0)
            while len(srv.progress) > MAX_PROGRESS:
                srv.progress.pop(next(iter(srv.progress)))
        result = await run_in_threadpool(translate_file_now, data, name, raw, progress)
        body = {"translatedFileUrl": str(request.url_for("download_file", name=result["stored"]))}
        if "bilingual" in result:
            body["bilingual"] = result["bilingual"]
        return answer("/translate_file", {k: v for k, v in data.items()}, FILE_FIELDS, body)

    @app.get("/download_file/{name}", name="download_file")
    def download_file(name: str):
        path = srv.store.path(name)
        if path is None:
            raise ApiError(404, f"no translated file {name!r} here (files are kept {srv.limits.file_age_s:.0f} s, "
                                f"the latest {srv.limits.max_files})")
        shown = name.split(".", 1)[1]
        return FileResponse(path, filename=shown, media_type=MEDIA.get(path.suffix.lower(), "text/plain; charset=utf-8"))

    @app.get("/progress/{token}")
    def progress(token: str):
        p = srv.progress.get(token)
        if p is None:
            return {"state": "unknown"}
        now = time.time()
        return {"state": p.state, "lines": p.lines, "lines_ahead": srv.batcher.lines_ahead(p) if p.state == "queued" else 0,
                "elapsed_s": round((p.finished or now) - (p.started or now), 1) if p.started else 0.0,
                "rate": round(srv.batcher.rate, 1)}

    @app.get("/", include_in_schema=False)
    def page():
        return FileResponse(STATIC / "index.html", media_type="text/html; charset=utf-8")

    app.mount("/static", StaticFiles(directory=STATIC), name="static")
