"""The metric table of ``doctrans score``: a plain dict, no registration decorators (every metric is here).

``METRIC_TABLE``: result key → ``Metric`` (``metrics/base.py``). A metric is one module in this
package defining ``METRIC`` and one row here; ``doctrans score`` (its options, the loop of
``evaluation/score.py``, the printed table and JSON) and the experiment tables' columns
(``metric_columns``; the model metrics, ``model_metrics``, computed per row by ``doctrans table``)
and their markdown columns (``Metric.views``) follow from the row. The order of the rows is the
order of the score table, of the result's keys, of the analysis lines (comparisons last), of the
options and of a row's model columns. ``check_table``
runs on import: names match their rows, shared options are one object, no option shadows a
``ScoreConfig`` field.
"""
from __future__ import annotations

from collections.abc import Mapping

from doctrans.evaluation.metrics import (apt, bleu_ci, bleu_tok_lc, chrf, coherence, cohesion, contrastive, cxmi,
                                         dp_recall, heldout, pronouns, sacrebleu_13a, significance)
from doctrans.evaluation.metrics.base import Metric, Option

METRIC_TABLE: dict[str, Metric] = {
    "bleu_tok_lc": bleu_tok_lc.METRIC,
    "sacrebleu": sacrebleu_13a.METRIC,
    "chrf": chrf.METRIC,
    "pronouns": pronouns.METRIC,
    "bleu_ci": bleu_ci.METRIC,
    "significance": significance.METRIC,
    "dp_recall": dp_recall.METRIC,
    "cohesion": cohesion.METRIC,
    "coherence": coherence.METRIC,
    "apt": apt.METRIC,
    "cxmi": cxmi.METRIC,                  # model metrics: the experiment tables' (ModelInputs)
    "contrastive": contrastive.METRIC,
    "heldout": heldout.METRIC,
}

# ScoreConfig's own fields (evaluation/score.py): no metric option may take one of these names.
CONFIG_FIELDS = ("hyp", "refs", "hyp_tokenized", "refs_tokenized", "metrics", "lowercase_detok", "split_hyphens",
                 "fmt", "out", "options")


def corpus_metrics(table: Mapping[str, Metric] | None = None) -> tuple[str, ...]:
    """The names of the corpus metrics (``--metrics`` chooses among them), in table order."""
    return tuple(name for name, m in (table or METRIC_TABLE).items() if m.kind == "corpus")


def metric_options(table: Mapping[str, Metric] | None = None) -> dict[str, Option]:
    """Every metric's options by name, in table order (an option listed by two metrics once)."""
    out: dict[str, Option] = {}
    for m in (table or METRIC_TABLE).values():
        for o in m.options:
            out.setdefault(o.name, o)
    return out


def model_metrics(views: tuple[str, ...], table: Mapping[str, Metric] | None = None) -> list[Metric]:
    """The model metrics shown in one of ``views`` (an experiment table's views), in table order."""
    return [m for m in (table or METRIC_TABLE).values() if m.kind == "model" and set(m.views) & set(views)]


def metric_columns(result: Mapping, table: Mapping[str, Metric] | None = None) -> dict:
    """The flat columns (``Metric.columns``) of every metric in a ``score_files`` result, in table
    order: bleu, sacrebleu, chrf, pronouns, ref_pronouns, bleu_ci95, bootstrap_p, sign_p, dp_recall(_p, _ci95),
    cohesion, ref_cohesion, coherence, ref_coherence, apt_pronoun, apt_noun — those computed."""
    row: dict = {}
    for name, m in (table or METRIC_TABLE).items():
        if m.columns is not None and name in result:
            row.update(m.columns(result[name]))
    return row


def check_table(table: Mapping[str, Metric]) -> None:
    """Raise ValueError when a row's key is not its metric's name, two options of one name differ,
    or an option is named like a ``ScoreConfig`` field."""
    seen: dict[str, Option] = {}
    for key, m in table.items():
        if key != m.name:
            raise ValueError(f"metric table row {key!r} holds metric {m.name!r}")
        for o in m.options:
            if o.name in CONFIG_FIELDS:
                raise ValueError(f"metric {m.name}: option {o.name!r} is a ScoreConfig field")
            if seen.setdefault(o.name, o) != o:
                raise ValueError(f"metric {m.name}: option {o.name!r} differs from the one of that name another "
                                 f"metric lists (share one Option object)")


check_table(METRIC_TABLE)
