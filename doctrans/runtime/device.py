"""The torch device of a run: ``train.device`` / ``translate --device``."""
from __future__ import annotations

import torch


def resolve_device(name: str) -> torch.device:
    """``auto`` → cuda when available, else cpu; ``cpu``/``cuda`` as given. Raises ValueError
    for another name or ``cuda`` without a GPU."""
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name not in ("cpu", "cuda"):
        raise ValueError(f"device must be auto, cpu or cuda, got {name!r}")
    if name == "cuda" and not torch.cuda.is_available():
        raise ValueError("device cuda requested but torch sees no GPU (use device: auto or cpu)")
    return torch.device(name)
