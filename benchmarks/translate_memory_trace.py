"""Per-batch memory trace of `doctrans translate` (issue 50 item 11: where a long translation's
peak memory comes from).

Usage: python benchmarks/translate_memory_trace.py --trace OUT.jsonl [--no-trim] -- TRANSLATE OPTIONS

Runs ``doctrans translate`` with the given options in this process and writes one JSON line per
beam-search batch (sentence and document paths): ``i`` (batch number), ``t`` (seconds since the
start), ``src`` (the batch's source shape: rows, padded width), ``rss_before`` / ``rss_after``
(resident size before and after the batch's search — before the heap trim that may follow it —
MB), ``hwm`` (peak resident size so far, MB, ``VmHWM``), ``cache`` (each live context cache,
``models/context/base.py`` ``RowCache``: [entries, tensor elements]) and ``trims`` (heap trims
before this batch's, ``utils/memory.py``); a last line ``{"end": true, "hwm": …}``. ``--no-trim``: without the
heap trimmer (the behaviour before it). Linux only (/proc/self).

Example (the 200 first lines of long_line_memory.py's fuzzed input through the quickstart's HAN
encoder; docs/journal/2026-11-28-long-line-memory-trim.md):

    python benchmarks/translate_memory_trace.py --trace $RUNS/trace.jsonl -- \\
        -c runs/context/han_encoder/last.pt -i $RUNS/fuzz200.tok.zh -o $RUNS/out.en \\
        --input-format tok --beam 5 --max-len-ratio 1.5 --threads 2
"""
from __future__ import annotations

import argparse
import json
import sys
import time
import weakref

from doctrans.inference import decode, documents
from doctrans.models.context.base import RowCache
from doctrans.utils import memory


def _hwm_mb() -> float:
    with open("/proc/self/status", encoding="ascii") as f:
        for line in f:
            if line.startswith("VmHWM"):
                return int(line.split()[1]) / 1024
    return float("nan")


def _rss_mb() -> float:
    return (memory.resident_bytes() or 0) / 2**20


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--trace", required=True, help="JSON-lines file to write")
    ap.add_argument("--no-trim", action="store_true", help="without the heap trimmer")
    ap.add_argument("translate", nargs=argparse.REMAINDER, help="`doctrans translate` options (after --)")
    a = ap.parse_args()
    options = a.translate[1:] if a.translate[:1] == ["--"] else a.translate
    out = open(a.trace, "w", encoding="utf-8")
    t0, batches, trimmers, caches = time.time(), [0], [], weakref.WeakSet()
    made = RowCache.__init__

    def registered(self, *args, **kw):
        made(self, *args, **kw)
        caches.add(self)

    RowCache.__init__ = registered

    class Trimmer(memory.HeapTrimmer):
        def __init__(self):
            super().__init__(trim=None if a.no_trim else "libc")
            trimmers.append(self)

    for module in (decode, documents):
        real = module.beam_search

        def traced(model, batch, *args, _real=real, **kw):
            before = _rss_mb()
            res = _real(model, batch, *args, **kw)
            src = batch if hasattr(batch, "shape") else batch.src
            out.write(json.dumps({
                "i": batches[0], "t": round(time.time() - t0, 1), "src": list(src.shape),
                "rss_before": round(before), "rss_after": round(_rss_mb()), "hwm": round(_hwm_mb()),
                "cache": sorted([len(c.items), c.elements] for c in caches),
                "trims": sum(t.trims for t in trimmers)}) + "\n")
            out.flush()
            batches[0] += 1
            return res

        module.beam_search = traced
        module.HeapTrimmer = Trimmer
    from doctrans.cli import main as cli

    sys.argv = ["doctrans", "-q", "translate", *options]
    try:
        cli()
    finally:
        out.write(json.dumps({"end": True, "hwm": round(_hwm_mb()), "batches": batches[0]}) + "\n")
        out.close()


if __name__ == "__main__":
    main()
