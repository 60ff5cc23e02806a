"""``chrf``: sacrebleu chrF2 (Popović 2015) on the detokenized text of ``sacrebleu`` and with the
same case rule."""
from __future__ import annotations

from doctrans.evaluation.metrics.base import CorpusTexts, Metric
from doctrans.evaluation.metrics.sacrebleu_13a import LEGEND


def compute(texts: CorpusTexts) -> dict:
    """score, signature, verbose and preprocessing of sacrebleu's chrF2."""
    from sacrebleu.metrics import CHRF

    hyps, refs, prep = texts.detokenized
    metric = CHRF(lowercase=texts.lowercase)
    s = metric.corpus_score(hyps, refs)
    sig = str(metric.get_signature())
    return {"score": s.score, "signature": sig, "verbose": s.format(signature=sig), "preprocessing": prep}


METRIC = Metric(
    name="chrf", title="chrF2", kind="corpus", needs=frozenset({"hypothesis", "references"}), compute=compute,
    form="detokenized", legend=LEGEND, columns=lambda e: {"chrf": e["score"]},
)
