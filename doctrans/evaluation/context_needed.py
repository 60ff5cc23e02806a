"""A context-needed pronoun test built automatically from held-out TVsub training episodes
(issue 52): ``doctrans contrastive build-heldout --data TVSUB -o DIR``.

The hand-annotated test set has 39 context-needed items (``evaluation/contrastive.py``): +5 points
is two items. This set is built from the 89 training episodes ``doctrans preprocess`` never
trains on (``data/heldout.py``: 62,979 lines), with the **automatic** DP annotation instead of
the hand one, deterministically:

1. **Text**: each episode's raw ``train/ID.zh`` / ``ID.en`` (line-aligned), the Chinese
   normalised and segmented with jieba, the English Moses-tokenized and lowercased — what
   ``doctrans preprocess`` makes of them (``data/text.py``).
2. **Alignment**: eflomal over those lines (the TVsub test set's lines appended when
   ``check_test``, so both are aligned in one run), symmetrised by intersection — the settings
   of ``doctrans annotate-dp`` (``dp/corpus.py``). eflomal samples with a seed from ``/dev/urandom``
   (it takes none), so two builds differ in a few links and items (a rebuild on a fresh machine,
   2026-11-29: 1,990 items where the first build had 1,986); the set directory keeps its
   alignment and a rebuild there reuses it.
3. **Dropped pronouns**: ``dp.annotate.find_dps`` (Algorithm 1 of the thesis, with
   ``overt_match``) on every pair: an English central pronoun the alignment leaves without a
   Chinese pronoun (and no unclaimed compatible pronoun left in the source) is dropped. The
   language model of Algorithm 1 only chooses *where* and *which Chinese form* to insert; *whether*
   an English pronoun is dropped does not depend on it, so the cheapest faithful way is no LM
   at all (a constant score): the items are exactly those the KenLM-scored annotation gives
   [I: the inserted position/surface, not used here, is then the first candidate].
4. **Context-needed**: a dropped pronoun whose form the previous lines of the episode decide,
   by one of three rules, each recording the deciding line's distance d (lines back):
   * ``agreement`` — a 3rd person (3SGM 他, 3SGF 她, 3SGN 它, 3PL), no overt 3rd-person pronoun
     in the current source, and the nearest preceding source line (d ≤ ``max_distance``) with an
     overt 3rd-person pronoun has exactly the item's class (``contrastive.context_need``);
   * ``agreement_en`` — a gendered or plural 3rd person (he/she/they forms: *it* is left out, it is
     mostly expletive), no overt 3rd-person pronoun in the current source, and the nearest
     preceding *English* line (d ≤ ``max_distance``) with a he/she/they form has exactly the
     item's class: the previous translation already says "he" or "she" (what a target-side
     context model reads);
   * ``reply`` — a dropped 1SG (2) after a line with an overt 2 (1SG) pronoun and none of the
     item's class, none of the other in the current source (d = 1; ``contrastive.context_need``).
   The item's ``distance`` is the smallest d of the rules that fire, ``rule`` that rule, ``rules``
   all of them.

The set directory has the format of ``contrastive.build_set`` (``src.zh``, ``ref.en``, ``docs``,
``items.jsonl``, ``summary.json``), so ``doctrans score contrastive DIR -c CKPT`` scores it; every
item is a context-needed DP item (``kind`` "dp", ``context_needed`` true), its contrasts the
reference with the pronoun replaced by every other pronoun of its case(s). ``summary.json``
holds the counts by rule, distance and class, the build time, and with ``check_test`` the
agreement with the hand-annotated context-needed items of the TVsub test set (``check``: the
share of those 39 the automatic procedure, run on the test set, reproduces — same line, same
token).
"""
from __future__ import annotations

import json
import logging
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path

from doctrans.dp.context_rules import (  # noqa: F401 - the rules, re-exported
    EN_THIRD_PERSON, deciding_context, dropped_pronouns, en_classes, english_class)
from doctrans.evaluation.contrastive import contrasts_of
from doctrans.utils.io import atomic_write_lines, atomic_write_text, read_lines

log = logging.getLogger(__name__)

ALIGNMENT = "align.zh-en"          # the set's alignment (held-out lines, then the test set's), reused on rebuild

Aligner = Callable[[Sequence[str], Sequence[str]], list[str]]   # (zh, en) token lines → Pharaoh lines


def eflomal_intersect(zh: Sequence[str], en: Sequence[str], samplers: int = 2) -> list[str]:
    """Pharaoh alignments of line-aligned token lines: eflomal both ways, intersected
    (``doctrans annotate-dp``'s default). Empty lines get empty alignments. eflomal seeds its
    sampler from ``/dev/urandom`` (no seed option), so two runs differ in a few links:
    ``build_heldout_set`` keeps the alignment in the set directory and reuses it."""
    from doctrans.dp import align as align_mod

    with tempfile.TemporaryDirectory(prefix="doctrans-heldout-") as tmp:
        t = Path(tmp)
        (t / "zh").write_text("".join(f"{x}\n" for x in zh), encoding="utf-8")
        (t / "en").write_text("".join(f"{x}\n" for x in en), encoding="utf-8")
        align_mod.eflomal_align(t / "zh", t / "en", t / "fwd", t / "rev", n_samplers=samplers)
        fwd, rev = read_lines(t / "fwd"), read_lines(t / "rev")
    return align_mod.symmetrize_lines(fwd, rev, "intersect")


def context_needed_items(seg: Sequence[str], ref: Sequence[str], doc_ids: Sequence[str], alignments: Sequence[str],
                         max_distance: int = 3) -> list[dict]:
    """The items of a set (module doc): per line, per dropped English pronoun whose form the
    previous lines decide, {line, position, pronoun, class, kind "dp", context_needed True, rule,
    rules, distance, contrasts}, in line and token order."""
    items = []
    for i, (s, r, a) in enumerate(zip(seg, ref, alignments)):
        toks = r.split()
        for j in dropped_pronouns(s, r, a):
            cls = english_class(toks[j])
            rules = deciding_context(seg, ref, doc_ids, i, cls, max_distance)
            contrasts = contrasts_of(toks[j])
            if not rules or not contrasts:               # "yourselves": in no case table, nothing to swap
                continue
            rule = min(rules, key=lambda k: (rules[k], k))
            items.append({"line": i, "position": j, "pronoun": toks[j], "class": cls, "kind": "dp",
                          "context_needed": True, "rule": rule, "rules": dict(sorted(rules.items())),
                          "distance": rules[rule], "contrasts": contrasts})
    return items


def _positions(doc_ids: Sequence[str]) -> list[int]:
    pos, last = [], None
    for k, d in enumerate(doc_ids):
        pos.append(pos[-1] + 1 if k and d == last else 0)
        last = d
    return pos


def heldout_episodes(data: Path, ids: Sequence[str]) -> tuple[list[str], list[str], list[str]]:
    """Raw (zh, en, doc id) lines of the TVsub training episodes ``ids``, in that order. Raises
    FileNotFoundError naming a missing file and ValueError when an episode's sides differ in
    line count."""
    zh, en, docs = [], [], []
    for d in ids:
        pz, pe = Path(data) / "train" / f"{d}.zh", Path(data) / "train" / f"{d}.en"
        for p in (pz, pe):
            if not p.is_file():
                raise FileNotFoundError(f"{p} not found (the TVsub layout of ../shared/corpora/tvsub)")
        a, b = read_lines(pz), read_lines(pe)
        if len(a) != len(b):
            raise ValueError(f"{pz} has {len(a)} lines but {pe} has {len(b)}")
        zh += a
        en += b
        docs += [d] * len(a)
    return zh, en, docs


def _summary(items: list[dict], lines: int, max_distance: int) -> dict:
    return {"lines": lines, "items": len(items), "max_distance": max_distance,
            "by_rule": dict(Counter(it["rule"] for it in items)),
            "by_rules_firing": dict(Counter("+".join(sorted(it["rules"])) for it in items)),
            "by_distance": {str(k): v for k, v in sorted(Counter(it["distance"] for it in items).items())},
            "by_class": dict(sorted(Counter(it["class"] for it in items).items())),
            "by_pronoun": dict(sorted(Counter(it["pronoun"] for it in items).items())),
            "contrasts": sum(len(it["contrasts"]) for it in items)}


def check_against_hand(auto: list[dict], hand: list[dict]) -> dict:
    """How many of the hand-annotated context-needed items (``contrastive.build_set``'s items with
    ``context_needed``) the automatic items of the same lines reproduce (same line and token)."""
    want = [(it["line"], it["position"]) for it in hand if it.get("context_needed")]
    got = {(it["line"], it["position"]) for it in auto}
    hit = [w for w in want if w in got]
    return {"hand_items": len(want), "reproduced": len(hit),
            "share": len(hit) / len(want) if want else float("nan"), "automatic_items": len(auto),
            "automatic_in_hand": sum((it["line"], it["position"]) in set(want) for it in auto)}


def build_heldout_set(data: Path, out: Path, ids: Sequence[str] | None = None, max_distance: int = 3,
                      check_test: bool = True, aligner: Aligner | None = None, samplers: int = 2) -> dict:
    """Build the held-out context-needed set (module doc) from TVsub ``data`` into ``out``;
    returns the summary (also ``out/summary.json``). ``ids``: the episodes (default
    ``data.heldout.TVSUB_HELD_OUT``); ``aligner``: (zh, en) token lines → Pharaoh lines (default
    ``eflomal_intersect``); ``check_test``: also run the procedure on the TVsub test set and
    compare with its hand-annotated context-needed items (``check``). Raises FileNotFoundError /
    ValueError naming a missing or malformed file, ValueError for ``max_distance`` < 1."""
    from doctrans.data.heldout import TVSUB_HELD_OUT
    from doctrans.data.text import normalize_zh, segment_zh, tokenize_en

    if max_distance < 1:
        raise ValueError(f"max_distance must be ≥ 1, got {max_distance}")
    t0 = time.time()
    data, out = Path(data), Path(out)
    zh, en, docs = heldout_episodes(data, TVSUB_HELD_OUT if ids is None else ids)
    seg = segment_zh(normalize_zh(x) for x in zh)
    ref = tokenize_en(en, lowercase=True)
    hand, t_seg, t_ref, t_docs = None, [], [], []
    if check_test:
        from doctrans.evaluation.contrastive import build_set, read_set

        with tempfile.TemporaryDirectory(prefix="doctrans-hand-") as tmp:
            build_set(data, "test", Path(tmp), max_distance)
            _, t_ref, t_docs, hand = read_set(Path(tmp))
        t_seg = segment_zh(normalize_zh(x) for x in read_lines(data / "test" / "test.zh"))
    log.info("held-out context-needed set: %d lines%s", len(seg) + len(t_seg),
             f" ({len(t_seg)} of the test set)" if t_seg else "")
    kept = out / ALIGNMENT
    aligned = read_lines(kept) if kept.is_file() else []
    if len(aligned) != len(seg) + len(t_seg):
        if kept.is_file():
            log.warning("%s has %d lines, not %d: aligning again", kept, len(aligned), len(seg) + len(t_seg))
        aligned = (aligner or (lambda a, b: eflomal_intersect(a, b, samplers)))(seg + t_seg, ref + t_ref)
        if len(aligned) != len(seg) + len(t_seg):
            raise RuntimeError(f"the aligner returned {len(aligned)} lines for {len(seg) + len(t_seg)}")
        out.mkdir(parents=True, exist_ok=True)
        atomic_write_lines(kept, aligned)
    else:
        log.info("held-out context-needed set: reusing the alignment %s", kept)
    items = context_needed_items(seg, ref, docs, aligned[:len(seg)], max_distance)
    out.mkdir(parents=True, exist_ok=True)
    atomic_write_lines(out / "src.zh", zh)
    atomic_write_lines(out / "ref.en", ref)
    atomic_write_lines(out / "docs", [f"{d}\t{p}" for d, p in zip(docs, _positions(docs))])
    atomic_write_lines(out / "items.jsonl", [json.dumps(it, ensure_ascii=False) for it in items])
    summary = {"source": str(data / "train"), "episodes": len(dict.fromkeys(docs)),
               **_summary(items, len(zh), max_distance)}
    if check_test:
        auto = context_needed_items(t_seg, t_ref, t_docs, aligned[len(seg):], max_distance)
        summary["check"] = check_against_hand(auto, hand)
    summary["build_seconds"] = round(time.time() - t0, 1)
    atomic_write_text(out / "summary.json", json.dumps(summary, indent=1, ensure_ascii=False) + "\n")
    return summary
