"""Paragraphs (issue 75): the TVsub test with every G consecutive lines of a document glued into
one line, translated, and scored against the references glued the same way.

Usage: python benchmarks/paragraphs.py --out DIR [--groups 2 3 5] [--marks punctuated plain]
       [--models document sentence] [--threads 1] [--label NAME] [-- TRANSLATE_OPTIONS…]

The shipped document-level model (``doctrans translate``) and sentence model (``--sentence``)
translate, as ``doctrans translate`` runs by default (beam 5), each of:

* **lines** — the test itself, one line at a time (the document model with ``--docs``), the
  translations of each group then joined with a space: what a translation of the paragraph
  could be at best;
* **paragraphs** — the glued test: each document's lines taken G at a time (the last group of a
  document may be shorter; groups never cross documents) and joined with nothing between them,
  as Chinese prose is written; ``punctuated``: a "。" added to a line that does not end in
  sentence-final punctuation (。！？!?… and ASCII "." or "~", a closing quote or bracket after
  them), as prose would be punctuated; ``plain``: glued as they are (79% of TVsub test lines end
  without punctuation, so most boundaries are unmarked). The document model gets the glued
  documents (``--docs``).

The three references are glued the same way (space-joined, one plain-text file per reference).
Scores: BLEU in the thesis setting (``doctrans score bleu … --metrics bleu_tok_lc``: lowercase,
Moses-tokenized, 3 references) of lines and paragraphs against the glued references; ``len``:
the paragraphs' output words / the lines' output words (whitespace-separated words of the
detokenized output, all groups together); ``rep6``: glued lines whose output repeats a word 6 or
more times in a row (punctuation between the repeats ignored: "no, no, no, no, no, no").
Options after ``--`` go to every ``doctrans translate`` call (e.g. ``-- --segment off``), so
the lines and the paragraphs are translated with the same settings. Outputs (the glued inputs,
references, translations, ``results.json``) go to ``--out``; a translation already there is
reused (``--fresh`` to translate again). Prints a table (markdown).
"""
from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TVSUB = ROOT.parent / "shared" / "corpora" / "tvsub"

# a line "ends a sentence" when its last character, closing quotes/brackets skipped, is one of these
FINAL = set("。！？!?…~～.｡")
CLOSING = set("”’」』）)]】》\"'")


def ends_sentence(line: str) -> bool:
    """Whether ``line`` (stripped) ends in sentence-final punctuation, closing quotes skipped."""
    s = line.strip().rstrip("".join(CLOSING))
    return bool(s) and s[-1] in FINAL


def groups_of(doc_ids: list[str], size: int) -> list[list[int]]:
    """Line indices in consecutive groups of ``size`` within each document (the last group of a
    document may be shorter)."""
    out: list[list[int]] = []
    for k, d in enumerate(doc_ids):
        if not out or doc_ids[out[-1][0]] != d or len(out[-1]) == size:
            out.append([])
        out[-1].append(k)
    return out


def glue(lines: list[str], groups: list[list[int]], punctuate: bool) -> list[str]:
    """Each group's lines joined with nothing between them (stripped; "。" added to a line that
    does not end a sentence when ``punctuate``)."""
    def one(s: str) -> str:
        s = s.strip()
        return s + "。" if punctuate and s and not ends_sentence(s) else s
    return ["".join(one(lines[k]) for k in g) for g in groups]


def joined(lines: list[str], groups: list[list[int]]) -> list[str]:
    """Each group's lines joined with a space (empty ones left out)."""
    return [" ".join(x for x in (lines[k].strip() for k in g) if x) for g in groups]


WORD = re.compile(r"[\w']+")


def longest_repeat(line: str) -> int:
    """The longest run of one word repeated in a row (lowercased; punctuation between ignored)."""
    best = run = 0
    prev = None
    for w in WORD.findall(line.lower()):
        run = run + 1 if w == prev else 1
        prev = w
        best = max(best, run)
    return best


def translate(src: Path, docs: Path, out: Path, model: str, threads: int, extra: list[str], fresh: bool) -> float:
    """``doctrans translate`` of ``src`` into ``out`` (kept when already there unless ``fresh``);
    returns the wall seconds (0 when reused)."""
    if out.exists() and not fresh:
        return 0.0
    cmd = [sys.executable, "-m", "doctrans.cli", "translate", "-i", str(src), "-o", str(out), "--docs", str(docs),
           "--threads", str(threads), *(["--sentence"] if model == "sentence" else []), *extra]
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    t0 = time.perf_counter()
    subprocess.run(cmd, check=True, env=env, cwd=ROOT)
    return time.perf_counter() - t0


def bleu(hyp: Path, refs: list[Path]) -> float:
    cmd = [sys.executable, "-m", "doctrans.cli", "score", "bleu", str(hyp), "--metrics", "bleu_tok_lc", "--json"]
    for r in refs:
        cmd += ["-r", str(r)]
    res = subprocess.run(cmd, env=dict(os.environ, PYTHONPATH=str(ROOT)), cwd=ROOT, capture_output=True, text=True)
    if res.returncode:
        raise SystemExit(f"{' '.join(cmd)} failed ({res.returncode}):\n{res.stderr}")
    return round(json.loads(res.stdout)["bleu_tok_lc"]["score"], 2)


def write(path: Path, lines: list[str]) -> Path:
    path.write_text("".join(f"{x}\n" for x in lines), encoding="utf-8")
    return path


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", required=True, type=Path)
    ap.add_argument("--src", type=Path, default=TVSUB / "test" / "test.zh")
    ap.add_argument("--ref", type=Path, default=TVSUB / "test" / "test.ref.sgm",
                    help="the references, an SGML file with one system per reference; its <DOC> blocks are "
                         "the documents")
    ap.add_argument("--groups", type=int, nargs="+", default=[2, 3, 5])
    ap.add_argument("--marks", nargs="+", default=["punctuated", "plain"], choices=["punctuated", "plain"])
    ap.add_argument("--models", nargs="+", default=["document", "sentence"], choices=["document", "sentence"])
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--label", default="", help="a name for this run in results.json and the table")
    ap.add_argument("--fresh", action="store_true", help="translate again even where a translation exists")
    ap.add_argument("extra", nargs=argparse.REMAINDER, help="-- then options for every doctrans translate call")
    args = ap.parse_args()
    extra = args.extra[1:] if args.extra[:1] == ["--"] else args.extra
    sys.path.insert(0, str(ROOT))
    from doctrans.data.sgml import read_sgml

    out = args.out
    out.mkdir(parents=True, exist_ok=True)
    refsets = read_sgml(args.ref)
    doc_ids = refsets[0].doc_ids()
    src = args.src.read_text(encoding="utf-8").splitlines()
    if len(src) != len(doc_ids):
        raise SystemExit(f"{args.src} has {len(src)} lines, {args.ref} {len(doc_ids)} segments")
    line_docs = write(out / "lines.docs", [f"{d}\t{k}" for d, k in _positions(doc_ids)])
    results = []
    for model in args.models:
        lines_hyp = out / f"lines.{model}.en"
        secs = translate(args.src, line_docs, lines_hyp, model, args.threads, extra, args.fresh)
        line_out = lines_hyp.read_text(encoding="utf-8").splitlines()
        for g in args.groups:
            groups = groups_of(doc_ids, g)
            refs = [write(out / f"ref{r + 1}.g{g}.en", joined(rs.segments, groups)) for r, rs in enumerate(refsets)]
            docs = write(out / f"g{g}.docs", [f"{d}\t{k}" for d, k in _positions([doc_ids[x[0]] for x in groups])])
            lines_joined = write(out / f"lines.{model}.g{g}.en", joined(line_out, groups))
            base = {"model": model, "group": g, "lines_bleu": bleu(lines_joined, refs), "lines_seconds": round(secs, 1)}
            base_words = sum(len(x.split()) for x in lines_joined.read_text(encoding="utf-8").splitlines())
            for mark in args.marks:
                par_src = write(out / f"g{g}.{mark}.zh", glue(src, groups, mark == "punctuated"))
                hyp = out / f"g{g}.{mark}.{model}.en"
                t = translate(par_src, docs, hyp, model, args.threads, extra, args.fresh)
                hyp_lines = hyp.read_text(encoding="utf-8").splitlines()
                assert len(hyp_lines) == len(groups), f"{hyp}: {len(hyp_lines)} lines for {len(groups)} groups"
                words = sum(len(x.split()) for x in hyp_lines)
                row = dict(base, mark=mark, bleu=bleu(hyp, refs), len=round(words / max(1, base_words), 3),
                           rep6=sum(longest_repeat(x) >= 6 for x in hyp_lines),
                           lines_rep6=sum(longest_repeat(x) >= 6 for x in joined(line_out, groups)),
                           seconds=round(t, 1), label=args.label, options=" ".join(extra))
                results.append(row)
                print(json.dumps(row), flush=True)
    (out / "results.json").write_text(json.dumps(results, indent=1) + "\n", encoding="utf-8")
    print("\n| model | glue | G | lines BLEU | paragraph BLEU | Δ | len | rep6 |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for r in results:
        print(f"| {r['model']} | {r['mark']} | {r['group']} | {r['lines_bleu']:.2f} | {r['bleu']:.2f} | "
              f"{r['bleu'] - r['lines_bleu']:+.2f} | {r['len']:.3f} | {r['rep6']} |")


def _positions(doc_ids: list[str]) -> list[tuple[str, int]]:
    """(document, position within it) per entry."""
    out, last, k = [], None, 0
    for d in doc_ids:
        k = k + 1 if d == last else 0
        last = d
        out.append((d, k))
    return out


if __name__ == "__main__":
    main()
