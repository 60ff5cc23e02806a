"""What ``doctrans score`` prints and writes: the score table of a ``score_files`` /
``score_corpus`` result (``format_table``: one row per corpus metric with its sacrebleu
signature, then how each side was read, the notes, the legends and every analysis's lines, in the
order of the metric table, comparisons last), or JSON (``render``), written atomically."""
from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path

from doctrans.evaluation.metrics import METRIC_TABLE
from doctrans.evaluation.metrics.base import Metric
from doctrans.evaluation.score_text import TextForm, tok_word
from doctrans.utils.io import atomic_write_text


def format_table(result: dict, table: Mapping[str, Metric] | None = None) -> str:
    """A readable table: metric, score, sacrebleu signature, #refs, #lines; then the notes and the
    analyses (``Metric.report``) of the metrics in ``result``."""
    table = table or METRIC_TABLE
    present = [m for m in table.values() if m.name in result]
    rows = [(m.name, f"{result[m.name]['score']:.2f}", result[m.name]["signature"])
            for m in present if m.kind == "corpus"]
    w_m = max(len("metric"), *(len(r[0]) for r in rows))
    head = f"{'metric':<{w_m}}  {'score':>6}  {'#refs':>5}  {'#lines':>6}  signature"
    lines = [head, "-" * len(head)]
    for m, score, sig in rows:
        lines.append(f"{m:<{w_m}}  {score:>6}  {result['n_refs']:>5}  {result['n_lines']:>6}  {sig}")
    lines.append("")
    for m, _, _ in rows:
        lines.append(f"{m}: {result[m]['preprocessing']}")
    for side, name in (("hyp", "hypothesis"), ("refs", "references")):
        f = result.get("form", {}).get(side)
        if f:
            form = TextForm(f["tokenized"], f["tokenized_lines"], f["detokenized_lines"], f["lowercase"], f["capitals"])
            lines.append(f"{name}: looks {form.describe()}; scored as {tok_word(f['scored_as_tokenized'])} "
                         f"({f['how']})")
    for note in result.get("notes", []):
        lines.append(f"NOTE: {note}")
    for legend in dict.fromkeys(m.legend for m in present if m.kind == "corpus" and m.legend):
        lines.append(legend)
    for kind in ("analysis", "comparison"):
        for m in present:
            if m.kind == kind and m.report is not None:
                lines += m.report(result[m.name])
    return "\n".join(lines) + "\n"


def render(result: dict, fmt: str = "table") -> str:
    """``format_table(result)`` or indented JSON (``fmt="json"``), newline-terminated."""
    if fmt == "json":
        return json.dumps(result, indent=2, ensure_ascii=False) + "\n"
    return format_table(result)


def write_atomic(path: str | Path, text: str) -> Path:
    """Write text to path atomically (``doctrans.utils.io.atomic_write_text``); returns path."""
    atomic_write_text(path, text)
    return Path(path)
