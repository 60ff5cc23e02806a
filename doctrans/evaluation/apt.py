"""Accuracy of pronoun (and noun) translation, APT-style (Miculicich Werlen & Popescu-Belis 2017,
"Validation of an Automatic Metric for the Accuracy of Pronoun Translation (APT)", DiscoMT;
the HAN paper's Table 4 uses it for pronouns and nouns).

For every source word of a class — a Chinese pronoun (Table 4.3 forms and the overt-only 您,
咱们, …) or a noun (jieba's part-of-speech tag ``n*`` for the token alone) — the target words
aligned to it in the reference (R) and in the hypothesis (H) are compared: the word counts as
correctly translated when R and H share a word (lower-cased), as wrong otherwise; a source word
with no aligned reference word is not counted. APT = correct / counted, per class.
[I: APT's "equivalent" category (a list of acceptable substitutes per pronoun) is not used;
a pronoun the hypothesis leaves unaligned counts as wrong.]

Alignment: eflomal (``dp.align``; Gibbs sampling, so figures move by a few tenths between runs)
over the *distinct* (source, target) pairs of source–reference and source–hypothesis, optionally
with a slice of the training corpus for better statistics, symmetrised grow-diag-final-and.
Identical pairs get one alignment, so a hypothesis equal to the reference has APT exactly 1.
"""
from __future__ import annotations

import logging
import tempfile
from pathlib import Path
from typing import Sequence

from doctrans.dp.pronouns import is_chinese_pronoun

log = logging.getLogger(__name__)


def _is_noun(token: str) -> bool:
    import jieba.posseg as pseg

    pieces = pseg.lcut(token, HMM=False)
    return len(pieces) == 1 and pieces[0].flag.startswith("n")


def source_classes(tokens: Sequence[str]) -> list[str | None]:
    """"pronoun" / "noun" / None for each token of a segmented Chinese line."""
    out = []
    for t in tokens:
        if is_chinese_pronoun(t, extended=True):
            out.append("pronoun")
        elif any("\u4e00" <= ch <= "\u9fff" for ch in t) and _is_noun(t):
            out.append("noun")
        else:
            out.append(None)
    return out


def align_pairs(pairs: Sequence[tuple[str, str]], samplers: int = 2) -> dict[tuple[str, str], set]:
    """eflomal + grow-diag-final-and of distinct (source, target) pairs → {pair: links}."""
    from doctrans.dp.align import eflomal_align, symmetrize_lines
    from doctrans.dp.annotate import parse_alignment

    uniq = list(dict.fromkeys(pairs))
    with tempfile.TemporaryDirectory(prefix="apt.") as d:
        d = Path(d)
        (d / "s").write_text("".join(f"{s}\n" for s, _ in uniq), encoding="utf-8")
        (d / "t").write_text("".join(f"{t}\n" for _, t in uniq), encoding="utf-8")
        eflomal_align(d / "s", d / "t", d / "f", d / "r", n_samplers=samplers)
        fwd = (d / "f").read_text(encoding="utf-8").split("\n")[:len(uniq)]
        rev = (d / "r").read_text(encoding="utf-8").split("\n")[:len(uniq)]
    sym = symmetrize_lines(fwd, rev, "grow-diag-final-and")
    return {p: parse_alignment(a) for p, a in zip(uniq, sym)}


def apt(src: Sequence[str], refs: Sequence[str], hyps: Sequence[str],
        extra: Sequence[tuple[str, str]] = (), samplers: int = 2) -> dict:
    """src: segmented source lines; refs / hyps: tokenized, lower-cased target lines; ``extra``:
    more (source, target) pairs for the aligner only → {pronoun: {correct, counted, apt},
    noun: {…}}. Raises ValueError on line counts that differ."""
    if not len(src) == len(refs) == len(hyps):
        raise ValueError(f"APT: {len(src)} source, {len(refs)} reference and {len(hyps)} hypothesis lines")
    links = align_pairs([*zip(src, refs), *zip(src, hyps), *extra], samplers)
    tot = {"pronoun": [0, 0], "noun": [0, 0]}
    for s, r, h in zip(src, refs, hyps):
        classes = source_classes(s.split())
        if not any(classes):
            continue
        rt, ht = r.lower().split(), h.lower().split()
        lr, lh = links[(s, r)], links[(s, h)]
        for k, cls in enumerate(classes):
            if cls is None:
                continue
            ref_words = {rt[j] for i, j in lr if i == k and j < len(rt)}
            if not ref_words:
                continue
            hyp_words = {ht[j] for i, j in lh if i == k and j < len(ht)}
            tot[cls][1] += 1
            tot[cls][0] += bool(ref_words & hyp_words)
    return {c: {"correct": a, "counted": n, "apt": a / n if n else float("nan")} for c, (a, n) in tot.items()}
