"""Training throughput of the doctrans Transformer on real prepared data (target tokens/s).

Usage: python benchmarks/train_speed.py PREPARED_DIR [--config pipelines/transformer/small.yaml]
       [--updates 20] [--warmup-updates 3] [--autocast none,bf16,auto] [--threads 2] [--cpu-time]

Times ``--updates`` optimizer updates (after ``--warmup-updates`` untimed ones) on the same
batches for every variant, so the figures are ratios measured in one run.
"""
from __future__ import annotations

import argparse
import time
from pathlib import Path

import torch
from _common import set_threads

from doctrans.config import load_experiment
from doctrans.data.batching import collate, epoch_batches, load_parallel, make_batches
from doctrans.data.vocab import Vocab
from doctrans.models.build import build_model
from doctrans.training.loss import forward_loss
from doctrans.utils.cpu import resolve_autocast


def measure(cfg, data, batches, tgt_vocab, src_n, autocast: str, updates: int, warm: int,
            clock=time.perf_counter) -> float:
    """Target tokens per second of ``clock`` (wall time by default; ``time.process_time``: this
    process's CPU time, steadier than wall time on a machine shared with other jobs)."""
    torch.manual_seed(0)
    model = build_model(cfg.model, src_n, len(tgt_vocab)).train()
    opt = torch.optim.Adam(model.parameters(), lr=1e-4, fused=True)
    tokens, elapsed = 0, 0.0
    for i, idx in enumerate(batches[: warm + updates]):
        b = collate(data, idx, tgt_vocab)
        t0 = clock()
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast == "bf16"):
            out = forward_loss(model, b, 0, 0.1)
        (out.total / out.n_tokens).backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        if i >= warm:
            elapsed += clock() - t0
            tokens += b.n_targets
    return tokens / elapsed


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("prepared")
    ap.add_argument("--config", default="pipelines/transformer/small.yaml")
    ap.add_argument("--updates", type=int, default=20)
    ap.add_argument("--warmup-updates", type=int, default=3)
    ap.add_argument("--autocast", default="none,bf16")
    ap.add_argument("--threads", type=int, default=0)
    ap.add_argument("--cpu-time", action="store_true",
                    help="tokens per CPU-second of this process instead of per wall-second (a shared machine)")
    args = ap.parse_args()
    set_threads(args.threads)
    cfg = load_experiment(args.config, [f"data.prepared={args.prepared}"])
    src_v = Vocab.from_counts_file(f"{args.prepared}/vocab.zh.txt")
    tgt_v = Vocab.from_counts_file(f"{args.prepared}/vocab.en.txt")
    target = Path(args.prepared) / "train.target"          # absent in datasets of format 1
    data, _ = load_parallel(f"{args.prepared}/train.bpe.zh", f"{args.prepared}/train.bpe.en", src_v, tgt_v, 128,
                            target if target.is_file() else None)
    batches = epoch_batches(make_batches(data, cfg.train.max_tokens, 1), 1, 0)
    print(f"torch {torch.__version__}, threads {torch.get_num_threads()}, max_tokens {cfg.train.max_tokens}, "
          f"{args.updates} timed updates")
    for variant in args.autocast.split(","):
        runs = resolve_autocast(variant, torch.device("cpu"))          # auto: what `doctrans train` would choose
        tps = measure(cfg, data, batches, tgt_v, len(src_v), runs, args.updates, args.warmup_updates,
                      time.process_time if args.cpu_time else time.perf_counter)
        shown = f"{variant} ({runs})" if variant == "auto" else variant
        print(f"autocast={shown:12s} {tps:8.0f} target tok/{'CPU-s' if args.cpu_time else 's'}", flush=True)


if __name__ == "__main__":
    main()
