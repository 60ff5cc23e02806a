"""Append-only JSON-lines metrics log, one per run directory (``metrics.jsonl``)."""
from __future__ import annotations

import json
import logging
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


_NOT_SCORES = ("step", "epoch", "lr", "eval_s", "wall_time_s", "cpu_time_s", "time", "best")


def last_dev_scores(path: str | Path) -> dict[str, float]:
    """The scores of the last dev evaluation in a ``metrics.jsonl`` (``{"dev KEY (update N)":
    value}`` for its numbers; {} without one or without the file), e.g. for the model card."""
    try:
        devs = [r for r in read_metrics(path) if r.get("kind") == "dev"]
    except (OSError, ValueError):
        return {}
    if not devs:
        return {}
    last = devs[-1]
    return {f"dev {k} (update {last.get('step', '?')})": v for k, v in last.items()
            if k not in _NOT_SCORES and isinstance(v, (int, float)) and not isinstance(v, bool)}


class TensorBoardWriter:
    """TensorBoard event files (``torch.utils.tensorboard``, the fairseq / Joey NMT convention):
    ``write("dev", rec)`` adds every numeric value of ``rec`` as scalar ``dev/<key>`` at
    ``rec["step"]``. If the ``tensorboard`` package is missing, logs one warning and writes
    nothing (metrics.jsonl still has everything)."""

    def __init__(self, log_dir: str | Path):
        try:
            from torch.utils.tensorboard import SummaryWriter
        except ImportError as e:                      # tensorboard is an install_requires; be safe
            logging.getLogger(__name__).warning("no TensorBoard events: %s", e)
            self.writer = None
            return
        self.writer = SummaryWriter(str(log_dir))

    def write(self, kind: str, rec: dict) -> None:
        if self.writer is None:
            return
        for k, v in rec.items():
            if k not in ("step", "epoch") and isinstance(v, (int, float)) and not isinstance(v, bool):
                self.writer.add_scalar(f"{kind}/{k}", v, rec["step"])
        self.writer.flush()

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
