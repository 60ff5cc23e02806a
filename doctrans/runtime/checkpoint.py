"""Checkpoint I/O: tensors and primitive types only, so ``torch.load(weights_only=True)`` works.

A checkpoint holds ``model``, ``optimizer``, ``state`` (TrainState), ``config`` (the resolved
ExperimentConfig), ``vocab`` (source/target token lists), ``rng`` (torch CPU RNG state),
``prepared`` (the dataset dir it was trained on) and ``version``; an NMT checkpoint also
``text`` (``{"src": …, "tgt": …}``, each ``TextProcessor.settings()``: lowercasing and the BPE
codes' text), so that it translates anywhere without its dataset. ``Trainer.save``
(``training/trainer.py``) writes them, atomically; this module loads them (training, inference
and the DP generators read checkpoints through it).
"""
from __future__ import annotations

import pickle
import zipfile
from pathlib import Path

import torch

from doctrans.config import ExperimentConfig, experiment_from_dict


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
    """The resolved ``ExperimentConfig`` a checkpoint was trained with. Raises ConfigError for
    keys this doctrans does not know."""
    return experiment_from_dict(ckpt["config"], source="checkpoint")
