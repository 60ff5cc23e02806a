"""Model variant tables (style.md: plain dicts, no registration decorators, no auto-import).

``BACKBONES``: ``model.backbone`` name → (config dataclass, model class). A backbone is one file
in ``models/backbones/`` implementing ``models.interface.Seq2SeqModel``, one row here and
``pipelines/<name>/{tiny,small,base}.yaml``; its config dataclass has a ``backbone`` field
holding its name. Nothing outside this file names a variant.
"""
from __future__ import annotations

from torch import nn

from doctrans.models.backbones.transformer import Transformer, TransformerConfig

DEFAULT_BACKBONE = "transformer"

BACKBONES = {
    "transformer": (TransformerConfig, Transformer),
}


def build_model(cfg, src_vocab: int, tgt_vocab: int, pad_id: int = 0) -> nn.Module:
    """Instantiate the backbone named by ``cfg.backbone`` (a row of ``BACKBONES``) with its
    config ``cfg``. Raises ValueError for an unknown name or a config of another backbone."""
    if cfg.backbone not in BACKBONES:
        raise ValueError(f"unknown backbone {cfg.backbone!r} (known: {', '.join(sorted(BACKBONES))})")
    cfg_cls, model_cls = BACKBONES[cfg.backbone]
    if not isinstance(cfg, cfg_cls):
        raise ValueError(f"backbone {cfg.backbone!r} needs a {cfg_cls.__name__}, got {type(cfg).__name__}")
    return model_cls(cfg, src_vocab, tgt_vocab, pad_id)
