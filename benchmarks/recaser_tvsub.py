"""The TVsub recaser (data/casing.py): learn it as `doctrans preprocess --train-docs all` does and
measure how much case it restores on the mixed-case dev and test references.

    python benchmarks/recaser_tvsub.py [--data ../shared/corpora/tvsub] [--out tvsub.recaser.en.json]
        [--prepared DIR] [--table FILE] [--hyp FILE ...]

Learning: the train targets of every episode but the held-out ones (``tvsub_config(...,
train_docs="all")``), Moses-tokenized cased (``TextProcessor("en", lowercase=False)``, each distinct
line once, as ``preprocess.map_lines``), ``Recaser.learn`` with preprocess' default min count. With
``--prepared`` (a dataset preprocess wrote from the same episodes) it checks that the lowercased
lines are that dataset's ``train.tok.en``, line for line (what preprocess relies on to learn the
recaser without tokenizing twice). Measuring: each reference (``dev.en``, ``test.en``: tokenized,
mixed case, sentence starts lowercased) tokenized cased, lowercased and recased, against itself
with each sentence's first word capitalized (``MosesDetruecaser``): the share of tokens with the
same spelling (all, and those with a capital on either side) and cased BLEU (recased vs
lowercase). ``--table FILE``: measure that table instead of learning one. ``--hyp FILE ...``:
detokenized translations of the test set (``doctrans translate``, ``--recase`` auto or no) scored
by cased and case-insensitive sacreBLEU against reference 1 (``test.en`` detokenized, sentence
starts capitalized). ~5 min of one core to learn (tokenizing 1.5M distinct lines).
"""
from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", default=str(REPO.parent / "shared" / "corpora" / "tvsub"))
    ap.add_argument("--out", default="tvsub.recaser.en.json", help="where the learnt table is written")
    ap.add_argument("--prepared", default="", help="check against this dataset's train.tok.en")
    ap.add_argument("--table", default="", help="measure this table instead of learning one")
    ap.add_argument("--hyp", nargs="*", default=[], help="detokenized test translations to score cased")
    args = ap.parse_args()

    import sacrebleu
    from sacremoses import MosesDetruecaser

    from doctrans.data.casing import Recaser
    from doctrans.data.preprocess import tvsub_config
    from doctrans.data.text import detokenize_en, tokenize_en

    cfg = tvsub_config(args.data, "/nonexistent", train_docs="all")
    recaser = Recaser.load(args.table) if args.table else learn(cfg, args)
    detruecase = MosesDetruecaser().detruecase
    for split in ("dev", "test"):
        raw = Path(args.data, split, f"{split}.en").read_text(encoding="utf-8").splitlines()
        gold = [detruecase(line, return_str=True) for line in tokenize_en(raw, lowercase=False)]
        lower = [line.lower() for line in gold]
        out = recaser.recase(lower)
        pairs = [(x, y) for a, b in zip(out, gold) for x, y in zip(a.split(), b.split())]
        cased = [(x, y) for x, y in pairs if x != x.lower() or y != y.lower()]
        bleu = lambda hyp: sacrebleu.corpus_bleu(hyp, [gold], tokenize="none", force=True).score  # noqa: E731
        print(f"{split}: {sum(x == y for x, y in pairs) / len(pairs):.1%} of {len(pairs):,} tokens spelled as the "
              f"reference, {sum(x == y for x, y in cased) / len(cased):.1%} of the {len(cased):,} with a capital; "
              f"cased BLEU {bleu(out):.2f} (lowercase {bleu(lower):.2f})")
    ref = detokenize_en(gold)                                  # gold is the test's, the loop's last split
    for hyp in args.hyp:
        lines = Path(hyp).read_text(encoding="utf-8").splitlines()
        print(f"{hyp}: sacreBLEU vs reference 1, cased {sacrebleu.corpus_bleu(lines, [ref]).score:.2f}, "
              f"case-insensitive {sacrebleu.corpus_bleu(lines, [ref], lowercase=True).score:.2f}")


def learn(cfg, args):
    """The recaser ``doctrans preprocess`` learns from ``cfg``'s train targets (written to ``args.out``)."""
    from doctrans.data.casing import Recaser
    from doctrans.data.preprocess import read_splits
    from doctrans.data.text import TextProcessor

    train = read_splits(cfg)[0]
    t0 = time.monotonic()
    uniq = list(dict.fromkeys(train.tgt))
    table = dict(zip(uniq, TextProcessor("en", lowercase=False).tokenize(uniq)))
    tok = [table[line] for line in train.tgt]
    print(f"tokenized {len(tok):,} train targets ({len(uniq):,} distinct) in {time.monotonic() - t0:.0f} s")
    if args.prepared:
        prepared = Path(args.prepared, "train.tok.en").read_text(encoding="utf-8").split("\n")
        same = sum(a.lower() == b for a, b in zip(tok, prepared))
        print(f"lowercased = {args.prepared}/train.tok.en: {same:,} of {len(tok):,} lines")
    t0 = time.monotonic()
    recaser = Recaser.learn(tok, "en", cfg.recaser_min_count)
    print(f"learnt {recaser} in {time.monotonic() - t0:.0f} s -> {args.out}")
    Path(args.out).write_text(json.dumps(recaser.to_dict(), indent=0, ensure_ascii=False) + "\n", encoding="utf-8")
    return recaser


if __name__ == "__main__":
    main()
