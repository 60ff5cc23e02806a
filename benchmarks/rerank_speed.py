"""Reranked vs plain decoding with a reconstructor model (issue 28: "reranked decoding ≤ 1.5× plain
decoding"). Run by hand; figures go to a journal entry (docs/journal/, indexed in benchmarks/RESULTS.md).

Usage: python benchmarks/rerank_speed.py CHECKPOINT INPUT.tok.zh --dp-generator GEN.pt
       [--beams 5,10] [--repeats 2] [--lines 0] [--threads 1] [--rerank-vocab 0,1000]

The model (and the DP generator) is loaded once; for each beam size the input (segmented Chinese,
``--input-format tok``) is translated plainly (``translate`` at that beam) and reranked
(``--rerank reconstructor``, k = beam, x̂ from ``--dp-generator``) once per ``--rerank-vocab``
value N (0 = the exact full softmax, ``translate --rerank-vocab N``), alternating, ``--repeats``
times each. Prints a Markdown table: process CPU seconds and wall seconds per pass (means),
sentences per CPU second, the ratio to plain decoding of CPU time (the figure for a shared
machine) and of wall time, the lines reranking changes against plain decoding, and for N > 0
the lines whose choice differs from exact reranking (N = 0, which must then be among the
values). The reranked pass includes the DP generator's labelling of the input (x̂), as
`doctrans translate --rerank` does.
"""
from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

import torch
from _common import set_threads, timed

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from doctrans.dp.apply import dp_inputs  # noqa: E402
from doctrans.inference.translate import LoadedModel, TranslateConfig, Translator  # noqa: E402


def translate_timed(translator: Translator, lines: list[str]) -> tuple[float, float, list[str]]:
    """(process CPU s, wall s, outputs) of one translation of ``lines``."""
    with timed() as t:
        out = translator.translate(lines)
    return t.cpu, t.wall, out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("checkpoint")
    ap.add_argument("input", type=Path, help="segmented source lines (translate --input-format tok)")
    ap.add_argument("--dp-generator", required=True, help="DP generator checkpoint for x̂")
    ap.add_argument("--beams", default="5,10")
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--lines", type=int, default=0, help="first N lines only (0 = all)")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--rerank-vocab", default="0", help="comma-separated translate --rerank-vocab values")
    args = ap.parse_args()
    set_threads(args.threads)
    lines = args.input.read_text(encoding="utf-8").splitlines()
    if args.lines:
        lines = lines[:args.lines]
    base = dict(checkpoint=args.checkpoint, input_format="tok", tokenized=True, threads=args.threads)
    loaded = LoadedModel.load(TranslateConfig(**base).model)
    vocabs = [int(v) for v in args.rerank_vocab.split(",")]
    rows = []
    for beam in (int(b) for b in args.beams.split(",")):
        cfg_p = TranslateConfig(**base, beam=beam)
        systems = {"plain": Translator(cfg_p, dp_inputs(cfg_p), loaded=loaded)}
        for n in vocabs:
            cfg_r = TranslateConfig(**base, beam=beam, rerank="reconstructor", dp_generator=args.dp_generator,
                                    rerank_vocab=n)
            systems[f"reranked, vocab {n or 'full'}"] = Translator(cfg_r, dp_inputs(cfg_r), loaded=loaded)
        times: dict[str, list[tuple[float, float]]] = {k: [] for k in systems}
        outs: dict[str, list[str]] = {}
        for _ in range(args.repeats):
            for name, tr in systems.items():
                cpu, wall, outs[name] = translate_timed(tr, lines)
                times[name].append((cpu, wall))
        mean = {k: (statistics.mean(c for c, _ in v), statistics.mean(w for _, w in v)) for k, v in times.items()}
        exact = outs.get("reranked, vocab full")
        for name in systems:
            cpu, wall = mean[name]
            vs_plain = sum(a != b for a, b in zip(outs["plain"], outs[name])) if name != "plain" else ""
            vs_exact = sum(a != b for a, b in zip(exact, outs[name])) if exact and name != "plain" else ""
            rows.append(f"| {beam} | {name} | {cpu:.1f} | {wall:.1f} | {len(lines) / cpu:.1f} | "
                        f"{cpu / mean['plain'][0]:.2f} | {wall / mean['plain'][1]:.2f} | {vs_plain} | {vs_exact} |")
        print(f"beam {beam} done", file=sys.stderr, flush=True)
    print(f"{len(lines)} lines, {args.repeats} alternating repeats, {args.threads} thread(s)\n")
    print("| beam | decoding | CPU s | wall s | sentences per CPU s | × plain (CPU) | × plain (wall) "
          "| lines changed vs plain | vs exact reranking |")
    print("| ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    print("\n".join(rows))


if __name__ == "__main__":
    main()
