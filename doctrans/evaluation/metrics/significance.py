"""``significance``: HYP against the baseline hypothesis (``--baseline``) in the bleu_tok_lc setting —
paired bootstrap resampling (Koehn 2004, sacrebleu's) and the sign test over lines
(``evaluation.significance``)."""
from __future__ import annotations

from doctrans.evaluation.metrics.base import BASELINE, BASELINE_TOKENIZED, BOOTSTRAP, Metric, ScoreInputs


def compute(inputs: ScoreInputs) -> dict:
    """{"baseline": path, "paired_bootstrap": {...}, "sign_test": {...}} with ``cfg.bootstrap`` samples."""
    from doctrans.evaluation.significance import paired_bootstrap, sign_test

    base, hyp, refs = inputs.baseline, inputs.hyp, inputs.refs
    return {"baseline": str(inputs.cfg.baseline),
            "paired_bootstrap": paired_bootstrap(base, hyp, refs, inputs.cfg.bootstrap),
            "sign_test": sign_test(base, hyp, refs)}


def report(sig: dict) -> list[str]:
    bs, st = sig["paired_bootstrap"], sig["sign_test"]
    return [f"vs baseline {sig['baseline']}: BLEU {bs['system']:.2f} vs {bs['baseline']:.2f} "
            f"({bs['system'] - bs['baseline']:+.2f}); paired bootstrap p = {bs['p_value']:.4f} "
            f"({bs['n_samples']} samples); sign test {st['wins']} better / {st['losses']} worse / "
            f"{st['ties']} tied, p = {st['p_value']:.4f}"]


def columns(sig: dict) -> dict:
    """bootstrap_p and sign_p (the tables mark a row whose both are < 0.05)."""
    return {"bootstrap_p": sig["paired_bootstrap"]["p_value"], "sign_p": sig["sign_test"]["p_value"]}


METRIC = Metric(
    name="significance", title="significance against the baseline", kind="comparison",
    needs=frozenset({"hypothesis", "references", "baseline"}), compute=compute,
    options=(BASELINE, BOOTSTRAP, BASELINE_TOKENIZED), when=("baseline",), report=report, columns=columns,
)
