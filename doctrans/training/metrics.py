"""Append-only JSON-lines metrics log, one per run directory (``metrics.jsonl``)."""
from __future__ import annotations

import json
import time
from pathlib import Path


class MetricsWriter:
    """``write(kind, **values)`` appends ``{"kind", "time", **values}`` and flushes.

    Keys carry their units (``xent_nats``, ``ppl``, ``bleu``, ``tok_per_s``).
    """

    def __init__(self, path: str | Path):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)

    def write(self, kind: str, **values) -> None:
        rec = {"kind": kind, "time": round(time.time(), 3), **values}
        with open(self.path, "a", encoding="utf-8") as f:
            f.write(json.dumps(rec, ensure_ascii=False) + "\n")


def read_metrics(path: str | Path) -> list[dict]:
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]
