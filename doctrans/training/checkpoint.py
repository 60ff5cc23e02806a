"""Checkpoints: tensors and primitive types only, so ``torch.load(weights_only=True)`` works.

A checkpoint holds ``model``, ``optimizer``, ``state`` (TrainState), ``config`` (the resolved
ExperimentConfig), ``vocab`` (source/target token lists), ``rng`` (torch CPU RNG state),
``prepared`` (the dataset dir it was trained on) and ``version``; an NMT checkpoint also
``text`` (``{"src": …, "tgt": …}``, each ``TextProcessor.settings()``: lowercasing and the BPE
codes' text), so that it translates anywhere without its dataset. ``Trainer.save``
(``training/trainer.py``) writes them, atomically; this module loads and checks them.
"""
from __future__ import annotations

import pickle
import zipfile
from pathlib import Path

import torch

from doctrans.config import ExperimentConfig, experiment_from_dict, from_dict, to_dict

# Config fields that may change when resuming (they do not change what an update computes).
RESUME_MAY_CHANGE = {
    "train.max_steps", "train.max_epochs", "train.max_time_min", "train.patience",
    "train.eval_every", "train.save_every", "train.log_every", "train.threads",
    "train.eval_bleu", "train.eval_beam", "train.eval_max_sentences", "run_dir",
    "train.eval_every_epochs", "train.save_every_epochs", "train.device", "train.tensorboard",
    "train.plot", "train.keep_last",
}


def load_torch_file(path: str | Path, required: tuple[str, ...] = ()) -> dict:
    """``torch.load(weights_only=True)`` of a doctrans checkpoint, with errors a user can act on.

    Shared by ``load_checkpoint`` and the DP generator loader. Raises FileNotFoundError naming
    a missing path; ValueError "PATH is not a doctrans checkpoint" for a file that is not a torch
    zip archive (random bytes, text, a legacy pickle), a zip archive torch cannot read, or a
    loaded object that is not a dict holding every key of ``required``; ValueError "PATH is
    truncated or corrupt" for a torch archive that cannot be read to the end.
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"checkpoint not found: {path}")
    with open(path, "rb") as f:
        magic = f.read(4)
    if magic != b"PK\x03\x04":
        raise ValueError(f"{path} is not a doctrans checkpoint (not a torch zip archive)")
    if not zipfile.is_zipfile(path):
        raise ValueError(f"{path} is truncated or corrupt (incomplete zip archive; copy or save it again)")
    try:
        with zipfile.ZipFile(path) as z:
            is_torch = any(n.endswith("/data.pkl") or n == "data.pkl" for n in z.namelist())
    except (zipfile.BadZipFile, OSError) as e:
        raise ValueError(f"{path} is truncated or corrupt ({e})") from None
    if not is_torch:
        raise ValueError(f"{path} is not a doctrans checkpoint (a zip archive without torch data)")
    try:
        ckpt = torch.load(path, map_location="cpu", weights_only=True)
    except (RuntimeError, EOFError, OSError, zipfile.BadZipFile) as e:
        raise ValueError(f"{path} is truncated or corrupt ({str(e).splitlines()[0]})") from None
    except pickle.UnpicklingError:
        raise ValueError(f"{path} is not a doctrans checkpoint (torch data of other types)") from None
    missing = [k for k in required if not isinstance(ckpt, dict) or k not in ckpt]
    if missing:
        raise ValueError(f"{path} is not a doctrans checkpoint (no {', '.join(missing)})")
    return ckpt


def load_checkpoint(path: str | Path) -> dict:
    """Load an NMT/training-loop checkpoint with ``weights_only=True`` (``load_torch_file``).

    Raises FileNotFoundError naming the path; ValueError "… is not a doctrans checkpoint" or
    "… is truncated or corrupt" (see ``load_torch_file``).
    """
    return load_torch_file(path, required=("model", "config"))


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


def step_checkpoints(run_dir: str | Path) -> list[Path]:
    """``run_dir/checkpoint{STEP}.pt`` (``train.keep_last``), oldest first (by STEP)."""
    found = []
    for p in Path(run_dir).glob("checkpoint*.pt"):
        step = p.stem[len("checkpoint"):]
        if step.isdigit():
            found.append((int(step), p))
    return [p for _, p in sorted(found)]


def average_checkpoints(paths: list[str | Path]) -> dict:
    """The element-wise mean of the models of ``paths`` (fairseq's ``average_checkpoints.py``;
    Vaswani et al. 2017 §6.1 average the last 5 checkpoints), as a checkpoint to translate: the
    last path's config, vocabularies, text settings and state, no optimizer. Floating tensors
    are averaged in float64 and cast back; other tensors (integer buffers) come from the last.

    Raises ValueError for no paths, or models whose parameter names or shapes differ (naming the
    first mismatch and the two files); load errors as ``load_checkpoint``.
    """
    if not paths:
        raise ValueError("average_checkpoints: no checkpoints given")
    last = load_checkpoint(paths[-1])                   # one checkpoint in memory at a time
    ref = last["model"]
    total = {k: v.double() for k, v in ref.items() if v.is_floating_point()}
    for p in paths[:-1]:
        m = load_checkpoint(p)["model"]
        if set(m) != set(ref):
            diff = sorted(set(m) ^ set(ref))[0]
            raise ValueError(f"cannot average {p} with {paths[-1]}: parameter {diff!r} is in one only")
        for k in total:
            if m[k].shape != ref[k].shape:
                raise ValueError(f"cannot average {p} with {paths[-1]}: {k} has shape "
                                 f"{tuple(m[k].shape)} vs {tuple(ref[k].shape)}")
            total[k] += m[k].double()
    model = {k: (total[k] / len(paths)).to(v.dtype) if k in total else v for k, v in ref.items()}
    out = {k: v for k, v in last.items() if k not in ("optimizer", "rng", "rng_ranks")}
    out["model"] = model
    out["averaged"] = [str(p) for p in paths]
    return out
