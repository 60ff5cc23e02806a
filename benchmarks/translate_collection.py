"""Throughput of ``doctrans translate`` on a directory of documents vs the same lines as one file
(issue 18): the TVsub test set (a) as one file, (b) as a directory of one file per document and
of pseudo-documents of ``--pseudo-lines`` lines, (c) those directories with ``--workers N``.

    python benchmarks/translate_collection.py -c RUN/last.pt [--prepared /work/data/quickstart]
        [--work DIR] [--beam 5] [--threads 2] [--workers 2] [--append docs/journal/DATE-topic.md]

The input is PREP/test.tok.zh (segmented, ``input_format=tok``) split by PREP/test.docs. Every
mode runs in this process through ``inference.translate.translate_input`` with the same beam, length caps
and thread budget; the time is the wall clock of the whole call (model loading included, and
for workers the spawn of the Pool), sentences/s = non-empty input lines / seconds.
"""
from __future__ import annotations

import argparse
import datetime
import logging
import os
import platform
import shutil
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from doctrans.inference.translate import TranslateConfig, translate_input as run  # noqa: E402

from _common import timed  # noqa: E402


def split_documents(prep: Path, work: Path, pseudo_lines: int) -> tuple[Path, Path, Path, int]:
    """Write work/test.tok.zh, work/docs/<doc>.zh and work/pseudo/<k>.zh; returns them and the
    number of non-empty lines."""
    lines = (prep / "test.tok.zh").read_text(encoding="utf-8").split("\n")[:-1]
    doc_ids = [x.split("\t")[0] for x in (prep / "test.docs").read_text(encoding="utf-8").split("\n")[:-1]]
    assert len(lines) == len(doc_ids), "test.tok.zh and test.docs differ in length"
    shutil.rmtree(work, ignore_errors=True)
    (work / "docs").mkdir(parents=True)
    (work / "pseudo").mkdir()
    whole = work / "test.tok.zh"
    whole.write_text("".join(x + "\n" for x in lines), encoding="utf-8")
    by_doc: dict[str, list[str]] = {}
    for x, d in zip(lines, doc_ids):
        by_doc.setdefault(d, []).append(x)
    for d, xs in by_doc.items():
        (work / "docs" / f"{d}.zh").write_text("".join(x + "\n" for x in xs), encoding="utf-8")
    for k in range(0, len(lines), pseudo_lines):
        (work / "pseudo" / f"{k // pseudo_lines:04d}.zh").write_text(
            "".join(x + "\n" for x in lines[k:k + pseudo_lines]), encoding="utf-8")
    return whole, work / "docs", work / "pseudo", sum(1 for x in lines if x.strip())


def run_timed(cfg: TranslateConfig) -> float:
    """Wall seconds of one ``translate.translate_input``."""
    with timed() as t:
        run(cfg)
    return t.wall


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("-c", "--checkpoint", required=True)
    ap.add_argument("--prepared", default="/work/data/quickstart")
    ap.add_argument("--work", default="/work/scratch/shard/bench")
    ap.add_argument("--beam", type=int, default=5)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--pseudo-lines", type=int, default=40)
    ap.add_argument("--max-len-ratio", type=float, default=1.2)
    ap.add_argument("--max-len-extra", type=int, default=5)
    ap.add_argument("--group-lines", type=int, default=512)
    ap.add_argument("--append", default="", help="Append the figures to this journal entry (docs/journal/DATE-topic.md; index: benchmarks/RESULTS.md).")
    a = ap.parse_args()
    logging.basicConfig(level=logging.WARNING)
    work = Path(a.work)
    whole, docs, pseudo, n = split_documents(Path(a.prepared), work, a.pseudo_lines)
    base = dict(checkpoint=a.checkpoint, beam=a.beam, threads=a.threads, input_format="tok",
                max_len_ratio=a.max_len_ratio, max_len_extra=a.max_len_extra, group_lines=a.group_lines)
    modes = [("a: one file", whole, work / "out.en", 1)]
    for name, d in (("documents", docs), (f"{a.pseudo_lines}-line pseudo-documents", pseudo)):
        files = len(list(d.iterdir()))
        modes += [(f"b: directory, {files} {name}", d, work / f"out_{d.name}", 1),
                  (f"c: directory, {files} {name}, --workers {a.workers}", d, work / f"out_{d.name}_w", a.workers)]
    warm = work / "warmup.zh"                                      # one-time costs (imports, caches) untimed
    warm.write_text("".join(whole.read_text(encoding="utf-8").splitlines(keepends=True)[:8]), encoding="utf-8")
    run(TranslateConfig(input=str(warm), output=str(work / "warmup.en"), **base))
    rows, load0 = [], os.getloadavg()[0]
    for label, inp, out, workers in modes:
        if out.is_dir():
            shutil.rmtree(out)
        sec = run_timed(TranslateConfig(input=str(inp), output=str(out), workers=workers, **base))
        rows.append((label, sec, n / sec))
        print(f"{label}: {n} sentences in {sec:.1f} s = {n / sec:.2f} sent/s", flush=True)
    ref = rows[0][2]
    table = ["| mode | seconds | sentences/s | ratio to a |", "| --- | ---: | ---: | ---: |"]
    table += [f"| {label} | {sec:.1f} | {rate:.2f} | {rate / ref:.2f} |" for label, sec, rate in rows]
    print("\n".join(table))
    if a.append:
        report(Path(a.append), a, n, table, (load0, os.getloadavg()[0]))


def report(path: Path, a, n: int, table: list[str], load: tuple[float, float]) -> None:
    now = datetime.datetime.now(datetime.timezone.utc)
    cmd = "python benchmarks/translate_collection.py " + " ".join(sys.argv[1:])
    text = (f"\n## Translating a document collection: directory vs one file, workers (issue 18) — {now:%Y-%m-%d}\n\n"
            f"- **Machine:** {os.cpu_count()} CPU cores ({platform.processor() or platform.machine()}), "
            f"Python {platform.python_version()}; load average {load[0]:.1f} at the start, {load[1]:.1f} at "
            f"the end (the cores were shared).\n"
            f"- **Date:** {now:%Y-%m-%d %H:%M} UTC\n"
            f"- **Data:** {a.prepared}/test.tok.zh ({n} sentences), split by test.docs and into "
            f"{a.pseudo_lines}-line pseudo-documents.\n"
            f"- **Command:** `{cmd}` — beam {a.beam}, --threads {a.threads} (the budget: 1 thread per "
            f"worker with --workers {a.workers}), --max-len-ratio {a.max_len_ratio} --max-len-extra "
            f"{a.max_len_extra} in every mode (the undertrained model's outputs capped), --group-lines "
            f"{a.group_lines}; seconds = wall clock of the whole `run` (model loading included).\n\n"
            + "\n".join(table) + "\n")
    with open(path, "a", encoding="utf-8") as f:
        f.write(text)


if __name__ == "__main__":
    main()
