"""How much of a HAN model's states is context, checkpoint by checkpoint (issue 29: why the HAN
encoder's CXMI stays near zero). Run by hand; figures go to a journal entry (docs/journal/, indexed in benchmarks/RESULTS.md).

Usage: python benchmarks/context_gate.py PREPARED [NAME=]CKPT [[NAME=]CKPT ...] [--split dev]
       [--rows 400] [--batch 50] [--plot FILE.png] [--json FILE.jsonl]

NAME labels the checkpoint's run in the plot (default: its directory's name), so checkpoints of a
run resumed into another directory draw one line.

For each checkpoint, the first ``--rows`` lines of ``PREPARED/SPLIT`` are run teacher-forced in
consecutive batches of ``--batch`` lines (each batch carries its own lines' previous sentences, as
document batches do), and every HAN block of the model (``explain_blocks()``) records, for the
query positions of rows that have context (Miculicich et al. 2018 eq. 6–8):

- ``context_share``: mean of (1 − λ_t) over positions and dimensions, λ_t the gate of eq. 7
  (1 = the block's output is all context, 0 = all the current sentence);
- ``norm_ratio``: mean over positions of ‖(1 − λ_t) ⊙ d_t‖ / ‖λ_t ⊙ h_t‖ (how large the context
  term is beside the sentence term in eq. 8, before LN_out);
- ``d_over_h``: mean of ‖d_t‖ / ‖h_t‖;
- ``word_entropy``: entropy of the word-level attention (eq. 4) over a context sentence's words,
  divided by log(number of words): 1 = uniform (the context summary is the sentence's mean),
  lower = the queries pick words.

Positions are all query positions of a block call (the row group's width: a few padding
positions are included). Raises SystemExit for a checkpoint without HAN blocks.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np
import torch
from _common import set_threads

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from doctrans.data.documents import DocBatchSpec, collate_doc, load_doc_split  # noqa: E402
from doctrans.data.vocab import Vocab  # noqa: E402
from doctrans.models.build import build_model  # noqa: E402
from doctrans.runtime.checkpoint import config_of, load_checkpoint  # noqa: E402
from doctrans.utils.io import atomic_write_text  # noqa: E402


def gate_stats(records: list[tuple[str, torch.Tensor]]) -> dict[str, list[float]]:
    """Per block call: the statistics of the module doc from a block's recorder entries
    (("gate", (λ, h, d)) with λ, h, d (R,T,H), rows whose d is 0 — no context — skipped;
    ("word", (R,N,A,T,L)) attention weights)."""
    out = {"context_share": [], "norm_ratio": [], "d_over_h": [], "word_entropy": []}
    for kind, value in records:
        if kind == "gate":
            lam, h, d = (t.float() for t in value)
            real = d.flatten(1).abs().sum(1) > 0                             # rows with context (d ≠ 0)
            lam, h, d = lam[real], h[real], d[real]
            if not len(lam):
                continue
            out["context_share"].append(float((1 - lam).mean()))
            out["norm_ratio"].append(float((((1 - lam) * d).norm(dim=-1)
                                            / (lam * h).norm(dim=-1).clamp(min=1e-9)).mean()))
            out["d_over_h"].append(float((d.norm(dim=-1) / h.norm(dim=-1).clamp(min=1e-9)).mean()))
        elif kind == "word":
            p = value.float()                                               # (R,N,A,T,L)
            words = (p > 0).sum(-1).clamp(min=2).float()                    # (R,N,A,T)
            ent = -(p.clamp(min=1e-12).log() * p).sum(-1) / words.log()
            out["word_entropy"].append(float(ent.mean()))
    return out


def probe(ckpt: Path, prepared: Path, split: str, rows: int, batch: int) -> dict:
    """The module doc's statistics of one checkpoint, averaged over batches, per block side."""
    ck = load_checkpoint(ckpt)
    exp = config_of(ck)
    sv, tv = Vocab(ck["vocab"]["src"]), Vocab(ck["vocab"]["tgt"])
    model = build_model(exp.model, len(sv), len(tv), 0, exp.context).eval()
    model.load_state_dict(ck["model"])
    blocks = model.explain_blocks()
    if not blocks:
        raise SystemExit(f"{ckpt}: the model has no HAN blocks to probe")
    data = load_doc_split(prepared, split, sv, tv)
    n = min(rows, len(data.src))
    acc: dict[str, dict[str, list[float]]] = {name: {} for name, _, _ in blocks}
    ctx_n = exp.context.context_sents
    for start in range(0, n, batch):
        first = start                                        # the first line's previous lines of its document
        while first > 0 and start - first < ctx_n and data.doc[first - 1] == data.doc[start]:
            first -= 1
        lines = np.arange(first, min(start + batch, n))
        b = collate_doc(data, DocBatchSpec(lines, lines >= start, ctx_n), tv)
        for _, block, _ in blocks:
            block.recorder = []
        try:
            with torch.no_grad():
                model.decode_train(model.encode(b), b.tgt_in)
            for name, block, _ in blocks:
                for key, vals in gate_stats(block.recorder).items():
                    acc[name].setdefault(key, []).extend(vals)
        finally:
            for _, block, _ in blocks:
                block.recorder = None
    return {"ckpt": str(ckpt), "step": int(ck["state"]["step"]),
            "blocks": {name: {k: round(float(np.mean(v)), 4) for k, v in stats.items() if v}
                       for name, stats in acc.items()}}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("prepared", type=Path)
    ap.add_argument("ckpts", nargs="+", metavar="[NAME=]CKPT")
    ap.add_argument("--split", default="dev")
    ap.add_argument("--rows", type=int, default=400, help="first lines of the split probed [400]")
    ap.add_argument("--batch", type=int, default=50, help="lines per teacher-forced batch [50]")
    ap.add_argument("--threads", type=int, default=1, help="torch threads [1]")
    ap.add_argument("--json", type=Path, help="also write the records here (JSON lines)")
    ap.add_argument("--plot", type=Path, help="PNG: context share and word entropy against the update")
    args = ap.parse_args()
    set_threads(args.threads)
    records = []
    for arg in args.ckpts:
        name, _, path = arg.rpartition("=") if "=" in arg else ("", "", arg)
        ck = Path(path)
        rec = probe(ck, args.prepared, args.split, args.rows, args.batch)
        rec["run"] = name or ck.parent.name
        print(json.dumps(rec), flush=True)
        records.append(rec)
    if args.json:
        atomic_write_text(args.json, "".join(json.dumps(r) + "\n" for r in records))
    if args.plot:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        fig, axes = plt.subplots(1, 2, figsize=(9, 3.4))
        runs: dict[str, list[dict]] = {}
        for r in records:
            runs.setdefault(r["run"], []).append(r)
        for run, recs in runs.items():
            recs = sorted(recs, key=lambda r: r["step"])
            for name in recs[0]["blocks"]:
                steps = [r["step"] for r in recs]
                axes[0].plot(steps, [r["blocks"][name].get("context_share") for r in recs], "o-",
                             label=f"{run} {name}")
                axes[1].plot(steps, [r["blocks"][name].get("word_entropy") for r in recs], "o-",
                             label=f"{run} {name}")
        axes[0].set(xlabel="update", ylabel="mean 1 − λ (context share)", ylim=(0, None))
        axes[1].set(xlabel="update", ylabel="word attention entropy / log L")
        axes[0].legend(fontsize=7)
        fig.tight_layout()
        args.plot.parent.mkdir(parents=True, exist_ok=True)
        fig.savefig(args.plot, dpi=110)
        print(f"wrote {args.plot}")


if __name__ == "__main__":
    main()
