"""``sacrebleu``: standard detokenized sacreBLEU (Post 2018; ``BLEU(tokenize="13a")``) on both
sides in ``CorpusTexts.detokenized`` form (tokenized text Moses-detokenized first). It is
case-insensitive (sacrebleu's own ``lowercase``, ``case:lc`` in the signature) as
``score_text.resolve_forms`` decides: by default whenever the references (as TVsub's) or the
hypothesis are all lowercase.
"""
from __future__ import annotations

from doctrans.evaluation.metrics.base import CorpusTexts, Metric, bleu_entry

LEGEND = ("sacrebleu/chrf = standard detokenized sacrebleu; case:lc = sacrebleu lowercased hyp and refs (default "
          "when the refs (as TVsub's) or the hypothesis are lowercase)")


def compute(texts: CorpusTexts) -> dict:
    """The sacrebleu entry (``base.bleu_entry``) of both sides detokenized."""
    from sacrebleu.metrics import BLEU

    hyps, refs, prep = texts.detokenized
    return bleu_entry(BLEU(tokenize="13a", lowercase=texts.lowercase), hyps, refs, prep)


METRIC = Metric(
    name="sacrebleu", title="detokenized sacreBLEU", kind="corpus", needs=frozenset({"hypothesis", "references"}),
    compute=compute, form="detokenized", legend=LEGEND, columns=lambda e: {"sacrebleu": e["score"]},
)
