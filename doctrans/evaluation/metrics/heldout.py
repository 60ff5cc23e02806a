"""``heldout``: accuracy of a row's checkpoint on the held-out context-needed pronoun set
(``evaluation.context_needed.build_heldout_set``: ≈2,000 automatically found context-needed DP
items from the 89 TVsub training episodes no model trains on; ``doctrans contrastive
build-heldout``), scored as the contrastive set (``contrastive.score_set``: the reference beats
every same-case pronoun swap) on the source the row's model reads, the per-item results kept for
McNemar's test against the first row (``table full``). The set is built with eflomal, which takes
no seed: two builds (two machines) differ in a few items, so each row carries its build's
fingerprint (``heldout_set``, ``set_fingerprint``) and only rows scored on the same build are
paired; a row scored on another build says so in its cell instead of a p. The set is the table's ``heldout`` setting
(empty: no columns); the scores are kept under the set directory (``contrastive.cached_columns``)."""
from __future__ import annotations

import hashlib
from pathlib import Path

from doctrans.evaluation.metrics.base import Column, Metric, ModelInputs


def set_dir(table) -> str:
    """The held-out set of a table: its ``heldout`` setting ("" when it has none)."""
    return getattr(table, "heldout", "") or ""


def set_fingerprint(d: str | Path) -> str:
    """The first 12 hex digits of the SHA-1 of the set's ``items.jsonl`` (which build of the set)."""
    return hashlib.sha1((Path(d) / "items.jsonl").read_bytes()).hexdigest()[:12]


def same_set(a: dict, b: dict) -> bool:
    """Whether two rows were scored on the same build of the set: the same ``heldout_set`` where
    both have one, else (rows kept before it was recorded) the same item count."""
    if "heldout_set" in a and "heldout_set" in b:
        return a["heldout_set"] == b["heldout_set"]
    return a.get("heldout_items") == b.get("heldout_items")


def columns(c: dict) -> dict:
    """A ``score_set`` result → {heldout (accuracy in [0, 1], NaN without items), heldout_items,
    heldout_per_item (1/0 per item)}."""
    return {"heldout": c["accuracy"], "heldout_items": c["items"], "heldout_per_item": c["per_item"]}


def compute(inputs: ModelInputs) -> dict:
    """The row's ``columns`` on the table's held-out set (nothing without one), scored on its raw
    source or, for a row that reads another source (``ModelInputs.source_of``: a +DPs row's DP
    completion), on that of the set's source (segmented as ``doctrans preprocess`` does). Raises
    FileNotFoundError naming the set directory when it is not built."""
    from doctrans.evaluation.contrastive import cached_columns, read_set

    d = set_dir(inputs.table)
    if not d:
        return {}
    if not (Path(d) / "items.jsonl").is_file():
        raise FileNotFoundError(f"held-out context-needed set {d}: no items.jsonl (build it: doctrans contrastive "
                                f"build-heldout --data TVSUB -o {d})")
    source = None
    if inputs.source_of is not None:
        from doctrans.data.text import normalize_zh, segment_zh

        src, _, docs, _ = read_set(Path(d))
        source = inputs.source_of(segment_zh(normalize_zh(x) for x in src), docs)
    return {**cached_columns(str(inputs.checkpoint), Path(d), columns, source, prefix="heldout-"),
            "heldout_set": set_fingerprint(d)}


def compare(row: dict, first: dict, table) -> dict:
    """McNemar's test of ``row`` against ``first`` on the held-out items (mcnemar_heldout_p);
    nothing when either row has no per-item results; ``mcnemar_heldout_p`` None when the two were
    scored on different builds of the set (``same_set``)."""
    from doctrans.evaluation.contrastive import mcnemar

    if "heldout" in row and "heldout" in first and not same_set(row, first):
        return {"mcnemar_heldout_p": None}
    if "heldout_per_item" not in row or "heldout_per_item" not in first:
        return {}
    return {"mcnemar_heldout_p": mcnemar(row["heldout_per_item"], first["heldout_per_item"])["p_value"]}


def against_first(r: dict, b: dict) -> str:
    """`` (p 0.123)``: the row's McNemar p-value against the first row (``Column.against_first``);
    `` (another build: 1,988 items)`` for a row scored on another build of the set than the first's."""
    if r is b or "heldout" not in r or "heldout" not in b:
        return ""
    if not same_set(r, b):
        return f" (another build: {r.get('heldout_items', 0):,} items)"
    return "" if r.get("mcnemar_heldout_p") is None else f" (p {r['mcnemar_heldout_p']:.3f})"


METRIC = Metric(
    name="heldout", title="held-out context-needed accuracy", kind="model", needs=frozenset({"model"}),
    compute=compute, compare=compare,
    views={"full": (Column("held-out context-needed (McNemar p)", "heldout", ".1%", against_first=against_first),)},
)
