"""Error messages a terminal can show: one line, bounded length.

A message built from hostile input (a YAML alias bomb, a 300 MB value repeated in a
``ConfigError``) must not become a 300 MB error: ``one_line`` keeps the first line's head and
says how much was cut, and ``short_repr`` bounds a value quoted in a message.
"""
from __future__ import annotations

import reprlib

MAX_MESSAGE = 2000           # characters of an error message the CLI prints
MAX_VALUE = 200              # characters of a value quoted inside a message


def one_line(message: object, limit: int = MAX_MESSAGE) -> str:
    """``str(message)`` with its lines joined by " | " (blank ones dropped), cut to ``limit``
    characters with "… [N more characters]" when longer."""
    text = str(message)
    if len(text) > 4 * limit:                    # never split a huge string into lines in full
        text, extra = text[:4 * limit], len(text) - 4 * limit
    else:
        extra = 0
    text = " | ".join(line.strip() for line in text.splitlines() if line.strip())
    if len(text) > limit:
        extra += len(text) - limit
        text = text[:limit]
    return f"{text}… [{extra:,} more characters]" if extra else text


_REPR = reprlib.Repr()
_REPR.maxstring = MAX_VALUE
_REPR.maxother = MAX_VALUE
_REPR.maxlist = _REPR.maxtuple = _REPR.maxdict = _REPR.maxset = 10
_REPR.maxlevel = 3


def short_repr(value: object) -> str:
    """``repr(value)`` bounded (``reprlib``: long strings and containers elided with "...")."""
    return _REPR.repr(value)
