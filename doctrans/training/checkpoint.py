"""Checkpoints: tensors and primitive types only, so ``torch.load(weights_only=True)`` works.

A checkpoint holds ``model``, ``optimizer``, ``state`` (TrainState), ``config`` (the resolved
ExperimentConfig), ``vocab`` (source/target token lists), ``rng`` (torch CPU RNG state),
``prepared`` (the dataset dir, for BPE codes) and ``version``. Writes are atomic.
"""
from __future__ import annotations

from pathlib import Path

import torch

from doctrans import __version__
from doctrans.config import ExperimentConfig, experiment_from_dict, from_dict, to_dict
from doctrans.utils.io import atomic_torch_save

# Config fields that may change when resuming (they do not change what an update computes).
RESUME_MAY_CHANGE = {
    "train.max_steps", "train.max_epochs", "train.max_time_min", "train.patience",
    "train.eval_every", "train.save_every", "train.log_every", "train.threads",
    "train.eval_bleu", "train.eval_beam", "train.eval_max_sentences", "run_dir",
    "train.eval_every_epochs", "train.save_every_epochs", "train.device", "train.tensorboard",
    "train.plot",
}


def save_checkpoint(path: Path, model, optimizer, state, cfg: ExperimentConfig,
                    src_tokens: list[str], tgt_tokens: list[str]) -> None:
    atomic_torch_save({
        "version": __version__,
        "model": model.state_dict(),
        "optimizer": optimizer.state_dict() if optimizer is not None else {},
        "state": state.to_dict(),
        "config": to_dict(cfg),
        "vocab": {"src": list(src_tokens), "tgt": list(tgt_tokens)},
        "rng": torch.get_rng_state(),
        "prepared": str(cfg.data.prepared),
    }, path)


def load_checkpoint(path: str | Path) -> dict:
    """Load with ``weights_only=True``. Raises FileNotFoundError naming the path."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"checkpoint not found: {path}")
    return torch.load(path, map_location="cpu", weights_only=True)


def config_of(ckpt: dict) -> ExperimentConfig:
    return experiment_from_dict(ckpt["config"], source="checkpoint")


def _flatten(d: dict, prefix: str = "") -> dict:
    out = {}
    for k, v in d.items():
        key = f"{prefix}{k}"
        if isinstance(v, dict):
            out.update(_flatten(v, key + "."))
        else:
            out[key] = v
    return out


def check_resume_compatible(saved, current) -> None:
    """Raise ValueError listing every changed key outside ``RESUME_MAY_CHANGE``. ``saved`` is
    the checkpoint's config, as a dict (parsed with ``from_dict(type(current), …)``, so keys it
    lacks — added to the dataclasses since — count as their defaults) or already parsed."""
    if isinstance(saved, dict):
        saved = from_dict(type(current), saved, source="checkpoint")
    a, b = _flatten(to_dict(saved)), _flatten(to_dict(current))
    diff = sorted(k for k in set(a) | set(b) if a.get(k) != b.get(k) and k not in RESUME_MAY_CHANGE)
    if diff:
        detail = ", ".join(f"{k}: {a.get(k)!r} → {b.get(k)!r}" for k in diff)
        raise ValueError(f"cannot resume: config differs from the checkpoint's ({detail})")
