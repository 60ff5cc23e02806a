"""``Limits``: the request limits of ``doctrans serve`` (``app.py``), each declared once
(``utils.settings.setting``: the ``--max-lines`` / ``--max-chars`` / ``--max-body-bytes`` options are
made from these fields). A module of its own, so the command line reads it without FastAPI."""
from __future__ import annotations

from dataclasses import dataclass

from doctrans.utils.settings import setting


@dataclass(frozen=True)
class Limits:
    max_lines: int = setting(256, "Lines (sentences) per request; more is a 413 error.", min=1)
    max_chars: int = setting(20_000, "Characters per request, all lines together; more is a 413 error.", min=1)
    max_body_bytes: int = setting(1_000_000, "Request body bytes; more is a 413 error before the body is read.",
                                  min=1)
    max_batch_lines: int = 512        # lines of queued requests translated together by the worker
    max_file_lines: int = setting(10_000, "Sentences of an uploaded file (/translate_file, the page); more is a "
                                          "413 error.", min=1)
    max_files: int = 100              # translated files kept for download
    file_age_s: float = 3600.0        # seconds a translated file is kept
