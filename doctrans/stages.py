"""The NMT stages with every layer wired in, for the CLI and for Python callers.

``training`` and ``inference`` sit below ``evaluation`` and ``dp`` in the package layers
(``tests/unit/test_architecture.py``), so they are given what they need from above: the
trainer its dev BLEU scorer (``evaluation.dev.dev_bleu``), the translator its input transform
(``dp.apply.dp_inputs``: DP completion with ``dp_generator``) and the ``--explain-context``
pictures (``evaluation.explain_context.explain_translation``). These functions do that wiring.
"""
from __future__ import annotations

from pathlib import Path

from doctrans.config import ExperimentConfig
from doctrans.dp.apply import dp_inputs
from doctrans.evaluation.dev import dev_bleu, dev_cxmi
from doctrans.evaluation.explain_context import explain_translation
from doctrans.inference import translate as _translate
from doctrans.inference.translate import TranslateConfig, Translator
from doctrans.training import train as _train


def train(cfg: ExperimentConfig, resume: bool = False) -> Path:
    """``doctrans train``: ``training.train.run`` with dev BLEU and, for a context model, dev
    CXMI (``evaluation.dev.dev_cxmi``). Returns the run directory; raises like it."""
    return _train.run(cfg, resume=resume, dev_scorer=dev_bleu, dev_context_scorer=dev_cxmi)


def translate(cfg: TranslateConfig) -> Path | None:
    """``doctrans translate``: ``inference.translate.run`` with the DP input transform
    (``cfg.dp_generator``) and, for ``cfg.explain_context`` > 0, the context-attention pictures.
    Returns the output path (None for stdout); raises like it."""
    return _translate.run(cfg, inputs_of=dp_inputs, after=explain_translation if cfg.explain_context > 0 else None)


def translator(cfg: TranslateConfig) -> Translator:
    """A ``Translator`` for ``cfg`` with its input transform (``dp.apply.dp_inputs``)."""
    return Translator(cfg, dp_inputs(cfg))
