"""``doctrans serve``: an HTTP JSON API over one loaded model (FastAPI app, run by uvicorn).

The optional extra ``pip install 'doctrans[serve]'`` provides FastAPI and uvicorn; without it
``create_app`` and ``serve`` raise ``MissingServeExtra`` (an ImportError) saying so. See
``app.py`` for the endpoints, limits and errors.
"""
from __future__ import annotations

# Seconds a SIGTERM leaves the requests in flight before the rest are refused (serve --drain-timeout;
# below the supervisors' kill delays: docker stop waits 10 s, Kubernetes 30 s, before SIGKILL).
DRAIN_TIMEOUT_S = 8.0


class MissingServeExtra(ImportError):
    """FastAPI or uvicorn is not installed: ``pip install 'doctrans[serve]'``."""


def require(module: str):
    """Import ``module`` (fastapi, uvicorn) or raise MissingServeExtra naming the extra."""
    import importlib

    try:
        return importlib.import_module(module)
    except ImportError as e:
        raise MissingServeExtra(f"doctrans serve needs {module} (not installed: {e}); install the server extra: "
                                f"pip install 'doctrans[serve]'") from None


def create_app(*args, **kwargs):
    """``app.create_app`` (FastAPI application over a translator)."""
    require("fastapi")
    from doctrans.serve.app import create_app as _create

    return _create(*args, **kwargs)
