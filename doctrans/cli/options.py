"""What the command modules share: the numeric option types and ``SectionedCommand``, a command
whose ``--help`` lists its options in named sections (``doctrans translate``)."""
from __future__ import annotations

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


def ensemble_options(f):
    """--ensemble / --ensemble-weights / --ensemble-mode (``models/ensemble.py``): -c decoded or
    scored together with more models as one (``translate``, ``score cxmi``, ``score contrastive``,
    ``serve``). Parse them with ``ensemble_settings``."""
    f = click.option("--ensemble-mode", type=click.Choice(["linear", "loglinear"]), default="linear",
                     show_default=True, help="With --ensemble: linear p = Σ w_i p_i (fairseq's ensembles), or "
                                             "loglinear p ∝ Π p_i^w_i.")(f)
    f = click.option("--ensemble-weights", default="", metavar="W,W,…",
                     help="With --ensemble: weights of -c and each --ensemble model, in that order (normalised) "
                          "[default: uniform].")(f)
    return click.option("--ensemble", multiple=True, type=CHECKPOINT,
                        help="With -c, this model too, as one ensemble (repeatable; models of one dataset; native "
                             "engine; models/ensemble.py): e.g. the shipped document model with the shipped sentence "
                             "model, `--ensemble tvsub-transformer-3x3 --ensemble-weights 0.3,0.7` (weights tuned on "
                             "TVsub dev: the sentence model's BLEU, most of the document model's pronouns; "
                             "docs/context.md).")(f)


def ensemble_settings(ensemble: tuple[str, ...], weights: str, mode: str) -> dict:
    """The ensemble options → ``TranslateConfig``'s fields (``ensemble``, ``ensemble_weights``,
    ``ensemble_mode``; {} without --ensemble). A usage error naming --ensemble-weights when they
    are not numbers, or not one per model."""
    if not ensemble:
        return {}
    try:
        w = tuple(float(x) for x in weights.split(",")) if weights else ()
    except ValueError:
        raise click.BadParameter(f"{weights!r}: comma-separated numbers, e.g. 0.3,0.7",
                                 param_hint="--ensemble-weights") from None
    if w and len(w) != 1 + len(ensemble):
        raise click.BadParameter(f"{len(w)} weights for {1 + len(ensemble)} models (-c and each --ensemble)",
                                 param_hint="--ensemble-weights")
    return dict(ensemble=tuple(ensemble), ensemble_weights=w, ensemble_mode=mode)


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
