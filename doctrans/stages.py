"""The NMT stages with every layer wired in, for the CLI and for Python callers.

``training`` and ``inference`` sit below ``evaluation`` and ``dp`` in the package layers
(``tests/unit/test_architecture.py``), so they are given what they need from above: the
trainer its dev BLEU scorer (``evaluation.dev.dev_bleu``), the translator its input transform
(``dp.apply.dp_inputs``: DP completion with ``dp_generator``) and the ``--explain-context``
pictures (``evaluation.explain_context.explain_translation``) and the ``--scores``
(``evaluation.confidence.line_scores``). These functions do that wiring, each stage importing
only what it wires (``doctrans translate`` imports no training module:
``tests/unit/test_architecture.py``).
"""
from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from doctrans.config import ExperimentConfig
    from doctrans.inference.translate import TranslateConfig, Translator


def train(cfg: ExperimentConfig, resume: bool = False, overwrite: bool = False) -> Path:
    """``doctrans train``: ``training.train.train_model`` with dev BLEU and, for a context model, dev
    CXMI (``evaluation.dev.dev_cxmi``), and the DP annotation reader of ``train.context_dense`` /
    ``train.context_attention_supervision`` (``dp.context_dense.TrainingContextData``). Returns the
    run directory; raises like it."""
    from doctrans.dp.context_dense import TrainingContextData
    from doctrans.evaluation.dev import dev_bleu, dev_cxmi
    from doctrans.training import train as _train

    return _train.train_model(cfg, resume=resume, dev_scorer=dev_bleu, dev_context_scorer=dev_cxmi,
                      context_data=TrainingContextData(), overwrite=overwrite)


def translate(cfg: TranslateConfig) -> Path | None:
    """``doctrans translate``: ``inference.translate.translate_input`` with the DP input transform
    (``cfg.dp.dp_generator``), for ``cfg.io.explain_context`` > 0 the context-attention pictures and,
    for ``cfg.io.scores``, the translations' log-probabilities (``evaluation.confidence.line_scores``).
    Returns the output path (None for stdout); raises like it."""
    from doctrans.dp.apply import dp_inputs
    from doctrans.evaluation.confidence import line_scores
    from doctrans.evaluation.explain_context import explain_translation
    from doctrans.inference import translate as _translate

    return _translate.translate_input(cfg, inputs_of=dp_inputs,
                                      after=explain_translation if cfg.io.explain_context > 0 else None,
                                      scorer=line_scores if cfg.io.scores else None)


def shortlist(prepared: str, output: str = "", top_k: int = 20, frequent: int = 100, align_path: str = "",
              threads: int = 0) -> Path:
    """``doctrans shortlist``: ``inference.shortlist.run_build`` with, unless ``align_path`` gives
    alignments, eflomal in both directions (``threads`` samplers; 0 = the usable cores, as
    ``translate --threads 0``) symmetrised with grow-diag-final-and (``dp.align``; temporary files
    in ``prepared``). Returns the file written."""
    import logging
    import tempfile

    from doctrans.dp.align import eflomal_align, symmetrize_lines
    from doctrans.inference.shortlist import run_build
    from doctrans.utils.io import read_lines
    from doctrans.utils.provenance import cpu_count

    threads = threads or cpu_count()

    def align(src_path: Path, tgt_path: Path) -> list[str]:
        from doctrans.utils.io import temp_name_prefix

        with tempfile.TemporaryDirectory(dir=src_path.parent, prefix=temp_name_prefix("shortlist"),
                                         suffix=".tmp") as tmp:
            fwd, rev = Path(tmp) / "fwd", Path(tmp) / "rev"
            logging.getLogger(__name__).info("aligning %s and %s with eflomal (%d samplers)", src_path, tgt_path,
                                             threads)
            eflomal_align(src_path, tgt_path, fwd, rev, n_samplers=threads)
            return symmetrize_lines(read_lines(fwd), read_lines(rev), "grow-diag-final-and")

    return run_build(prepared, output, top_k, frequent, align_path, align)


def translator(cfg: TranslateConfig) -> Translator:
    """A ``Translator`` for ``cfg`` with its input transform (``dp.apply.dp_inputs``)."""
    from doctrans.dp.apply import dp_inputs
    from doctrans.inference.translate import Translator

    return Translator(cfg, dp_inputs(cfg))
