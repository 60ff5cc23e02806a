"""Starting the server: load the model once, build the app (``app.create_app``), run uvicorn
(one process; on SIGTERM or SIGINT uvicorn stops accepting, finishes the requests in flight and
returns: the command exits 0)."""
from __future__ import annotations

import logging
import signal
import threading

from doctrans.serve import require
from doctrans.serve.app import Limits

log = logging.getLogger(__name__)


def serve(translator, host: str = "127.0.0.1", port: int = 5000, limits: Limits = Limits(), source: str = "zh",
          target: str = "en", name: str = "", log_level: str | None = None) -> None:
    """Serve ``translator`` at http://HOST:PORT until SIGTERM / SIGINT; uvicorn logs at
    ``log_level`` (default: the root logger's level, so ``doctrans -q serve`` logs no requests).
    Raises MissingServeExtra without FastAPI / uvicorn, OSError when the server did not start
    (e.g. the port is in use)."""
    if log_level is None:
        log_level = logging.getLevelName(logging.getLogger().getEffectiveLevel()).lower()
    uvicorn = require("uvicorn")
    require("fastapi")
    from doctrans.serve.app import create_app

    app = create_app(translator, limits, source, target, name)
    log.info("serving %s at http://%s:%d (POST /translate, /translator/translate, /translate/document; "
             "GET /health)", name, host, port)
    config = uvicorn.Config(app, host=host, port=port, log_level=log_level, workers=1, timeout_graceful_shutdown=30)
    server = uvicorn.Server(config)
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
    log.info("server stopped")
