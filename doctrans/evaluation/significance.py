"""System vs baseline: paired bootstrap resampling, the sign test, and pronoun counts.

* **Paired bootstrap** (Koehn 2004): sacrebleu's ``PairedTest(test_type="bs")`` — 1,000
  resampled test sets, p = share of samples where the system is not better than the baseline
  (sacrebleu's definition; seed 12345). Computed in the thesis setting (tokenized,
  lowercased BLEU against all references): both sides are prepared exactly as ``bleu_tok_lc``.
* **Sign test** (Collins et al. 2005, as the thesis uses it): per sentence, the smoothed
  sentence-level BLEU of system and baseline (same preparation); sentences where the system
  is better are wins, worse losses, equal ties (dropped); two-sided exact binomial p-value of
  the wins among wins + losses under p = 0.5.
* **Pronoun count** (thesis Table 6.8): English central pronouns (Table 4.2 forms) in a
  tokenized, lowercased text.
"""
from __future__ import annotations

import math
from collections.abc import Sequence

from doctrans.dp.pronouns import TRIGGERS


def sign_test_p(wins: int, losses: int) -> float:
    """Two-sided exact binomial p-value of ``wins`` out of ``wins + losses`` at p = 0.5."""
    n = wins + losses
    if n == 0:
        return 1.0
    k = min(wins, losses)
    tail = sum(math.comb(n, i) for i in range(k + 1)) / 2 ** n
    return min(1.0, 2 * tail)


def sign_test(base: Sequence[str], system: Sequence[str], refs: Sequence[Sequence[str]]) -> dict:
    """Sentence-BLEU sign test on prepared (tokenized, lowercased) text; refs as streams."""
    from sacrebleu.metrics import BLEU

    metric = BLEU(tokenize="none", lowercase=True, force=True, effective_order=True)
    wins = losses = ties = 0
    for i, (b, s) in enumerate(zip(base, system)):
        r = [ref[i] for ref in refs]
        sb, ss = metric.sentence_score(b, r).score, metric.sentence_score(s, r).score
        if ss > sb + 1e-9:
            wins += 1
        elif sb > ss + 1e-9:
            losses += 1
        else:
            ties += 1
    return {"wins": wins, "losses": losses, "ties": ties, "p_value": sign_test_p(wins, losses)}


def paired_bootstrap(base: Sequence[str], system: Sequence[str], refs: Sequence[Sequence[str]],
                     n_samples: int = 1000) -> dict:
    """sacrebleu paired bootstrap on prepared text: ``{"baseline", "system", "p_value", "ci"}``.

    Equal corpus scores get p = 1.0: sacrebleu 2.x counts resampled differences strictly above the
    observed one, so two systems with the same BLEU (observed difference 0: identical outputs, or
    two untrained models both at 0) come out at p = 1/(n + 1), "significant"."""
    from sacrebleu.metrics import BLEU
    from sacrebleu.significance import PairedTest

    metric = {"BLEU": BLEU(tokenize="none", lowercase=True, force=True)}
    test = PairedTest([("baseline", list(base)), ("system", list(system))], metric,
                      references=[list(r) for r in refs], test_type="bs", n_samples=n_samples)
    sigs, scores = test()
    b, s = scores["BLEU"]
    p = 1.0 if float(b.score) == float(s.score) else float(s.p_value)
    return {"baseline": float(b.score), "system": float(s.score), "p_value": p,
            "ci95": float(s.ci), "n_samples": n_samples, "signature": str(sigs["BLEU"])}


def count_pronouns(lines: Sequence[str]) -> int:
    """English central pronouns (Table 4.2, any case) in whitespace-tokenized lines."""
    return sum(t.lower() in TRIGGERS for line in lines for t in line.split())


PRONOUN_CLASSES: tuple[str, ...] = ("1SG", "1PL", "2", "3SGM", "3SGF", "3SGN", "3PL")


def count_pronouns_by_class(lines: Sequence[str]) -> dict[str, int]:
    """``count_pronouns`` split by Table 4.2 class (``PRONOUN_CLASSES`` order, every class
    present; 2SG and 2PL one class "2", as *you* does not tell them apart): which pronouns a
    system adds or drops, e.g. a model that inserts *I* and *you* where the references have none."""
    from doctrans.dp.context_rules import english_class

    out = dict.fromkeys(PRONOUN_CLASSES, 0)
    for line in lines:
        for t in line.split():
            t = t.lower()
            if t in TRIGGERS:
                out[english_class(t)] += 1
    return out
