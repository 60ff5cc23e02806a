"""Context usage against stage-2 updates (issue 29, item 3): CXMI and contrastive accuracy of a
context model at several update counts, with and without context-usage training.

Usage: python benchmarks/usage_curve.py --init STAGE1.pt --prepared PREP --out DIR
       [--config pipelines/context/han_encoder.yaml ...] [--steps 200,600,1500,3000]
       [--variant plain=] [--variant "usage=train.coword_dropout=0.1 train.context_dropout=0.2"]
       [--contrastive SET_DIR] [--data TVSUB] [--cxmi-lines 0] [--threads 1] [--extra KEY=VALUE ...]

For every config × variant, one stage-2 run from ``--init`` (``doctrans train`` with the
variant's overrides, ``train.init_from``, ``data.prepared``, ``--extra``) is trained to each
update count of ``--steps`` in turn: ``--resume`` with the next ``train.max_steps``, which
continues exactly as an uninterrupted run would (same batches, RNG and optimizer state), so the
points of one curve are one run; at each count its ``last.pt`` is copied to ``step{N}.pt``
and scored on the TVsub test set (``PREP/test.tok.zh``/``test.tok.en``/``test.docs``, the first
``--cxmi-lines`` lines, 0 = all) for CXMI against an empty and a random context
(``evaluation.cxmi.compute_cxmi``) and on the contrastive set (``--contrastive``, built from
``--data`` under DIR when not given) for accuracy on all / DP / context-needed items
(``evaluation.contrastive.score_set``). A run already at a count is not trained again and a
scored point is read back from DIR/points.jsonl, so an interrupted curve resumes.

Writes DIR/points.jsonl (one JSON object per point), DIR/usage_curve.md (a table) and
DIR/usage_curve.png (CXMI vs random and context-needed / DP accuracy against updates, one line
per config × variant).
"""
from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from doctrans.evaluation.contrastive import build_set, score_set  # noqa: E402
from doctrans.evaluation.cxmi import compute_cxmi, load_scoring_set  # noqa: E402
from doctrans.runtime.checkpoint import load_checkpoint  # noqa: E402
from doctrans.utils.io import atomic_write_text, read_lines  # noqa: E402


def train_to(config: str, run_dir: Path, steps: int, overrides: list[str], threads: int) -> None:
    """Train (or resume) ``run_dir`` until ``steps`` updates with ``doctrans train``."""
    done = run_dir / "last.pt"
    if done.is_file() and load_checkpoint(done)["state"]["step"] >= steps:
        return
    cmd = [sys.executable, "-c", "import sys; sys.path.insert(0, sys.argv.pop(1)); from doctrans.cli import main; "
           "sys.argv[0] = 'doctrans'; main()", str(REPO), "train", config, *overrides, f"run_dir={run_dir}",
           f"train.max_steps={steps}", f"train.threads={threads}", "train.eval_every=0", "train.save_every=0",
           *(["--resume"] if done.is_file() else [])]
    print("+", " ".join(cmd[4:]), flush=True)
    subprocess.run(cmd, check=True)


def score_point(ckpt: Path, prep: Path, set_dir: Path, cxmi_lines: int) -> dict:
    """CXMI (vs empty and random, nats per sentence) on the first ``cxmi_lines`` test lines and
    contrastive accuracy (all / DP / context-needed) of one checkpoint."""
    lines, refs = read_lines(prep / "test.tok.zh"), read_lines(prep / "test.tok.en")
    docs = [x.split("\t")[0] for x in read_lines(prep / "test.docs")]
    if cxmi_lines:
        lines, refs, docs = lines[:cxmi_lines], refs[:cxmi_lines], docs[:cxmi_lines]
    s = load_scoring_set(str(ckpt), lines, refs, docs, tokenized=True)
    conditions = ("empty", "random") if len(set(docs)) > 1 else ("empty",)
    cx = compute_cxmi(s.model, s.src, s.tgt, s.doc, s.targets, conditions=conditions)
    c = score_set(str(ckpt), set_dir)
    return {"cxmi_empty": cx["empty"]["cxmi"], "cxmi_random": cx["random"]["cxmi"] if "random" in cx else None,
            "contrastive": c["accuracy"], "contrastive_dp": c["by_kind"].get("dp", {}).get("accuracy"),
            "contrastive_context_needed": c["context_needed"]["accuracy"],
            "context_needed_items": c["context_needed"]["items"]}


def render(points: list[dict]) -> str:
    lines = ["| config | variant | updates | CXMI vs empty | CXMI vs random | contrastive all | DP | context-needed |",
             "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for p in points:
        rnd = "—" if p["cxmi_random"] is None else f"{p['cxmi_random']:+.3f}"
        lines.append(f"| {p['config']} | {p['variant']} | {p['steps']} | {p['cxmi_empty']:+.3f} | {rnd} "
                     f"| {p['contrastive']:.1%} | {p['contrastive_dp']:.1%} | {p['contrastive_context_needed']:.1%} |")
    return "\n".join(lines) + "\n"


def plot(points: list[dict], out: Path) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(10.5, 3.8))
    for key in dict.fromkeys((p["config"], p["variant"]) for p in points):
        pts = sorted((p for p in points if (p["config"], p["variant"]) == key), key=lambda p: p["steps"])
        x = [p["steps"] for p in pts]
        label = f"{key[0]} {key[1]}"
        ax1.plot(x, [p["cxmi_random"] if p["cxmi_random"] is not None else p["cxmi_empty"] for p in pts], "o-",
                 label=label, ms=3)
        line, = ax2.plot(x, [100 * p["contrastive_context_needed"] for p in pts], "o-", label=f"{label} ctx-needed",
                         ms=3)
        ax2.plot(x, [100 * p["contrastive_dp"] for p in pts], "s--", color=line.get_color(), ms=3, alpha=0.6,
                 label=f"{label} DP")
    ax1.axhline(0, color="grey", lw=0.8)
    ax1.set(xlabel="stage-2 updates", ylabel="test CXMI vs random (vs empty: 1 doc) (nats/sent)")
    ax2.set(xlabel="stage-2 updates", ylabel="contrastive accuracy (%)")
    for ax in (ax1, ax2):
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    fig.tight_layout()
    tmp = out.with_name(out.name + ".tmp.png")
    fig.savefig(tmp, dpi=110)
    plt.close(fig)
    tmp.replace(out)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--init", required=True, help="the stage-1 sentence-level checkpoint")
    ap.add_argument("--prepared", required=True, type=Path)
    ap.add_argument("--out", required=True, type=Path)
    ap.add_argument("--config", action="append", default=[], help="context YAML(s) [han_encoder, concat]")
    ap.add_argument("--steps", default="200,600,1500,3000")
    ap.add_argument("--variant", action="append", default=[], metavar="NAME=OVERRIDES",
                    help="a curve: its name and space-separated KEY=VALUE overrides [plain=, usage=coword 0.1 + "
                         "context 0.2]")
    ap.add_argument("--contrastive", default="", help="contrastive set directory [built under OUT]")
    ap.add_argument("--data", default=str(REPO.parent / "shared" / "corpora" / "tvsub"))
    ap.add_argument("--cxmi-lines", type=int, default=0, help="CXMI on the first K test lines (0: all)")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--extra", action="append", default=[], help="more overrides for every run")
    a = ap.parse_args()
    configs = a.config or ["pipelines/context/han_encoder.yaml", "pipelines/context/concat.yaml"]
    variants = [v.partition("=")[::2] for v in a.variant] or [
        ("plain", ""), ("usage", "train.coword_dropout=0.1 train.context_dropout=0.2")]
    steps = sorted(int(x) for x in a.steps.split(","))
    a.out.mkdir(parents=True, exist_ok=True)
    set_dir = Path(a.contrastive) if a.contrastive else a.out / "contrastive_test"
    if not (set_dir / "items.jsonl").is_file():
        build_set(Path(a.data), "test", set_dir)
    store = a.out / "points.jsonl"
    points = [json.loads(x) for x in read_lines(store)] if store.is_file() else []
    for config in configs:
        name = Path(config).stem
        for variant, over in variants:
            run_dir = a.out / f"{name}_{variant}"
            overrides = [f"data.prepared={a.prepared}", f"train.init_from={a.init}", *over.split(), *a.extra]
            for n in steps:
                if any(p["config"] == name and p["variant"] == variant and p["steps"] == n for p in points):
                    continue
                train_to(str(REPO / config), run_dir, n, overrides, a.threads)
                ckpt = run_dir / f"step{n}.pt"
                shutil.copyfile(run_dir / "last.pt", ckpt)
                point = {"config": name, "variant": variant, "overrides": over, "steps": n,
                         **score_point(ckpt, a.prepared, set_dir, a.cxmi_lines)}
                print(json.dumps(point), flush=True)
                points.append(point)
                atomic_write_text(store, "".join(json.dumps(p) + "\n" for p in points))
                ckpt.unlink()                                  # 130 MB each: the figures are kept, not the weights
    atomic_write_text(a.out / "usage_curve.md", render(points))
    plot(points, a.out / "usage_curve.png")
    print(render(points))


if __name__ == "__main__":
    main()
