"""Speed of one HAN block (``models/context/han_block.py``) at the shapes of the quickstart slice.

Usage: python benchmarks/han_block_speed.py [--threads 1] [--repeats 20] [--d-model 256] [--d-ff 1024]

Three cases, each timed over ``--repeats`` calls after 3 untimed ones:

* ``encoder train``: HAN encoder in training, B = 64 target rows of T = 16 source tokens, N = 3
  context sentences of L = 16 tokens, forward + backward (``detach_context`` on, the default);
* ``encoder infer``: the same shapes, forward only, no gradient;
* ``decoder step``: one beam-search step of HAN decoder, 64 sentences × beam 5 queries against
  the N = 3 context sentences of L = 16 target tokens.

Run it with ``PYTHONPATH`` pointing at two checkouts to compare implementations: the block's
parameters and outputs are the same, only the time changes.
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import torch

sys.path.append(str(Path(__file__).resolve().parents[1]))     # after PYTHONPATH: compare checkouts

from doctrans.models.context.han_block import HANBlock, HANBlockConfig  # noqa: E402


def _inputs(b: int, t: int, n: int, length: int, h: int, g: torch.Generator):
    x = torch.randn(b, t, h, generator=g)
    ctx = torch.randn(b, n, length, h, generator=g)
    lengths = torch.randint(3, length + 1, (b, n), generator=g)
    word_mask = torch.arange(length)[None, None, :] >= lengths[..., None]
    missing = torch.zeros(b, n, dtype=torch.bool)
    missing[: b // 8, 0] = True                                   # a few document starts
    return x, ctx, word_mask, missing


def _time(fn, repeats: int) -> float:
    for _ in range(3):
        fn()
    t0 = time.perf_counter()
    for _ in range(repeats):
        fn()
    return (time.perf_counter() - t0) / repeats * 1000.0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--repeats", type=int, default=20)
    ap.add_argument("--d-model", type=int, default=256)
    ap.add_argument("--d-ff", type=int, default=1024)
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    block = HANBlock(a.d_model, HANBlockConfig(heads=4, d_ff=a.d_ff, dropout=0.1))
    h, ctx, wm, miss = _inputs(64, 16, 3, 16, a.d_model, g)
    h.requires_grad_(True)

    def train() -> None:
        block.train()
        block(h, ctx, wm, miss).sum().backward()

    def infer() -> None:
        block.eval()
        with torch.no_grad():
            block(h, ctx, wm, miss)

    hq = torch.randn(64 * 5, 1, a.d_model, generator=g)
    rep = torch.arange(64).repeat_interleave(5)
    dctx, dwm, dmiss = ctx[rep], wm[rep], miss[rep]

    def step() -> None:
        block.eval()
        with torch.no_grad():
            block(hq, dctx, dwm, dmiss)

    print(f"torch {torch.__version__}, threads {a.threads}, H {a.d_model}, d_ff {a.d_ff}, mean of {a.repeats}")
    print("| case | ms per call |\n| --- | ---: |")
    for name, fn in (("encoder train (fwd+bwd)", train), ("encoder infer", infer), ("decoder step (64×5 rows)", step)):
        print(f"| {name} | {_time(fn, a.repeats):.2f} |", flush=True)


if __name__ == "__main__":
    main()
