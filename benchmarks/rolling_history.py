"""The rolling history's cost (issue 52): document translation time of the target-side
concatenation model (``models/context/tgt_concat.py``) vs the sentence model's, goal ≤ 1.3×.

Usage: python benchmarks/rolling_history.py [--size tiny|small] [--docs 40] [--lines 12]
       [--beam 5] [--batch-sentences 64] [--context-sents 1] [--threads 1] [--repeats 2]
       [--checkpoint CKPT]

Systems, all on the same backbone weights (``--checkpoint``: a tgt_concat checkpoint, its
backbone the sentence model; default a fresh ``pipelines/transformer/{size}.yaml`` model): the
sentence model through ``decode_corpus`` (every sentence in one length-sorted pass, what
``translate`` does for it), the source-side concatenation and the target-side concatenation
through ``translate_documents`` (position k of every document in one batch after position k − 1:
the rolling history of its own translations, force-decoded as the prefix). Input: ``--docs``
documents of ``--lines`` lines (random ids, 3–12 tokens). Interleaved ``--repeats`` times; prints wall and
CPU seconds per system, the ratio to the sentence model, and the mean output length. A fresh
model rarely emits ``</s>``: its outputs run to the length cap (``max_len_ratio`` 1.5, +10), so
the prefixes are longer than a trained model's — an upper bound on the prefix's cost.
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
import torch
from _common import set_threads

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from doctrans.config import load_experiment  # noqa: E402
from doctrans.data.vocab import Vocab  # noqa: E402
from doctrans.inference.documents import translate_documents  # noqa: E402
from doctrans.inference.translate import decode_corpus  # noqa: E402
from doctrans.models.build import build_model  # noqa: E402
from doctrans.inference.config import SearchOptions


def _documents(args, vocab_size: int) -> list[list[np.ndarray]]:
    rng = np.random.default_rng(0)
    return [[np.r_[rng.integers(4, vocab_size, int(rng.integers(3, 13))), 2] for _ in range(args.lines)]
            for _ in range(args.docs)]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--size", default="tiny", choices=["tiny", "small"])
    ap.add_argument("--docs", type=int, default=40)
    ap.add_argument("--lines", type=int, default=12)
    ap.add_argument("--beam", type=int, default=5)
    ap.add_argument("--batch-sentences", type=int, default=64)
    ap.add_argument("--context-sents", type=int, default=1)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--vocab", type=int, default=2000, help="vocabulary size of a fresh model")
    ap.add_argument("--checkpoint", default="")
    args = ap.parse_args()
    set_threads(args.threads)
    torch.manual_seed(0)
    if args.checkpoint:
        from doctrans.runtime.checkpoint import config_of, load_checkpoint

        ck = load_checkpoint(args.checkpoint)
        exp = config_of(ck)
        sv, tv = Vocab(ck["vocab"]["src"]), Vocab(ck["vocab"]["tgt"])
        n_src, n_tgt = len(sv), len(tv)
        model_cfg, state = exp.model, ck["model"]
    else:
        exp = load_experiment(ROOT / "pipelines" / "transformer" / f"{args.size}.yaml")
        n_src = n_tgt = args.vocab
        tv = Vocab(["<pad>", "<s>", "</s>", "<unk>"] + [f"w{i}" for i in range(args.vocab - 4)])
        model_cfg, state = exp.model, None
    contexts = {"tgt_concat": f"{{type: tgt_concat, context_sents: {args.context_sents}}}",
                "concat": f"{{type: concat, context_sents: {args.context_sents}}}"}
    models = {}
    for name, ctx in contexts.items():
        cfg = load_experiment(ROOT / "pipelines" / "transformer" / f"{args.size}.yaml", [f"context={ctx}"])
        m = build_model(model_cfg, n_src, n_tgt, 0, cfg.context).eval()
        if state is not None and name == "tgt_concat":
            m.load_state_dict(state)
        models[name] = m
    models["concat"].backbone.load_state_dict(models["tgt_concat"].backbone.state_dict())
    models = {"sentence": models["tgt_concat"].backbone, **models}
    docs = _documents(args, n_src)
    flat = [x for d in docs for x in d]
    search = SearchOptions(beam=args.beam, lenpen=1.0, max_len_ratio=1.5, max_len_extra=10,
                           batch_sentences=args.batch_sentences, history_chunk=0)
    times: dict[str, list[tuple[float, float]]] = {k: [] for k in models}
    lengths: dict[str, float] = {}
    with torch.no_grad():
        for _ in range(args.repeats):
            for name, m in models.items():
                w, c = time.perf_counter(), time.process_time()
                if name == "sentence":
                    out = decode_corpus(m, flat, tv, search)
                else:
                    out = [y for d in translate_documents(m, docs, tv, search) for y in d]
                times[name].append((time.perf_counter() - w, time.process_time() - c))
                lengths[name] = float(np.mean([len(y.split()) for y in out]))
    base_w = min(t[0] for t in times["sentence"])
    base_c = min(t[1] for t in times["sentence"])
    print(f"{len(docs)} documents, {len(flat)} sentences, {args.size} Transformer, beam {args.beam}, "
          f"N = {args.context_sents}, {args.threads} thread(s), best of {args.repeats}")
    print("| system | wall s | CPU s | × sentence (wall) | × sentence (CPU) | mean output length |")
    print("| --- | ---: | ---: | ---: | ---: | ---: |")
    for name, ts in times.items():
        wall, cpu = min(t[0] for t in ts), min(t[1] for t in ts)
        print(f"| {name} | {wall:.2f} | {cpu:.2f} | {wall / base_w:.2f} | {cpu / base_c:.2f} | {lengths[name]:.1f} |")


if __name__ == "__main__":
    main()
