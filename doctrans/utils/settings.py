"""Settings declared once: a dataclass field with its default and its help (``setting``), from
which the command line's options are made (``cli/options.py``'s ``config_options``, as fairseq's
``gen_parser_from_dataclass`` makes argparse options from its dataclasses) and which the Python
API reads (``default_of``). So a setting's default is written in one place: its field.

The metadata is plain data (no click here: this is the lowest layer): ``help``; ``flags`` (the
option's names, default ``--field-name``); ``type`` (``int`` / ``float`` / ``str``, or the name
of a command-line type: ``"auto|N"``, ``"file"``, ``"checkpoint"``, ``"floats"``); ``choices``;
``min`` / ``max`` / ``min_open`` (a range-checked number); ``metavar``; ``multiple`` (a
repeatable option, a tuple). A field without a default (``required``) still gets an option,
whose default is None."""
from __future__ import annotations

import dataclasses
from typing import Any

MISSING = dataclasses.MISSING


def setting(default: Any = MISSING, help: str = "", *, flags: tuple[str, ...] = (), type: Any = None,
            choices: tuple[str, ...] | None = None, min: float | None = None, max: float | None = None,
            min_open: bool = False, metavar: str | None = None, multiple: bool = False) -> Any:
    """A dataclass field with ``default`` and the metadata an option is made from (module doc).
    ``type`` defaults to the default's own type (int, float, bool → a flag, str). Mutable
    defaults are not accepted (a tuple is the default of a ``multiple`` option)."""
    meta = {"help": help, "flags": tuple(flags), "type": type, "choices": tuple(choices) if choices else None,
            "min": min, "max": max, "min_open": min_open, "metavar": metavar, "multiple": multiple}
    return dataclasses.field(default=default, metadata={"setting": meta})


def settings_of(cls: type) -> dict[str, dataclasses.Field]:
    """Field name → field of every field of dataclass ``cls`` declared with ``setting``."""
    return {f.name: f for f in dataclasses.fields(cls) if "setting" in f.metadata}


def default_of(cls: type, name: str) -> Any:
    """The default of field ``name`` of dataclass ``cls``. Raises KeyError for no such field and
    ValueError for a field without a default."""
    fields = {f.name: f for f in dataclasses.fields(cls)}
    f = fields[name]
    if f.default is not MISSING:
        return f.default
    if f.default_factory is not MISSING:
        return f.default_factory()
    raise ValueError(f"{cls.__name__}.{name} has no default")
