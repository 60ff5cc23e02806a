"""Per-line latency of streaming translation (issue 51): ``DocumentSession.translate(line)``
for a sentence model and a context model, against translating the same documents at once.

Usage: python benchmarks/stream_latency.py [--checkpoint CKPT] [--context-checkpoint CKPT]
       [--lines FILE --input-format raw] [--size small] [--steps 120] [--docs 4] [--doc-lines 25]
       [--beam 5] [--threads 1] [--out DIR]

Without checkpoints, two models of ``pipelines/transformer/{size}.yaml`` (the sentence model,
and the same with a HAN decoder context of 2 sentences — docs/models.md §1.1, a target-side
model: the session hands it its own previous translations) are trained ``--steps`` updates on
the tests' toy reversal task (``tests/conftest.py``: random 'w<i>' lines, target reversed) —
enough to emit end-of-sentence at about the right length, so the latency is that of real-length
outputs, not of ``max_len`` runaways; the input is ``--docs`` documents of ``--doc-lines`` toy
lines (BPE input). With ``--lines FILE`` (e.g. TVsub test.zh, raw) the documents are its first
lines. For each model: every line through a fresh ``DocumentSession`` per document (latency =
wall time of each ``translate`` call: p50, p90, max, mean), then the same documents through
``Translator.translate(lines, doc_ids)`` at once (seconds per line), checking that the stream
gave the same translations. Prints a Markdown table.
"""
from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch
from _common import set_threads

REPO = Path(__file__).resolve().parents[1]
HAN = "context={type: han, context_sents: 2, attach: both, heads: 4, d_ff: 512, dropout: 0.0}"


def train_toy(root: Path, size: str, steps: int, *overrides: str) -> Path:
    sys.path.insert(0, str(REPO / "tests"))
    from conftest import QUIET_TRAIN, reversal_pairs, write_prepared

    from doctrans import stages
    from doctrans.config import load_experiment

    pairs = reversal_pairs(2000)
    prep = write_prepared(root / "prep", pairs, (pairs[0][:50], pairs[1][:50]))
    cfg = load_experiment(REPO / "pipelines" / "transformer" / f"{size}.yaml",
                          [f"data.prepared={prep}", f"run_dir={root / 'run'}", *QUIET_TRAIN, f"train.max_steps={steps}",
                           "train.warmup=20", "train.save_every=100000", "train.eval_every=100000",
                           "train.autocast=none", "train.max_tokens=1024", *overrides])
    return stages.train(cfg) / "last.pt"


def pct(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(q * (len(xs) - 1))))]


def measure(name: str, tr, docs: list[list[str]]) -> str:
    from doctrans.inference.stream import DocumentSession

    lat, streamed = [], []
    tr.translate(docs[0][:2], doc_ids=["w", "w"])                     # warm-up
    for d in docs:
        s = DocumentSession(tr)
        for line in d:
            t0 = time.perf_counter()
            streamed.append(s.translate(line))
            lat.append(time.perf_counter() - t0)
    lines = [x for d in docs for x in d]
    t0 = time.perf_counter()
    batch = tr.translate(lines, doc_ids=[str(k) for k, d in enumerate(docs) for _ in d])
    per_line = (time.perf_counter() - t0) / len(lines)
    same = sum(a == b for a, b in zip(streamed, batch))
    words = statistics.mean(len(x.split()) for x in streamed)
    return (f"| {name} | {len(lat)} | {1000 * pct(lat, 0.5):.1f} | {1000 * pct(lat, 0.9):.1f} | "
            f"{1000 * max(lat):.1f} | {1000 * statistics.mean(lat):.1f} | {1000 * per_line:.1f} | "
            f"{same}/{len(lines)} | {words:.1f} |")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--checkpoint", default="")
    ap.add_argument("--context-checkpoint", default="")
    ap.add_argument("--lines", default="", help="documents from this file's lines instead of toy lines")
    ap.add_argument("--input-format", default="bpe")
    ap.add_argument("--size", default="small")
    ap.add_argument("--steps", type=int, default=120)
    ap.add_argument("--docs", type=int, default=4)
    ap.add_argument("--doc-lines", type=int, default=25)
    ap.add_argument("--beam", type=int, default=5)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--out", default="")
    a = ap.parse_args()
    set_threads(a.threads)
    from doctrans.inference.translate import TranslateConfig, Translator

    work = Path(a.out or tempfile.mkdtemp(prefix="stream_latency."))
    t0 = time.time()
    sent = a.checkpoint or str(train_toy(work / "sent", a.size, a.steps))
    ctx = a.context_checkpoint or str(train_toy(work / "han", a.size, a.steps, HAN))
    trained = time.time() - t0
    if a.lines:
        src = [x for x in Path(a.lines).read_text(encoding="utf-8").splitlines() if x.strip()]
    else:
        sys.path.insert(0, str(REPO / "tests"))
        from conftest import reversal_pairs

        src = reversal_pairs(a.docs * a.doc_lines, seed=7)[0]
    docs = [src[k * a.doc_lines:(k + 1) * a.doc_lines] for k in range(a.docs)]
    print(f"models: {'given' if a.checkpoint else f'{a.size} trained {a.steps} steps on the toy reversal task'}"
          f" ({trained:.0f} s); {a.docs} documents x {a.doc_lines} lines; beam {a.beam}; {a.threads} thread(s)")
    print("| model | lines | p50 ms | p90 ms | max ms | mean ms | batch ms/line | stream = batch | words/line |")
    print("|---|---|---|---|---|---|---|---|---|")
    for name, ck in (("sentence", sent), ("HAN decoder (2 sents)", ctx)):
        tr = Translator(TranslateConfig(checkpoint=ck, input_format=a.input_format, tokenized=True, beam=a.beam,
                                        threads=a.threads))
        print(measure(name, tr, docs), flush=True)


if __name__ == "__main__":
    main()
