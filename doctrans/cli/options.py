"""What the command modules share: the numeric option types and ``SectionedCommand``, a command
whose ``--help`` lists its options in named sections (``doctrans translate``)."""
from __future__ import annotations

import dataclasses

import click

# Numeric option types: every count, size and rate is range-checked by click (a one-line usage
# error naming the option); 0 is accepted only where the help says what it means.
POSITIVE = click.IntRange(min=1)
NON_NEGATIVE = click.IntRange(min=0)


class AutoOrCount(click.ParamType):
    """``auto`` or an integer ≥ 0 (``translate --history-chunk``) → "auto" or the int."""

    name = "auto|N"

    def convert(self, value, param, ctx):
        if value == "auto":
            return value
        text = str(value)
        if not (text.isascii() and text.isdigit()):    # "-1", "x", "2.5"
            self.fail(f"{value!r} is neither 'auto' nor an integer ≥ 0", param, ctx)
        return int(text)


AUTO_OR_COUNT = AutoOrCount()


class CheckpointParam(click.ParamType):
    """A checkpoint file (or, ``dir_okay``, an exported CTranslate2 directory), or the name of a
    shipped model (``doctrans models``) → its path (the shipped file's checksum verified), as
    ``translate -c`` and ``export -c`` take them. A usage error names the option when it is neither."""

    name = "CKPT|NAME"

    def __init__(self, dir_okay: bool = False):
        self.dir_okay = dir_okay

    def convert(self, value, param, ctx):
        from pathlib import Path

        from doctrans.runtime.shipped import resolve

        path = resolve(str(value))
        if not (Path(path).is_file() or (self.dir_okay and Path(path).is_dir())):
            self.fail(f"{value}: no such checkpoint file, nor a shipped model's name (`doctrans models` lists them)",
                      param, ctx)
        return path


CHECKPOINT = CheckpointParam()


class FloatList(click.ParamType):
    """Comma-separated numbers (``--ensemble-weights 0.3,0.7``) → a tuple of floats."""

    name = "W,W,…"

    def convert(self, value, param, ctx):
        if isinstance(value, tuple):
            return value
        try:
            return tuple(float(x) for x in str(value).split(",")) if str(value) else ()
        except ValueError:
            self.fail(f"{value!r}: comma-separated numbers, e.g. 0.3,0.7", param, ctx)


# ``utils.settings.setting(type=…)`` names of the command-line types
NAMED_TYPES = {"auto|N": AUTO_OR_COUNT, "file": click.Path(dir_okay=False), "checkpoint": CHECKPOINT,
               "floats": FloatList()}


def _empty(value) -> bool:
    return value is None or value is dataclasses.MISSING or value in ("", ()) or value is False


def setting_option(f: dataclasses.Field, **override):
    """The click option of a dataclass field declared with ``utils.settings.setting``: its names
    (``flags``, else ``--field-name``; the parameter is the field's name), type (a choice, a
    range-checked number, a named type, a flag for a bool), default (the field's; None for a field
    without one or a choice whose default is no choice: the command then leaves the field at
    its default), ``show_default`` (unless the default is empty), metavar, repeatable, and help.
    ``override``: click keywords replacing those (e.g. ``help`` where a command words it for
    itself, a ``type`` that converts at parse time); never a default."""
    meta = f.metadata["setting"]
    default = f.default
    kind = meta["type"] if meta["type"] is not None else type(default)
    kw: dict = {"help": meta["help"]}
    if meta["choices"]:
        kw["type"] = click.Choice(list(meta["choices"]))
        if default not in meta["choices"]:
            default = None
    elif isinstance(kind, str):
        kw["type"] = NAMED_TYPES[kind]
    elif kind is bool:
        kw["is_flag"] = True
    elif meta["min"] is not None or meta["max"] is not None:
        rng = click.IntRange if kind is int else click.FloatRange
        kw["type"] = rng(min=meta["min"], max=meta["max"], **({"min_open": True} if meta["min_open"] else {}))
    elif kind in (int, float):
        kw["type"] = kind
    if meta["metavar"]:
        kw["metavar"] = meta["metavar"]
    if meta["multiple"]:
        kw["multiple"] = True
    kw["default"] = None if default is dataclasses.MISSING else default
    flags = meta["flags"] or (f"--{f.name.replace('_', '-')}",)
    if not _empty(kw["default"]) and (not kw.get("is_flag") or any("/" in x for x in flags)):
        kw["show_default"] = True               # (a flag: only an on/off pair, --protect/--no-protect)
    if "default" in override:
        raise TypeError(f"--{f.name}: a setting's default is its field's")
    kw.update(override)
    return click.option(*flags, f.name, **kw)


def _options(fields: list[dataclasses.Field], override: dict[str, dict] | None):
    def deco(fn):
        for f in reversed(fields):
            fn = setting_option(f, **(override or {}).get(f.name, {}))(fn)
        return fn
    return deco


def config_options(cls: type, names: tuple[str, ...] | None = None, override: dict[str, dict] | None = None):
    """A decorator adding the options of dataclass ``cls``'s fields ``names`` (default: every field
    declared with ``setting``), in that order, each made by ``setting_option`` (``override``:
    field name → its click keywords to replace, e.g. ``{"threads": {"help": …}}``)."""
    from doctrans.utils.settings import settings_of

    fields = settings_of(cls)
    return _options([fields[n] for n in (names if names is not None else tuple(fields))], override)


def translate_options(*names: str, override: dict[str, dict] | None = None):
    """``config_options`` for settings of a ``TranslateConfig`` named across its groups
    (``inference.config``: model, search, input/output, DP)."""
    from doctrans.inference.config import FIELD_GROUP, GROUPS
    from doctrans.utils.settings import settings_of

    return _options([settings_of(GROUPS[FIELD_GROUP[n]])[n] for n in names], override)


ENSEMBLE = ("ensemble", "ensemble_weights", "ensemble_mode")


def ensemble_options(f):
    """--ensemble / --ensemble-weights / --ensemble-mode (``models/ensemble.py``; the fields of
    ``inference.config.ModelOptions``): -c decoded or scored together with more models as one
    (``translate``, ``score cxmi``, ``score contrastive``, ``serve``). Parse them with
    ``ensemble_settings``."""
    return translate_options(*ENSEMBLE)(f)


def ensemble_settings(ensemble: tuple[str, ...], weights: tuple[float, ...], mode: str) -> dict:
    """The ensemble options → ``TranslateConfig``'s fields (``ensemble``, ``ensemble_weights``,
    ``ensemble_mode``; {} without --ensemble). A usage error naming --ensemble-weights when they
    are not one per model."""
    if not ensemble:
        return {}
    w = tuple(weights or ())
    if w and len(w) != 1 + len(ensemble):
        raise click.BadParameter(f"{len(w)} weights for {1 + len(ensemble)} models (-c and each --ensemble)",
                                 param_hint="--ensemble-weights")
    return dict(ensemble=tuple(ensemble), ensemble_weights=w, ensemble_mode=mode)


def given(kw: dict) -> dict:
    """A command's option values → the settings they give: those left None (an option without a
    default of its own) are dropped, so their fields keep their defaults."""
    return {k: v for k, v in kw.items() if v is not None}


class SectionedCommand(click.Command):
    """A click command whose ``--help`` shows its options in sections, e.g. ``Input options:``,
    ``Search options:``, in the order given, then ``Other options:`` (``--help``).

    ``sections``: (title, parameter names) pairs, passed through ``click.command(cls=
    SectionedCommand, sections=…)``; every option of the command is in exactly one section.
    Raises TypeError at definition time for an option in no section, in two, or a name that is
    no option of the command, so a new option cannot silently go missing from the help."""

    def __init__(self, *args, sections: tuple[tuple[str, tuple[str, ...]], ...] = (), **kwargs):
        super().__init__(*args, **kwargs)
        options = [p.name for p in self.params if isinstance(p, click.Option)]
        listed = [n for _, names in sections for n in names]
        problems = ([f"{n}: in no section" for n in options if n not in listed]
                    + [f"{n}: no such option" for n in listed if n not in options]
                    + [f"{n}: in several sections" for n in sorted(set(listed)) if listed.count(n) > 1])
        if problems:
            raise TypeError(f"command {self.name!r}, option sections: " + "; ".join(problems))
        self.sections = tuple((title, tuple(names)) for title, names in sections)

    def format_options(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        params = {p.name: p for p in self.get_params(ctx)}
        listed = {n for _, names in self.sections for n in names}
        groups = [(title, [params[n] for n in names]) for title, names in self.sections]
        groups.append(("Other", [p for n, p in params.items() if n not in listed]))
        for title, members in groups:
            rows = [r for r in (p.get_help_record(ctx) for p in members) if r is not None]
            if rows:
                with formatter.section(f"{title} options"):
                    formatter.write_dl(rows)
