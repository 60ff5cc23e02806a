"""Context-dense training data, the selection (issue 52; Mąka et al. 2025, arXiv 2509.14031: fine-tuning on data
selected to be context-dependent): the training pairs whose English pronoun is dropped in the
Chinese *and* whose form the previous lines decide, and batches that upweight them
(``train.context_dense: {share, max_distance, dp_dir}``).

**Selection** (``dense_lines``): a target line of a prepared, ``doctrans annotate-dp``-annotated
corpus is context-dense when one of its DPs (``{split}.dplabel``: the Chinese pronoun dropped
before a source token) has a class (Table 4.2 row; 2SG/2PL one class) that the previous lines of
its document decide, by the rules of the held-out context-needed test
(``evaluation.context_needed.deciding_context``: a 他/她/它/他们 antecedent in the source, a
he/she/they in the previous English, or the I/you flip of a reply), within ``max_distance``
lines — the N a model reads [I: Mąka et al. select with a context-aware model's CXMI; the DP
annotation says the same thing for the phenomenon doctrans targets, and costs nothing at
training time]. ``count_dense`` reports how many a corpus holds.

**Upweighting** (``data/context_dense.py``: ``dense_batches``): each epoch gets extra document batches whose target rows
are context-dense lines (each with its N previous lines as context-only rows, as every document
batch), enough that dense lines make up ``share`` of the epoch's target rows; the lines are
drawn without replacement in an order shuffled with (seed, epoch), cycling when more are needed
[I: oversampling, so the original data stays whole (Mąka et al. mix the selected data with the
original)]. A share at or below the corpus' own adds nothing.
"""
from __future__ import annotations

import logging
from collections import Counter
from pathlib import Path

import numpy as np

from doctrans.data.documents import read_doc_positions
from doctrans.utils.io import read_lines

log = logging.getLogger(__name__)

NO_DP = "N"


def dp_classes(label_line: str) -> list[str]:
    """The pronoun classes of the DPs of one ``.dplabel`` line (``N`` = none): each inserted
    Chinese pronoun's Table 4.2 row, 2SG/2PL as one class "2"."""
    from doctrans.dp.context_rules import pronoun_class
    from doctrans.dp.pronouns import chinese_roots, root_rows

    out = []
    for lab in label_line.split():
        if lab == NO_DP:
            continue
        roots = chinese_roots(lab)
        if roots:
            out.append(pronoun_class(root_rows(roots[0])[0]))
    return out


def check_rules(rules) -> tuple[str, ...]:
    """``rules`` as a tuple, every name one of ``dp.context_rules.RULES`` (empty = all of them).
    Raises ValueError naming an unknown rule."""
    from doctrans.dp.context_rules import RULES

    rules = tuple(rules or ())
    bad = [r for r in rules if r not in RULES]
    if bad:
        raise ValueError(f"train.context_dense.rules: unknown rule(s) {bad}; the rules are {list(RULES)}")
    return rules


def dense_lines(seg: list[str], ref: list[str], doc_ids: list[str], labels: list[str], max_distance: int = 1,
                targets: np.ndarray | None = None, rules: tuple[str, ...] = ()) -> tuple[np.ndarray, Counter]:
    """(bool (n,) True at the context-dense lines, Counter of the deciding rules over them).
    seg: segmented source lines; ref: tokenized English lines; doc_ids: each line's document
    (contiguous); labels: ``.dplabel`` lines; targets: (n,) bool, the lines that may be chosen
    (None: all); rules: the deciding rules that select a line (``dp.context_rules.RULES`` names;
    empty = all) —
    e.g. ``("agreement", "agreement_en")`` keeps the 3rd-person lines and leaves out the I/you
    replies. Raises ValueError on different line counts, ``max_distance`` < 1 or an unknown rule."""
    from doctrans.dp.context_rules import RULES, deciding_context

    keep = set(check_rules(rules) or RULES)

    n = len(seg)
    if not (len(ref) == len(doc_ids) == len(labels) == n):
        raise ValueError(f"line counts differ: {n} source, {len(ref)} target, {len(doc_ids)} docs, "
                         f"{len(labels)} DP labels")
    if max_distance < 1:
        raise ValueError(f"context_dense.max_distance must be ≥ 1, got {max_distance}")
    dense = np.zeros(n, dtype=bool)
    rules: Counter = Counter()
    for i, lab in enumerate(labels):
        if (targets is not None and not targets[i]) or not lab or set(lab.split()) == {NO_DP}:
            continue
        fired = {}
        for cls in dict.fromkeys(dp_classes(lab)):
            fired.update(deciding_context(seg, ref, doc_ids, i, cls, max_distance))
        fired = {r: d for r, d in fired.items() if r in keep}
        if fired:
            dense[i] = True
            rules.update(fired)
    return dense, rules


def load_dense(prepared: Path, dp_dir: Path | None = None, split: str = "train", max_distance: int = 1,
               rules: tuple[str, ...] = ()) -> tuple[np.ndarray, Counter]:
    """``dense_lines`` of a prepared split (``{split}.tok.zh``, ``{split}.tok.en``, ``{split}.docs``,
    ``{split}.target`` where it exists) and its DP annotation (``DP_DIR/{split}.dplabel``, default
    ``PREPARED/dp``). Raises FileNotFoundError naming a missing file (run `doctrans annotate-dp`)."""
    from doctrans.data.batching import read_targets

    prepared = Path(prepared)
    dp_dir = Path(dp_dir) if dp_dir else prepared / "dp"
    paths = [prepared / f"{split}.tok.zh", prepared / f"{split}.tok.en", prepared / f"{split}.docs",
             dp_dir / f"{split}.dplabel"]
    for p in paths:
        if not p.is_file():
            raise FileNotFoundError(f"{p} not found: train.context_dense needs a prepared corpus and its DP "
                                    f"annotation (doctrans annotate-dp {prepared})")
    seg, ref, labels = read_lines(paths[0]), read_lines(paths[1]), read_lines(paths[3])
    names, doc, _ = read_doc_positions(paths[2], len(seg))
    target_path = prepared / f"{split}.target"
    targets = read_targets(target_path, len(seg)) if target_path.is_file() else None
    return dense_lines(seg, ref, [names[d] for d in doc], labels, max_distance, targets, rules)


def count_dense(prepared: Path, dp_dir: Path | None = None, split: str = "train", max_distance: int = 1,
                rules: tuple[str, ...] = ()) -> dict:
    """How many context-dense pairs a prepared + annotated split holds: {lines, with_dp,
    context_dense, share_of_lines, by_rule, max_distance, rules}."""
    from doctrans.dp.context_rules import RULES

    dp_dir = Path(dp_dir) if dp_dir else Path(prepared) / "dp"
    chosen = check_rules(rules)
    dense, rules = load_dense(Path(prepared), dp_dir, split, max_distance, chosen)
    labels = read_lines(dp_dir / f"{split}.dplabel")
    with_dp = sum(1 for lab in labels if lab and set(lab.split()) != {NO_DP})
    return {"lines": int(dense.size), "with_dp": with_dp, "context_dense": int(dense.sum()),
            "share_of_lines": float(dense.mean()) if dense.size else 0.0, "by_rule": dict(rules),
            "max_distance": max_distance, "rules": list(chosen or RULES)}




class TrainingContextData:
    """What ``training.train`` reads of a prepared corpus's DP annotation for
    ``train.context_dense`` and ``train.context_attention_supervision`` (``doctrans.stages.train``
    passes it: training sits below ``dp``): ``dense`` = ``load_dense``, ``marks`` =
    ``dp.attention_marks.supervision_table``."""

    @staticmethod
    def dense(prepared: Path, dp_dir: Path | None, max_distance: int, rules: tuple[str, ...] = ()
              ) -> tuple[np.ndarray, Counter]:
        return load_dense(prepared, dp_dir, "train", max_distance, rules)

    @staticmethod
    def marks(prepared: Path, dp_dir: Path | None, max_distance: int) -> dict:
        from doctrans.dp.attention_marks import supervision_table

        return supervision_table(prepared, dp_dir, "train", max_distance)
