"""All model variant names live here, in plain dict tables (style.md: no registries)."""
from __future__ import annotations

from torch import nn

from doctrans.models.backbones.transformer import Transformer, TransformerConfig

BACKBONES = {
    "transformer": (TransformerConfig, Transformer),
}


def build_model(cfg: TransformerConfig, src_vocab: int, tgt_vocab: int, pad_id: int = 0) -> nn.Module:
    """Instantiate the backbone for ``cfg`` (currently the Transformer, models.md §1.3)."""
    for cfg_cls, model_cls in BACKBONES.values():
        if isinstance(cfg, cfg_cls):
            return model_cls(cfg, src_vocab, tgt_vocab, pad_id)
    raise ValueError(f"no backbone for config type {type(cfg).__name__}")
