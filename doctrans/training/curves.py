"""The learning-curve picture a run directory gets when training ends (``learning_curves.png``):
train and dev cross-entropy per update (nats per target), and the dev selection metric."""
from __future__ import annotations

import os
from pathlib import Path

from doctrans.training.metrics import read_metrics


def plot_learning_curves(metrics_path: str | Path, out_path: str | Path, metric: str = "bleu") -> Path:
    """Read ``metrics.jsonl`` and write the PNG atomically. Left: ``xent_nats`` of the train
    records and of the dev records against the update; then the dev ``metric`` (if it is not
    the cross-entropy); then, for a context model whose dev records have them
    (``train.eval_cxmi_sentences``), dev CXMI against an empty and a random context (nats per
    sentence). Raises ValueError if the file has no train or dev records."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    recs = read_metrics(metrics_path)
    train = [r for r in recs if r.get("kind") == "train" and "xent_nats" in r]
    dev = [r for r in recs if r.get("kind") == "dev"]
    if not train and not dev:
        raise ValueError(f"{metrics_path}: no train or dev records to plot")
    extra = metric != "xent_nats" and any(metric in r for r in dev)
    usage = [r for r in dev if "cxmi_empty_nats" in r]
    panels = 1 + extra + bool(usage)
    fig, axes = plt.subplots(1, panels, figsize=(5 * panels + 0.5, 3.6), squeeze=False)
    ax = axes[0][0]
    if train:
        ax.plot([r["step"] for r in train], [r["xent_nats"] for r in train], label="train", lw=1,
                marker="o" if len(train) < 30 else None, ms=3)        # a few points must stay visible
    dev_x = [r for r in dev if "xent_nats" in r]
    if dev_x:
        ax.plot([r["step"] for r in dev_x], [r["xent_nats"] for r in dev_x], "o-", label="dev", ms=3)
    ax.set_xlabel("update")
    ax.set_ylabel("cross-entropy (nats / target)")
    if ax.lines:
        ax.legend()
    ax.grid(alpha=0.3)
    if extra:
        ax2 = axes[0][1]
        pts = [r for r in dev if metric in r]
        ax2.plot([r["step"] for r in pts], [r[metric] for r in pts], "o-", color="C2", ms=3)
        ax2.set_xlabel("update")
        ax2.set_ylabel(f"dev {metric}")
        ax2.grid(alpha=0.3)
    if usage:
        ax3 = axes[0][panels - 1]
        for key, label in (("cxmi_empty_nats", "vs empty"), ("cxmi_random_nats", "vs random")):
            pts = [r for r in usage if key in r]
            ax3.plot([r["step"] for r in pts], [r[key] for r in pts], "o-", label=label, ms=3)
        ax3.axhline(0.0, color="grey", lw=0.8)
        ax3.set_xlabel("update")
        ax3.set_ylabel("dev CXMI (nats / sentence)")
        ax3.legend()
        ax3.grid(alpha=0.3)
    fig.suptitle(Path(metrics_path).parent.name)
    fig.tight_layout()
    out_path = Path(out_path)
    tmp = out_path.with_name(out_path.name + ".tmp.png")
    fig.savefig(tmp, dpi=110)
    plt.close(fig)
    os.replace(tmp, out_path)
    return out_path
