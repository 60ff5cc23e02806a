"""The reconstruction spec: what a model reconstructs (docs/models.md §2.8–2.11), and the errors
of a model without a reconstructor or DP predictor.

``Seq2SeqModel.reconstruction`` (``models/interface.py``) is a ``ReconstructionSpec``;
``models/interface.py: NoReconstruction`` answers for every model without a reconstructor, and
``models/reconstructor.py`` is the model with one.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class ReconstructionSpec:
    """What a model reconstructs (docs/models.md §2.9–2.10); ``ReconstructionSpec()`` for none.

    encoder_input: which source the encoder reads in training and translation:
      "original" (x) | "annotated" (x̂, the DP- or DPP-completed source); "" = no reconstructor.
    target: what is reconstructed: "dp" (x̂ with DP words) | "dpp" (x̂ with #DP# placeholders)
      | "original" (x itself, the end-to-end labeler §2.11) | "" (none).
    reranks: the model has a reconstructor that reads the decoder states, so
      ``reconstruction_score`` varies with the candidate translation (§2.8 "Decoding").
    weight: λ, the weight of log R in reranking (= the training weight, §2.8 footnote).
    predicts_dps: ``predict_dps`` works (joint DP predictor §2.10 or labeler §2.11).
    """
    encoder_input: str = ""
    target: str = ""
    reranks: bool = False
    weight: float = 1.0
    predicts_dps: bool = False


def no_reconstructor_message(model: Any) -> str:
    """The ``reconstruction_score`` error of a model without a reconstructor."""
    return (f"model {type(model).__name__} has no reconstructor; --rerank reconstructor needs a model trained "
            "with one (pipelines/dp/rec_*.yaml)")


def no_dp_message(model: Any) -> str:
    """The ``predict_dps`` error of a model that predicts no DPs."""
    return (f"model {type(model).__name__} predicts no DPs; --dp-out needs a joint DP predictor/labeler "
            "(pipelines/dp/rec_joint_*.yaml)")
