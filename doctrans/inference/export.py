"""``doctrans export --format ctranslate2``: a checkpoint as a CTranslate2 model directory
(the format, the mapping and what the directory holds: ``inference/ct2.py``, which translates
with it)."""
from __future__ import annotations

import json
import logging
import math
import os
import shutil
import tempfile
from pathlib import Path

import numpy as np

from doctrans.data.vocab import Vocab
from doctrans.inference.ct2 import FORMAT, FORMAT_VERSION, META, is_exported, require_ctranslate2
from doctrans.inference.config import ModelOptions
from doctrans.inference.translate import LoadedModel
from doctrans.models.build import portable_models
from doctrans.runtime.checkpoint import config_of, load_checkpoint
from doctrans.runtime.model_card import write_model_card
from doctrans.utils.io import atomic_write_text, umask

log = logging.getLogger(__name__)

_NEVER = -1e9          # output-layer bias of the tokens native search never emits


def _spec(p, src_tokens: list[str], tgt_tokens: list[str]):
    """The CTranslate2 ``TransformerSpec`` of a ``PortableTransformer``."""
    require_ctranslate2()
    from ctranslate2.specs import transformer_spec as ts

    w = {k: v.numpy() for k, v in p.weights.items()}
    enc = ts.TransformerEncoderSpec(p.layers_enc, p.heads, pre_norm=p.pre_norm)
    dec = ts.TransformerDecoderSpec(p.layers_dec, p.heads, pre_norm=p.pre_norm)
    spec = ts.TransformerSpec(enc, dec)
    h = w["src_embed.weight"].shape[1]
    scale = True if math.isclose(p.embed_scale, math.sqrt(h)) else np.float32(p.embed_scale)

    def linear(s, name: str, bias: np.ndarray | None = None) -> None:
        s.weight = w[f"{name}.weight"]
        b = w.get(f"{name}.bias", bias)
        if b is not None:
            s.bias = b

    def norm(s, name: str) -> None:
        s.gamma, s.beta = w[f"{name}.weight"], w[f"{name}.bias"]

    enc.embeddings[0].weight = w["src_embed.weight"]
    dec.embeddings.weight = w["tgt_embed.weight"]
    for side in (enc, dec):
        side.scale_embeddings = scale
        side.position_encodings.encodings = p.positions.numpy()
    never = np.zeros(len(tgt_tokens), dtype=np.float32)
    never[[Vocab.pad_id, Vocab.bos_id]] = _NEVER
    linear(dec.projection, "out_proj", bias=never)
    if "out_proj.bias" in w:
        dec.projection.bias = w["out_proj.bias"] + never
    for i, layer in enumerate(enc.layer):
        norm(layer.self_attention.layer_norm, f"enc.{i}.self.norm")
        linear(layer.self_attention.linear[0], f"enc.{i}.self.qkv")
        linear(layer.self_attention.linear[1], f"enc.{i}.self.out")
        norm(layer.ffn.layer_norm, f"enc.{i}.ffn.norm")
        linear(layer.ffn.linear_0, f"enc.{i}.ffn.in")
        linear(layer.ffn.linear_1, f"enc.{i}.ffn.out")
    for i, layer in enumerate(dec.layer):
        norm(layer.self_attention.layer_norm, f"dec.{i}.self.norm")
        linear(layer.self_attention.linear[0], f"dec.{i}.self.qkv")
        linear(layer.self_attention.linear[1], f"dec.{i}.self.out")
        norm(layer.attention.layer_norm, f"dec.{i}.cross.norm")
        linear(layer.attention.linear[0], f"dec.{i}.cross.q")
        linear(layer.attention.linear[1], f"dec.{i}.cross.kv")
        linear(layer.attention.linear[2], f"dec.{i}.cross.out")
        norm(layer.ffn.layer_norm, f"dec.{i}.ffn.norm")
        linear(layer.ffn.linear_0, f"dec.{i}.ffn.in")
        linear(layer.ffn.linear_1, f"dec.{i}.ffn.out")
    if p.pre_norm:
        norm(enc.layer_norm, "enc.norm")
        norm(dec.layer_norm, "dec.norm")
    spec.config.layer_norm_epsilon = p.layer_norm_eps
    spec.config.add_source_eos = True              # the source ends in </s>, as doctrans encodes it
    spec.config.decoder_start_token = "<s>"
    spec.register_source_vocabulary(src_tokens)
    spec.register_target_vocabulary(tgt_tokens)
    spec.validate()
    spec.optimize()
    return spec


def export_ctranslate2(checkpoint: str, output: str, prepared: str = "") -> Path:
    """Write the model of ``checkpoint`` as a CTranslate2 model directory ``output`` (see the
    module doc), replacing an earlier export there. Raises ValueError for a model CTranslate2
    cannot express (naming those it can; checked first) or an ``output`` that exists and is not an
    export, MissingCTranslate2 without ctranslate2, and like ``LoadedModel.load``."""
    out = Path(output)
    if out.exists() and not (out.is_dir() and (not any(out.iterdir()) or is_exported(out))):
        raise ValueError(f"{out} exists and is not an earlier export: choose another -o/--output or remove it")
    loaded = LoadedModel.load(ModelOptions(checkpoint=checkpoint, prepared=prepared, device="cpu"))
    portable = loaded.model.portable()
    if portable is None:
        exp = config_of(load_checkpoint(checkpoint))
        what = f"model.backbone {exp.model.backbone}" + (f" with context.type {exp.context.type}" if exp.context else "")
        raise ValueError(f"{checkpoint} is a {what} model, which CTranslate2 cannot express; "
                         f"export works for {portable_models()}")
    spec = _spec(portable, loaded.src_vocab.tokens, loaded.tgt_vocab.tokens)
    meta = {"format": FORMAT, "version": FORMAT_VERSION, "checkpoint": str(checkpoint),
            "text": {"src": loaded.src_proc.settings(), "tgt": loaded.tgt_proc.settings()},
            "chunk_len": loaded.chunk_len, "protect_dp": loaded.protect_dp,
            "max_target_len": loaded.model.max_target_len,
            "source_context": portable.source_context, "max_context_tokens": portable.max_context_tokens,
            "target_context": portable.target_context,
            "max_target_context_tokens": portable.max_target_context_tokens,
            "src_vocab": loaded.src_vocab.tokens, "tgt_vocab": loaded.tgt_vocab.tokens}
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=out.parent))
    try:
        spec.save(str(tmp))
        atomic_write_text(tmp / META, json.dumps(meta, ensure_ascii=False))
        write_model_card(tmp, load_checkpoint(checkpoint), name=f"{Path(checkpoint).parent.name} (CTranslate2 export)",
                         use=f"doctrans translate --engine ctranslate2 -c {out} -i INPUT -o OUTPUT",
                         notes=f"Exported from `{checkpoint}` as a CTranslate2 TransformerSpec (float32; "
                               "`--compute-type int8` converts at load time).")
        os.chmod(tmp, 0o777 & ~umask())
        old = None
        if out.exists():
            old = out.with_name(f".{out.name}.old")
            shutil.rmtree(old, ignore_errors=True)
            out.rename(old)
        tmp.rename(out)
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    log.info("exported %s → %s (CTranslate2 TransformerSpec, float32%s)", checkpoint, out,
             f", source context {portable.source_context}" if portable.source_context else "")
    return out


def exportable(checkpoint: str) -> bool:
    """Whether ``export_ctranslate2`` can write ``checkpoint``'s model (its ``portable()`` is not
    None); loads the checkpoint on the CPU. Raises like ``LoadedModel.load``."""
    loaded = LoadedModel.load(ModelOptions(checkpoint=str(checkpoint), device="cpu"))
    return loaded.model.portable() is not None


def shipped_export_hint(kind: str) -> str:
    """What ``doctrans translate --engine ctranslate2`` without ``-c`` tells its user: the engine
    runs an exported directory, so name the export command for the first shipped model of
    ``kind`` ("document" | "sentence") that CTranslate2 can express, and say when the default of
    that kind is not one (the default document model numbers its context from an offset, which
    no engine can). Loads the shipped models of ``kind`` in index order until one is exportable.
    Raises ValueError (``default_model``) when none of ``kind`` is shipped."""
    from doctrans.runtime.shipped import default_model, shipped_models

    default = default_model(kind)
    first = next((m for m in shipped_models() if m.kind == kind and exportable(str(m.verify()))), None)
    head = "--engine ctranslate2 translates with an exported model directory, given with -c"
    if first is None:
        return (f"{head}; no shipped {kind} model can be exported to CTranslate2 (the default, {default.name}, "
                "cannot be expressed by it): translate with --engine native")
    why = "" if first.name == default.name else (
        f" (the default {kind} model, {default.name}, cannot be exported: CTranslate2 cannot express it; "
        f"{first.name} is the shipped {kind} model it can run)")
    return (f"{head}: export a shipped model first with `doctrans export --format ctranslate2 -c {first.name} -o DIR`, "
            f"then `doctrans translate --engine ctranslate2 -c DIR -i FILE`{why}")
