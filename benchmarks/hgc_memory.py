"""Peak memory of HGC's global context (docs/models.md §2.7; issue 16: "its word→word attention over a
30-sentence sub-document is O(M²): measure its memory at small and base shapes").

Usage: python benchmarks/hgc_memory.py [--lengths 20,40,100] [--tokens 8192] [--block 30]
       [--shapes small,base] [--chunks 0,256]

One training step (forward + backward, random weights, random token ids) of the encoder–decoder on
a batch of whole sub-documents — ``--block`` sentences of ``L`` source and target tokens each,
as many sub-documents as fit ``--tokens`` — for the sentence Transformer and for HGC
(``layers: all``, ``query_chunk`` from ``--chunks``), each in a fresh subprocess so that its peak
resident memory (``ru_maxrss``) is its own. Shapes: ``small`` = pipelines/transformer/small.yaml
(3+3, H 256), ``base`` = pipelines/transformer/base.yaml (6+6, H 512), 8,000-type vocabularies.
Prints a Markdown table: peak RSS (GiB), and HGC's extra over the sentence model.
"""
from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def _one(shape: str, length: int, tokens: int, block: int, hgc: bool, chunk: int) -> dict:
    import torch

    from doctrans.config import load_experiment
    from doctrans.data.documents import DocBatch
    from doctrans.models.build import build_model
    from doctrans.training.loss import forward_loss

    over = [f"context={{type: hgc, block: {block}, query_chunk: {chunk}}}"] if hgc else []
    cfg = load_experiment(REPO / "pipelines" / "transformer" / f"{shape}.yaml", over)
    torch.manual_seed(0)
    model = build_model(cfg.model, 8000, 8000, 0, cfg.context)
    subdocs = max(1, tokens // (block * length))
    b = subdocs * block

    batch = DocBatch(src=torch.randint(4, 8000, (b, length)), tgt_in=None, tgt_out=torch.randint(4, 8000, (b, length)),
                     index=None, n_targets=b * length, is_target=torch.ones(b, dtype=torch.bool),
                     ctx=torch.zeros((b, 0), dtype=torch.long),
                     block=torch.arange(subdocs).repeat_interleave(block))
    batch.tgt_in = torch.cat([torch.ones(b, 1, dtype=torch.long), batch.tgt_out[:, :-1]], 1)
    model.train()
    start = time.perf_counter()
    loss = forward_loss(model, batch, 0, 0.1)
    loss.total.backward()
    return {"rss_gib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20, "seconds": time.perf_counter() - start,
            "subdocs": subdocs, "rows": b}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--lengths", default="20,40,100", help="tokens per sentence (source and target)")
    ap.add_argument("--tokens", type=int, default=8192, help="source tokens per batch (S4: 8192)")
    ap.add_argument("--block", type=int, default=30, help="sentences per sub-document")
    ap.add_argument("--shapes", default="small,base")
    ap.add_argument("--chunks", default="0,256", help="HGC query_chunk values (0 = all queries at once)")
    ap.add_argument("--child", default=None, help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.child:
        print(json.dumps(_one(**json.loads(a.child))))
        return
    print(f"| shape | tokens/sentence | sub-documents × {a.block} | M (tokens per sub-document) | model | peak RSS (GiB) "
          "| extra over sentence (GiB) | step (s) |")
    print("| --- | ---: | ---: | ---: | --- | ---: | ---: | ---: |")
    for shape in a.shapes.split(","):
        for length in map(int, a.lengths.split(",")):
            base = None
            for hgc, chunk in [(False, 0)] + [(True, int(c)) for c in a.chunks.split(",")]:
                arg = json.dumps(dict(shape=shape, length=length, tokens=a.tokens, block=a.block, hgc=hgc, chunk=chunk))
                out = subprocess.run([sys.executable, __file__, "--child", arg], check=True, capture_output=True,
                                     text=True, cwd=REPO).stdout
                r = json.loads(out.strip().splitlines()[-1])
                base = r["rss_gib"] if not hgc else base
                name = f"HGC (query_chunk {chunk})" if hgc else "sentence"
                extra = f"{r['rss_gib'] - base:+.2f}" if hgc else "—"
                print(f"| {shape} | {length} | {r['subdocs']} | {a.block * length} | {name} | {r['rss_gib']:.2f} | {extra} "
                      f"| {r['seconds']:.1f} |", flush=True)


if __name__ == "__main__":
    main()
