"""``apt``: APT pronoun and noun translation accuracy (Miculicich Werlen & Popescu-Belis 2017;
``evaluation.apt``) — the segmented source (``--apt``) aligned with eflomal to the first reference
and to HYP, optionally alongside ``--apt-corpus`` parallel text for better alignments."""
from __future__ import annotations

from doctrans.evaluation.metrics.base import Column, Metric, Option, ScoreInputs

APT_SRC = Option("apt_src", flag="--apt",
                 help="Add APT pronoun and noun translation accuracy (Miculicich Werlen & Popescu-Belis 2017): the "
                      "segmented source (e.g. test.seg.zh) aligned with eflomal to the first reference and to HYP.")
APT_CORPUS = Option("apt_corpus", flag="--apt-corpus", type="text", metavar="PREFIX",
                    help="--apt: tokenized parallel text PREFIX.zh / PREFIX.en (e.g. PREP/train.tok, first 50,000 "
                         "lines) aligned alongside, for better alignments.")
APT_CORPUS_LINES = Option("apt_corpus_lines", 50000, type="positive")     # at most this many of them


def compute(inputs: ScoreInputs) -> dict:
    """{"pronoun": {"apt", "counted", …}, "noun": {…}} of HYP against the first reference."""
    from doctrans.evaluation.apt import apt
    from doctrans.evaluation.score_text import read_lines

    cfg, hyp = inputs.cfg, inputs.hyp
    src = read_lines(cfg.apt_src)
    if len(src) != len(hyp):
        raise ValueError(f"APT source {cfg.apt_src} has {len(src)} lines, the hypothesis {len(hyp)}")
    extra: list[tuple[str, str]] = []
    if cfg.apt_corpus:
        zh, en = (read_lines(f"{cfg.apt_corpus}.{lang}")[:cfg.apt_corpus_lines] for lang in ("zh", "en"))
        if len(zh) != len(en):
            raise ValueError(f"{cfg.apt_corpus}.zh and .en have {len(zh)} and {len(en)} lines")
        extra = list(zip(zh, en))
    return apt(src, inputs.refs[0], hyp, extra)


def report(a: dict) -> list[str]:
    return [f"APT (aligned-word accuracy vs the first reference, eflomal): pronouns "
            f"{100 * a['pronoun']['apt']:.1f}% of {a['pronoun']['counted']}, nouns "
            f"{100 * a['noun']['apt']:.1f}% of {a['noun']['counted']}"]


METRIC = Metric(
    name="apt", title="APT pronoun and noun accuracy", kind="analysis",
    needs=frozenset({"hypothesis", "references", "source"}), compute=compute,
    options=(APT_SRC, APT_CORPUS, APT_CORPUS_LINES), when=("apt_src",), report=report,
    columns=lambda a: {"apt_pronoun": a["pronoun"]["apt"], "apt_noun": a["noun"]["apt"]},
    views={v: (Column("APT pronouns", "apt_pronoun", ".1%"), Column("APT nouns", "apt_noun", ".1%"))
           for v in ("context_discourse", "dp_discourse")},
)
