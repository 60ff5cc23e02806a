"""Small helpers shared by every stage."""
from __future__ import annotations

import os

QUIET_ENV = "DOCTRANS_QUIET"        # set by `doctrans -q`; inherited by worker processes


def set_quiet(quiet: bool) -> None:
    """``doctrans -q/--quiet``: progress bars off in this process and the processes it starts."""
    if quiet:
        os.environ[QUIET_ENV] = "1"
    else:
        os.environ.pop(QUIET_ENV, None)


def bars_off() -> bool:
    """True under ``doctrans -q`` (``DOCTRANS_QUIET=1``): every tqdm bar passes ``disable=`` this."""
    return os.environ.get(QUIET_ENV, "") not in ("", "0")
