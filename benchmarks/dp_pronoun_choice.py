"""Pronoun choice of DP generators at the hand oracle's DP positions (no detection involved).

For every DP of TVsub's hand oracle (``SPLIT.oracle-dp.seg.zh``), moved onto our segmentation
by character offset (a DP inside one of our tokens goes to the next token boundary), ask each
generator which pronoun it would insert there: argmax over the pronoun columns of its
per-position distribution, i.e. P(pronoun | DP here). Prints the accuracy overall and for the
most frequent gold pronouns, and writes OUT.json. This separates the two halves of the
pronoun F of ``doctrans score dp``: where to insert (detection) and what (choice).

    python benchmarks/dp_pronoun_choice.py --prepared data/prep_full --split test \\
        --generator labeler=RUN/best.pt --generator ensemble=A.pt:B.pt:C.pt -o results/dp_choice_test
"""
from __future__ import annotations

import json
import sys
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from doctrans.dp.data import DPSentence, load_sentences  # noqa: E402
from doctrans.dp.agreement import base_chars, extract_dps, project_offsets  # noqa: E402
from doctrans.dp.generator import load_generator  # noqa: E402
from doctrans.utils.io import atomic_write_text, read_lines  # noqa: E402

from dp_pr_curve import generator_args, hand_oracle  # noqa: E402  (same folder)


def oracle_slots(sents: list[DPSentence], oracle_base: list[str], oracle: list[str]) -> list[list[tuple[int, str]]]:
    """Per sentence: [(token position 0..S, gold pronoun)] of the oracle's DPs on our tokens."""
    out = []
    for s, b, o in zip(sents, oracle_base, oracle):
        ours = base_chars(" ".join(s.tokens))
        proj = project_offsets(base_chars(b), ours) if base_chars(b) != ours else None
        starts, c = [], 0
        for t in s.tokens:
            starts.append(c)
            c += len(base_chars(t))
        slots = {}
        for off, pron in extract_dps(b, o):
            off = (proj[off] if off < len(proj) else c) if proj is not None else off
            t = next((i for i, st in enumerate(starts) if st >= off), len(s.tokens))
            slots.setdefault(t, pron)
        out.append(sorted(slots.items()))
    return out


def main() -> None:
    ap = generator_args(__doc__, "results/dp_choice_test")
    ap.add_argument("--top", type=int, default=5, help="gold pronouns listed separately")
    args = ap.parse_args()
    prep = Path(args.prepared)
    paths = hand_oracle(prep, args.split)
    sents = load_sentences(prep / f"{args.split}.tok.zh", None, prep / f"{args.split}.docs")
    slots = oracle_slots(sents, read_lines(paths[0]), read_lines(paths[1]))
    gold_counts = Counter(p for row in slots for _, p in row)
    top = [p for p, _ in gold_counts.most_common(args.top)]
    result = {"split": args.split, "oracle_dps": sum(gold_counts.values()), "generators": {}}
    print(f"{args.split}: {result['oracle_dps']} oracle DPs on {len(sents)} lines")
    print(f"{'generator':12s} {'accuracy':>9s}  " + "  ".join(f"{p:>8s}" for p in top))
    for spec in args.generator:
        name, _, path = spec.partition("=")
        gen = load_generator(path)
        right = Counter()
        for row, probs in zip(slots, gen.distributions(sents)):
            for t, gold in row:
                pred = gen.labels[int(probs[t, 1:].argmax()) + 1]
                right[gold] += pred == gold
        n_right = sum(right.values())
        per = {p: {"n": gold_counts[p], "right": right[p]} for p in gold_counts}
        result["generators"][name] = {"checkpoint": path, "right": n_right,
                                      "accuracy": n_right / max(result["oracle_dps"], 1), "by_gold": per}
        print(f"{name:12s} {n_right / max(result['oracle_dps'], 1):9.3f}  "
              + "  ".join(f"{right[p]:>3d}/{gold_counts[p]:<4d}" for p in top))
    out = Path(args.out).with_suffix(".json")
    out.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(out, json.dumps(result, ensure_ascii=False, indent=1) + "\n")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
