"""``pronouns``: English pronouns (the forms of thesis Table 4.2) counted in the hypothesis, each
reference and the baseline (``--baseline``), in the tokenized, lowercased form; always on.
Thesis Table 6.8 compares these counts (``evaluation.significance.count_pronouns``); the counts
by class (1SG, 1PL, 2, 3SGM, 3SGF, 3SGN, 3PL: ``count_pronouns_by_class``) say which pronouns a
system adds or drops."""
from __future__ import annotations

from doctrans.evaluation.metrics.base import BASELINE, BASELINE_TOKENIZED, Column, Metric, ScoreInputs


def compute(inputs: ScoreInputs) -> dict:
    """{"hyp": count, "refs": [count per reference], "baseline": count (with a baseline),
    "by_class": {"hyp": {class: count}, "refs": [{class: count} per reference], "baseline": …}}."""
    from doctrans.evaluation.significance import count_pronouns_by_class

    by = {"hyp": count_pronouns_by_class(inputs.hyp), "refs": [count_pronouns_by_class(r) for r in inputs.refs]}
    if inputs.baseline is not None:
        by["baseline"] = count_pronouns_by_class(inputs.baseline)
    out = {k: [sum(c.values()) for c in v] if k == "refs" else sum(v.values()) for k, v in by.items()}
    out["by_class"] = by
    return out


def report(pr: dict) -> list[str]:
    lines = [f"English pronouns (Table 4.2 forms): hyp {pr['hyp']}, refs {pr['refs']}"
             + (f", baseline {pr['baseline']}" if "baseline" in pr else "")]
    by = pr.get("by_class")
    if by:
        who = "hyp / refs" + (" / baseline" if "baseline" in by else "")
        cells = []
        for c in by["hyp"]:
            n = [str(by["hyp"][c])] + ["/".join(str(r[c]) for r in by["refs"])]
            if "baseline" in by:
                n.append(str(by["baseline"][c]))
            cells.append(f"{c} {' / '.join(n)}")
        lines.append(f"  by class ({who}): " + "; ".join(cells))
    return lines


METRIC = Metric(
    name="pronouns", title="English pronoun counts", kind="analysis", needs=frozenset({"hypothesis", "references"}),
    compute=compute, options=(BASELINE, BASELINE_TOKENIZED), report=report,
    columns=lambda e: {"pronouns": e["hyp"], "ref_pronouns": e["refs"]},
    views={"context_discourse": (Column("EN pronouns", "pronouns", "d",
                                        reference=lambda first: str(first["ref_pronouns"][0])),)},
)
