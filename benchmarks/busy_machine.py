"""Translation speed on a busy machine: torch threads and OpenMP's wait policy (issue 31, item 4).

Usage: python benchmarks/busy_machine.py [--lines 100] [--repeats 3] [--load N] [--beam 5]
       [--model small|tiny] [--work DIR]

With as many other busy processes as cores, a torch process that uses every core for its
intra-op (OpenMP) threads spends its time waiting for threads that are not scheduled: libgomp's
threads spin at the end of every parallel region, and each small matrix product of beam search
is one. This script measures it:

1. it makes a Transformer checkpoint (``pipelines/transformer/<model>.yaml``, one update on
   random words, so the weights are essentially random; a random model decodes to the length
   limit, which is a steady workload) under ``--work`` (default: a temporary directory);
2. it starts ``--load`` busy-loop processes (default: one per usable core; 0 = none);
3. it translates ``--lines`` random lines (``input_format=bpe``, beam ``--beam``), each time in
   a fresh process, interleaved over ``--repeats`` rounds, in these settings:

   * ``before``: torch's default threads (all cores), OpenMP environment as given (the doctrans
     behaviour before this change);
   * ``threads1``: ``torch.set_num_threads(1)``;
   * ``passive``: all cores, ``OMP_WAIT_POLICY=PASSIVE`` (threads sleep instead of spinning);
   * ``cli``: what ``doctrans translate`` does now by default (``import doctrans.cli`` first, so
     its environment defaults apply; ``--threads`` at its default);

and prints seconds per translation (inside the process: model load + translate, not the
interpreter start) for each setting, and the machine's load average. Other processes on the
machine count too: note them with the figures.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

SETTINGS = {
    "before": ({}, 0, False),
    "threads1": ({}, 1, False),
    "passive": ({"OMP_WAIT_POLICY": "PASSIVE"}, 0, False),
    "cli": ({}, None, True),
}
OMP_VARS = ("OMP_WAIT_POLICY", "KMP_BLOCKTIME", "GOMP_SPINCOUNT", "OMP_NUM_THREADS", "MKL_NUM_THREADS")

RUNNER = r"""
import json, sys, time
t0 = time.perf_counter()
args = json.loads(sys.argv[1])
if args["import_cli"]:
    import doctrans.cli as cli                               # its environment defaults
    threads = cli.translate_cmd.params                       # --threads' default
    threads = next(p.default for p in threads if p.name == "threads")
else:
    threads = args["threads"]
import torch
from doctrans.inference import translate
translate.translate_input(translate.TranslateConfig(checkpoint=args["ckpt"], input=args["input"], output=args["output"],
                                        input_format="bpe", beam=args["beam"], threads=threads, device="cpu"))
import os
print(json.dumps({"seconds": time.perf_counter() - t0, "torch_threads": torch.get_num_threads(),
                  "OMP_WAIT_POLICY": os.environ.get("OMP_WAIT_POLICY")}))
"""


def make_checkpoint(work: Path, model: str) -> Path:
    sys.path.insert(0, str(REPO))
    sys.path.insert(0, str(REPO / "tests"))
    from conftest import QUIET_TRAIN, reversal_pairs, write_prepared

    from doctrans.config import load_experiment
    from doctrans.training import train

    ckpt = work / "run" / "last.pt"
    if ckpt.exists():
        return ckpt
    pairs = reversal_pairs(2000, vocab=3000)
    dev = (pairs[0][:20], pairs[1][:20])
    prep = write_prepared(work / "prep", pairs, dev)
    cfg = load_experiment(REPO / "pipelines" / "transformer" / f"{model}.yaml",
                          [f"data.prepared={prep}", f"run_dir={work / 'run'}", *QUIET_TRAIN,
                           "train.max_steps=1", "train.eval_every=0", "train.save_every=0"])
    return train.train_model(cfg) / "last.pt"


def busy_loops(n: int) -> list[subprocess.Popen]:
    return [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(n)]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--lines", type=int, default=100)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--load", type=int, default=None, help="busy-loop processes [default: one per usable core]")
    ap.add_argument("--beam", type=int, default=5)
    ap.add_argument("--model", default="small", choices=["small", "tiny"])
    ap.add_argument("--settings", default=",".join(SETTINGS))
    ap.add_argument("--work", default=None)
    args = ap.parse_args()
    cores = len(os.sched_getaffinity(0))
    n_load = cores if args.load is None else args.load
    work = Path(args.work or tempfile.mkdtemp(prefix="busy_machine."))
    ckpt = make_checkpoint(work, args.model)
    import numpy as np
    rng = np.random.default_rng(1)
    src = work / "src.txt"
    src.write_text("".join(" ".join(f"w{i}" for i in rng.integers(0, 3000, rng.integers(4, 14))) + "\n"
                           for _ in range(args.lines)), encoding="utf-8")
    base_env = {k: v for k, v in os.environ.items() if k not in OMP_VARS}
    base_env["PYTHONPATH"] = str(REPO)
    given = {k: os.environ[k] for k in OMP_VARS if k in os.environ}
    print(f"cores {cores}, busy loops {n_load}, {args.lines} lines, beam {args.beam}, model {args.model}; "
          f"OpenMP variables removed for the runs: {given or 'none set'}", flush=True)
    names = [s for s in args.settings.split(",") if s]
    times: dict[str, list[float]] = {s: [] for s in names}
    info: dict[str, dict] = {}
    loops = busy_loops(n_load)
    try:
        time.sleep(1.0)
        for r in range(args.repeats):
            for name in names:
                extra, threads, import_cli = SETTINGS[name]
                job = {"ckpt": str(ckpt), "input": str(src), "output": str(work / f"out.{name}"),
                       "beam": args.beam, "threads": threads, "import_cli": import_cli}
                proc = subprocess.run([sys.executable, "-c", RUNNER, json.dumps(job)], env={**base_env, **extra},
                                      capture_output=True, text=True)
                if proc.returncode:
                    sys.exit(f"{name}: runner failed:\n{proc.stderr[-3000:]}")
                res = json.loads(proc.stdout.strip().splitlines()[-1])
                times[name].append(res["seconds"])
                info[name] = res
                print(f"round {r + 1} {name:9s} {res['seconds']:7.2f} s  (torch threads {res['torch_threads']}, "
                      f"OMP_WAIT_POLICY {res['OMP_WAIT_POLICY']}; load {os.getloadavg()[0]:.2f})", flush=True)
    finally:
        for p in loops:
            p.kill()
            p.wait()
    print("\nsetting    median s   runs")
    for name in names:
        print(f"{name:9s} {statistics.median(times[name]):8.2f}   " + " ".join(f"{t:.2f}" for t in times[name]))


if __name__ == "__main__":
    main()
