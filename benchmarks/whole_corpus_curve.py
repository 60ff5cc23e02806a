"""Where the whole-corpus models stand (issue 48): their learning curve by update, and how many
more updates the sentence model's curve says the 28.6 BLEU goal needs.

    python benchmarks/whole_corpus_curve.py [--points benchmarks/plots/whole_corpus_curve.tsv] \
        [--goal 28.6] [--ci 28.30,1.90] [--out benchmarks/plots/whole_corpus_curve]

Reads the measurements the journal entries record (``--points``: a TSV, one measurement a line:
series, updates counted from scratch, dev cross-entropy in nats/token, TVsub test BLEU in the thesis
setting, source; ``#`` lines are comments) — the GPU runs' checkpoints are not kept, so the
curve is drawn from those records, each row naming its entry. Writes OUT.md (the points, the gain
per doubling of updates between neighbouring points of the ``sentence, GPU`` series, the
projection) and OUT.png (dev cross-entropy and test BLEU against updates, log scale, every series,
the goal and, with ``--ci MEAN,HALF``, the shipped model's 95% bootstrap interval from
``doctrans score --confidence``).

The projection, in two steps. (1) Test BLEU against dev cross-entropy: a least-squares line
through every sentence-model checkpoint with both measured (r reported), which gives the dev
cross-entropy at which the line reaches ``--goal``. (2) The dev cross-entropy falls by g nats per
doubling of updates between the last two dev points of the ``sentence, GPU`` series; at that rate
the goal's dev cross-entropy is d = (xent0 − xent_goal) / g doublings past the last point, i.e.
updates0 · 2^d (a constant rate per doubling; the measured rate shrinks, so it is a lower bound).
It then says whether a measured checkpoint already reached that dev cross-entropy, and what the test
gave it. A rough guide with a test whose 95% interval is ±1.9 BLEU, as the output says.
Raises SystemExit naming the file and line of a malformed point.
"""
from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from doctrans.utils.io import atomic_write_text  # noqa: E402

GPU = "sentence, GPU"


def read_points(path: Path) -> list[dict]:
    """The TSV's rows as dicts (updates int; dev_xent, test_bleu float or None)."""
    rows, header = [], None
    for no, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip() or line.startswith("#"):
            continue
        cells = line.split("\t")
        if header is None:
            header = cells
            continue
        if len(cells) != len(header):
            raise SystemExit(f"{path}:{no}: {len(cells)} fields, expected {len(header)} ({', '.join(header)})")
        r = dict(zip(header, cells))
        try:
            r["updates"] = int(r["updates"])
            for k in ("dev_xent", "test_bleu"):
                r[k] = float(r[k]) if r[k] else None
        except ValueError as e:
            raise SystemExit(f"{path}:{no}: {e}") from None
        rows.append(r)
    return rows


def gains_per_doubling(points: list[tuple[int, float]]) -> list[tuple[int, int, float]]:
    """(updates a, updates b, change of the measure per doubling of updates) between neighbours."""
    return [(a, b, (yb - ya) / math.log2(b / a)) for (a, ya), (b, yb) in zip(points, points[1:])]


def projection(rows: list[dict], goal: float) -> dict:
    """The module doc's two steps over the sentence series (see there)."""
    both = [(r["dev_xent"], r["test_bleu"]) for r in rows
            if r["series"].startswith("sentence") and r["dev_xent"] is not None and r["test_bleu"] is not None]
    n = len(both)
    if n < 3:
        raise SystemExit(f"need 3 sentence checkpoints with dev xent and test BLEU, found {n}")
    mx, my = sum(x for x, _ in both) / n, sum(y for _, y in both) / n
    sxx = sum((x - mx) ** 2 for x, _ in both)
    sxy = sum((x - mx) * (y - my) for x, y in both)
    syy = sum((y - my) ** 2 for _, y in both)
    slope = sxy / sxx
    goal_xent = mx + (goal - my) / slope
    gpu = [(r["updates"], r["dev_xent"]) for r in rows if r["series"] == GPU and r["dev_xent"] is not None]
    u0, x0 = gpu[-1]
    per_doubling = -gains_per_doubling(gpu[-2:])[0][2]      # nats fallen per doubling, last interval
    d = (x0 - goal_xent) / per_doubling
    measured = sorted((r["dev_xent"], r["updates"], r["test_bleu"], r["series"]) for r in rows
                      if r["series"].startswith("sentence") and r["dev_xent"] is not None)
    reached = [m for m in measured if m[0] <= goal_xent]
    return {"n": n, "slope": slope, "r": sxy / math.sqrt(sxx * syy), "goal_xent": goal_xent,
            "per_doubling": per_doubling, "doublings": d, "updates": u0 * 2 ** d, "from": (u0, x0),
            "reached": reached, "closest": measured[0], "measured": measured}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--points", type=Path, default=REPO / "benchmarks/plots/whole_corpus_curve.tsv")
    ap.add_argument("--goal", type=float, default=28.6)
    ap.add_argument("--ci", default=None, metavar="MEAN,HALF")
    ap.add_argument("--out", type=Path, default=REPO / "benchmarks/plots/whole_corpus_curve")
    args = ap.parse_args()
    rows = read_points(args.points)
    series = list(dict.fromkeys(r["series"] for r in rows))
    gpu_xent = [(r["updates"], r["dev_xent"]) for r in rows if r["series"] == GPU and r["dev_xent"] is not None]
    gpu_bleu = [(r["updates"], r["test_bleu"]) for r in rows if r["series"] == GPU and r["test_bleu"] is not None]
    p = projection(rows, args.goal)

    md = [f"# Whole-corpus learning curve (from `{args.points.relative_to(REPO)}`)", "",
          "| series | updates | dev xent | test BLEU | source |", "| --- | ---: | ---: | ---: | --- |"]
    for r in rows:
        xent = "" if r["dev_xent"] is None else f"{r['dev_xent']:.3f}"
        bleu = "" if r["test_bleu"] is None else f"{r['test_bleu']:.2f}"
        md.append(f"| {r['series']} | {r['updates']:,} | {xent} | {bleu} | {r['source']} |")
    md += ["", f"Per doubling of updates along `{GPU}`, between neighbouring measurements:", "",
           "| from | to | dev xent change per doubling (nats) |", "| ---: | ---: | ---: |"]
    md += [f"| {a:,} | {b:,} | {g:+.3f} |" for a, b, g in gains_per_doubling(gpu_xent)]
    md += ["", "| from | to | test BLEU change per doubling |", "| ---: | ---: | ---: |"]
    md += [f"| {a:,} | {b:,} | {g:+.2f} |" for a, b, g in gains_per_doubling(gpu_bleu)]
    u0, x0 = p["from"]
    md += ["", f"Projection (module doc). (1) Test BLEU ≈ {p['slope']:.1f} × dev xent + c over the {p['n']} sentence "
           f"checkpoints with both (r = {p['r']:.2f}): {args.goal} at dev xent {p['goal_xent']:.4f}. (2) At the GPU "
           f"curve's last rate ({p['per_doubling']:.3f} nats per doubling of updates), from {x0:.3f} at {u0:,} updates "
           f"that is {p['doublings']:.2f} doublings: ≈ {p['updates']:,.0f} updates (+{p['updates'] - u0:,.0f})."]
    if p["reached"]:
        md.append("Checkpoints measured at or below it: " + "; ".join(
            f"{name} at {u:,} (dev {x:.4f}, test {'—' if b is None else f'{b:.2f}'})"
            for x, u, b, name in p["reached"]) + ".")
    else:
        x, u, b, name = p["closest"]
        md.append(f"No checkpoint measured reached it; the closest: {name} at {u:,} (dev {x:.4f}, test "
                  f"{'—' if b is None else f'{b:.2f}'}).")
    md.append("A rough guide: the checkpoints' test BLEU scatters about the line, and the test's 95% bootstrap "
              "interval is about ±1.9 BLEU (`doctrans score --confidence`).")
    if args.ci:
        mean, half = (float(v) for v in args.ci.split(","))
        md.append(f"Shipped sentence model: μ = {mean:.2f} ± {half:.2f} (95%); the goal {args.goal} is "
                  f"{'inside' if abs(args.goal - mean) <= half else 'outside'} it.")
    atomic_write_text(args.out.with_suffix(".md"), "\n".join(md) + "\n")

    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax1, ax2, ax3) = plt.subplots(1, 3, figsize=(15, 4.6))
    colours = dict(zip(series, plt.rcParams["axes.prop_cycle"].by_key()["color"]))
    for s in series:
        xs = [(r["updates"], r["dev_xent"]) for r in rows if r["series"] == s and r["dev_xent"] is not None]
        bs = [(r["updates"], r["test_bleu"]) for r in rows if r["series"] == s and r["test_bleu"] is not None]
        xb = [(r["dev_xent"], r["test_bleu"]) for r in rows
              if r["series"] == s and r["dev_xent"] is not None and r["test_bleu"] is not None]
        style = "o-" if s == GPU else "s--" if s.startswith("sentence") else "^:"
        kw = {"color": colours[s], "ms": 4}
        if xs:
            ax1.plot(*zip(*xs), style, label=s, **kw)
        if bs:
            ax2.plot(*zip(*bs), style, label=None if xs else s, **kw)
        if xb and s.startswith("sentence"):
            ax3.plot(*zip(*xb), style[0], **kw)
    ax2.axhline(args.goal, color="k", lw=0.8, ls="-.", label=f"goal {args.goal}")
    if args.ci:
        ax2.fill_between([u0 * 0.97, u0 * 1.03], mean - half, mean + half, color="grey", alpha=0.3,
                         label="shipped sentence model: 95% bootstrap interval")
    ax1.axhline(p["goal_xent"], color="k", lw=0.8, ls=":", label=f"dev xent the fit gives BLEU {args.goal}")
    fit_x = [min(x for x, *_ in p["measured"]) - 0.004, max(x for x, *_ in p["measured"] if x < 2.06) + 0.002]
    ax3.plot(fit_x, [args.goal + p["slope"] * (x - p["goal_xent"]) for x in fit_x], "k-",
             lw=0.8, label=f"fit: {p['slope']:.1f} BLEU per nat (r {p['r']:.2f})")
    ax3.axhline(args.goal, color="k", lw=0.8, ls="-.")
    ax3.axvline(p["goal_xent"], color="k", lw=0.8, ls=":")
    for ax, xl, yl in ((ax1, "updates from scratch (log scale)", "dev cross-entropy (nats/token)"),
                       (ax2, "updates from scratch (log scale)", "TVsub test BLEU (3 refs, thesis setting)"),
                       (ax3, "dev cross-entropy (nats/token)", "TVsub test BLEU")):
        ax.set_xlabel(xl)
        ax.set_ylabel(yl)
        ax.grid(alpha=0.3)
    ax1.set_xscale("log")
    ax2.set_xscale("log")
    off = [f"{x:.3f} at {u:,}" for u, x in gpu_xent if x > 2.25]
    ax1.set_ylim(2.0, 2.25)
    ax2.set_ylim(23.5, 30.5)
    ax1.set_title("dev cross-entropy" + (f" (off the scale: {', '.join(off)})" if off else ""), fontsize=9)
    ax2.set_title("test BLEU", fontsize=9)
    ax3.set_title("sentence checkpoints: test BLEU against dev cross-entropy", fontsize=9)
    ax3.legend(fontsize=7, loc="lower left")
    fig.legend(*[sum(v, []) for v in zip(ax1.get_legend_handles_labels(), ax2.get_legend_handles_labels())],
               loc="lower center", ncol=5, fontsize=7.5, frameon=False)
    fig.tight_layout(rect=(0, 0.1, 1, 1))
    fig.savefig(args.out.with_suffix(".png"), dpi=110)
    print("\n".join(md[-5:]))
    print(f"wrote {args.out.with_suffix('.md')} and {args.out.with_suffix('.png')}")


if __name__ == "__main__":
    main()
