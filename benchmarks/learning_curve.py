"""Learning curves of one or more training runs: dev cross-entropy (from each run's
metrics.jsonl) and test BLEU of every kept ``checkpoint{STEP}.pt`` (``train.keep_every``), by
updates and by CPU-hours of the training process (``cpu_time_s``) — the whole-corpus stage 1's
curve (issue 48) and the shape sweep at equal CPU-hours (several runs side by side).

    python benchmarks/learning_curve.py --prepared PREP --data TVSUB --out results/full_curve \
        NAME=RUN_DIR [NAME=RUN_DIR …] [--beam 5] [--threads 2] [--every 2000]

Writes OUT.md (a table per run: updates, epoch, CPU-hours, wall hours, dev xent, test BLEU; and
the runs side by side at the CPU-hours they share) and OUT.png (dev xent and test BLEU against
CPU-hours and updates). Test BLEU: the TVsub test (PREP/test.tok.zh) translated sentence by
sentence with beam ``--beam``, case-insensitive tokenized BLEU against DATA/test/test.ref.sgm
(3 references: the thesis setting). A checkpoint's translation is kept in OUT/ (``NAME.STEP.hyp``)
and reused by a later call, so the curve grows as the run goes on. Test BLEU is measured, never
used to choose anything; the run's best checkpoint is chosen on dev cross-entropy.
"""
from __future__ import annotations

import argparse
import json
import logging
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from doctrans.training.checkpoint import step_checkpoints  # noqa: E402
from doctrans.training.metrics import read_metrics  # noqa: E402
from doctrans.utils.io import atomic_write_lines, atomic_write_text, read_lines  # noqa: E402
from doctrans.utils.provenance import provenance_line  # noqa: E402

log = logging.getLogger("learning_curve")


def dev_points(run_dir: Path) -> dict[int, dict]:
    """step → the run's dev record at that step (the last one written for the step)."""
    return {r["step"]: r for r in read_metrics(run_dir / "metrics.jsonl") if r.get("kind") == "dev"}


def cpu_at(run_dir: Path) -> dict[int, tuple[float, float]]:
    """step → (cpu_time_s, wall seconds) of the run's train/dev records (the latest at that step)."""
    out = {}
    for r in read_metrics(run_dir / "metrics.jsonl"):
        if "cpu_time_s" in r:
            out[r["step"]] = (r["cpu_time_s"], r.get("wall_time_s", float("nan")))
    return out


def test_bleu(ckpt: Path, name: str, prep: Path, ref: Path, out: Path, beam: int) -> float:
    """BLEU (tokenized, lowercased, 3 refs) of ``ckpt`` on the test set; its translation reused
    when the stamp (checkpoint mtime, beam) matches."""
    from doctrans.evaluation.score import ScoreConfig, score_files
    from doctrans.inference.translate import TranslateConfig, Translator

    step = ckpt.stem[len("checkpoint"):] or ckpt.stem
    hyp = out / f"{name}.{step}.hyp"
    stamp = {"checkpoint": str(ckpt.resolve()), "mtime": ckpt.stat().st_mtime, "beam": beam}
    done = hyp.with_suffix(".json")
    if not (hyp.is_file() and done.is_file() and json.loads(done.read_text())["stamp"] == stamp):
        tr = Translator(TranslateConfig(checkpoint=str(ckpt), input_format="tok", tokenized=True, beam=beam))
        atomic_write_lines(hyp, tr.translate(read_lines(prep / "test.tok.zh")))
        atomic_write_text(done, json.dumps({"stamp": stamp}) + "\n")
    res = score_files(ScoreConfig(hyp=str(hyp), refs=(str(ref),), hyp_tokenized=True, metrics=("bleu_tok_lc",)))
    return res["bleu_tok_lc"]["score"]


def curve(name: str, run_dir: Path, args) -> list[dict]:
    devs, cpu = dev_points(run_dir), cpu_at(run_dir)
    rows = []
    for ckpt in step_checkpoints(run_dir):
        step = int(ckpt.stem[len("checkpoint"):])
        if args.every and step % args.every:
            continue
        dev = devs.get(step, {})
        c, w = cpu.get(step, (float("nan"), float("nan")))
        bleu = test_bleu(ckpt, name, Path(args.prepared), Path(args.ref), Path(args.out), args.beam)
        rows.append({"step": step, "epoch": dev.get("epoch"), "cpu_h": c / 3600, "wall_h": w / 3600,
                     "dev_xent": dev.get("xent_nats"), "test_bleu": bleu})
        log.info("%s %d: dev xent %s, test BLEU %.2f, %.2f CPU-h", name, step, dev.get("xent_nats"), bleu, c / 3600)
    return rows


def _fmt(x, spec: str) -> str:
    return "–" if x is None or x != x else format(x, spec)


def render(curves: dict[str, list[dict]]) -> str:
    out = ["# Learning curves", ""]
    for name, rows in curves.items():
        out += [f"## {name}", "", "| updates | epoch | CPU-hours | wall hours | dev xent (nats) | test BLEU |",
                "| ---: | ---: | ---: | ---: | ---: | ---: |"]
        out += [f"| {r['step']} | {_fmt(r['epoch'], 'd')} | {_fmt(r['cpu_h'], '.2f')} | {_fmt(r['wall_h'], '.2f')} | "
                f"{_fmt(r['dev_xent'], '.3f')} | {r['test_bleu']:.2f} |" for r in rows]
        out.append("")
    if len(curves) > 1:                         # side by side at the CPU budget every run reached
        shared = min((rows[-1]["cpu_h"] for rows in curves.values() if rows), default=float("nan"))
        out += [f"## At equal CPU-hours (the last point of each run at or below {shared:.2f} CPU-h)", "",
                "| run | updates | CPU-hours | dev xent | test BLEU |", "| --- | ---: | ---: | ---: | ---: |"]
        for name, rows in curves.items():
            at = [r for r in rows if r["cpu_h"] <= shared + 1e-9]
            if at:
                r = at[-1]
                out.append(f"| {name} | {r['step']} | {r['cpu_h']:.2f} | {_fmt(r['dev_xent'], '.3f')} | "
                           f"{r['test_bleu']:.2f} |")
        out.append("")
    out.append(provenance_line())
    return "\n".join(out) + "\n"


def plot(curves: dict[str, list[dict]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 3, figsize=(15, 4))
    for name, rows in curves.items():
        dev = [r for r in rows if r["dev_xent"] is not None]
        axes[0].plot([r["cpu_h"] for r in dev], [r["dev_xent"] for r in dev], marker="o", label=name)
        axes[1].plot([r["cpu_h"] for r in rows], [r["test_bleu"] for r in rows], marker="o", label=name)
        axes[2].plot([r["step"] for r in rows], [r["test_bleu"] for r in rows], marker="o", label=name)
    for ax, (x, y) in zip(axes, [("CPU-hours", "dev cross-entropy (nats)"), ("CPU-hours", "test BLEU (3 refs)"),
                                 ("updates", "test BLEU (3 refs)")]):
        ax.set_xlabel(x)
        ax.set_ylabel(y)
        ax.grid(alpha=0.3)
        ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=100)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("runs", nargs="+", metavar="NAME=RUN_DIR")
    ap.add_argument("--prepared", required=True, help="prepared dataset (its test.tok.zh)")
    ap.add_argument("--data", default=str(REPO.parent / "shared" / "corpora" / "tvsub"), help="TVsub root")
    ap.add_argument("--ref", default="", help="test references (SGML) [default: DATA/test/test.ref.sgm]")
    ap.add_argument("--out", required=True, help="OUT.md, OUT.png and the translations in OUT/")
    ap.add_argument("--beam", type=int, default=5)
    ap.add_argument("--every", type=int, default=0, help="only checkpoints at multiples of this many updates")
    ap.add_argument("--threads", type=int, default=0, help="torch threads (0: all cores)")
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s", datefmt="%H:%M:%S")
    from _common import set_threads

    set_threads(args.threads)
    args.ref = args.ref or str(Path(args.data) / "test" / "test.ref.sgm")
    Path(args.out).mkdir(parents=True, exist_ok=True)
    curves = {}
    for spec in args.runs:
        name, _, run = spec.partition("=")
        if not run:
            ap.error(f"{spec!r}: give NAME=RUN_DIR")
        curves[name] = curve(name, Path(run), args)
    atomic_write_text(f"{args.out}.md", render(curves))
    plot(curves, Path(f"{args.out}.png"))
    print(render(curves))


if __name__ == "__main__":
    main()
