"""``dp_recall``: DP translation recall (``evaluation.dp_recall``) — the share of the hand-annotated
dropped pronouns (``--base`` the segmented source, ``--oracle`` the same with the DPs inserted) that
the first reference realises and HYP realises too; with ``--baseline`` also the baseline's recall
and a paired bootstrap of the difference over lines."""
from __future__ import annotations

from doctrans.evaluation.metrics.base import BASELINE, BOOTSTRAP, Column, Metric, Option, ScoreInputs

DP_BASE = Option("dp_base", flag="--base",
                 help="With --oracle: the segmented source (test.seg.zh), for DP translation recall.")
DP_ORACLE = Option("dp_oracle", flag="--oracle",
                   help="With --base: the oracle DP-inserted source (test.oracle-dp.seg.zh): adds DP translation "
                        "recall of HYP (share of the dropped pronouns the reference realises that HYP realises too).")


def compute(inputs: ScoreInputs) -> dict:
    """{"base", "oracle", recall, realised, in_reference, dps, by_class; with a baseline "baseline"
    (its recall) and "bootstrap" (delta, ci95, p_value)}."""
    from doctrans.evaluation.dp_recall import dp_recall, dp_recall_bootstrap
    from doctrans.evaluation.score_text import read_lines

    cfg = inputs.cfg
    src, oracle = read_lines(cfg.dp_base), read_lines(cfg.dp_oracle)
    ref = inputs.refs[0]
    out = {"base": str(cfg.dp_base), "oracle": str(cfg.dp_oracle), **dp_recall(inputs.hyp, ref, src, oracle)}
    if inputs.baseline is not None:
        out["baseline"] = dp_recall(inputs.baseline, ref, src, oracle)["recall"]
        out["bootstrap"] = dp_recall_bootstrap(inputs.hyp, inputs.baseline, ref, src, oracle, max(cfg.bootstrap, 1))
    return out


def report(d: dict) -> list[str]:
    return [f"DP translation recall: {100 * d['recall']:.1f}% ({d['realised']} of the {d['in_reference']} "
            f"dropped pronouns the first reference realises; {d['dps']} hand-annotated DPs)"
            + (f", baseline {100 * d['baseline']:.1f}%" if "baseline" in d else "")
            + (f" (difference {100 * d['bootstrap']['delta']:+.1f} points, 95% interval "
               f"[{100 * d['bootstrap']['ci95'][0]:+.1f}, {100 * d['bootstrap']['ci95'][1]:+.1f}], paired "
               f"bootstrap p = {d['bootstrap']['p_value']:.4f})" if "bootstrap" in d else "") + "; by class: "
            + ", ".join(f"{c} {100 * v['recall']:.0f}% of {v['in_reference']}" for c, v in d["by_class"].items())]


def columns(d: dict) -> dict:
    """dp_recall, and against the baseline dp_recall_p and dp_recall_ci95 (of the difference)."""
    row = {"dp_recall": d["recall"]}
    if "bootstrap" in d:
        row["dp_recall_p"], row["dp_recall_ci95"] = d["bootstrap"]["p_value"], d["bootstrap"]["ci95"]
    return row


def against_first(r: dict, b: dict) -> str:
    """`` (+6.2, p 0.004)``: a row's DP recall against the first row's ``b``, in points, with the
    paired bootstrap p-value over lines (``evaluation.dp_recall.dp_recall_bootstrap``); empty for
    the first row or a row without one (``Column.against_first``)."""
    if r is b or r.get("dp_recall_p") is None or b.get("dp_recall") is None or r.get("dp_recall") is None:
        return ""
    return f" ({(r['dp_recall'] - b['dp_recall']) * 100:+.1f}, p {r['dp_recall_p']:.3f})"


METRIC = Metric(
    name="dp_recall", title="DP translation recall", kind="analysis",
    needs=frozenset({"hypothesis", "references", "dp_annotation"}), compute=compute,
    options=(DP_BASE, DP_ORACLE, BASELINE, BOOTSTRAP), when=("dp_base", "dp_oracle"), report=report, columns=columns,
    views={v: (Column("DP recall", "dp_recall", ".1%", against_first=against_first),) for v in ("context_usage", "context_discourse", "rec", "full")},
)
