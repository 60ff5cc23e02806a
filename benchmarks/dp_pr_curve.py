"""Precision/recall of DP generators over the threshold τ, against TVsub's hand oracle.

Every generator has one tuned operating point (τ chosen on dev); this sweeps τ over the
training grid (``doctrans.dp.train.THRESHOLDS``, 0.30–0.975) on a split and
plots position and pronoun P/R for each generator, with the authors' released generator output
(``test.auto-dp.seg.zh``, a single point) for reference. Writes OUT.png and OUT.json.

    python benchmarks/dp_pr_curve.py --prepared data/prep_full --split test \\
        --generator labeler=runs/dp_labeler_full/best.pt --generator thesis=… -o results/dp_pr_test
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from doctrans.dp.corpus import oracle_paths  # noqa: E402
from doctrans.dp.data import load_sentences  # noqa: E402
from doctrans.dp.agreement import dp_agreement_files  # noqa: E402
from doctrans.dp.generator import load_generator  # noqa: E402
from doctrans.dp.train import THRESHOLDS, oracle_sweep  # noqa: E402
from doctrans.utils.io import atomic_write_text, read_lines  # noqa: E402


def sweep(gen_path: str, prep: Path, split: str, oracle: tuple[Path, Path]) -> list[dict]:
    gen = load_generator(gen_path)
    sents = load_sentences(prep / f"{split}.tok.zh", None, prep / f"{split}.docs")
    probs = gen.distributions(sents)
    # the operating point: the grid τ nearest the generator's (an ensemble's mean τ may lie between)
    tuned = min(THRESHOLDS, key=lambda t: abs(t - gen.threshold))
    return [{"tau": tau, "tuned": tau == tuned, "dps": r["sys_dps"],
             "position": r["position"], "pronoun": r["pronoun"]}
            for tau, r in oracle_sweep(sents, probs, gen.labels, read_lines(oracle[0]), read_lines(oracle[1]))]


def generator_args(description: str, out_default: str) -> argparse.ArgumentParser:
    """The options the DP generator benchmarks share: --prepared, --split, --generator, -o."""
    ap = argparse.ArgumentParser(description=description, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--prepared", default="data/prep_full")
    ap.add_argument("--split", default="test", choices=["dev", "test"])
    ap.add_argument("--generator", action="append", required=True,
                    help="NAME=CHECKPOINT[:CHECKPOINT...] (repeatable; several checkpoints = an ensemble)")
    ap.add_argument("-o", "--out", default=out_default)
    return ap


def hand_oracle(prep: Path, split: str) -> tuple[Path, Path]:
    """(oracle base, oracle DP file) of ``split`` from PREP/meta.json; exits naming the file if none."""
    meta = json.loads((prep / "meta.json").read_text(encoding="utf-8"))
    oracle = oracle_paths(meta, split)
    if oracle is None:
        sys.exit(f"no hand oracle for {split} (from {prep / 'meta.json'})")
    return oracle


def main() -> None:
    args = generator_args(__doc__, "results/dp_pr_test").parse_args()
    prep = Path(args.prepared)
    oracle = hand_oracle(prep, args.split)
    curves = {}
    for spec in args.generator:
        name, _, path = spec.partition("=")
        curves[name] = sweep(path, prep, args.split, oracle)
    authors = None
    auto = oracle[1].parent / f"{args.split}.auto-dp.seg.zh"
    if auto.is_file():
        r = dp_agreement_files(oracle[0], auto, oracle[0], oracle[1])
        authors = {"position": r["position"], "pronoun": r["pronoun"], "dps": r["sys_dps"]}

    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(10, 4.2), sharey=True)
    for ax, key in zip(axes, ("position", "pronoun")):
        for name, rows in curves.items():
            line, = ax.plot([r[key]["recall"] for r in rows], [r[key]["precision"] for r in rows], ".-", label=name)
            for r in rows:
                if r["tuned"]:
                    ax.plot(r[key]["recall"], r[key]["precision"], "o", ms=9, mfc="none", color=line.get_color())
        if authors:
            ax.plot(authors[key]["recall"], authors[key]["precision"], "k*", ms=12, label="authors' output")
        for f in (0.2, 0.3, 0.4, 0.5):                       # iso-F curves
            rr = np.linspace(f / (2 - f) + 1e-3, 1, 100)
            ax.plot(rr, f * rr / (2 * rr - f), ":", color="grey", lw=0.7)
            ax.text(0.98, f * 0.98 / (2 * 0.98 - f), f"F={f}", fontsize=7, color="grey", ha="right", va="bottom")
        ax.set_xlim(0, 1), ax.set_ylim(0, 1)
        ax.set_xlabel("recall"), ax.set_title(f"DP {key} ({args.split}, vs hand oracle)")
        ax.grid(alpha=0.3)
    axes[0].set_ylabel("precision")
    axes[1].legend(loc="upper right", fontsize=8)
    fig.suptitle("τ sweep (a DP where P(N) < τ); circle = τ tuned on dev", fontsize=9)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.tight_layout()
    fig.savefig(f"{out}.png", dpi=120)
    atomic_write_text(f"{out}.json", json.dumps({"split": args.split, "curves": curves, "authors": authors},
                                                indent=1) + "\n")
    for name, rows in curves.items():
        best = max(rows, key=lambda r: r["pronoun"]["f1"])
        tuned = next((r for r in rows if r["tuned"]), None)
        print(f"{name}: tuned τ {tuned and tuned['tau']}: position F {tuned and round(tuned['position']['f1'], 4)}, "
              f"pronoun F {tuned and round(tuned['pronoun']['f1'], 4)}; oracle-best τ {best['tau']}: "
              f"pronoun F {best['pronoun']['f1']:.4f} (an upper bound, τ chosen on the scored split)")
    if authors:
        print(f"authors: position F {authors['position']['f1']:.4f}, pronoun F {authors['pronoun']['f1']:.4f}")
    print(f"wrote {out}.png, {out}.json")


if __name__ == "__main__":
    main()
