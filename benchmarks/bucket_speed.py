"""Length buckets of document batches: equal-count groups vs grid-minimising cuts (issue 16).

Usage: python benchmarks/bucket_speed.py PREPARED_DIR [--models qcn,han_encoder] [--batches 5]
       [--repeats 3] [--max-tokens 4096] [--threads 1]

A document batch's target rows are encoded and decoded in at most ``LENGTH_BUCKETS`` length
groups (``models.rows.length_buckets``). This compares the two ways of cutting the
length-sorted rows, on the first ``--batches`` document batches of epoch 0 of the training split
(``make_doc_batches``, runs mode, train.seed):

* **equal**: ``LENGTH_BUCKETS`` groups of equal row count (the implementation before 2026-11-24);
* **grid**: the cuts between distinct lengths that minimise Σ_g rows_g × longest_g (now).

It prints (1) the grid efficiency, real tokens / padded grid, of the encoder (groups by source
length) and the decoder (groups by max(source, target), as ``training.loss.target_logits``), and
(2) for the sentence Transformer (``pipelines/quickstart.yaml``, every target row encoded in
buckets, no context) and each ``pipelines/context/{model}.yaml`` built from scratch, on the
first batches of its own plan (its N previous sentences or sub-documents): the seconds of
forward_loss + backward over the batches under each cutting, interleaved batch by batch (same
model, same batches, no optimizer step, so both see the same parameters), the first of
``--repeats`` passes untimed. Ratios are what to read; the machine's load shifts both.
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import torch
from _common import prepared_vocabs, set_threads

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from doctrans.config import load_experiment  # noqa: E402
from doctrans.data.documents import collate_doc, load_doc_split, make_doc_batches  # noqa: E402
from doctrans.models.build import build_model  # noqa: E402
from doctrans.models import rows as base  # noqa: E402
from doctrans.models.context.base import ContextModel  # noqa: E402
from doctrans.models.rows import encode_bucketed, scatter_rows  # noqa: E402
from doctrans.training.loss import forward_loss  # noqa: E402

GRID = base.length_buckets


def equal_buckets(lengths, max_buckets=None, min_rows=8):
    """The previous ``length_buckets``: the length-sorted rows in equal-count groups."""
    order = lengths.argsort(stable=True)
    k = max(1, min(max_buckets or base.LENGTH_BUCKETS, order.numel() // min_rows))
    return [c for c in order.chunk(k) if c.numel()]


def use(fn) -> None:
    """Make every loaded module that imported ``length_buckets`` call ``fn``."""
    for mod in list(sys.modules.values()):
        if getattr(mod, "length_buckets", None) in (GRID, equal_buckets):
            mod.length_buckets = fn


class BucketedSentence(ContextModel):
    """The sentence model on document batches: target rows encoded in length buckets, no context."""

    def encode(self, batch):
        rows = batch.is_target.nonzero().squeeze(1)
        return scatter_rows(encode_bucketed(self.backbone, batch.src, rows), batch.src.size(0), batch.src.size(1))


def efficiency(batches, fn) -> tuple[float, float]:
    """(encoder, decoder) real tokens / padded grid of the target rows under ``fn``."""
    cells = {"enc": [0, 0], "dec": [0, 0]}
    for b in batches:
        rows = b.is_target.nonzero().squeeze(1)
        s_len, t_len = b.src[rows].ne(0).sum(1), b.tgt_out[rows].ne(0).sum(1)
        for side, key, lengths in (("enc", s_len, s_len), ("dec", torch.maximum(s_len, t_len), t_len)):
            for g in fn(key):
                cells[side][0] += int(lengths[g].sum())
                cells[side][1] += len(g) * int(lengths[g].max())
    return cells["enc"][0] / cells["enc"][1], cells["dec"][0] / cells["dec"][1]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("prepared", type=Path)
    ap.add_argument("--models", default="qcn,han_encoder")
    ap.add_argument("--batches", type=int, default=5)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--max-tokens", type=int, default=4096)
    ap.add_argument("--threads", type=int, default=1)
    a = ap.parse_args()
    set_threads(a.threads)
    sv, tv = prepared_vocabs(a.prepared)
    cfg = load_experiment(REPO / "pipelines" / "quickstart.yaml", [f"data.prepared={a.prepared}"])
    docs = load_doc_split(a.prepared, "train", sv, tv, cfg.data.max_len)
    plan = make_doc_batches(docs, a.max_tokens, 3, cfg.train.seed, 0)[:a.batches]
    batches = [collate_doc(docs, k, tv) for k in plan]
    print(f"{len(batches)} document batches, {sum(int(b.is_target.sum()) for b in batches)} target rows, "
          f"at most {base.LENGTH_BUCKETS} buckets\n")
    print("| cutting | encoder grid efficiency | decoder grid efficiency |\n| --- | ---: | ---: |")
    for name, fn in (("equal", equal_buckets), ("grid", GRID)):
        enc, dec = efficiency(batches, fn)
        print(f"| {name} | {enc:.3f} | {dec:.3f} |")
    systems = []
    torch.manual_seed(cfg.train.seed)
    systems.append(("sentence (bucketed)", BucketedSentence(build_model(cfg.model, len(sv), len(tv), 0, None), 3),
                    batches))
    for model in a.models.split(","):
        c = load_experiment(REPO / "pipelines" / "context" / f"{model}.yaml", ['train.init_from=""'])
        torch.manual_seed(c.train.seed)
        own = make_doc_batches(docs, a.max_tokens, getattr(c.context, "context_sents", 0), c.train.seed, 0,
                               block=getattr(c.context, "block", 0))[:a.batches]     # its own N / sub-documents
        systems.append((model, build_model(c.model, len(sv), len(tv), 0, c.context),
                        [collate_doc(docs, k, tv) for k in own]))
    seconds = {(name, cut): 0.0 for name, _, _ in systems for cut in ("equal", "grid")}
    for r in range(a.repeats):
        for i in range(a.batches):
            for name, m, own in systems:
                if i >= len(own):
                    continue
                b = own[i]
                m.train()
                for cut, fn in (("equal", equal_buckets), ("grid", GRID)):
                    use(fn)
                    t0 = time.perf_counter()
                    forward_loss(m, b, 0, 0.1).total.backward()
                    if r:
                        seconds[name, cut] += time.perf_counter() - t0
                    m.zero_grad(set_to_none=True)
    use(GRID)
    print(f"\nforward + backward over the batches, {a.repeats - 1} timed passes, interleaved\n")
    print("| model | equal s | grid s | speed-up |\n| --- | ---: | ---: | ---: |")
    for name, _, _ in systems:
        e, g = seconds[name, "equal"], seconds[name, "grid"]
        print(f"| {name} | {e:.2f} | {g:.2f} | {e / g:.3f} |")


if __name__ == "__main__":
    main()
