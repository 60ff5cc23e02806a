"""Time one training step of the thesis DPP detector (Elman RNN, 200/200, window 5) with dense
vs sparse embedding gradients (``MixedAdam``), on synthetic batches shaped like TVsub's.

    python benchmarks/dp_detector_step.py [--vocab 50000] [--tokens 7] [--steps 20]

Prints ms per step and sentences/s for batch 256 and 512; figures go to a journal entry (docs/journal/, indexed in benchmarks/RESULTS.md).
"""
from __future__ import annotations

import argparse
import time

import torch
import torch.nn.functional as F

from doctrans.dp.models.thesis import ElmanDetector
from doctrans.training.optim import MixedAdam


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--vocab", type=int, default=50_000)
    ap.add_argument("--tokens", type=int, default=7, help="positions per sentence (TVsub: ≈ 6 + </s>)")
    ap.add_argument("--steps", type=int, default=20)
    args = ap.parse_args()
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads")
    for batch in (256, 512):
        for sparse in (False, True):
            torch.manual_seed(0)
            model = ElmanDetector(args.vocab, 200, 200, 5, 0, sparse=sparse)
            opt = MixedAdam(model, 1e-3)
            toks = torch.randint(1, args.vocab, (batch, args.tokens))
            gold = torch.randint(0, 2, (batch, args.tokens))

            def step():
                loss = F.cross_entropy(model(toks).flatten(0, 1), gold.flatten())
                opt.zero_grad()
                loss.backward()
                opt.step(max_norm=1.0)

            for _ in range(3):
                step()
            t0 = time.perf_counter()
            for _ in range(args.steps):
                step()
            dt = (time.perf_counter() - t0) / args.steps
            print(f"batch {batch:4d} sparse={sparse!s:5}: {dt * 1000:6.1f} ms/step, {batch / dt:7.0f} sentences/s")


if __name__ == "__main__":
    main()
