"""``translate --scores FILE``: how sure the model is of each translation, so that a reader
checks the least likely lines first.

A line's score is the log-probability (natural log, nats) the model gives its own translation,
``log p(y | x, context)`` summed over the translation's target tokens (BPE units and ``</s>``),
with ``length_normalized`` = score / tokens (the mean per token, which is what the beam ranks
with the default ``--lenpen 1``). The model reads the line's source and, for a context model,
its document's previous lines with the translations the model gave them (teacher forcing,
``evaluation.confidence.line_scores``, wired in by ``stages.translate``), over the whole target
vocabulary (a ``--shortlist`` search normalises over fewer words, so its beam scores differ). A
line translated in pieces (longer than the model reads, ``long_lines``) and an empty line have
none (``null``).

Where they go: JSON lines, written atomically (``-``: standard output). A text file or stdin:
one object per input line, ``{"line": K (from 1), "score": S, "tokens": N,
"length_normalized": S / N}``. A subtitle file or directory: one object per cue, ``{"file": …,
"cue": K (from 1), "start": "HH:MM:SS.mmm", "end": …, "score": …, "tokens": …,
"length_normalized": …, "cps": characters per second, "lines": [output lines]}``, a cue's score
summing its sentences' and SDH labels'. The lowest length-normalised scores are logged.

Not available: ``--engine ctranslate2`` (no torch model to score with), ``--dp-generator``
(the model read completed sources), ``--stream`` and a directory of text documents.
"""
from __future__ import annotations

import json
import logging
import sys
from collections.abc import Callable
from typing import Any

from doctrans.utils.io import atomic_write_lines

log = logging.getLogger(__name__)

Score = tuple[float, int]            # (log-probability in nats, target tokens with </s>)
Scorer = Callable[[Any, Any, "list[str] | None"], "list[Score | None]"]
"""(translator, its ``Translation`` of some lines, their document ids) → per line its ``Score``
or None (``evaluation.confidence.line_scores``)."""


def fields(score: Score | None) -> dict:
    """The JSON fields of one score: ``score``, ``tokens``, ``length_normalized`` (nulls for None)."""
    if score is None:
        return {"score": None, "tokens": 0, "length_normalized": None}
    lp, n = score
    return {"score": round(lp, 4), "tokens": n, "length_normalized": round(lp / max(n, 1), 4)}


def add(a: Score | None, b: Score | None) -> Score | None:
    """Two scores of one cue summed (None when either is None)."""
    return None if a is None or b is None else (a[0] + b[0], a[1] + b[1])


def check(cfg, is_dir: bool, subtitles: bool = False) -> None:
    """ValueError, before the model is loaded, for ``--scores`` where no score can be made (module doc)."""
    if not cfg.io.scores:
        return
    why = [(cfg.model.engine != "native", "--engine ctranslate2 (no torch model to score with)"),
           (bool(cfg.dp.dp_generator), "--dp-generator (the model reads DP-completed sources)"),
           (cfg.io.stream, "--stream"), (is_dir and not subtitles, "a directory of text documents")]
    given = [w for on, w in why if on]
    if given:
        raise ValueError(f"--scores is not available with {', '.join(given)}: translate a file (text or subtitles) "
                         f"or stdin with the native engine")
    if cfg.io.scores == "-" and cfg.io.output == "-":
        raise ValueError("--scores - and the translations both go to stdout: give --output FILE or a --scores FILE")


def write(path: str, rows: list[dict]) -> None:
    """JSON lines ``rows`` to ``path`` (atomically), or standard output for ``-``."""
    text = [json.dumps(r, ensure_ascii=False) for r in rows]
    if path == "-":
        sys.stdout.write("".join(f"{x}\n" for x in text))
    else:
        atomic_write_lines(path, text)


def line_rows(scores: list[Score | None]) -> list[dict]:
    """One row per input line (module doc)."""
    return [{"line": k + 1, **fields(s)} for k, s in enumerate(scores)]


def log_lowest(name: str, scored: list[tuple[str, Score | None]], show: int = 5) -> None:
    """Log the ``show`` lowest length-normalised scores of ``scored`` ((location, score) pairs)."""
    have = sorted(((s[0] / max(s[1], 1), w) for w, s in scored if s is not None))
    if have:
        log.info("%s: lowest scores (log-probability per token; check these first): %s", name,
                 ", ".join(f"{w} {v:.2f}" for v, w in have[:show]))
