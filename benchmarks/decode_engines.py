"""Decoding engines side by side: native (torch) fp32 and ``--quantize int8``, CTranslate2 float32,
int8_float32 and int8 on an export of the same checkpoint; sentences/s and BLEU on the TVsub test.

    .venv/bin/python benchmarks/decode_engines.py CKPT PREP REF [--beam 5] [--threads 1] [--rounds 2]
        [--work DIR] [--systems native,native-int8,ct2-float32,ct2-int8_float32,ct2-int8]
        [--shortlist FILE]    (then also systems native-shortlist, native-int8-shortlist, ct2-TYPE-shortlist)

CKPT: a sentence-level (or concatenation) checkpoint; PREP: its prepared dataset (``test.tok.zh``,
translated as doctrans' tables do: tokenized input, tokenized output, test documents as
``test.docs``); REF: the references (``$TVSUB/test/test.ref.sgm``, 3 references). Each system
is loaded once (untimed), warmed up on 32 lines (untimed), then the whole test set is translated
``--rounds`` times, the systems taking turns round by round (so a load change on a shared machine
hits all of them); the fastest round counts. BLEU: case-insensitive tokenized BLEU-4
(``bleu_tok_lc``, the thesis setting) of the last round's output (the output is the same every
round). The CTranslate2 export goes to ``WORK/ct2`` (made once). Prints a markdown table with
ratios to native fp32 and writes the outputs and ``WORK/decode_engines.json``.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import time
from pathlib import Path

import torch
from _common import set_threads


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("checkpoint")
    ap.add_argument("prepared")
    ap.add_argument("ref")
    ap.add_argument("--beam", type=int, default=5)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--batch-sentences", type=int, default=64)
    ap.add_argument("--work", default=os.path.join(os.environ.get("TMPDIR", "/tmp"), "decode_engines"))
    ap.add_argument("--systems", default="native,native-int8,ct2-float32,ct2-int8_float32,ct2-int8")
    ap.add_argument("--shortlist", default="", help="a `doctrans shortlist` file for the *-shortlist systems")
    args = ap.parse_args()

    from doctrans.evaluation.score import bleu_tok_lc, load_references
    from doctrans.inference.export import export_ctranslate2
    from doctrans.inference.translate import TranslateConfig, Translator
    from doctrans.utils.io import atomic_write_lines, read_lines

    set_threads(args.threads)
    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    prep = Path(args.prepared)
    lines = read_lines(prep / "test.tok.zh")
    doc_ids = [x.split("\t")[0] for x in read_lines(prep / "test.docs")]
    refs, refs_tok = load_references([args.ref])
    names = args.systems.split(",")
    ct2_dir = work / "ct2"
    if any(n.startswith("ct2") for n in names) and not (ct2_dir / "model.bin").is_file():
        export_ctranslate2(args.checkpoint, str(ct2_dir))
    common = dict(input_format="tok", tokenized=True, beam=args.beam, batch_sentences=args.batch_sentences,
                  threads=args.threads)
    systems = {}
    for n in names:
        short = n.endswith("-shortlist")
        if short and not args.shortlist:
            ap.error(f"system {n} needs --shortlist FILE")
        sl = args.shortlist if short else ""
        if n.startswith("ct2-"):
            cfg = TranslateConfig(checkpoint=str(ct2_dir), engine="ctranslate2",
                                  compute_type=n[4:].removesuffix("-shortlist"), shortlist=sl, **common)
        else:
            cfg = TranslateConfig(checkpoint=args.checkpoint, shortlist=sl, **common,
                                  quantize="int8" if n.startswith("native-int8") else "none")
        systems[n] = Translator(cfg)
        systems[n].translate(lines[:32], doc_ids=doc_ids[:32])             # warm-up
    best = {n: float("inf") for n in names}
    outs: dict[str, list[str]] = {}
    for r in range(args.rounds):
        for n in names:
            t0 = time.perf_counter()
            outs[n] = systems[n].translate(lines, doc_ids=doc_ids)
            dt = time.perf_counter() - t0
            best[n] = min(best[n], dt)
            print(f"round {r + 1} {n:18s} {dt:7.2f} s  {len(lines) / dt:7.1f} sent/s", flush=True)
    rows = []
    for n in names:
        atomic_write_lines(work / f"test.{n}.hyp", outs[n])
        bleu = bleu_tok_lc(outs[n], refs, hyp_tokenized=True, refs_tokenized=refs_tok)
        same = sum(a == b for a, b in zip(outs[n], outs[names[0]]))
        rows.append({"system": n, "seconds": best[n], "sent_s": len(lines) / best[n], "bleu": bleu,
                     "same_as_first": same})
    base = rows[0]
    print(f"\n{len(lines)} lines, beam {args.beam}, {args.threads} thread(s), batches of {args.batch_sentences}, "
          f"best of {args.rounds} rounds; {platform.processor() or platform.machine()}, torch {torch.__version__}")
    print(f"| system | sent/s | × {base['system']} | BLEU | Δ BLEU | outputs equal to {base['system']} |")
    print("| --- | --- | --- | --- | --- | --- |")
    for row in rows:
        print(f"| {row['system']} | {row['sent_s']:.1f} | {row['sent_s'] / base['sent_s']:.2f} | {row['bleu']:.2f} | "
              f"{row['bleu'] - base['bleu']:+.2f} | {row['same_as_first']}/{len(lines)} |")
    (work / "decode_engines.json").write_text(json.dumps({"args": vars(args), "rows": rows}, indent=1) + "\n")


if __name__ == "__main__":
    main()
