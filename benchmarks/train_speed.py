"""Training throughput of the doctrans Transformer on real prepared data (target tokens/s).

Usage: python benchmarks/train_speed.py PREPARED_DIR [--config pipelines/transformer/small.yaml]
       [--updates 20] [--warmup-updates 3] [--autocast none,bf16,auto] [--threads 2] [--cpu-time]
       [--compile] [--raw]

Times ``--updates`` optimizer updates (after ``--warmup-updates`` untimed ones) on the same
batches for every variant, so the figures are ratios measured in one run. ``--compile`` adds
each variant with the doctrans model under ``torch.compile``; ``--raw`` adds the raw-PyTorch
ceiling of the same shapes: ``torch.nn.Transformer`` (pre-norm, the config's layers, width, heads,
FFN and dropout; sinusoidal positions, tied decoder embeddings) with ``F.cross_entropy``'s label
smoothing, on the same padded batches, the same Adam — what the step could cost with nothing of
doctrans' own (issue 74, item 6).
"""
from __future__ import annotations

import argparse
import math
import time
from pathlib import Path

import torch
import torch.nn.functional as F
from _common import set_threads

from doctrans.config import load_experiment
from doctrans.data.batching import collate, epoch_batches, load_parallel, make_batches
from doctrans.data.vocab import Vocab
from doctrans.models.build import build_model
from doctrans.training.loss import forward_loss
from doctrans.utils.cpu import resolve_autocast


class RawTransformer(torch.nn.Module):
    """The ceiling: ``torch.nn.Transformer`` at ``cfg.model``'s shapes (pre-norm), sinusoidal
    positions, the decoder's embeddings tied to the output projection, label-smoothed
    ``F.cross_entropy`` summed over the non-padding targets. forward(src (B, S), tgt_in (B, T),
    tgt_out (B, T)) → (summed loss, target tokens)."""

    def __init__(self, m, src_n: int, tgt_n: int, max_len: int = 1024):
        super().__init__()
        self.d = m.d_model
        self.src_embed = torch.nn.Embedding(src_n, m.d_model, padding_idx=0)
        self.tgt_embed = torch.nn.Embedding(tgt_n, m.d_model, padding_idx=0)
        self.core = torch.nn.Transformer(m.d_model, m.heads, m.layers_enc, m.layers_dec, m.d_ff, m.dropout,
                                         batch_first=True, norm_first=True)
        pos = torch.arange(max_len)[:, None] * torch.exp(torch.arange(0, m.d_model, 2) * (-math.log(1e4) / m.d_model))
        pe = torch.zeros(max_len, m.d_model)
        pe[:, 0::2], pe[:, 1::2] = torch.sin(pos), torch.cos(pos)
        self.register_buffer("pe", pe)
        self.drop = torch.nn.Dropout(m.dropout)

    def embed(self, table, ids):
        return self.drop(table(ids) * math.sqrt(self.d) + self.pe[: ids.size(1)])

    def forward(self, src, tgt_in, tgt_out):
        causal = torch.nn.Transformer.generate_square_subsequent_mask(tgt_in.size(1), dtype=torch.bool)
        h = self.core(self.embed(self.src_embed, src), self.embed(self.tgt_embed, tgt_in), tgt_mask=causal,
                      src_key_padding_mask=src.eq(0), tgt_key_padding_mask=tgt_in.eq(0),
                      memory_key_padding_mask=src.eq(0), tgt_is_causal=True)
        logits = h @ self.tgt_embed.weight.t()
        loss = F.cross_entropy(logits.flatten(0, 1).float(), tgt_out.flatten(), ignore_index=0,
                               label_smoothing=0.1, reduction="sum")
        return loss, int(tgt_out.ne(0).sum())


def measure(cfg, data, batches, tgt_vocab, src_n, autocast: str, updates: int, warm: int,
            clock=time.perf_counter, kind: str = "doctrans") -> float:
    """Target tokens per second of ``clock`` (wall time by default; ``time.process_time``: this
    process's CPU time, steadier than wall time on a machine shared with other jobs). ``kind``:
    doctrans (its model and loss), compiled (the same under ``torch.compile``), raw
    (``RawTransformer``)."""
    torch.manual_seed(0)
    if kind == "raw":
        model = RawTransformer(cfg.model, src_n, len(tgt_vocab)).train()
    else:
        model = build_model(cfg.model, src_n, len(tgt_vocab)).train()
    opt = torch.optim.Adam(model.parameters(), lr=1e-4, fused=True)
    step = torch.compile(forward_loss) if kind == "compiled" else forward_loss
    tokens, elapsed = 0, 0.0
    for i, idx in enumerate(batches[: warm + updates]):
        b = collate(data, idx, tgt_vocab)
        t0 = clock()
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast == "bf16"):
            if kind == "raw":
                total, n = model(b.src, b.tgt_in, b.tgt_out)
            else:
                out = step(model, b, 0, 0.1)
                total, n = out.total, out.n_tokens
        (total / n).backward()
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
    ap.add_argument("--compile", action="store_true", help="also each variant under torch.compile")
    ap.add_argument("--raw", action="store_true", help="also the raw-PyTorch ceiling (nn.Transformer) of each variant")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                    help="a config override (e.g. train.max_tokens=4096); repeatable")
    args = ap.parse_args()
    set_threads(args.threads)
    cfg = load_experiment(args.config, [f"data.prepared={args.prepared}", *args.set])
    src_v = Vocab.from_counts_file(f"{args.prepared}/vocab.zh.txt")
    tgt_v = Vocab.from_counts_file(f"{args.prepared}/vocab.en.txt")
    target = Path(args.prepared) / "train.target"          # absent in datasets of format 1
    data, _ = load_parallel(f"{args.prepared}/train.bpe.zh", f"{args.prepared}/train.bpe.en", src_v, tgt_v, 128,
                            target if target.is_file() else None)
    batches = epoch_batches(make_batches(data, cfg.train.max_tokens, 1), 1, 0)
    print(f"torch {torch.__version__}, threads {torch.get_num_threads()}, max_tokens {cfg.train.max_tokens}, "
          f"{args.updates} timed updates")
    kinds = ["doctrans"] + ["compiled"] * args.compile + ["raw"] * args.raw
    first = None
    for variant in args.autocast.split(","):
        runs = resolve_autocast(variant, torch.device("cpu"))          # auto: what `doctrans train` would choose
        for kind in kinds:
            tps = measure(cfg, data, batches, tgt_v, len(src_v), runs, args.updates, args.warmup_updates,
                          time.process_time if args.cpu_time else time.perf_counter, kind)
            first = first or tps
            shown = f"{variant} ({runs})" if variant == "auto" else variant
            print(f"{kind:9s} autocast={shown:12s} {tps:8.0f} target tok/{'CPU-s' if args.cpu_time else 's'} "
                  f"({tps / first:.2f}x the first)", flush=True)


if __name__ == "__main__":
    main()
