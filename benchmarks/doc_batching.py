"""Document-aware batching vs sentence-level length-bucketed batching on a prepared dataset.

Usage: python benchmarks/doc_batching.py PREPARED_DIR [--max-tokens 4096] [--context 1,3]
       [--max-len 80] [--collate 200] [--modes runs,sorted]

For ``batching.make_batches`` (N = 0, sentence level) and ``documents.make_doc_batches`` at each
N of ``--context`` and each mode of ``--modes``: time to plan one epoch's batches, time to collate ``--collate`` batches (ms per
batch), batches per epoch, and the shares of the padded token grid (rows × width per batch,
summed over source and target input): real tokens of target rows, of context-only rows, and
padding. Prints a Markdown table.
"""
from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np

from doctrans.data.batching import collate, epoch_batches, load_parallel, make_batches
from doctrans.data.documents import collate_doc, load_doc_split, make_doc_batches

from _common import prepared_vocabs


def grid_shares(batches) -> tuple[float, float, float]:
    """(target-row tokens, context-row tokens, padding) as shares of the padded src+tgt grid."""
    target = context = grid = 0
    for b in batches:
        keep = b.is_target.numpy() if hasattr(b, "is_target") else np.ones(len(b.index), dtype=bool)
        real = (b.src.ne(0).sum(1) + b.tgt_in.ne(0).sum(1)).numpy()
        target += int(real[keep].sum())
        context += int(real[~keep].sum())
        grid += b.src.numel() + b.tgt_in.numel()
    return target / grid, context / grid, 1 - (target + context) / grid


def row(name: str, plan_s: float, keys, collate_fn, n_collate: int) -> str:
    t0 = time.perf_counter()
    batches = [collate_fn(k) for k in keys[:n_collate]]
    ms = (time.perf_counter() - t0) / len(batches) * 1000
    t, c, p = grid_shares(batches)
    return f"| {name} | {len(keys):,} | {plan_s:.2f} | {ms:.2f} | {t:.1%} | {c:.1%} | {p:.1%} |"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("prepared", type=Path)
    ap.add_argument("--max-tokens", type=int, default=4096)
    ap.add_argument("--context", default="1,3")
    ap.add_argument("--max-len", type=int, default=80)
    ap.add_argument("--collate", type=int, default=200)
    ap.add_argument("--modes", default="runs,sorted", help="data.doc_batching modes to compare")
    a = ap.parse_args()
    prep = a.prepared
    sv, tv = prepared_vocabs(prep)
    target = prep / "train.target"
    pairs, _ = load_parallel(prep / "train.bpe.zh", prep / "train.bpe.en", sv, tv, a.max_len,
                             target if target.is_file() else None)
    docs = load_doc_split(prep, "train", sv, tv, a.max_len)
    print(f"{len(pairs):,} target pairs; {len(docs):,} lines in {docs.n_docs} documents; max_tokens {a.max_tokens}\n")
    print("| batching | batches/epoch | plan s | collate ms/batch | target tokens | context tokens | padding |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: |")
    t0 = time.perf_counter()
    keys = epoch_batches(make_batches(pairs, a.max_tokens, 1), 1, 0)
    print(row("sentence (make_batches)", time.perf_counter() - t0, keys,
              lambda k: collate(pairs, k, tv), a.collate), flush=True)
    for n in (int(x) for x in a.context.split(",")):
        for mode in a.modes.split(","):
            t0 = time.perf_counter()
            keys = make_doc_batches(docs, a.max_tokens, n, seed=1, epoch=0, mode=mode)
            print(row(f"documents {mode}, N = {n}", time.perf_counter() - t0, keys,
                      lambda k: collate_doc(docs, k, tv), a.collate), flush=True)


if __name__ == "__main__":
    main()
