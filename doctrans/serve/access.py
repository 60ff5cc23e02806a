"""API keys and request rate limits of ``doctrans serve`` (``--api-keys FILE``, ``--req-limit N``).

Keys file (``read_keys``): one key a line, optionally followed by that key's limit in requests
per minute (``KEY`` or ``KEY 120``); blank lines and ``#`` comments are skipped. When a keys
file is given, every translating request (``/translate``, ``/translate_file``, ``/detect``,
``/translator/translate``, ``/translate/document``) must carry one of its keys — LibreTranslate's
``api_key`` field (JSON or form), or ``?api_key=`` or ``Authorization: Bearer KEY`` — else it
gets a 403. The pages, ``/health``, ``/languages``, ``/frontend/settings``, ``/translator/models``
and downloads need none (a download's name is a random 128-bit id).

Rate limit (``RateLimit``): at most N requests in any 60 seconds per key (the key's own limit,
else ``--req-limit``), or per client address for requests without a key; past it a 429 with
``Retry-After`` (the seconds until the oldest request of the window leaves it). ``--req-limit
0`` (the default) and no per-key limit: no limit.
"""
from __future__ import annotations

import collections
import math
import threading
import time
from pathlib import Path

WINDOW_S = 60.0


def read_keys(path: str | Path) -> dict[str, int]:
    """The keys of ``path`` → their requests-per-minute limit (0: the server's). Raises
    ValueError naming the file and line for a malformed line or a key given twice, OSError for
    an unreadable file."""
    keys: dict[str, int] = {}
    for n, line in enumerate(Path(path).read_text(encoding="utf-8").splitlines(), 1):
        fields = line.split("#", 1)[0].split()
        if not fields:
            continue
        if len(fields) > 2 or (len(fields) == 2 and not (fields[1].isdigit() and int(fields[1]) > 0)):
            raise ValueError(f"{path}:{n}: expected 'KEY' or 'KEY REQUESTS_PER_MINUTE' (a positive integer), "
                             f"got {line.strip()!r}")
        if fields[0] in keys:
            raise ValueError(f"{path}:{n}: the key {fields[0][:4]}… is given twice")
        keys[fields[0]] = int(fields[1]) if len(fields) == 2 else 0
    if not keys:
        raise ValueError(f"{path}: no key in the keys file (one key a line; an empty file would refuse every request)")
    return keys


class Refused(Exception):
    """A request refused by the keys or the rate limit: ``status`` 403 or 429, ``retry_after``."""

    def __init__(self, status: int, message: str, retry_after: int | None = None):
        super().__init__(message)
        self.status, self.message, self.retry_after = status, message, retry_after


class Access:
    """The keys (None: no keys file) and the rate limit (module doc). ``check(key, client)``
    raises Refused or counts the request."""

    def __init__(self, keys: dict[str, int] | None = None, req_limit: int = 0):
        self.keys, self.req_limit = keys, req_limit
        self._seen: dict[str, collections.deque] = {}
        self._lock = threading.Lock()

    @property
    def required(self) -> bool:
        return self.keys is not None

    def check(self, key: str | None, client: str) -> None:
        if self.keys is not None:
            if not key:
                raise Refused(403, "this server needs an API key: send api_key (or Authorization: Bearer KEY)")
            if key not in self.keys:
                raise Refused(403, "Invalid API key")
        limit = (self.keys or {}).get(key or "", 0) or self.req_limit
        if limit <= 0:
            return
        who = f"key:{key}" if key else f"addr:{client}"
        now = time.monotonic()
        with self._lock:
            seen = self._seen.setdefault(who, collections.deque())
            while seen and now - seen[0] >= WINDOW_S:
                seen.popleft()
            if len(seen) >= limit:
                wait = max(1, math.ceil(WINDOW_S - (now - seen[0])))
                raise Refused(429, f"Slowdown: {limit} per 1 minute", retry_after=wait)
            seen.append(now)
            if len(self._seen) > 10_000:                 # forget idle clients
                for k in [k for k, d in self._seen.items() if not d or now - d[-1] >= WINDOW_S]:
                    del self._seen[k]
