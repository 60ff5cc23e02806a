"""Making a shippable file from a training checkpoint and shipping it (``doctrans models add``):
``make_shippable`` (fp16 weights, tied ones kept one tensor by ``half_weights``, no optimizer
state, written with its digest) and ``ship`` (the file, its card and its entry in a shipped
index, ``runtime/shipped.py``, which describes the layout).
"""
from __future__ import annotations

import logging
from pathlib import Path

import torch

from doctrans.runtime.checkpoint import load_checkpoint
from doctrans.runtime.checkpoint_digest import storage_key
from doctrans.runtime.checkpoint_write import save_checkpoint
from doctrans.runtime.shipped import KINDS, ShippedModel, register, sha256_of, shipped_dir, shipped_models
from doctrans.utils.io import atomic_write_text

log = logging.getLogger(__name__)


def make_shippable(checkpoint: str | Path, out: str | Path, recaser: str | Path | None = None) -> dict:
    """Write ``checkpoint`` as a shippable file at ``out``: floating-point weights in fp16, no
    optimizer state or RNG; vocabularies, text settings (BPE codes), config and training state
    kept; ``recaser`` (a table ``data/casing.py`` wrote) goes into the target side's text settings;
    written by ``checkpoint_write.save_checkpoint`` (atomically, with its digest inside). Returns
    {"sha256", "bytes", "params"}. Raises ValueError for a checkpoint without ``text`` (it could
    not translate without its dataset) or with non-finite weights."""
    ckpt = load_checkpoint(checkpoint)
    if not ckpt.get("text"):
        raise ValueError(f"{checkpoint} has no text settings (BPE codes): it would not translate on its own")
    weights = half_weights(ckpt["model"], checkpoint)
    keep = {k: v for k, v in ckpt.items() if k not in ("optimizer", "rng", "rng_ranks", "model")}
    if recaser is not None:
        from doctrans.data.casing import Recaser

        table = Recaser.load(recaser).to_dict()
        keep["text"] = {**keep["text"], "tgt": {**keep["text"]["tgt"], "recaser": table}}
    elif keep["text"].get("tgt", {}).get("lowercase") and not keep["text"].get("tgt", {}).get("recaser"):
        log.warning("%s carries no recaser: the shipped model will write lowercase (give a recaser table, "
                    "e.g. doctrans/shipped/tvsub.recaser.en.json, with --recaser)", checkpoint)
    save_checkpoint({**keep, "model": weights, "shipped": True}, out)
    unique = {v.untyped_storage().data_ptr(): v.numel() for v in weights.values() if v.is_floating_point()}
    params = sum(unique.values())                                   # tied tensors counted once
    return {"sha256": sha256_of(out), "bytes": Path(out).stat().st_size, "params": params}


def half_weights(model: dict[str, torch.Tensor], source: str | Path = "") -> dict[str, torch.Tensor]:
    """``model`` (a state dict) with its floating-point tensors in fp16; tensors that share one
    storage (tied weights: the decoder embedding and the output projection) stay one tensor, so
    they are written once. Raises ValueError naming ``source`` and the key of a non-finite weight."""
    out, done = {}, {}
    for k, v in model.items():
        if v.is_floating_point():
            key = storage_key(v)
            if key not in done:
                if not torch.isfinite(v).all():
                    raise ValueError(f"{source}: weight {k} is not finite; not shipping it")
                done[key] = v.half()
            v = done[key]
        out[k] = v
    return out


def ship(checkpoint: str | Path, name: str, kind: str, card: str, summary: str,
         root: str | Path | None = None, replace: bool = False, max_mb: float = 30.0,
         recaser: str | Path | None = None) -> ShippedModel:
    """Ship ``checkpoint`` as ``NAME``: ``root/NAME.pt`` (``make_shippable``: fp16, no optimizer),
    ``root/NAME.md`` = ``card`` (markdown) followed by a "File" section (SHA-256, bytes,
    parameters), and its ``index.json`` entry (``register``); ``recaser``: a table put inside it. Raises ValueError for an unknown
    ``kind``, a name that is not a plain file stem, a name already shipped without ``replace``
    (a shipped model is replaced only when asked), or a file over ``max_mb`` MB (removed again)."""
    root = Path(root) if root is not None else shipped_dir()
    if kind not in KINDS:
        raise ValueError(f"kind {kind!r}: expected one of {', '.join(KINDS)}")
    if not name or not all(c.isalnum() or c in "-_." for c in name) or name.startswith("."):
        raise ValueError(f"model name {name!r}: use letters, digits, '-', '_' and '.'")
    if not replace and any(m.name == name for m in shipped_models(root)):
        raise ValueError(f"{name} is already shipped in {root}: pass replace=True (--replace) to replace it")
    root.mkdir(parents=True, exist_ok=True)
    out = root / f"{name}.pt"
    info = make_shippable(checkpoint, out, recaser)
    if info["bytes"] > max_mb * 1e6:
        out.unlink()
        raise ValueError(f"{checkpoint}: {info['bytes'] / 1e6:.1f} MB in fp16, over the {max_mb:g} MB a shipped "
                         f"model may take")
    atomic_write_text(root / f"{name}.md", card.rstrip() + f"\n\n## File\n\n`{name}.pt`: {info['bytes']:,} bytes, "
          f"{info['params']:,} parameters (fp16), SHA-256 `{info['sha256']}`.\n")
    model = ShippedModel(name, kind, f"{name}.pt", info["sha256"], info["bytes"], f"{name}.md", summary, str(root))
    register(root, model)
    return model
