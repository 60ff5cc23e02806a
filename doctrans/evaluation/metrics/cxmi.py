"""``cxmi``: conditional cross-mutual information of a row's checkpoint (Fernandes et al. 2021;
``evaluation.cxmi``): the mean log-likelihood gain of the test references from the real context
over an empty and over a random other-document context (nats per sentence), and P-CXMI of the
reference's pronouns (nats per word, vs empty). A model that does not read documents ignores its
context: exactly 0."""
from __future__ import annotations

from doctrans.evaluation.metrics.base import Column, Metric, ModelInputs


def compute(inputs: ModelInputs) -> dict:
    """{cxmi, cxmi_random, pcxmi_pronoun} (NaN P-CXMI without a pronoun in the references)."""
    from doctrans.evaluation.cxmi import compute_cxmi
    from doctrans.models.interface import reads_documents

    s = inputs.scoring_set
    if not reads_documents(s.model):
        return {"cxmi": 0.0, "cxmi_random": 0.0, "pcxmi_pronoun": 0.0}
    both = compute_cxmi(s.model, s.src, s.tgt, s.doc, s.targets, conditions=("empty", "random"))
    cx = both["empty"]
    return {"cxmi": cx["cxmi"], "cxmi_random": both["random"]["cxmi"],
            "pcxmi_pronoun": cx["by_class"].get("pronoun", {}).get("mean_pcxmi", float("nan"))}


METRIC = Metric(
    name="cxmi", title="CXMI", kind="model", needs=frozenset({"model"}), compute=compute,
    views={"context_usage": (Column("CXMI vs empty", "cxmi", "+.3f"), Column("CXMI vs random", "cxmi_random", "+.3f")),
           "context_discourse": (Column("CXMI (nats/sent)", "cxmi", "+.3f"),
                                 Column("P-CXMI pronouns (nats/word)", "pcxmi_pronoun", "+.4f")),
           "full": (Column("CXMI vs empty", "cxmi", "+.3f"), Column("CXMI vs random", "cxmi_random", "+.3f"))},
)
