"""Model variant tables: plain dicts (no registration decorators, no auto-import), so every variant is listed here.

``BACKBONES``: ``model.backbone`` name → (config dataclass, model class). A backbone is one file
in ``models/backbones/`` implementing ``models.interface.Seq2SeqModel``, one row here and
``pipelines/<name>/{tiny,small,base}.yaml``; its config dataclass has a ``backbone`` field
holding its name.

``CONTEXT_MODELS``: ``context.type`` name → (config dataclass, model class wrapping a backbone,
``models/context/base.py``). A context model is one file in ``models/context/``, one row here
and ``pipelines/context/<name>.yaml``.

``RECONSTRUCTOR``: (config dataclass, model class) of the ``model.reconstructor`` section, which
wraps the backbone (or context model) in reconstructors and DP heads (``models/reconstructor.py``,
docs/models.md §2.9–2.10; ``pipelines/dp/rec_*.yaml``). Nothing outside this file names a variant.
"""
from __future__ import annotations

from torch import nn

from doctrans.models.backbones.rnnsearch import RNNSearch, RNNSearchConfig
from doctrans.models.backbones.transformer import Transformer, TransformerConfig
from doctrans.models.context.cache import CacheConfig, ContinuousCache
from doctrans.models.context.capsule import QCN, QCNConfig
from doctrans.models.context.concat import ConcatConfig, ConcatContext
from doctrans.models.context.global_context import HGC, HGCConfig
from doctrans.models.context.han import HAN, HANConfig
from doctrans.models.context.hier_rnn import HRNN, HRNNConfig
from doctrans.models.context.inter_sentence_gate import InterSentenceGate, ISGConfig
from doctrans.models.context.multi_encoder import MultiEncoder, MultiEncoderConfig
from doctrans.models.context.tgt_concat import TargetConcat, TgtConcatConfig
from doctrans.models.interface import missing_members
from doctrans.models.reconstructor import ReconstructedModel, ReconstructorConfig

DEFAULT_BACKBONE = "transformer"

BACKBONES = {
    "transformer": (TransformerConfig, Transformer),
    "rnnsearch": (RNNSearchConfig, RNNSearch),
}

CONTEXT_MODELS = {
    "concat": (ConcatConfig, ConcatContext),
    "han": (HANConfig, HAN),
    "hgc": (HGCConfig, HGC),
    "qcn": (QCNConfig, QCN),
    "hrnn": (HRNNConfig, HRNN),
    "multi_encoder": (MultiEncoderConfig, MultiEncoder),
    "isg": (ISGConfig, InterSentenceGate),
    "cache": (CacheConfig, ContinuousCache),
    "tgt_concat": (TgtConcatConfig, TargetConcat),
}

RECONSTRUCTOR = (ReconstructorConfig, ReconstructedModel)


def build_model(cfg, src_vocab: int, tgt_vocab: int, pad_id: int = 0, context=None) -> nn.Module:
    """Instantiate the backbone named by ``cfg.backbone`` (a row of ``BACKBONES``) with its
    config ``cfg``, wrapped in the context model ``context.type`` (a row of ``CONTEXT_MODELS``)
    when ``context`` is given. Raises ValueError for an unknown name, a mismatched config, or a
    context model whose ``backbone_parts`` the backbone does not provide (naming the model, the
    backbone and the missing members). A ``cfg.reconstructor`` (``RECONSTRUCTOR``'s config) wraps
    the backbone — or the context model — in ``ReconstructedModel``."""
    backbone = _row(BACKBONES, cfg.backbone, cfg, "backbone")(cfg, src_vocab, tgt_vocab, pad_id)
    rec = getattr(cfg, "reconstructor", None)
    if rec is not None:
        if not isinstance(rec, RECONSTRUCTOR[0]):
            raise ValueError(f"model.reconstructor needs a {RECONSTRUCTOR[0].__name__}, got {type(rec).__name__}")
        if context is not None:                 # a reconstructor over a context model (models/reconstructor.py)
            return RECONSTRUCTOR[1](_context_model(backbone, cfg, context), rec)
        return RECONSTRUCTOR[1](backbone, rec)
    if context is None:
        return backbone
    return _context_model(backbone, cfg, context)


def _context_model(backbone: nn.Module, cfg, context) -> nn.Module:
    """The context model ``context.type`` over ``backbone``, its ``backbone_parts`` checked."""
    model_cls = _row(CONTEXT_MODELS, context.type, context, "context model")
    for parts in model_cls.backbone_parts:
        missing = missing_members(backbone, parts)
        if missing:
            fits = sorted(name for name, (_, cls) in BACKBONES.items() if not missing_members(cls, parts))
            raise ValueError(f"context model {context.type!r} needs a backbone with {parts.__name__} "
                             f"({parts.__module__.replace('.', '/')}.py); backbone {cfg.backbone!r} lacks {', '.join(missing)} "
                             f"(use model.backbone: {' or '.join(fits) or '?'})")
    return model_cls(backbone, context)


def _row(table: dict, name: str, cfg, what: str) -> type:
    """The model class of ``table[name]`` after checking that ``cfg`` is its config dataclass."""
    if name not in table:
        raise ValueError(f"unknown {what} {name!r} (known: {', '.join(sorted(table))})")
    cfg_cls, model_cls = table[name]
    if not isinstance(cfg, cfg_cls):
        raise ValueError(f"{what} {name!r} needs a {cfg_cls.__name__}, got {type(cfg).__name__}")
    return model_cls


def portable_models() -> str:
    """Which models ``portable()`` (``doctrans export``) can express, for error messages: the
    backbones and context models whose class defines its own ``portable``, e.g. "model.backbone
    transformer, alone or with context.type concat"."""
    from doctrans.models.context.base import ContextModel
    from doctrans.models.interface import SentenceModelDefaults

    backbones = sorted(n for n, (_, cls) in BACKBONES.items() if cls.portable is not SentenceModelDefaults.portable)
    contexts = sorted(n for n, (_, cls) in CONTEXT_MODELS.items() if cls.portable is not ContextModel.portable)
    return (f"model.backbone {' or '.join(backbones)}, alone (a sentence-level model) or with context.type "
            f"{' or '.join(contexts)} (not every setting of them: e.g. context.context_position_offset > 0)")
