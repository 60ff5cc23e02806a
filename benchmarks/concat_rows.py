"""Time of building the concatenation models' inputs — the source concatenation
(``ConcatContext.concatenated_source``) and the target prefix (``TargetConcat.target_prefix``) —
for real document batches, per batch (issue 48: `tgt_concat` trained at 0.19× the sentence
model's target tok/s on an H200, alone or sharing the GPU alike: its input, not the GPU, set the
pace).

Usage: python benchmarks/concat_rows.py --prepared PREP [--max-tokens 32768] [--batches 5]
       [--device cpu|cuda] [--checkpoint CKPT]

The batches: ``make_doc_batches`` of PREP's train split (runs, 1 context sentence, epoch 0, seed
1), the first ``--batches``. The model: the shipped document model ``tvsub-tgt-concat-3x3``
(or ``--checkpoint``; only its padding id, context size and prefix cap matter). Prints, per
batch, the rows, and the milliseconds of each function (the median of 3 runs), as JSON lines.
"""
from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

import torch

from doctrans.data.documents import collate_doc, load_doc_split, make_doc_batches
from doctrans.data.vocab import Vocab


def _ms(fn, device: str) -> float:
    times = []
    for _ in range(3):
        if device == "cuda":
            torch.cuda.synchronize()
        t = time.perf_counter()
        fn()
        if device == "cuda":
            torch.cuda.synchronize()
        times.append((time.perf_counter() - t) * 1000)
    return statistics.median(times)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--prepared", required=True, type=Path)
    ap.add_argument("--max-tokens", type=int, default=32768)
    ap.add_argument("--batches", type=int, default=5)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--checkpoint", default="tvsub-tgt-concat-3x3")
    args = ap.parse_args()
    torch.set_num_threads(1)
    from doctrans.runtime.checkpoint import build_translation_model, load_checkpoint
    from doctrans.runtime.shipped import resolve
    path = resolve(args.checkpoint)
    model = build_translation_model(load_checkpoint(path), path)[2].to(args.device)
    src_vocab = Vocab.from_counts_file(args.prepared / "vocab.zh.txt")
    tgt_vocab = Vocab.from_counts_file(args.prepared / "vocab.en.txt")
    data = load_doc_split(args.prepared, "train", src_vocab, tgt_vocab)
    specs = make_doc_batches(data, args.max_tokens, 1, seed=1)[:args.batches]
    for spec in specs:
        batch = collate_doc(data, spec, tgt_vocab).to(torch.device(args.device))
        src_ms = _ms(lambda: model.concatenated_source(batch), args.device)
        tgt_ms = _ms(lambda: model.target_prefix(batch), args.device)
        print(json.dumps({"rows": int(batch.src.size(0)), "targets": int(batch.is_target.sum()),
                          "concatenated_source_ms": round(src_ms, 2), "target_prefix_ms": round(tgt_ms, 2)}))


if __name__ == "__main__":
    main()
