"""``pronouns``: English pronouns (the forms of thesis Table 4.2) counted in the hypothesis, each
reference and the baseline (``--baseline``), in the tokenized, lowercased form; always on.
Thesis Table 6.8 compares these counts (``evaluation.significance.count_pronouns``)."""
from __future__ import annotations

from doctrans.evaluation.metrics.base import BASELINE, BASELINE_TOKENIZED, Column, Metric, ScoreInputs


def compute(inputs: ScoreInputs) -> dict:
    """{"hyp": count, "refs": [count per reference], "baseline": count (with a baseline)}."""
    from doctrans.evaluation.significance import count_pronouns

    out = {"hyp": count_pronouns(inputs.hyp), "refs": [count_pronouns(r) for r in inputs.refs]}
    if inputs.baseline is not None:
        out["baseline"] = count_pronouns(inputs.baseline)
    return out


def report(pr: dict) -> list[str]:
    return [f"English pronouns (Table 4.2 forms): hyp {pr['hyp']}, refs {pr['refs']}"
            + (f", baseline {pr['baseline']}" if "baseline" in pr else "")]


METRIC = Metric(
    name="pronouns", title="English pronoun counts", kind="analysis", needs=frozenset({"hypothesis", "references"}),
    compute=compute, options=(BASELINE, BASELINE_TOKENIZED), report=report,
    columns=lambda e: {"pronouns": e["hyp"], "ref_pronouns": e["refs"]},
    views={"context_discourse": (Column("EN pronouns", "pronouns", "d",
                                        reference=lambda first: str(first["ref_pronouns"][0])),)},
)
