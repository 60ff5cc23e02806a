"""``doctrans configs``: the shipped YAML configs (``pipelines/**.yaml``, each with the first line
of its leading comment) and the config keys with their defaults and comments, read from the
config dataclasses (``doctrans/config.py``; the backbone and context-model configs of
``models/build.py``; the DP generator's ``doctrans/dp/config.py``). The comments are the
``# …`` comments written beside (and under) each field in the dataclass source.
"""
from __future__ import annotations

import dataclasses
import inspect
import io
import os
import re
import textwrap
import tokenize
from pathlib import Path

import doctrans

PIPELINES_ENV = "DOCTRANS_PIPELINES"


def pipelines_candidates() -> list[Path]:
    """Where the shipped configs are looked for, in order: ``$DOCTRANS_PIPELINES``, the checkout the
    package is installed from (``doctrans/../pipelines``: an editable install or ``bin/doctrans``),
    then ``./pipelines``."""
    found = [Path(os.environ[PIPELINES_ENV])] if os.environ.get(PIPELINES_ENV) else []
    return found + [Path(doctrans.__file__).resolve().parent.parent / "pipelines", Path.cwd() / "pipelines"]


def find_pipelines() -> Path:
    """The first directory of ``pipelines_candidates`` that exists. Raises FileNotFoundError (one
    line, naming every place looked) when none does."""
    tried = pipelines_candidates()
    for d in tried:
        if d.is_dir():
            return d
    raise FileNotFoundError(f"no pipelines/ directory (looked in {', '.join(str(d) for d in tried)}): "
                            f"run from a doctrans checkout or set {PIPELINES_ENV}=DIR")


# the end of a sentence: a period before a word, a parenthesis or the end; not "et al.", "e.g.", "eq." …
_SENTENCE_END = re.compile(r"(?<!\bal)(?<!\be\.g)(?<!\bi\.e)(?<!\bvs)(?<!\beq)(?<!\bcf)(?<!\bch)(?<!\bFig)"
                           r"\.(?=\s+[^\W\d_(\"]|\s+[(\"]|\s*$)")


def description(text: str) -> str:
    """The first sentence of a YAML file's leading comment: its first paragraph (up to an empty
    ``#`` line or an indented example line) joined into one line, cut after the first sentence
    (a full stop before a capital or the end, or a colon that ends the paragraph)."""
    lines = []
    for line in text.splitlines():
        if not line.startswith("#"):
            if line.strip() or lines:
                break
            continue
        body = line[1:]
        if not body.strip() or (lines and body.startswith("   ")):
            break
        lines.append(body.strip())
    para = " ".join(lines)
    m = _SENTENCE_END.search(para)
    return para[:m.end()] if m else para


def shipped_configs(root: Path) -> list[tuple[str, str]]:
    """(path, ``description``: the first sentence of its comment) of every ``root/**/*.yaml``,
    sorted; paths relative to the working directory when under it, else absolute."""
    out = []
    for p in sorted(root.rglob("*.yaml")):
        first = description(p.read_text(encoding="utf-8"))
        out.append((os.path.relpath(p) if p.resolve().is_relative_to(Path.cwd().resolve()) else str(p), first))
    return out


def render_configs(rows: list[tuple[str, str]], width: int = 110) -> str:
    """``doctrans configs``' listing: one config per entry, its description wrapped under its
    own column (never cut)."""
    col = max((len(p) for p, _ in rows), default=0)
    out = []
    for path, note in rows:
        wrapped = textwrap.wrap(note, max(40, width - col - 4)) or [""]
        out.append(f"  {path:<{col}}  {wrapped[0]}".rstrip())
        out += [f"  {'':<{col}}  {w}" for w in wrapped[1:]]
    return "".join(f"{x}\n" for x in out)


def field_comments(cls: type) -> dict[str, str]:
    """The ``# …`` comment of each field of dataclass ``cls`` in its source: the one on the
    field's line plus any comment-only lines right under it (continuations)."""
    try:
        src = inspect.getsource(cls)
    except (OSError, TypeError):
        return {}
    names = {f.name for f in dataclasses.fields(cls)}
    comments: dict[str, list[str]] = {}
    current, line_start = None, True
    for tok in tokenize.generate_tokens(io.StringIO(src).readline):
        if tok.type == tokenize.NAME and line_start and tok.start[1] > 0:
            current = tok.string if tok.string in names else None
        elif tok.type == tokenize.COMMENT and current:
            comments.setdefault(current, []).append(tok.string.lstrip("#").strip())
        line_start = tok.type in (tokenize.NEWLINE, tokenize.NL, tokenize.INDENT, tokenize.DEDENT)
        if tok.type == tokenize.NEWLINE and tok.start[1] == 0:
            current = None
    return {k: " ".join(v) for k, v in comments.items()}


def _default(f: dataclasses.Field):
    if f.default is not dataclasses.MISSING:
        return f.default
    if f.default_factory is not dataclasses.MISSING:
        return f.default_factory()
    return None


def _show(value) -> str:
    if dataclasses.is_dataclass(value):
        return "{…}"
    if isinstance(value, tuple):
        value = list(value)
    if isinstance(value, str):
        return repr(value) if value == "" else value
    if value is None:
        return "null"
    if isinstance(value, bool):
        return str(value).lower()
    return str(value)


def render_dataclass(cls: type, title: str, defaults: dict | None = None) -> str:
    """``title`` and one line per field: ``key: default   comment``; ``defaults`` overrides shown
    defaults (the DP trainer's)."""
    comments = field_comments(cls)
    lines = [title]
    for f in dataclasses.fields(cls):
        value = (defaults or {}).get(f.name, _default(f))
        if dataclasses.is_dataclass(value):
            continue                                    # a nested section: listed on its own
        key = f"  {f.name}: {_show(value)}"
        note = comments.get(f.name, "")
        lines.append(f"{key:<40} {note}".rstrip() if note else key)
    return "\n".join(lines) + "\n"


def sections() -> dict[str, list[tuple[type, str, dict | None]]]:
    """Section name → [(dataclass, heading, shown defaults)] of every YAML section."""
    from doctrans import config
    from doctrans.dp import config as dp_config
    from doctrans.dp.models import DP_MODELS
    from doctrans.models.build import BACKBONES, CONTEXT_MODELS, RECONSTRUCTOR

    return {
        "top": [(config.ExperimentConfig, "top level (doctrans train CONFIG.yaml; plus the sections below)", None)],
        "data": [(config.DataConfig, "data:", None)],
        "model": [(cls, f"model:  (model.backbone: {name})", None) for name, (cls, _) in BACKBONES.items()]
                 + [(RECONSTRUCTOR[0], "model.reconstructor:  (absent = none; docs/models.md §2.9–2.10)", None)],
        "context": [(cls, f"context:  (context.type: {name}; absent = sentence-level)", None)
                    for name, (cls, _) in CONTEXT_MODELS.items()],
        "train": [(config.TrainConfig, "train:", None)],
        "decode": [(config.DecodeConfig, "decode:  (dev BLEU during training)", None)],
        "dp": [(dp_config.DPGenConfig, "DP generator (task: dp_generator, pipelines/dp/), top level", None),
               (dp_config.DPDataConfig, "DP generator data:", None),
               *[(cls, f"DP generator model:  (model.name: {name})", None) for name, (cls, _) in DP_MODELS.items()],
               (config.TrainConfig, "DP generator train:  (defaults: the DP trainer's)", dp_config.DP_TRAIN_DEFAULTS)],
    }


def render_keys(section: str | None = None) -> str:
    """The keys of ``section`` (one of ``sections()``), or of every section. Raises KeyError."""
    table = sections()
    if section is not None and section not in table:
        raise KeyError(section)
    names = [section] if section else list(table)
    return "\n".join(render_dataclass(cls, title, defaults) for n in names for cls, title, defaults in table[n])
