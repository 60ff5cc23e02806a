"""Training step time of the reconstructor models vs the sentence Transformer they continue (issue 28).

Usage: python benchmarks/rec_speed.py PREPARED_DIR CHECKPOINT [--updates 10] [--warmup 3]
       [--systems baseline,rec_both,rec_both:full,rec_shared,rec_joint_labeler] [--threads 1]
       [--pronoun-dropout P]

Every system starts from CHECKPOINT (the quickstart's stage-1 ``last.pt``, ``train.init_from`` as
in ``pipelines/dp/rec_*.yaml``): ``baseline`` is ``pipelines/quickstart.yaml`` continued, NAME is
``pipelines/dp/NAME.yaml``, ``NAME:full`` the same with ``model.reconstructor.softmax=full`` (the
thesis' full source-vocabulary softmax in training). Data: PREPARED's train split with each
model's reconstruction target and DP labels (``training.train.attach_reconstruction``, x̂ from
PREPARED/dp). The systems are trained **interleaved by update** (update k of every system, then
k + 1…) on the same first batches of epoch 0 (``make_batches``, train.seed), so load on a shared
machine hits all alike: forward_loss (cross-entropy + the model's auxiliary terms), backward,
clipping at 1.0, Adam. Prints a Markdown table: seconds per update (mean of the ``--updates``
timed ones after ``--warmup`` untimed), target tok/s, the ratio to the baseline, and the
loss terms (nats per target token) of the first and last timed update.
A document model (``rec_joint_context``) trains on its document batches (``make_doc_batches``,
runs of consecutive sentences with their N context rows, ``data.doc_batching`` of its YAML):
other batches than the sentence systems', so compare its target tok/s, not s/update — or compare
it with a context model of the same N: ``DIR/NAME`` is ``pipelines/DIR/NAME.yaml`` (e.g.
``context/han_encoder+pd,rec_joint_labeler_han+pd``: the HAN encoder and the joint labeler over
it, the same document batches).
``NAME+pd`` (with ``--pronoun-dropout P``, default 0.5) is NAME trained with ``train.pronoun_dropout``:
its batches pass through the training task's context-usage step (``data.context_usage``: the
deletions and, for a reconstructor, the rewritten x̂ / DP labels), whose time counts in its update.
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
import torch
from _common import set_threads

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from doctrans.config import load_experiment  # noqa: E402
from doctrans.data.context_usage import apply_context_usage, usage_generator  # noqa: E402
from doctrans.data.batching import ParallelData, collate, epoch_batches, load_parallel, make_batches  # noqa: E402
from doctrans.data.documents import collate_doc, load_doc_split, make_doc_batches  # noqa: E402
from doctrans.models.build import build_model  # noqa: E402
from doctrans.models.interface import bind_vocabularies  # noqa: E402
from doctrans.training.loss import forward_loss  # noqa: E402
from doctrans.training.train import NMTTask, _vocabs, attach_reconstruction, initialise_from  # noqa: E402


def system(name: str, prep: Path, ckpt: str, cache: dict, pronoun_dropout: float = 0.5):
    name, pd = (name[:-3], True) if name.endswith("+pd") else (name, False)
    base, _, variant = name.partition(":")
    path = REPO / "pipelines" / ("quickstart.yaml" if base == "baseline" else
                                 f"{base}.yaml" if "/" in base else f"dp/{base}.yaml")
    opts = [f"data.prepared={prep}", f"data.rec_dir={prep / 'dp'}", f"train.init_from={ckpt}"]
    if variant:
        opts.append(f"model.reconstructor.softmax={variant}")
    if pd:
        opts.append(f"train.pronoun_dropout={pronoun_dropout}")
    cfg = load_experiment(path, opts)
    src_vocab, tgt_vocab = _vocabs(cfg)
    torch.manual_seed(cfg.train.seed)
    model = build_model(cfg.model, len(src_vocab), len(tgt_vocab), src_vocab.pad_id)
    bind_vocabularies(model, src_vocab, tgt_vocab)
    if model.document.reads_documents:
        data = load_doc_split(prep, "train", src_vocab, tgt_vocab, cfg.data.max_len)
    else:
        key = len(src_vocab)
        if key not in cache:
            cache[key], _ = load_parallel(prep / "train.bpe.zh", prep / "train.bpe.en", src_vocab, tgt_vocab,
                                          max_len=cfg.data.max_len, target_path=prep / "train.target")
        full = cache[key]
        data = ParallelData(list(full.src), full.tgt, full.line)
    attach_reconstruction(cfg, model, "train", data, src_vocab)
    initialise_from(model, ckpt)
    model.train()
    opt = torch.optim.Adam(model.parameters(), lr=1e-4, betas=(0.9, 0.98))
    usage = None
    if pd:                                         # the training task's own usage step (no model named)
        t = cfg.train
        ids = NMTTask._pronoun_dropout_ids(t, src_vocab)
        rec = NMTTask._reconstruction_drop(t, model, src_vocab)
        joins = np.array([w.endswith("@@") for w in src_vocab.tokens])

        def usage(batch, k):
            return apply_context_usage(batch, t.coword_dropout, t.context_dropout, usage_generator(t.seed, 0, k),
                                       t.pronoun_dropout, ids, joins, rec)
    return cfg, model, opt, data, tgt_vocab, usage


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("prepared", type=Path)
    ap.add_argument("checkpoint")
    ap.add_argument("--updates", type=int, default=10)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--systems", default="baseline,rec_both,rec_both:full,rec_shared,rec_joint_labeler")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--pronoun-dropout", type=float, default=0.5, help="p of the NAME+pd systems")
    args = ap.parse_args()
    set_threads(args.threads)
    cache: dict = {}
    names = args.systems.split(",")
    systems = {n: system(n, args.prepared, args.checkpoint, cache, args.pronoun_dropout) for n in names}
    cfg0, _, _, data0, _, _ = systems[names[0]]
    order = epoch_batches(make_batches(data0, cfg0.train.max_tokens, cfg0.train.seed), cfg0.train.seed, 0)
    doc_order = {}
    for n, (cfg, model, _, data, _, _) in systems.items():
        if model.document.reads_documents:
            doc_order[n] = make_doc_batches(data, cfg.train.max_tokens, model.document.context_sents, cfg.train.seed, 0,
                                            mode=cfg.data.doc_batching, budget=cfg.data.doc_budget)
    secs = dict.fromkeys(names, 0.0)
    toks = dict.fromkeys(names, 0)
    terms: dict[str, list[dict]] = {n: [] for n in names}
    for k in range(args.warmup + args.updates):
        for n in names:
            cfg, model, opt, data, tgt_vocab, usage = systems[n]
            batch = collate_doc(data, doc_order[n][k], tgt_vocab) if n in doc_order else collate(data, order[k], tgt_vocab)
            t0 = time.perf_counter()
            if usage is not None:
                batch = usage(batch, k)
            out = forward_loss(model, batch, tgt_vocab.pad_id, cfg.train.label_smoothing)
            opt.zero_grad(set_to_none=True)
            (out.total / out.n_tokens).backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            dt = time.perf_counter() - t0
            if k >= args.warmup:
                secs[n] += dt
                toks[n] += out.n_tokens
                terms[n].append({t: v / out.n_tokens for t, v in out.terms.items()})
            print(f"update {k} {n}: {dt:.2f} s", file=sys.stderr, flush=True)
    base = secs[names[0]] / args.updates
    print(f"| system | s/update | target tok/s | × {names[0]} | terms (nats/target token): first → last timed update |")
    print("|---|---|---|---|---|")
    for n in names:
        s = secs[n] / args.updates
        first, last = terms[n][0], terms[n][-1]
        show = ", ".join(f"{t} {first[t]:.2f} → {last[t]:.2f}" for t in first)
        print(f"| {n} | {s:.2f} | {toks[n] / secs[n]:.0f} | {s / base:.2f} | {show} |")


if __name__ == "__main__":
    main()
