"""Context usage over training from runs already trained (issue 29, item 3): the dev CXMI that
``doctrans train`` logs at every evaluation (``train.eval_cxmi_sentences``: the first K dev lines,
against an empty and a random context) against the update, one line per run.

Usage: python benchmarks/plot_usage_runs.py NAME=RUN_DIR [NAME=RUN_DIR ...] --out FILE.png
       [--table FILE.md]

Reads RUN_DIR/metrics.jsonl of each run (the ``dev`` records with ``cxmi_random_nats``; a run
resumed to more updates keeps appending there, so its points are one run). Writes a two-panel
picture (CXMI vs random, CXMI vs empty, nats per sentence, against stage-2 updates) and, with
``--table``, the same points as a Markdown table. ``benchmarks/usage_curve.py`` is the version
that trains the runs itself and also scores the TVsub test set and the contrastive subsets.
Raises SystemExit naming a run without any dev CXMI record.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from doctrans.training.metrics import read_metrics  # noqa: E402
from doctrans.utils.io import atomic_write_text  # noqa: E402


def usage_points(run_dir: Path) -> list[dict]:
    """The dev records of ``run_dir/metrics.jsonl`` that carry dev CXMI, one per update (the last
    record of an update wins: a resumed run may have evaluated it twice)."""
    by_step = {}
    for rec in read_metrics(run_dir / "metrics.jsonl"):
        if rec.get("kind") == "dev" and "cxmi_random_nats" in rec:
            by_step[int(rec["step"])] = rec
    return [by_step[s] for s in sorted(by_step)]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("runs", nargs="+", metavar="NAME=RUN_DIR")
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--table", type=Path)
    a = ap.parse_args()
    curves = {}
    for spec in a.runs:
        name, _, path = spec.partition("=")
        pts = usage_points(Path(path))
        if not pts:
            raise SystemExit(f"{path}/metrics.jsonl: no dev record with cxmi_random_nats (train.eval_cxmi_sentences)")
        curves[name] = pts
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, axes = plt.subplots(1, 2, figsize=(10, 4), sharex=True)
    for ax, key, title in ((axes[0], "cxmi_random_nats", "dev CXMI vs a random context"),
                           (axes[1], "cxmi_empty_nats", "dev CXMI vs the empty context")):
        for name, pts in curves.items():
            ax.plot([p["step"] for p in pts], [p[key] for p in pts], marker="o", label=name)
        ax.axhline(0.0, color="grey", lw=0.8)
        ax.set_title(title)
        ax.set_xlabel("stage-2 updates")
        ax.set_ylabel("nats per sentence")
    axes[0].axhline(0.10, color="red", lw=0.8, ls="--", label="issue 29 goal (test)")
    axes[0].legend(fontsize=8)
    fig.tight_layout()
    a.out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(a.out, dpi=120)
    rows = ["| run | update | dev CXMI vs random | vs empty | dev xent | dev BLEU |", "| --- | ---: | ---: | ---: | ---: | ---: |"]
    for name, pts in curves.items():
        for p in pts:
            rows.append(f"| {name} | {p['step']} | {p['cxmi_random_nats']:+.3f} | {p['cxmi_empty_nats']:+.3f} | "
                        f"{p['xent_nats']:.3f} | {p.get('bleu', float('nan')):.2f} |")
    table = "\n".join(rows) + "\n"
    print(table)
    if a.table:
        atomic_write_text(a.table, table)


if __name__ == "__main__":
    main()
