"""The rules that say whether the previous lines of a document decide a dropped pronoun's form
(issue 52), shared by the held-out context-needed test (``evaluation/context_needed.py``), the
contrastive set (``evaluation/contrastive.py``), the context-dense training data
(``dp/context_dense.py``) and the attention-supervision marks (``dp/attention_marks.py``).

Classes are Table 4.2 rows with 2SG and 2PL merged (*you* does not tell them apart). See
``evaluation/context_needed.py`` for the rules (``agreement``, ``agreement_en``, ``reply``).
"""
from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

from doctrans.dp.annotate import find_dps, parse_alignment
from doctrans.dp.pronouns import ENGLISH_PRONOUNS, chinese_roots, root_rows

THIRD_PERSON = ("3SGM", "3SGF", "3SGN", "3PL")
REPLY = {"1SG": "2", "2": "1SG"}
EN_THIRD_PERSON = ("3SGM", "3SGF", "3PL")          # he / she / they forms (it: mostly expletive)
RULES = ("agreement", "agreement_en", "reply")     # the names deciding_context gives its rules


def pronoun_class(row: str) -> str:
    """Table 4.2 row → class (2SG and 2PL are one class: *you* does not tell them apart)."""
    return "2" if row.startswith("2") else row


def english_class(form: str) -> str:
    """Lower-cased English central pronoun → its class (KeyError for another word)."""
    return pronoun_class(ENGLISH_PRONOUNS[form].categories[0])


def root_counts(line: str) -> Counter:
    """Class → number of Chinese pronoun roots in a segmented line (inside tokens too)."""
    return Counter(pronoun_class(root_rows(r)[0]) for tok in line.split() for r in chinese_roots(tok))


def _constant_lm(tokens: list[str]) -> float:
    """The LM of ``find_dps`` when only *which* English pronouns are dropped matters (module doc)."""
    return 0.0


def dropped_pronouns(zh: str, en: str, alignment: str) -> list[int]:
    """Token positions of the English central pronouns of ``en`` that the automatic DP
    annotation (``find_dps``, strict_unaligned, overt_match) finds dropped in ``zh``."""
    src, tgt = zh.split(), en.split()
    if not src or not tgt:
        return []
    res = find_dps(src, tgt, parse_alignment(alignment), _constant_lm)
    return [ins.tgt_index for ins in res.insertions if tgt[ins.tgt_index] in ENGLISH_PRONOUNS]


def en_classes(line: str) -> set[str]:
    """The he/she/they classes (``EN_THIRD_PERSON``) of the English pronouns of a tokenized line."""
    out = set()
    for tok in line.split():
        if tok in ENGLISH_PRONOUNS:
            cls = english_class(tok)
            if cls in EN_THIRD_PERSON:
                out.add(cls)
    return out


def deciding_context(seg: Sequence[str], ref: Sequence[str], doc_ids: Sequence[str], line: int, cls: str,
                     max_distance: int = 3) -> dict[str, int]:
    """The rules (module doc) under which the previous lines decide a dropped pronoun of class
    ``cls`` in ``line`` → {rule: distance d}; {} when none does. seg: segmented source lines;
    ref: tokenized lowercased English lines; doc_ids: the document of each line (contiguous)."""
    cur = root_counts(seg[line])

    def same_doc(d: int) -> bool:
        return line - d >= 0 and doc_ids[line - d] == doc_ids[line]

    out: dict[str, int] = {}
    if cls in THIRD_PERSON and not any(cur[k] for k in THIRD_PERSON):
        for d in range(1, max_distance + 1):
            if not same_doc(d):
                break
            prev = root_counts(seg[line - d])
            mentioned = {k for k in THIRD_PERSON if prev[k]}
            if mentioned:
                if mentioned == {cls}:
                    out["agreement"] = d
                break
        if cls in EN_THIRD_PERSON:
            for d in range(1, max_distance + 1):
                if not same_doc(d):
                    break
                mentioned = en_classes(ref[line - d])
                if mentioned:
                    if mentioned == {cls}:
                        out["agreement_en"] = d
                    break
    other = REPLY.get(cls)
    if other and same_doc(1):
        prev = root_counts(seg[line - 1])
        if prev[other] and not prev[cls] and not cur[other]:
            out["reply"] = 1
    return out
