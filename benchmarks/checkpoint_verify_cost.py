"""What verifying a checkpoint at load costs (issue 73, item 3): the shipped sentence model loaded
with ``torch.load`` alone, with ``load_checkpoint`` where it lies (a shipped file at its index
path: the file's SHA-256 against the index), and a copy of it carrying a digest
(``content_digest`` of its content); the two hashes alone; and the digest of a training
checkpoint of the same model (fp32 weights + Adam's two moments). Min and median of N rounds,
the ways of loading alternated so that each sees the same machine load; one torch thread.

    python benchmarks/checkpoint_verify_cost.py [--rounds 15]
"""
from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

import torch

from doctrans.runtime.checkpoint import load_checkpoint
from doctrans.runtime.checkpoint_digest import content_digest, storage_key, with_digest
from doctrans.runtime.shipped import default_model, sha256_of


def _stats(ts: list[float]) -> str:
    ts = sorted(ts)
    return f"min {ts[0] * 1e3:.1f} ms, median {ts[len(ts) // 2] * 1e3:.1f} ms"


def _timed(f) -> float:
    t = time.perf_counter()
    f()
    return time.perf_counter() - t


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=15)
    a = ap.parse_args()
    torch.set_num_threads(1)
    path = str(default_model("sentence").verify())
    raw = torch.load(path, map_location="cpu", weights_only=True)
    with tempfile.TemporaryDirectory() as tmp:
        copy = str(Path(tmp) / "with-digest.pt")
        torch.save(with_digest(raw), copy)
        print(f"{path}: {os.path.getsize(path):,} bytes; the copy with a digest: {os.path.getsize(copy):,} bytes")
        cases = {"torch.load alone": lambda: torch.load(path, map_location="cpu", weights_only=True),
                 "load_checkpoint, the shipped file at its index path": lambda: load_checkpoint(path),
                 "load_checkpoint, a copy carrying a digest": lambda: load_checkpoint(copy),
                 "content_digest alone": lambda: content_digest(raw),
                 "SHA-256 of the file alone": lambda: sha256_of(path)}
        times: dict[str, list[float]] = {k: [] for k in cases}
        for _ in range(a.rounds):
            for k, f in cases.items():
                times[k].append(_timed(f))
    for k, ts in times.items():
        print(f"{k:55s} {_stats(ts)}")
    done: dict[tuple, torch.Tensor] = {}                 # fp32, tied weights kept one tensor
    m32 = {k: done.setdefault(storage_key(v), v.float()) for k, v in raw["model"].items()}
    params = list({storage_key(v): v for v in m32.values()}.values())
    opt = [{"state": {i: {"step": torch.tensor(5.0), "exp_avg": v.clone(), "exp_avg_sq": v.clone()}
                      for i, v in enumerate(params)},
            "param_groups": [{"lr": 1e-3, "params": list(range(len(params)))}]}]
    big = {**raw, "model": m32, "optimizer": opt}
    mb = sum(t.numel() * 4 for t in params) * 3 / 1e6
    print(f"content_digest of a training checkpoint (fp32 + Adam, {mb:.0f} MB of tensors): "
          + _stats([_timed(lambda: content_digest(big)) for _ in range(5)]))


if __name__ == "__main__":
    main()
