"""Model cards: what a checkpoint is, what it was trained on, how far, how well, with what
config and code — ``MODEL_CARD.md`` beside the weights (issue 50: run and export directories
carried none).

``render_model_card(checkpoint, scores)`` renders one from a checkpoint (a path or the loaded
dict of ``runtime/checkpoint.py``: its ``config``, ``state``, ``vocab``, ``model``, ``prepared``
and ``version``) and optional scores (``{name: value}``, e.g. the last dev evaluation or test
BLEU; a value may be a string with its own unit). ``write_model_card`` writes it atomically.
Written by ``doctrans train`` into the run directory at the end of training (the dev scores of
its last evaluation), by ``doctrans export`` into the exported directory, and usable for shipped
models (``runtime/shipped.py``). The card says only what the checkpoint and the caller know;
the commit is the one of the doctrans checkout that writes the card
(``utils.provenance.git_commit``), named as such.
"""
from __future__ import annotations

import json
import time
from pathlib import Path

import yaml

from doctrans.utils.io import atomic_write_text
from doctrans.utils.provenance import git_commit

CARD = "MODEL_CARD.md"


def _load(checkpoint: str | Path | dict) -> tuple[dict, str]:
    if isinstance(checkpoint, dict):
        return checkpoint, ""
    from doctrans.runtime.checkpoint import load_checkpoint

    return load_checkpoint(checkpoint), str(checkpoint)


def _hours(seconds: float) -> str:
    return f"{seconds / 3600:.2f} h" if seconds >= 3600 else f"{seconds / 60:.1f} min"


def _fmt(v) -> str:
    if isinstance(v, float):
        return f"{v:.4g}" if abs(v) < 1000 else f"{v:,.0f}"
    if isinstance(v, int) and not isinstance(v, bool):
        return f"{v:,}"
    return str(v)


def _data_line(cfg: dict, prepared: str) -> str:
    data = cfg.get("data", {})
    where = prepared or data.get("prepared", "")
    src, tgt = (str(data.get(k, "")).split(".")[-1] for k in ("src_suffix", "tgt_suffix"))
    line = f"{src}→{tgt}, prepared dataset `{where}`" if where else f"{src}→{tgt}"
    meta = Path(where) / "meta.json" if where else None
    if meta is not None and meta.is_file():
        try:
            m = json.loads(meta.read_text(encoding="utf-8"))
            train = m.get("splits", {}).get("train", {})
            parts = [f"{_fmt(train[k])} {k}" for k in ("documents", "sentences") if k in train]
            if parts:
                line += f" ({', '.join(parts)} in train)"
        except (OSError, ValueError):
            pass
    return line


def render_model_card(checkpoint: str | Path | dict, scores: dict | None = None, *, name: str = "",
                      notes: str = "", use: str = "") -> str:
    """The markdown model card of ``checkpoint`` (a path or a loaded checkpoint dict) with
    ``scores`` ({metric: value}, shown as given), free ``notes`` (e.g. known limits) and ``use``
    (the command that translates with it; default: ``doctrans translate -c PATH …``). Raises
    like ``runtime.checkpoint.load_checkpoint`` for a path that is not a checkpoint."""
    ckpt, path = _load(checkpoint)
    cfg = ckpt.get("config") or {}
    state = ckpt.get("state") or {}
    model = cfg.get("model", {})
    ctx = cfg.get("context") or None
    params = sum(int(t.numel()) for t in (ckpt.get("model") or {}).values() if hasattr(t, "numel"))
    what = f"{model.get('backbone', '?')} " + (f"with the {ctx.get('type')} context model (reads documents)"
                                              if isinstance(ctx, dict) else "sentence-level model")
    vocab = ckpt.get("vocab") or {}
    title = name or cfg.get("name") or (Path(path).parent.name if path else "model")
    train = cfg.get("train", {})
    metric = train.get("metric", "")
    best = state.get("best_metric")
    rows = [
        ("what", f"{what}, {params / 1e6:.2f}M parameters (doctrans {ckpt.get('version', '?')}"
                 f"{', kind ' + str(ckpt['kind']) if ckpt.get('kind') else ''})"),
        ("data", _data_line(cfg, str(ckpt.get("prepared", "")))),
        ("vocabulary", f"{_fmt(len(vocab.get('src', [])))} source / {_fmt(len(vocab.get('tgt', [])))} target "
                       "units (BPE codes inside the checkpoint)" if vocab else "?"),
        ("updates", f"{_fmt(state.get('step', 0))} updates, {state.get('epoch', 0)} epochs done, "
                    f"{_fmt(state.get('tgt_tokens', 0))} target tokens"
                    + (f"; stopped: {state['stop_reason']}" if state.get("stop_reason") else "")),
        ("time", f"{_hours(state.get('wall_time_s', 0.0))} wall, {_hours(state.get('cpu_time_s', 0.0))} CPU"),
        ("best dev", f"{metric} {best:.4g} at update {_fmt(state.get('best_step', 0))}" if best is not None
         else "no dev evaluation"),
        ("init", f"from `{train['init_from']}`" if train.get("init_from") else "from scratch"),
        ("checkpoint", f"`{path}`" if path else "(in memory)"),
        ("card written", f"{time.strftime('%Y-%m-%d %H:%M %Z').strip()} by doctrans at commit {git_commit()}"),
    ]
    out = [f"# Model card: {title}", "", "| | |", "| --- | --- |"]
    out += [f"| {k} | {v} |" for k, v in rows]
    if scores:
        out += ["", "## Scores", "", "| metric | value |", "| --- | ---: |"]
        out += [f"| {k} | {_fmt(v)} |" for k, v in scores.items()]
    if notes:
        out += ["", "## Notes", "", notes.strip()]
    use = use or f"doctrans translate -c {path or 'CHECKPOINT'} -i INPUT -o OUTPUT"
    out += ["", "## Use", "", "```bash", use + (" --docs DOCS   # documents: --docs, an .sgm, or a directory"
                                                 if ctx else ""), "```"]
    out += ["", "## Config", "", "```yaml", yaml.safe_dump(cfg, sort_keys=False, allow_unicode=True).rstrip(), "```"]
    return "\n".join(out) + "\n"


def write_model_card(directory: str | Path, checkpoint: str | Path | dict, scores: dict | None = None,
                     **kw) -> Path:
    """Write ``render_model_card`` as ``directory/MODEL_CARD.md`` (atomically); returns its path."""
    path = Path(directory) / CARD
    atomic_write_text(path, render_model_card(checkpoint, scores, **kw))
    return path
