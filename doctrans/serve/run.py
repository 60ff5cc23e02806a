"""Starting the server: load the model once, build the app (``app.create_app``), run uvicorn
(one process). On SIGTERM or SIGINT uvicorn stops accepting, the app drains (``app.py``: what is
queued is still translated for ``drain_timeout`` seconds, then every request not answered gets a
JSON 503 with Retry-After), the connections close and ``serve`` returns: the command exits 0,
about ``drain_timeout`` seconds after the signal at most (a translation still running then is
abandoned: the process ends with ``os._exit(0)``)."""
from __future__ import annotations

import logging
import os
import signal
import sys
import threading

from doctrans.serve import DRAIN_TIMEOUT_S, require
from doctrans.serve.app import Limits

log = logging.getLogger(__name__)


def is_loopback(host: str) -> bool:
    """Whether ``host`` (an address or a name) is this machine's loopback (127.0.0.0/8, ::1, localhost)."""
    import ipaddress

    if host.lower() in ("localhost", "localhost."):
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def serve(translator, host: str = "127.0.0.1", port: int = 5000, limits: Limits = Limits(), source: str = "zh",
          target: str = "en", name: str = "", log_level: str | None = None,
          drain_timeout: float = DRAIN_TIMEOUT_S, access=None) -> None:
    """Serve ``translator`` (a Translator, or a ``models.ModelRegistry``) at http://HOST:PORT
    until SIGTERM / SIGINT, then drain for at most ``drain_timeout`` seconds (module doc);
    ``access``: keys and rate limit (``access.Access``; a warning when HOST is not a loopback
    address and there are no keys: anyone who reaches it can use the server); uvicorn logs at
    ``log_level`` (default: the root logger's level, so ``doctrans -q serve`` logs no requests).
    Raises MissingServeExtra without FastAPI / uvicorn, OSError when the server did not start
    (e.g. the port is in use)."""
    if log_level is None:
        log_level = logging.getLevelName(logging.getLogger().getEffectiveLevel()).lower()
    uvicorn = require("uvicorn")
    require("fastapi")
    from doctrans.serve.app import create_app

    app = create_app(translator, limits, source, target, name, access=access)
    models = app.state.server.models.models
    log.info("serving %s at http://%s:%d (the page: GET /; LibreTranslate: POST /translate, /translate_file, "
             "/detect; OpenNMT-py: POST /translator/translate; POST /translate/document; GET /health)",
             ", ".join(m.name + ("" if m.loaded else " (loaded on first use)") for m in models), host, port)
    if not is_loopback(host) and (access is None or not access.required):
        log.warning("serving on %s, which is not a loopback address, without --api-keys: anyone who can reach "
                    "this address can translate with this machine (give --api-keys FILE, or --host 127.0.0.1)", host)

    class DrainingServer(uvicorn.Server):
        async def shutdown(self, sockets=None):         # uvicorn's graceful shutdown, the app draining
            app.state.drain(drain_timeout)
            await super().shutdown(sockets)

    # Every request is answered by the drain deadline; uvicorn's own limit (after which it cancels
    # what is still running) only catches a connection stuck otherwise.
    config = uvicorn.Config(app, host=host, port=port, log_level=log_level, workers=1,
                            timeout_graceful_shutdown=int(drain_timeout) + 5)
    server = DrainingServer(config)
    # uvicorn handles SIGTERM / SIGINT while it runs (graceful shutdown) and then raises the signal
    # again for the handler that was there before; ours ends the process normally (exit code 0)
    # and also stops a server that is still starting.
    main = threading.current_thread() is threading.main_thread()
    previous = signal.signal(signal.SIGTERM, lambda signum, frame: setattr(server, "should_exit", True)) if main else None
    try:
        server.run()
    finally:
        if main:
            signal.signal(signal.SIGTERM, previous)
    if not server.started:
        raise OSError(f"the server did not start on {host}:{port} (port in use?)")
    if main and app.state.batcher.translating:
        # Every request was answered (its 503 sent) but a translation still runs in the worker
        # thread: torch cannot be interrupted, and the interpreter's exit around a thread inside
        # it aborts ("terminate called without an active exception", exit code -6). The process
        # ends now instead, its logs flushed.
        log.info("server stopped (the translation still running was abandoned)")
        logging.shutdown()
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(0)
    log.info("server stopped")
