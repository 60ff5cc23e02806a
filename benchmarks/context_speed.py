"""Training and translation speed of the context models vs the sentence model (issue 14).

Usage: python benchmarks/context_speed.py PREPARED_DIR [--work DIR] [--updates 30] [--warmup 5]
       [--models concat,han_encoder,han_decoder,han_joint] [--modes runs,sorted] [--rounds 1]
       [--threads 2] [--translate-lines 150] [--beam 5] [--max-len-ratio 1.5] [--max-len-extra 10]

Training: ``doctrans train`` (one subprocess per run, the same command a user runs) of the
sentence model (``pipelines/quickstart.yaml``) and of every context model
(``pipelines/context/{model}.yaml``, ``train.init_from=""``) under every ``data.doc_batching``
mode of ``--modes``, interleaved (round 1: all systems, round 2: all systems…), each for
``--warmup`` + ``--updates`` updates without evaluation. Target tok/s comes from the run's
``metrics.jsonl`` train records (``train.log_every = --warmup``; the first window, the warm-up,
is left out): Σ tokens / Σ seconds of the other windows. Prints a Markdown table with each
run's ratio to the sentence model of the same round.

Translation (skipped with ``--translate-lines 0``): the first ``--translate-lines`` lines of
each TVsub test document (``PREP/test.tok.zh`` + ``PREP/test.docs``) at ``--beam``, with the
round-1 checkpoints (``last.pt``) of the sentence model (no documents) and of each context model
(``Translator.translate(lines, doc_ids=…)``; batching mode ``--modes``' first), interleaved, the
same ``max_len_ratio``/``max_len_extra`` caps for all: sentences/s, ratio, mean output length.
"""
from __future__ import annotations

import argparse
import logging
import os
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from doctrans.training.metrics import read_metrics  # noqa: E402
from doctrans.utils.io import read_lines  # noqa: E402

log = logging.getLogger("context_speed")


def train_run(yaml: str, run_dir: Path, prep: Path, extra: list[str], a) -> float:
    """Train ``yaml`` for warmup + updates updates in a subprocess → target tok/s after warm-up.
    Raises RuntimeError (with the log tail) when training fails."""
    overrides = [f"data.prepared={prep}", f"run_dir={run_dir}", f"train.max_steps={a.warmup + a.updates}",
                 "train.eval_every=0", "train.eval_bleu=false", "train.metric=xent_nats",
                 "train.metric_mode=min", "train.tensorboard=false", "train.plot=false",
                 "train.max_time_min=0", f"train.log_every={a.warmup}", f"train.threads={a.threads}",
                 "train.save_every=100000", *extra]
    env = dict(os.environ, PYTHONPATH=str(REPO))
    proc = subprocess.run([sys.executable, "-m", "doctrans.cli", "train", yaml, *overrides], cwd=REPO, env=env,
                          capture_output=True, text=True)
    if proc.returncode:
        raise RuntimeError(f"training {yaml} failed:\n{proc.stderr[-3000:]}")
    return window_speed(run_dir / "metrics.jsonl", a.warmup)


def window_speed(metrics: Path, warmup: int) -> float:
    """Σ target tokens / Σ seconds of the train records after step ``warmup`` (each record a
    window of ``log_every`` updates: tokens = tok_per_s × Δ train_time_s)."""
    recs = [r for r in read_metrics(metrics) if r.get("kind") == "train"]
    if len(recs) < 2:
        raise ValueError(f"{metrics}: need at least 2 train records, got {len(recs)}")
    tok = sec = 0.0
    for prev, r in zip(recs, recs[1:]):
        if prev["step"] < warmup:
            continue
        dt = r["train_time_s"] - prev["train_time_s"]
        tok, sec = tok + r["tok_per_s"] * dt, sec + dt
    return tok / sec


def systems(a) -> list[tuple[str, str, list[str]]]:
    """(name, YAML, overrides) per run, the sentence model first."""
    out = [("sentence", "pipelines/quickstart.yaml", [])]
    for model in a.models.split(","):
        for mode in a.modes.split(","):
            out.append((f"{model}/{mode}", f"pipelines/context/{model}.yaml",
                        ['train.init_from=""', f"data.doc_batching={mode}"]))
    return out


def translate_speed(prep: Path, runs: dict[str, Path], a) -> list[tuple[str, float, float]]:
    """(name, sentences/s, mean output tokens) per checkpoint, on the first lines of each test
    document; the sentence model gets no documents."""
    import torch

    from doctrans.inference.translate import TranslateConfig, Translator

    torch.set_num_threads(a.threads)
    lines, docs = read_lines(prep / "test.tok.zh"), [x.split("\t") for x in read_lines(prep / "test.docs")]
    keep = [i for i, (_, pos) in enumerate(docs) if int(pos) < a.translate_lines]
    src, doc_ids = [lines[i] for i in keep], [docs[i][0] for i in keep]
    out = []
    for name, run_dir in runs.items():
        cfg = TranslateConfig(checkpoint=str(run_dir / "last.pt"), input_format="tok", tokenized=True,
                              beam=a.beam, max_len_ratio=a.max_len_ratio, max_len_extra=a.max_len_extra,
                              threads=a.threads, device="cpu")
        tr = Translator(cfg)
        t0 = time.perf_counter()
        hyps = tr.translate(src, doc_ids=None if name == "sentence" else doc_ids)
        dt = time.perf_counter() - t0
        out.append((name, len(src) / dt, sum(len(h.split()) for h in hyps) / len(hyps)))
        log.info("translate %s: %d sentences in %.1f s", name, len(src), dt)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("prepared", type=Path)
    ap.add_argument("--work", type=Path, default=Path(os.environ.get("TMPDIR", "/tmp")) / "context_speed")
    ap.add_argument("--updates", type=int, default=30)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--models", default="concat,han_encoder,han_decoder,han_joint")
    ap.add_argument("--modes", default="runs,sorted")
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--translate-lines", type=int, default=150, help="per test document; 0: no translation")
    ap.add_argument("--beam", type=int, default=5)
    ap.add_argument("--max-len-ratio", type=float, default=1.5)
    ap.add_argument("--max-len-extra", type=int, default=10)
    a = ap.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s", datefmt="%H:%M:%S")
    if a.updates % a.warmup:
        raise ValueError("--updates must be a multiple of --warmup (records every --warmup updates)")
    prep = a.prepared.resolve()
    speeds: dict[str, list[float]] = {}
    for rnd in range(a.rounds):
        for name, yaml, extra in systems(a):
            tps = train_run(yaml, a.work / f"r{rnd}" / name.replace("/", "-"), prep, extra, a)
            speeds.setdefault(name, []).append(tps)
            log.info("round %d %s: %.0f target tok/s", rnd + 1, name, tps)
    base = speeds["sentence"]
    print(f"\n{a.updates} timed updates after {a.warmup}, {a.rounds} round(s), threads {a.threads}\n")
    print("| system / doc_batching | target tok/s (per round) | ratio to sentence (mean) |")
    print("| --- | ---: | ---: |")
    for name, v in speeds.items():
        ratios = [x / b for x, b in zip(v, base)]
        print(f"| {name} | {' / '.join(f'{x:,.0f}' for x in v)} | {sum(ratios) / len(ratios):.2f} |")
    if a.translate_lines:
        mode = a.modes.split(",")[0]
        runs = {"sentence": a.work / "r0" / "sentence"}
        runs.update({m: a.work / "r0" / f"{m}-{mode}" for m in a.models.split(",")})
        rows = translate_speed(prep, runs, a)
        print(f"\nbeam {a.beam}, max_len_ratio {a.max_len_ratio}, max_len_extra {a.max_len_extra}, "
              f"first {a.translate_lines} lines of each test document\n")
        print("| system | sentences/s | ratio to sentence | mean output tokens |")
        print("| --- | ---: | ---: | ---: |")
        for name, sps, length in rows:
            print(f"| {name} | {sps:.2f} | {sps / rows[0][1]:.2f} | {length:.1f} |")


if __name__ == "__main__":
    main()
