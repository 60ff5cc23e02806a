"""What the endpoints of ``doctrans serve`` share (``app.py``, ``libre.py``): the limits, the API
error, the request bodies, and ``Server`` — the models, the worker, the keys, the file store and the
counters, with ``run`` (a request's lines translated under the limits) and ``check`` (keys and the
rate limit)."""
from __future__ import annotations

import logging
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass, field

from fastapi import Request, Response
from pydantic import BaseModel, ConfigDict, Field

from doctrans.serve.access import Access, Refused
from doctrans.serve.batcher import Batcher, Progress, Unavailable
from doctrans.serve.files import FileStore
from doctrans.serve.limits import Limits  # noqa: F401 (serve.server.Limits: the request limits)
from doctrans.serve.models import Languages, ModelRegistry, ServedModel, UnknownModel

log = logging.getLogger(__name__)


class ApiError(Exception):
    def __init__(self, status: int, message: str, headers: dict | None = None):
        super().__init__(message)
        self.status, self.message, self.headers = status, message, headers or {}


class _Body(BaseModel):
    model_config = ConfigDict(extra="allow")        # fields not declared are kept, to be reported


class OnmtItem(_Body):
    src: str
    id: int | str | None = None
    n_best: int | None = None


class DocumentRequest(_Body):
    lines: list[str] = Field(...)
    model: int | str | None = None
    api_key: str | None = None


def no_bom(s: str) -> str:
    """A line without its leading byte order mark (not text: the file readers drop it too)."""
    return s[1:] if s.startswith("\ufeff") else s


def one_line(s: str) -> str:
    s = no_bom(s)
    return " ".join(no_bom(x) for x in s.splitlines()) if ("\n" in s or "\r" in s) else s


@dataclass
class Server:
    """What the endpoints share: the models, the worker, the limits, languages, keys, the file
    store, the counters. ``run`` translates a request's lines (limits checked); ``check``
    applies the keys and the rate limit; ``ignored`` reports the fields no endpoint reads."""

    models: ModelRegistry
    limits: Limits
    languages: Languages
    access: Access
    store: FileStore
    batcher: Batcher
    stats: dict = field(default_factory=lambda: {"requests": 0, "sentences": 0, "started": time.time()})
    progress: OrderedDict[str, Progress] = field(default_factory=OrderedDict)   # the page's uploads, by token
    _reported: set = field(default_factory=set)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def model(self, ref) -> ServedModel:
        """The model ``ref`` names, loaded (400 for one this server does not hold)."""
        try:
            return self.models.get(ref)
        except UnknownModel as e:
            raise ApiError(400, str(e)) from None

    def check(self, request: Request, key: str | None) -> None:
        """403 / 429 unless the keys and the rate limit let the request through (``access.py``);
        the key: ``key`` (the body's api_key), else ``?api_key=``, else Authorization: Bearer."""
        if not key:
            key = request.query_params.get("api_key")
        if not key:
            auth = request.headers.get("authorization", "")
            key = auth[7:].strip() if auth.lower().startswith("bearer ") else None
        try:
            self.access.check(key, request.client.host if request.client else "")
        except Refused as e:
            raise ApiError(e.status, e.message, {"Retry-After": str(e.retry_after)} if e.retry_after else None) from None

    def run(self, lines: list[str], doc_ids: list[str], model: ServedModel, n: int = 0,
            max_lines: int | None = None, progress: Progress | None = None) -> list:
        """The translations of ``lines`` by ``model`` (``n`` > 0: per line its n best (text,
        score)); 413 over the limits (``max_lines``: another line limit, for files)."""
        limit = max_lines or self.limits.max_lines
        if len(lines) > limit:
            what = "sentences in one file" if max_lines else "lines in one request"
            raise ApiError(413, f"{len(lines)} {what}: at most {limit}")
        chars = sum(len(x) for x in lines)
        if max_lines is None and chars > self.limits.max_chars:
            raise ApiError(413, f"{chars} characters in one request: at most {self.limits.max_chars}")
        if not lines:
            return []
        run = (lambda xs, ids: model.nbest(xs, ids, n)) if n else model.translate
        try:
            out = self.batcher.submit(lines, doc_ids, run=run, key=(model.name, n), progress=progress)
        except ValueError as e:
            raise ApiError(422, str(e)) from None
        except Unavailable as e:
            raise ApiError(503, str(e)) from None
        with self._lock:
            self.stats["requests"] += 1
            self.stats["sentences"] += sum(1 for x in lines if x.strip())
        return out

    def ignored(self, path: str, response: Response, names) -> list[str]:
        """``names`` (fields no endpoint reads), sorted; set in the answer's header and logged
        the first time each is seen."""
        names = sorted(set(names))
        if names:
            response.headers["Doctrans-Ignored-Fields"] = ", ".join(names)
            with self._lock:
                new = [n for n in names if (path, n) not in self._reported]
                self._reported.update((path, n) for n in new)
            if new:
                log.info("POST %s: ignored the request field(s) %s (not read by this server)", path, ", ".join(new))
        return names


def extra_fields(*bodies: BaseModel) -> list[str]:
    return [k for b in bodies for k in (b.model_extra or {})]
