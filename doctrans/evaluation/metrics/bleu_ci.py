"""``bleu_ci``: a 95% confidence interval of the hypothesis' BLEU in the thesis setting
(``bleu_tok_lc``: case-insensitive BLEU-4 on Moses-tokenized text against all references) by
bootstrap resampling of the test set's lines (Koehn 2004, "Statistical Significance Tests for
Machine Translation Evaluation": the confidence interval of one system), computed by sacrebleu
(``corpus_score(n_bootstrap=N)``, its ``_mean`` and ``_ci``; its seed, ``SACREBLEU_SEED``, default 12345) — what
``sacrebleu --confidence`` prints for one system: the mean of the resampled scores ± half the
width of the interval between their 2.5th and 97.5th percentiles. On with ``--confidence``;
``--bootstrap`` sets the number of resampled test sets (default 1000).

It says how far a corpus score may move with another test set of the same kind: a goal missed by
less than the interval's half width is within the test's sampling error."""
from __future__ import annotations

from doctrans.evaluation.metrics.base import BOOTSTRAP, Metric, Option, ScoreInputs, ScoreOptionError

CONFIDENCE = Option("confidence", False, flag="--confidence", type="flag",
                    help="A 95% confidence interval of HYP's BLEU (thesis setting) by bootstrap resampling of the "
                         "test lines (sacrebleu's, as `sacrebleu --confidence`; --bootstrap samples).")


def compute(inputs: ScoreInputs) -> dict:
    """{"score", "mean", "ci95" (half width, BLEU points), "n_samples", "seed"} of the
    tokenized, lowercased hypothesis against every reference.

    Raises ``ScoreOptionError`` when ``--bootstrap`` is below 2 (no interval from one sample)."""
    from sacrebleu.metrics import BLEU

    n = int(inputs.cfg.bootstrap)
    if n < 2:
        raise ScoreOptionError(f"--confidence needs at least 2 bootstrap samples (--bootstrap {n})")
    metric = BLEU(tokenize="none", lowercase=True, force=True)     # bleu_tok_lc's preparation, done by inputs
    s = metric.corpus_score(inputs.hyp, inputs.refs, n_bootstrap=n)
    mean, ci = float(s._mean), float(s._ci)
    return {"score": float(s.score), "mean": mean, "ci95": ci, "n_samples": n, "seed": str(metric.seed)}


def report(e: dict) -> list[str]:
    return [f"BLEU (thesis setting) {e['score']:.2f}: μ = {e['mean']:.2f} ± {e['ci95']:.2f} (95% confidence "
            f"interval by bootstrap resampling, {e['n_samples']} resampled test sets, sacrebleu seed {e['seed']})"]


METRIC = Metric(
    name="bleu_ci", title="BLEU confidence interval", kind="analysis",
    needs=frozenset({"hypothesis", "references"}), compute=compute, options=(CONFIDENCE, BOOTSTRAP),
    when=("confidence",), report=report, columns=lambda e: {"bleu_ci95": e["ci95"]},
)
