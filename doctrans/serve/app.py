"""The HTTP JSON API of ``doctrans serve``: one loaded model behind FastAPI.

Endpoints (request and response bodies are JSON):

* ``GET /health`` → ``{"status": "ok", "model", "source", "target", "reads_documents",
  "limits": {…}, "requests", "sentences", "batches", "queued_requests", "uptime_s"}``
  (``queued_requests``: submitted, not answered yet).
* ``POST /translator/translate`` — OpenNMT-py's REST server shape: ``[{"src": "…", "id": 100}, …]``
  → ``[[{"src", "tgt", "n_best": 1, "pred_score": null}, …]]``, one result per item, in order;
  each ``src`` an independent sentence (``id``, OpenNMT's model id, is accepted and ignored: one
  model is served).
* ``POST /translate`` — LibreTranslate's shape: ``{"q": "…" | ["…", …], "source": "zh" | "auto",
  "target": "en", "format": "text"}`` → ``{"translatedText": "…" | ["…", …]}``; a ``q`` of
  several lines is one document (a context model reads its previous lines), lines kept. A
  ``source`` / ``target`` other than the model's languages is a 400.
* ``POST /translate/document`` — ``{"lines": ["…", …]}`` → ``{"lines": ["…", …]}``: one document,
  one output line per input line ("" for a blank one), translated with context by a context
  model.

Text: a byte order mark (U+FEFF) at the start of a line is not text and is dropped, as the
file readers of ``doctrans translate`` drop it. Fields a request may carry but this server does not
read (e.g. LibreTranslate's ``alternatives``, OpenNMT-py's ``ref``) do not fail the request — real
clients send them, and refusing them would break those clients — but neither are they dropped
silently: the answer names them, sorted, in its ``Doctrans-Ignored-Fields`` header
(comma-separated) and, when the answer is a JSON object, in ``"ignored": […]``; the first request
with each such field is logged. Fields the endpoints declare are not reported (``id`` of
OpenNMT-py, LibreTranslate's ``api_key``: accepted, no key is needed).

Concurrency (``Batcher``): one worker thread owns the model; each request's lines are queued,
and the worker translates everything waiting (up to ``max_batch_lines``) in one
``translator.translate`` call, each request its own documents (its ``doc_ids`` prefixed by the
request), so concurrent requests fill the beam-search batches together and each gets exactly its
own translations; a request whose batch failed is retried alone, so an error reaches only its
own request. The endpoints run in FastAPI's thread pool and wait for their result, so the event
loop keeps accepting; no request is dropped. Limits (``Limits``): at most
``max_lines`` lines/sentences and ``max_chars`` characters per request (413), and
``max_body_bytes`` of request body (413; ``RequestGuard``: a ``Content-Length`` over the limit
before the body is read, a chunked body — no ``Content-Length`` — counted as it arrives and refused
as soon as the count passes the limit, the rest never read; either 413 closes the connection).

Shutting down (``drain``, called by ``run.serve`` on SIGTERM / SIGINT once uvicorn stops
accepting): requests already queued are still translated until the drain time has passed; then
every request not answered — queued, or in the batch being translated — gets a 503, as does a
request that arrives while draining (on a connection still open, or whose body was still being
read); the 503 carries ``Retry-After`` (``RETRY_AFTER_S`` seconds).

Every error is a JSON body ``{"error": message, "status": code}`` with that status code: 400 bad
languages, 404 unknown path, 405 wrong method, 413 too large, 422 malformed JSON or fields, 500
a failed translation (logged with its traceback), 503 shutting down.
"""
from __future__ import annotations

import logging
import queue
import threading
import time
from concurrent.futures import Future
from dataclasses import asdict, dataclass

from fastapi import FastAPI, Request, Response
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field
from starlette.exceptions import HTTPException as StarletteHTTPException

from doctrans.serve.limits import Limits

log = logging.getLogger(__name__)

RETRY_AFTER_S = 5         # Retry-After of a 503 (the server is shutting down): about a restart's time
UNAVAILABLE = "the server is shutting down: not translated, retry later"


class Unavailable(Exception):
    """The request was not translated because the server is shutting down (a 503)."""


class Batcher:
    """The model's one worker thread: ``submit(lines, doc_ids)`` queues a request and waits for
    its translations; the worker takes every request waiting (at least one, up to
    ``max_batch_lines`` lines) and translates them in one ``translator.translate`` call, each
    request's documents kept apart. A failed joint call is retried request by request, so each
    gets its own result or exception. ``drain(timeout)`` starts the shutdown: new requests are
    refused (``Unavailable``), the queued ones are still translated, and those not answered
    ``timeout`` seconds later get ``Unavailable``; ``close()`` stops the worker after the queued
    requests, waiting for it until the drain deadline (60 s without a drain); a translation still
    running then is abandoned (its thread is a daemon, its results are dropped)."""

    def __init__(self, translator, max_batch_lines: int = Limits.max_batch_lines):
        self.translator, self.max_batch_lines = translator, max_batch_lines
        self.calls = 0                              # translate calls made (batches)
        self.draining = False                       # drain() was called: new requests are refused
        self._queue: queue.Queue = queue.Queue()
        self._pending: set[Future] = set()          # submitted, not answered (queued or translating)
        self._lock = threading.Lock()               # guards _pending, draining, _expired and answering
        self._expired = False                       # the drain time has passed
        self._timer: threading.Timer | None = None
        self._deadline: float | None = None         # time.monotonic() at which drain() refuses the rest
        self._thread = threading.Thread(target=self._work, name="doctrans-translate", daemon=True)
        self._thread.start()

    @property
    def translating(self) -> bool:
        """The worker thread still runs (after ``close``: a translation it could not finish)."""
        return self._thread.is_alive()

    @property
    def queued_requests(self) -> int:
        """Requests submitted and not answered yet (waiting or being translated)."""
        return len(self._pending)

    def submit(self, lines: list[str], doc_ids: list[str]) -> list[str]:
        """The translations of ``lines``; raises what the translator raised, or Unavailable when
        the server is draining (at once, or at the drain deadline)."""
        fut: Future = Future()
        with self._lock:
            if self.draining:
                raise Unavailable(UNAVAILABLE)
            self._pending.add(fut)
            self._queue.put((lines, doc_ids, fut))
        return fut.result()

    def drain(self, timeout: float) -> None:
        """Refuse new requests; answer those not answered within ``timeout`` seconds with
        Unavailable. The worker stops once the queue is empty."""
        with self._lock:
            if self.draining:
                return
            self.draining = True
            self._queue.put(None)
            self._deadline = time.monotonic() + max(0.0, timeout)
        self._timer = threading.Timer(max(0.0, timeout), self._expire)
        self._timer.daemon = True
        self._timer.start()

    def close(self, timeout: float | None = None) -> None:
        """Stop the worker after the queued requests; wait for it at most ``timeout`` seconds
        (default: until the drain deadline, 60 s without a drain)."""
        with self._lock:
            if not self.draining:
                self.draining = True
                self._queue.put(None)
        if timeout is None:
            timeout = 60.0 if self._deadline is None else max(0.0, self._deadline - time.monotonic())
        self._thread.join(timeout=timeout)
        if self._timer is not None and not self._pending:
            self._timer.cancel()

    def _expire(self) -> None:
        with self._lock:
            self._expired = True
            for fut in self._pending:
                fut.set_exception(Unavailable(UNAVAILABLE))
            self._pending.clear()

    def _answer(self, fut: Future, result=None, error: BaseException | None = None) -> None:
        with self._lock:
            if fut not in self._pending:                # refused at the drain deadline meanwhile
                return
            self._pending.discard(fut)
            if error is not None:
                fut.set_exception(error)
            else:
                fut.set_result(result)

    def _translate(self, batch: list) -> None:
        lines = [x for b in batch for x in b[0]]
        ids = [f"{k}:{d}" for k, b in enumerate(batch) for d in b[1]]
        try:
            self.calls += 1
            out = iter(self.translator.translate(lines, doc_ids=ids))
        except Exception as e:                      # noqa: BLE001 — handed to the requests
            if len(batch) > 1:
                for b in batch:
                    self._translate([b])
            else:
                self._answer(batch[0][2], error=e)
            return
        for b in batch:
            self._answer(b[2], [next(out) for _ in b[0]])

    def _work(self) -> None:
        while True:
            item = self._queue.get()
            if item is None:
                return
            batch, size, stop = [item], len(item[0]), False
            while size < self.max_batch_lines:
                try:
                    nxt = self._queue.get_nowait()
                except queue.Empty:
                    break
                if nxt is None:
                    stop = True
                    break
                batch.append(nxt)
                size += len(nxt[0])
            with self._lock:
                batch = [b for b in batch if b[2] in self._pending]     # not refused at the deadline
            if batch and not self._expired:
                self._translate(batch)
            if stop:
                return


class ApiError(Exception):
    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status, self.message = status, message


class _Body(BaseModel):
    model_config = ConfigDict(extra="allow")        # fields not declared are kept, to be reported


class OnmtItem(_Body):
    src: str
    id: int | str | None = None


class LibreRequest(_Body):
    q: str | list[str]
    source: str = "auto"
    target: str = ""
    format: str = "text"
    api_key: str | None = None


class DocumentRequest(_Body):
    lines: list[str] = Field(...)


def _text(s: str) -> str:
    """A line without its leading byte order mark (not text: the file readers drop it too)."""
    return s[1:] if s.startswith("\ufeff") else s


def _one_line(s: str) -> str:
    s = _text(s)
    return " ".join(_text(x) for x in s.splitlines()) if ("\n" in s or "\r" in s) else s


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


def create_app(translator, limits: Limits = Limits(), source: str = "zh", target: str = "en",
               name: str = "") -> FastAPI:
    """The FastAPI application serving ``translator`` (an ``inference.translate.Translator``;
    anything with ``translate(lines, doc_ids=…)`` and ``reads_documents``) under ``limits``;
    ``source`` / ``target``: the model's languages (LibreTranslate's codes); ``name``: shown by
    /health. See the module doc."""
    app = FastAPI(title="doctrans", description="Document-level zh→en translation", version="1")
    batcher = Batcher(translator, limits.max_batch_lines)
    app.state.batcher = batcher
    app.router.on_shutdown.append(batcher.close)
    app.add_middleware(RequestGuard, max_body_bytes=limits.max_body_bytes, draining=lambda: batcher.draining)
    reported: set[tuple[str, str]] = set()

    def ignored(path: str, response: Response, *bodies: BaseModel) -> list[str]:
        """The fields of ``bodies`` no endpoint declares, sorted; set in the answer's header and
        logged the first time each is seen."""
        names = sorted({k for b in bodies for k in (b.model_extra or {})})
        if names:
            response.headers["Doctrans-Ignored-Fields"] = ", ".join(names)
            new = [n for n in names if (path, n) not in reported]
            if new:
                reported.update((path, n) for n in new)
                log.info("POST %s: ignored the request field(s) %s (not read by this server)", path, ", ".join(new))
        return names

    stats = {"requests": 0, "sentences": 0, "started": time.time()}
    count_lock = threading.Lock()

    def run(lines: list[str], doc_ids: list[str]) -> list[str]:
        if len(lines) > limits.max_lines:
            raise ApiError(413, f"{len(lines)} lines in one request: at most {limits.max_lines}")
        chars = sum(len(x) for x in lines)
        if chars > limits.max_chars:
            raise ApiError(413, f"{chars} characters in one request: at most {limits.max_chars}")
        if not lines:
            return []
        try:
            out = batcher.submit(lines, doc_ids)
        except ValueError as e:
            raise ApiError(422, str(e)) from None
        except Unavailable as e:
            raise ApiError(503, str(e)) from None
        with count_lock:
            stats["requests"] += 1
            stats["sentences"] += sum(1 for x in lines if x.strip())
        return out

    @app.exception_handler(ApiError)
    async def api_error(request: Request, exc: ApiError):
        return _error(exc.status, exc.message)

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
        log.exception("%s %s failed", request.method, request.url.path)
        return _error(500, f"translation failed: {type(exc).__name__}: {exc}")

    @app.get("/health")
    def health():
        return {"status": "ok", "model": name, "source": source, "target": target,
                "reads_documents": bool(translator.reads_documents), "limits": asdict(limits),
                "requests": stats["requests"], "sentences": stats["sentences"], "batches": batcher.calls,
                "queued_requests": batcher.queued_requests,
                "uptime_s": round(time.time() - stats["started"], 1)}

    @app.post("/translator/translate")
    def onmt(items: list[OnmtItem], response: Response):
        srcs = [_one_line(x.src) for x in items]
        out = run(srcs, [str(k) for k in range(len(srcs))])
        ignored("/translator/translate", response, *items)
        return [[{"src": s, "tgt": t, "n_best": 1, "pred_score": None} for s, t in zip(srcs, out)]]

    @app.post("/translate")
    def libre(req: LibreRequest, response: Response):
        if req.source not in ("auto", source):
            raise ApiError(400, f"source language {req.source!r} is not supported: this model translates "
                                f"{source} to {target}")
        if req.target and req.target != target:
            raise ApiError(400, f"target language {req.target!r} is not supported: this model translates "
                                f"{source} to {target}")
        if req.format not in ("text",):
            raise ApiError(400, f"format {req.format!r} is not supported: text")
        texts = [req.q] if isinstance(req.q, str) else req.q
        docs = [t.split("\n") for t in texts]
        lines = [_text(x.rstrip("\r")) for d in docs for x in d]
        out = iter(run(lines, [str(k) for k, d in enumerate(docs) for _ in d]))
        joined = ["\n".join(next(out) for _ in d) for d in docs]
        answer = {"translatedText": joined[0] if isinstance(req.q, str) else joined}
        return {**answer, "ignored": names} if (names := ignored("/translate", response, req)) else answer

    @app.post("/translate/document")
    def document(req: DocumentRequest, response: Response):
        lines = [_one_line(x) for x in req.lines]
        answer = {"lines": run(lines, ["0"] * len(lines))}
        return {**answer, "ignored": names} if (names := ignored("/translate/document", response, req)) else answer

    def drain(timeout: float) -> None:
        """Start the shutdown (see the module doc): called once uvicorn stops accepting."""
        log.info("shutting down: %d request(s) in flight, answered or refused within %.0f s",
                 batcher.queued_requests, timeout)
        batcher.drain(timeout)

    app.state.drain = drain

    return app


def _error(status: int, message: str, close: bool = False, **extra) -> JSONResponse:
    """The JSON error answer; a 503 carries Retry-After; ``close``: the connection is closed after
    it (the request body was not read whole)."""
    headers = {"Retry-After": str(RETRY_AFTER_S)} if status == 503 else {}
    if close:
        headers["Connection"] = "close"
    return JSONResponse({"error": message, "status": status, **extra}, status_code=status, headers=headers)
