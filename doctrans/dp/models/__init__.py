"""DP generator models: ``model.name`` in a ``pipelines/dp/*.yaml`` → (config dataclass of the
``model:`` section, ``DPModel`` adapter class). Adding a model = one file here, one row below,
one YAML."""
from __future__ import annotations

from doctrans.dp.models.labeler import LabelerConfig, LabelerModel
from doctrans.dp.models.thesis import ThesisConfig, ThesisModel

DEFAULT_MODEL = "labeler"      # model.name when the YAML gives none

DP_MODELS = {
    "labeler": (LabelerConfig, LabelerModel),   # ours: BiGRU labeler with document context
    "thesis": (ThesisConfig, ThesisModel),      # thesis §4.3.2: Elman detector + surface MLP
}
