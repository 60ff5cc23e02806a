"""The HTTP API of ``doctrans serve``: the models (``models.py``) behind FastAPI.

Endpoints (JSON unless said otherwise; LibreTranslate's and the page's are ``libre.py``'s):

* ``GET /`` — the page (``static/``): paste text or drop a file, choose the model, the
  translation beside the source, the translated file to download.
* ``GET /health`` → ``{"status": "ok", "model", "models", "source", "target", "reads_documents",
  "limits": {…}, "requests", "sentences", "batches", "queued_requests", "uptime_s"}``
  (``queued_requests``: submitted, not answered yet).
* ``POST /translator/translate`` — OpenNMT-py's REST server: ``[{"src": "…", "id": 100,
  "n_best": 1}, …]`` → a list per rank (``n_best`` lists) of one result per item, in order:
  ``{"src", "tgt", "n_best", "pred_score"}``; each ``src`` an independent sentence. The first
  item's ``id`` names the model (``models.py``: a ``model_id`` of ``/translator/models``, a name
  or a kind; none: the default) and its ``n_best`` (default 1, at most the beam) the hypotheses
  per sentence; ``pred_score`` is the search's normalised score (log p / length^lenpen) of a
  sentence model, null for a context model (which has no n-best: ``n_best`` > 1 is a 400).
* ``GET /translator/models`` — the served models: ``[{"model_id", "name", "kind", "loaded",
  "default", "scores", "checkpoint"[, "beam", "engine"]}, …]``.
* ``POST /translate/document`` — ``{"lines": ["…", …][, "model"]}`` → ``{"lines": ["…", …]}``:
  one document, one output line per input line ("" for a blank one), translated with context by
  a context model.
* LibreTranslate's ``/translate``, ``/detect``, ``/languages``, ``/translate_file``,
  ``/download_file/NAME``, ``/frontend/settings``, and the page's ``/progress/TOKEN``: ``libre.py``.

Text: a byte order mark (U+FEFF) at the start of a line is not text and is dropped, as the
file readers of ``doctrans translate`` drop it. Fields a request may carry but this server does not
read (e.g. OpenNMT-py's ``ref``) do not fail the request — real clients send them, and refusing
them would break those clients — but neither are they dropped silently: the answer names them,
sorted, in its ``Doctrans-Ignored-Fields`` header (comma-separated) and, when the answer is a
JSON object, in ``"ignored": […]``; the first request with each such field is logged.

Concurrency (``batcher.Batcher``): one worker thread owns the models; each request's lines are
queued with its model (and n-best size), and the worker translates the waiting requests of one
model together (up to ``max_batch_lines``) in one call, each request its own documents, so
concurrent requests fill the beam-search batches together and each gets exactly its own
translations; an error reaches only its own request. The endpoints wait for their result in
FastAPI's thread pool, so the event loop keeps accepting; no request is dropped. Limits
(``Limits``): at most ``max_lines`` lines/sentences and ``max_chars`` characters per request
(413), ``max_file_lines`` sentences in an uploaded file (413), and ``max_body_bytes`` of request
body (413; ``RequestGuard``: a ``Content-Length`` over the limit before the body is read, a
chunked body — no ``Content-Length`` — counted as it arrives and refused as soon as the count
passes the limit, the rest never read; either 413 closes the connection). Keys and request
rates: ``access.py`` (403, 429).

Shutting down (``drain``, called by ``run.serve`` on SIGTERM / SIGINT once uvicorn stops
accepting): requests already queued are still translated until the drain time has passed; then
every request not answered — queued, or in the batch being translated — gets a 503, as does a
request that arrives while draining (on a connection still open, or whose body was still being
read); the 503 carries ``Retry-After`` (``RETRY_AFTER_S`` seconds).

Every error is a JSON body ``{"error": message, "status": code}`` with that status code (the
``error`` field is LibreTranslate's error shape): 400 bad request (languages, format, model,
missing field of a LibreTranslate endpoint), 403 no valid API key, 404 unknown path, 405 wrong
method, 413 too large, 422 malformed JSON or fields (OpenNMT-py and document endpoints), 429 over
the request rate (with Retry-After), 500 a failed translation (logged with its traceback), 503
shutting down.
"""
from __future__ import annotations

import logging
import time
from dataclasses import asdict

from fastapi import FastAPI, Request, Response
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from doctrans.serve.access import Access
from doctrans.serve.batcher import UNAVAILABLE, Batcher, Unavailable
from doctrans.serve.files import FileStore
from doctrans.serve.models import Languages, ModelRegistry
from doctrans.serve.server import ApiError, DocumentRequest, Limits, OnmtItem, Server, extra_fields, one_line

__all__ = ["ApiError", "Batcher", "Limits", "RequestGuard", "Server", "Unavailable", "create_app"]

log = logging.getLogger(__name__)

RETRY_AFTER_S = 5         # Retry-After of a 503 (the server is shutting down): about a restart's time


class _Refused(Exception):
    """Raised into the endpoint by ``RequestGuard``'s receive once it has refused the request."""


class RequestGuard:
    """ASGI middleware in front of the endpoints: refuses a request body over ``max_body_bytes``
    with a 413 — at once when its ``Content-Length`` says so, else (a chunked body) as soon as the
    bytes received pass the limit, the rest never read — and, once ``draining()`` is true, a new
    request, or one whose body is still arriving, with a 503. Answers sent before the body was
    read whole close the connection (``Connection: close``), so the client stops sending."""

    def __init__(self, app, max_body_bytes: int, draining):
        self.app, self.max_body_bytes, self.draining = app, max_body_bytes, draining

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        if self.draining():
            return await _error(503, UNAVAILABLE, close=True)(scope, receive, send)
        size = dict(scope["headers"]).get(b"content-length", b"").decode("latin-1")
        if size.isdigit() and int(size) > self.max_body_bytes:
            return await _error(413, f"request body of {size} bytes: at most {self.max_body_bytes}",
                                close=True)(scope, receive, send)
        state = {"bytes": 0, "done": False, "refused": None, "started": False}

        async def counted_receive():
            if state["refused"] is not None:
                raise _Refused
            if not state["done"] and self.draining():
                state["refused"] = _error(503, UNAVAILABLE, close=True)
                raise _Refused
            message = await receive()
            if message["type"] == "http.request" and not state["done"]:
                state["bytes"] += len(message.get("body", b""))
                state["done"] = not message.get("more_body", False)
                if state["bytes"] > self.max_body_bytes:
                    state["refused"] = _error(413, f"request body over {self.max_body_bytes} bytes ("
                                                   f"{state['bytes']} received, the rest not read)", close=True)
                    raise _Refused
            return message

        async def guarded_send(message):
            if state["refused"] is None:            # the endpoint's answer to a refused request is dropped
                state["started"] |= message["type"] == "http.response.start"
                await send(message)

        try:
            await self.app(scope, counted_receive, guarded_send)
        except Exception:
            if state["refused"] is None:
                raise
        if state["refused"] is not None and not state["started"]:
            await state["refused"](scope, receive, send)


def create_app(models, limits: Limits = Limits(), source: str = "zh", target: str = "en", name: str = "",
               access: Access | None = None) -> FastAPI:
    """The FastAPI application serving ``models`` (a ``models.ModelRegistry``, or one
    ``inference.translate.Translator`` — anything with ``translate(lines, doc_ids=…)``,
    ``reads_documents`` and ``cfg`` — called ``name``) under ``limits``; ``source`` / ``target``:
    the models' languages (LibreTranslate's codes); ``access``: keys and rate limit (default:
    none). See the module doc."""
    from doctrans.serve.libre import add_libre_routes

    registry = models if isinstance(models, ModelRegistry) else ModelRegistry.of(models, name)
    app = FastAPI(title="doctrans", description="Document-level zh→en translation", version="1")
    batcher = Batcher(max_batch_lines=limits.max_batch_lines)
    srv = Server(registry, limits, Languages(source, target), access or Access(), FileStore(limits.max_files,
                 limits.file_age_s), batcher)
    app.state.batcher, app.state.server = batcher, srv
    app.router.on_shutdown.append(batcher.close)
    app.router.on_shutdown.append(srv.store.close)
    app.add_middleware(RequestGuard, max_body_bytes=limits.max_body_bytes, draining=lambda: batcher.draining)

    @app.exception_handler(ApiError)
    async def api_error(request: Request, exc: ApiError):
        return _error(exc.status, exc.message, headers=exc.headers)

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, exc: StarletteHTTPException):
        return _error(exc.status_code, str(exc.detail))

    @app.exception_handler(RequestValidationError)
    async def invalid(request: Request, exc: RequestValidationError):
        first = exc.errors()[0] if exc.errors() else {}
        where = ".".join(str(x) for x in first.get("loc", ()))
        return _error(422, f"malformed request: {where}: {first.get('msg', 'invalid')}" if where else
                      "malformed request", details=[{k: e.get(k) for k in ("loc", "msg", "type")} for e in exc.errors()])

    @app.exception_handler(Exception)
    async def failed(request: Request, exc: Exception):
        if not isinstance(exc, _Refused):           # (the guard answers a refused body itself)
            log.exception("%s %s failed", request.method, request.url.path)
        return _error(500, f"translation failed: {type(exc).__name__}: {exc}")

    @app.get("/health")
    def health():
        default = registry.default
        return {"status": "ok", "model": default.name, "models": [m.name for m in registry.models],
                "source": source, "target": target, "reads_documents": default.kind == "document",
                "limits": asdict(limits), "requests": srv.stats["requests"], "sentences": srv.stats["sentences"],
                "batches": batcher.calls, "queued_requests": batcher.queued_requests,
                "uptime_s": round(time.time() - srv.stats["started"], 1)}

    @app.get("/translator/models")
    def onmt_models():
        return registry.describe()

    @app.post("/translator/translate")
    def onmt(items: list[OnmtItem], request: Request, response: Response):
        srv.check(request, None)
        first = items[0] if items else OnmtItem(src="")
        model = srv.model(first.id)
        n = first.n_best if first.n_best is not None else 1
        if n < 1:
            raise ApiError(400, f"n_best must be at least 1, got {n}")
        if n > 1 and not model.scores:
            raise ApiError(400, f"n_best {n}: model {model.name} reads documents and has no n-best lists "
                                "(/translator/models: a model with \"scores\": true has)")
        beam = model.translator.cfg.search.beam
        if n > beam:
            raise ApiError(400, f"n_best {n} exceeds the beam size {beam} of model {model.name}")
        srcs = [one_line(x.src) for x in items]
        ids = [str(k) for k in range(len(srcs))]
        srv.ignored("/translator/translate", response, extra_fields(*items))
        if not model.scores:
            out = srv.run(srcs, ids, model)
            return [[{"src": s, "tgt": t, "n_best": 1, "pred_score": None} for s, t in zip(srcs, out)]]
        lists = srv.run(srcs, ids, model, n=n)
        ranks = []
        for r in range(n):
            rank = []
            for s, hyps in zip(srcs, lists):
                t, score = hyps[min(r, len(hyps) - 1)] if hyps else ("", None)
                rank.append({"src": s, "tgt": t, "n_best": n, "pred_score": score})
            ranks.append(rank)
        return ranks

    @app.post("/translate/document")
    def document(req: DocumentRequest, request: Request, response: Response):
        srv.check(request, req.api_key)
        model = srv.model(req.model)
        lines = [one_line(x) for x in req.lines]
        answer = {"lines": srv.run(lines, ["0"] * len(lines), model)}
        names = srv.ignored("/translate/document", response, extra_fields(req))
        return {**answer, "ignored": names} if names else answer

    add_libre_routes(app, srv)

    def drain(timeout: float) -> None:
        """Start the shutdown (see the module doc): called once uvicorn stops accepting."""
        log.info("shutting down: %d request(s) in flight, answered or refused within %.0f s",
                 batcher.queued_requests, timeout)
        batcher.drain(timeout)

    app.state.drain = drain

    return app


def _error(status: int, message: str, close: bool = False, headers: dict | None = None, **extra) -> JSONResponse:
    """The JSON error answer; a 503 carries Retry-After; ``close``: the connection is closed after
    it (the request body was not read whole)."""
    headers = dict(headers or {})
    if status == 503:
        headers["Retry-After"] = str(RETRY_AFTER_S)
    if close:
        headers["Connection"] = "close"
    return JSONResponse({"error": message, "status": status, **extra}, status_code=status, headers=headers)
