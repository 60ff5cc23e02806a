"""``cohesion``: lexical cohesion (Wong & Kit 2012 without WordNet: repeated content-word lemmas
over content words; ``evaluation.cohesion``) of HYP and the first reference, per document
(``--docs`` or an .sgm reference), optionally over windows of ``--cohesion-window`` lines."""
from __future__ import annotations

from doctrans.evaluation.metrics.base import DOCS, Column, Metric, Option, ScoreInputs, reference_cell

COHESION = Option("cohesion", False, flag="--cohesion", type="flag",
                  help="Add lexical cohesion (Wong & Kit 2012; lemma repetition) of HYP and the first reference, per "
                       "document (--docs or an .sgm reference).")
COHESION_WINDOW = Option("cohesion_window", 0, flag="--cohesion-window", type="non_negative", show_default=True,
                         help="--cohesion over consecutive windows of this many lines of each document (0: whole "
                              "documents; a subtitle episode of 300–800 lines repeats nearly every content word, so "
                              "whole-episode cohesion saturates).")


def compute(inputs: ScoreInputs) -> dict:
    """{"hyp": lc, "ref": lc, "devices": what counts as cohesive, "window": lines (0: documents)}."""
    from doctrans.evaluation import cohesion as coh

    window = inputs.cfg.cohesion_window
    out = {k: coh.lexical_cohesion(coh.split_documents(lines, inputs.doc_ids), window)["lc"]
           for k, lines in (("hyp", inputs.hyp), ("ref", inputs.refs[0]))}
    out["devices"] = coh.COHESION_DEVICES
    out["window"] = window
    return out


def report(c: dict) -> list[str]:
    return [f"lexical cohesion ({c['devices']}): hyp {c['hyp']:.4f}, first reference {c['ref']:.4f}"]


METRIC = Metric(
    name="cohesion", title="lexical cohesion", kind="analysis", needs=frozenset({"hypothesis", "references",
                                                                                  "documents"}),
    compute=compute, options=(COHESION, COHESION_WINDOW, DOCS), when=("cohesion",), report=report,
    columns=lambda c: {"cohesion": c["hyp"], "ref_cohesion": c["ref"]},
    views={v: (Column("cohesion", "cohesion", ".4f", reference=reference_cell("ref_cohesion", ".4f")),)
           for v in ("context_discourse", "dp_discourse")},
)
