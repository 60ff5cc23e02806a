"""How far ``translate --rerank-vocab N`` moves reranking from the exact reconstructor score, and
what it saves (issue 28: "reranked decoding ≤ 1.5× plain"). Run by hand; figures go to
a journal entry (docs/journal/, indexed in benchmarks/RESULTS.md).

Usage: python benchmarks/rerank_vocab.py CHECKPOINT INPUT.tok.zh --dp-generator GEN.pt
       [--beam 10] [--vocab 500,1000,2000,4000,8000] [--lines 0] [--threads 1]

The input is translated once plainly and once with ``--rerank reconstructor`` (k = beam, exact
full-softmax log R), recording every ``rerank_batch`` call (sources, the n-best with their beam
scores and decoder states, x̂). Each recorded batch is then reranked again with ``top_words``
N for every N. Prints, per N: the CPU seconds of all rerank passes (the exact pass first), the
estimated reranked/plain ratio of a whole translation (plain CPU s + the reranked run's CPU s
outside the rerank passes + that N's rerank passes, over plain), the sentences whose choice
equals the exact one, and the regret: how much lower the chosen candidate's exact combined score
is than the exact best (nats per sentence, mean and maximum over the sentences) — beside the
regret of not reranking at all (the beam's 1-best), the scale of what reranking can change.
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import torch
from _common import set_threads

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

import doctrans.inference.reconstruction as reconstruction  # noqa: E402
from doctrans.dp.apply import dp_inputs  # noqa: E402
from doctrans.inference.translate import LoadedModel, TranslateConfig, Translator  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("checkpoint")
    ap.add_argument("input", type=Path, help="segmented source lines (translate --input-format tok)")
    ap.add_argument("--dp-generator", required=True, help="DP generator checkpoint for x̂")
    ap.add_argument("--beam", type=int, default=10)
    ap.add_argument("--vocab", default="500,1000,2000,4000,8000")
    ap.add_argument("--lines", type=int, default=0, help="first N lines only (0 = all)")
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args()
    set_threads(args.threads)
    lines = args.input.read_text(encoding="utf-8").splitlines()
    if args.lines:
        lines = lines[:args.lines]
    base = dict(checkpoint=args.checkpoint, input_format="tok", tokenized=True, threads=args.threads, beam=args.beam)
    loaded = LoadedModel.load(TranslateConfig(**base).model)
    cfg_p = TranslateConfig(**base)
    plain = Translator(cfg_p, dp_inputs(cfg_p), loaded=loaded)
    cfg = TranslateConfig(**base, rerank="reconstructor", dp_generator=args.dp_generator)
    rerank = Translator(cfg, dp_inputs(cfg), loaded=loaded)
    plain.translate(lines[:20])                                        # warm-up
    c0 = time.process_time()
    plain.translate(lines)
    plain_cpu = time.process_time() - c0

    calls: list[tuple[tuple, dict, tuple]] = []
    real = reconstruction.rerank_batch
    spent = [0.0]

    def recording(*a, **kw):
        t0 = time.process_time()
        out = real(*a, **kw)
        spent[0] += time.process_time() - t0
        calls.append((a, kw, out))
        return out

    reconstruction.rerank_batch = recording
    c0 = time.process_time()
    rerank.translate(lines)
    rerank_cpu = time.process_time() - c0
    reconstruction.rerank_batch = real
    outside = rerank_cpu - spent[0]
    n_sent = sum(len(c[2][0]) for c in calls)
    rows = [f"| exact (full softmax) | {spent[0]:.1f} | {rerank_cpu / plain_cpu:.2f} | "
            f"{n_sent} / {n_sent} | 0 | 0 |"]
    plain_regret = [sc[j] - sc[0] for _, _, (chosen, combined) in calls for j, sc in zip(chosen, combined)]
    rows.append(f"| no reranking (the beam's 1-best) | 0 | {plain_cpu / plain_cpu:.2f} | "
                f"{sum(r == 0 for r in plain_regret)} / {n_sent} | {sum(plain_regret) / n_sent:.4f} | "
                f"{max(plain_regret):.3f} |")
    for n in (int(v) for v in args.vocab.split(",")):
        same, regrets, cpu = 0, [], 0.0
        for a, kw, (chosen, combined) in calls:
            t0 = time.process_time()
            got, _ = real(*a, **{**kw, "top_words": n})
            cpu += time.process_time() - t0
            for j_exact, j, sc in zip(chosen, got, combined):
                same += j == j_exact
                regrets.append(sc[j_exact] - sc[j])
        ratio = (outside + cpu) / plain_cpu
        rows.append(f"| N = {n} | {cpu:.1f} | {ratio:.2f} | {same} / {n_sent} | {sum(regrets) / len(regrets):.4f} | "
                    f"{max(regrets):.3f} |")
    print(f"{len(lines)} lines, beam {args.beam} (k = beam), {args.threads} thread(s); plain decoding "
          f"{plain_cpu:.1f} CPU s, reranked {rerank_cpu:.1f} CPU s of which the rerank passes {spent[0]:.1f}\n")
    print("| log R normalised over | rerank passes, CPU s | reranked / plain (CPU) | choice = exact | "
          "mean regret (nats) | max regret (nats) |")
    print("| --- | ---: | ---: | ---: | ---: | ---: |")
    print("\n".join(rows))


if __name__ == "__main__":
    main()
