"""``contrastive``: contrastive pronoun accuracy of a row's checkpoint (``evaluation.contrastive``:
a ContraPro-style set built from the TVsub test set, Müller et al. 2018) — all items, DP / overt,
context-needed — scored on the source the row's model reads; and McNemar's test of a row against
the first row on the DP and the context-needed items (``table context``)."""
from __future__ import annotations

from pathlib import Path

from doctrans.evaluation.metrics.base import Column, Metric, ModelInputs


def set_dir(table) -> Path:
    """The contrastive set of a table: its ``contrastive`` setting, else WORK/contrastive_test
    (built there when absent)."""
    return Path(table.contrastive) if table.contrastive else Path(table.work) / "contrastive_test"


def compute(inputs: ModelInputs) -> dict:
    """``evaluation.contrastive.table_columns``: contrastive, contrastive_dp, contrastive_overt,
    contrastive_context_needed (accuracies in [0, 1], NaN for a kind without items), the item
    counts and contrastive_per_item (1/0 per item); kept for reuse under the set directory."""
    from doctrans.evaluation.contrastive import table_columns

    return table_columns(str(inputs.checkpoint), set_dir(inputs.table), Path(inputs.table.data), inputs.source)


def compare(row: dict, first: dict, table) -> dict:
    """McNemar's test of ``row`` against ``first`` on the set's DP and context-needed items
    (mcnemar_dp_p, mcnemar_cn_p); nothing when either row has no per-item results."""
    from doctrans.evaluation.contrastive import mcnemar, read_set

    if "contrastive_per_item" not in row or "contrastive_per_item" not in first:
        return {}
    items = read_set(set_dir(table))[3]
    out = {}
    for key, keep in (("mcnemar_dp_p", lambda it: it["kind"] == "dp"),
                      ("mcnemar_cn_p", lambda it: it.get("context_needed", False))):
        idx = [k for k, it in enumerate(items) if keep(it)]
        out[key] = mcnemar([row["contrastive_per_item"][k] for k in idx],
                           [first["contrastive_per_item"][k] for k in idx])["p_value"]
    return out


def mcnemar_cell(key: str):
    """A ``Column.against_first``: `` (p 0.123)``, the row's McNemar p-value ``key`` against the
    first row; empty for the first row or a row without one."""
    return lambda r, b: "" if r is b or r.get(key) is None else f" (p {r[key]:.3f})"


ALL, DP, OVERT = (Column("contrastive all", "contrastive", ".1%"), Column("contrastive DP", "contrastive_dp", ".1%"),
                  Column("contrastive overt", "contrastive_overt", ".1%"))

METRIC = Metric(
    name="contrastive", title="contrastive pronoun accuracy", kind="model",
    needs=frozenset({"model"}), compute=compute, compare=compare,
    views={"context_usage": (ALL, Column("DP", "contrastive_dp", ".1%"), Column("overt", "contrastive_overt", ".1%"),
                             Column("context-needed", "contrastive_context_needed", ".1%"),
                             Column("McNemar p DP / context-needed", "mcnemar_dp_p / mcnemar_cn_p", ".3f")),
           "context_discourse": (DP, OVERT, ALL), "dp_discourse": (DP, OVERT, ALL), "rec": (DP, OVERT),
           "full": (Column("context-needed, test (McNemar p)", "contrastive_context_needed", ".1%",
                           against_first=mcnemar_cell("mcnemar_cn_p")),)},
)
