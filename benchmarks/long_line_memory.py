"""Peak memory of translating long, fuzzed lines through a HAN model (issue 50, item 11: "2,000
fuzzed lines take 3.45 GB through the HAN model, 30 lines of > 2,500 characters 2.0 GB";
goal ≤ 1.5 GB).

Usage: python benchmarks/long_line_memory.py [--checkpoint CKPT] [--lines 2000] [--max-chars 2500]
       [--beam 5] [--max-len-ratio 1.5] [--threads 2] [--work DIR] [-- EXTRA TRANSLATE OPTIONS]

Without ``--checkpoint`` a HAN encoder model of the small shape (pipelines/context/han_encoder.yaml:
3+3 layers, d 256, N = 3) is trained for 2 updates on a synthetic prepared dataset whose source
tokens are single CJK characters (no BPE merges), so every character of the fuzzed input is one
source token, as a character-split line would be. The input: ``--lines`` lines, each of a length
drawn uniformly from 1…``--max-chars`` characters, random CJK characters with a sentence end
(。！？) about every 40 characters and a comma about every 15 (seed 0), written pre-tokenized
(``--input-format tok``, one character per token) so that segmentation time does not count; no
``--docs``: the whole input is one document, as a fuzzed file is. ``doctrans translate`` runs in a
subprocess; its peak resident memory is ``ru_maxrss`` of the child (GiB), printed as one JSON
line with the wall time.

The 2-update model ends no translation (every line decodes to its length cap: hours for 2,000
lines); a trained one ends them — e.g. the quickstart's HAN encoder,
``--checkpoint runs/context/han_encoder/last.pt``: 200 lines in ≈ 10.5 min on 2 cores
(docs/journal/2026-11-28-long-line-memory.md).
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
CJK = [chr(0x4E00 + i) for i in range(3000)]


def _prepared(out: Path, n: int = 300) -> Path:
    rng = np.random.default_rng(1)
    src, tgt = [], []
    for _ in range(n):
        ids = rng.integers(0, len(CJK), rng.integers(4, 30))
        src.append(" ".join(CJK[i] for i in ids) + " 。")
        tgt.append(" ".join(f"v{i}" for i in ids) + " .")
    out.mkdir(parents=True, exist_ok=True)
    for split in ("train", "dev"):
        for lang, lines in (("zh", src), ("en", tgt)):
            for kind in ("tok", "bpe"):
                (out / f"{split}.{kind}.{lang}").write_text("".join(f"{x}\n" for x in lines), encoding="utf-8")
        (out / f"{split}.docs").write_text("".join(f"d{i // 20}\t{i % 20}\n" for i in range(n)), encoding="utf-8")
    for lang, lines in (("zh", src), ("en", tgt)):
        counts = Counter(t for line in lines for t in line.split())
        if lang == "zh":                                  # every character is in the vocabulary
            counts.update({c: 1 for c in CJK + ["，", "！", "？"]})
        (out / f"vocab.{lang}.txt").write_text("".join(f"{t}\t{c}\n" for t, c in counts.most_common()),
                                               encoding="utf-8")
        (out / f"bpe.codes.{lang}").write_text("#version: 0.2\n", encoding="utf-8")
    meta = {"version": 1, "src": "zh", "tgt": "en", "lowercase": True, "bpe": {"merges": 0, "joint": False},
            "splits": {"train": {"sentences": n}, "dev": {"sentences": n}}}
    (out / "meta.json").write_text(json.dumps(meta), encoding="utf-8")
    return out


def _train(work: Path, threads: int) -> Path:
    run = work / "han"
    if (run / "last.pt").is_file():
        return run / "last.pt"
    prep = _prepared(work / "prep")
    cmd = [sys.executable, "-m", "doctrans.cli", "-q", "train", str(REPO / "pipelines/context/han_encoder.yaml"),
           f"data.prepared={prep}", f"run_dir={run}", "train.init_from=", "train.max_steps=2",
           "train.eval_bleu=false", "train.metric=xent_nats", "train.metric_mode=min", "train.eval_every=0",
           "train.eval_cxmi_sentences=0", "train.tensorboard=false", "train.plot=false", f"train.threads={threads}",
           "train.autocast=none", "--overwrite"]
    subprocess.run(cmd, check=True, cwd=REPO)
    return run / "last.pt"


def _fuzz(path: Path, lines: int, max_chars: int) -> int:
    rng = np.random.default_rng(0)
    total = 0
    with open(path, "w", encoding="utf-8") as f:
        for _ in range(lines):
            n = int(rng.integers(1, max_chars + 1))
            chars = [CJK[i] for i in rng.integers(0, len(CJK), n)]
            for k in range(n):
                r = rng.random()
                if r < 1 / 40:
                    chars[k] = "。！？"[k % 3]
                elif r < 1 / 40 + 1 / 15:
                    chars[k] = "，"
            total += n
            f.write(" ".join(chars) + "\n")
    return total


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--checkpoint", default="")
    ap.add_argument("--lines", type=int, default=2000)
    ap.add_argument("--max-chars", type=int, default=2500)
    ap.add_argument("--beam", type=int, default=5)
    ap.add_argument("--max-len-ratio", type=float, default=1.5)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--work", default="/tmp/doctrans_long_line_memory")
    ap.add_argument("extra", nargs="*", help="more `doctrans translate` options (after --)")
    a = ap.parse_args()
    work = Path(a.work)
    work.mkdir(parents=True, exist_ok=True)
    ckpt = Path(a.checkpoint) if a.checkpoint else _train(work, a.threads)
    inp = work / f"fuzz_{a.lines}_{a.max_chars}.tok.zh"
    chars = _fuzz(inp, a.lines, a.max_chars)
    cmd = [sys.executable, "-m", "doctrans.cli", "-q", "translate", "-c", str(ckpt), "-i", str(inp),
           "-o", str(work / "out.en"), "--input-format", "tok", "--beam", str(a.beam),
           "--max-len-ratio", str(a.max_len_ratio), "--threads", str(a.threads), *a.extra]
    t0 = time.time()
    proc = subprocess.run(cmd, cwd=REPO, env={**os.environ, "DOCTRANS_QUIET": "1"})
    wall = time.time() - t0
    peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 2**20
    out_lines = sum(1 for _ in open(work / "out.en", encoding="utf-8")) if proc.returncode == 0 else None
    print(json.dumps({"lines": a.lines, "max_chars": a.max_chars, "chars": chars, "beam": a.beam,
                      "checkpoint": str(ckpt), "rc": proc.returncode, "out_lines": out_lines,
                      "peak_rss_gib": round(peak, 3), "wall_s": round(wall, 1)}))


if __name__ == "__main__":
    main()
