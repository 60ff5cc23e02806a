"""``coherence``: the mean cosine of adjacent sentences of a document (Foltz et al. 1998;
``evaluation.cohesion``) in an LSA space (``--lsa``: a model, or a tokenized English corpus to fit
one on) and with averaged word vectors, of HYP and the first reference."""
from __future__ import annotations

from doctrans.evaluation.metrics.base import DOCS, Column, Metric, Option, ScoreInputs, reference_cell

LSA = Option("lsa", flag="--lsa",
             help="Add coherence (Foltz et al. 1998: adjacent-sentence cosine in LSA space, and averaged word "
                  "vectors): an LSA model (.pkl) or a tokenized English corpus to fit one on (e.g. "
                  "PREP/train.tok.en; cached beside it).")


def compute(inputs: ScoreInputs) -> dict:
    """{"lsa": {"hyp", "ref"}, "average": {"hyp", "ref"}}: mean adjacent-sentence cosines."""
    from doctrans.evaluation import cohesion as coh

    lsa = coh.lsa_model(inputs.cfg.lsa)
    docs = {k: coh.split_documents(lines, inputs.doc_ids) for k, lines in (("hyp", inputs.hyp),
                                                                          ("ref", inputs.refs[0]))}
    return {v: {k: coh.coherence(d, lsa, v)["coherence"] for k, d in docs.items()} for v in ("lsa", "average")}


def report(c: dict) -> list[str]:
    return [f"coherence (mean adjacent-sentence cosine): LSA hyp {c['lsa']['hyp']:.4f}, first reference "
            f"{c['lsa']['ref']:.4f}; averaged word vectors hyp {c['average']['hyp']:.4f}, "
            f"first reference {c['average']['ref']:.4f}"]


METRIC = Metric(
    name="coherence", title="coherence", kind="analysis",
    needs=frozenset({"hypothesis", "references", "documents", "lsa"}), compute=compute, options=(LSA, DOCS),
    when=("lsa",), report=report,
    columns=lambda c: {"coherence": c["lsa"]["hyp"], "ref_coherence": c["lsa"]["ref"]},
    views={v: (Column("coherence (LSA)", "coherence", ".4f", reference=reference_cell("ref_coherence", ".4f")),)
           for v in ("context_discourse", "dp_discourse")},
)
