"""``bleu_tok_lc``: the comparison setting of the thesis (Wang 2019, Tables 5.4 and 6.2) and of the
HAN paper's ``multi-bleu`` numbers — case-insensitive 4-gram BLEU on Moses-tokenized text against
all references (Papineni et al. 2002), computed by sacrebleu (``BLEU(tokenize="none",
lowercase=True)``) on both sides in ``CorpusTexts.tokenized`` form: text that is not tokenized yet
is tokenized with sacremoses, already tokenized text has its Moses XML escapes undone, and with
``split_hyphens`` both get Moses' aggressive hyphen splitting (TVsub's SGML references have it).
Its signature's ``tok:none`` becomes the tokenization done here (``score_text.tok_lc_signature``),
which reproduces the figure (Post 2018).
"""
from __future__ import annotations

from doctrans.evaluation.metrics.base import CorpusTexts, Metric, bleu_entry


def compute(texts: CorpusTexts) -> dict:
    """The sacrebleu entry (``base.bleu_entry``) of both sides in the tokenized, lowercased form."""
    import sacremoses
    from sacrebleu.metrics import BLEU

    from doctrans.evaluation.score_text import LANG, tok_lc_signature

    prep = (f"sacremoses {sacremoses.__version__} lang={LANG} escape=False "
            f"aggressive_dash_splits={texts.split_hyphens}; "
            f"hyp {'given tokenized' if texts.hyp_tokenized else 'tokenized here'}, "
            f"refs {'given tokenized' if texts.refs_tokenized else 'tokenized here'}")
    metric = BLEU(tokenize="none", lowercase=True, force=True)   # tokenized on purpose: no warning
    hyps, refs = texts.tokenized
    entry = bleu_entry(metric, hyps, refs, prep)
    # sacrebleu's tok:none says it did not tokenize; the figure depends on the Moses tokenization done here
    done = tok_lc_signature(texts.split_hyphens)
    entry["signature"] = entry["signature"].replace("tok:none", f"tok:{done}")
    entry["verbose"] = entry["verbose"].replace("tok:none", f"tok:{done}")
    return entry


METRIC = Metric(
    name="bleu_tok_lc", title="BLEU in the thesis setting", kind="corpus",
    needs=frozenset({"hypothesis", "references"}), compute=compute, form="tokenized",
    legend="bleu_tok_lc = the thesis setting (case-insensitive BLEU-4 on Moses-tokenized text, all refs)",
    columns=lambda e: {"bleu": e["score"]},
)
