"""The torch device of a run: ``train.device`` / ``translate --device``."""
from __future__ import annotations

import os

import torch

CUDNN_SDP_ENV = "DOCTRANS_CUDNN_SDP"      # "1": keep PyTorch's cuDNN attention backend on


def configure_cuda() -> None:
    """Settings for a run on a GPU, applied by ``resolve_device`` whenever it returns cuda.

    PyTorch's cuDNN backend of ``F.scaled_dot_product_attention`` is switched off (the flash /
    memory-efficient kernels remain) unless the environment sets ``DOCTRANS_CUDNN_SDP=1``: cuDNN
    builds an execution plan for every new (rows, query length, key length) shape, and the length
    buckets of document batches (``models.rows.length_buckets``) seldom repeat a shape, so a
    context model's step is spent building plans — on an H200 (torch 2.11) QCN's ≈ 94 SDPA calls
    per update averaged 13 ms each, 0.6 updates/s against the sentence Transformer's 28/s
    (``benchmarks/RESULTS.md``, 2026-11-27). [I: a speed setting; the result is the same
    attention.] Idempotent; a no-op on a torch without the switch."""
    if os.environ.get(CUDNN_SDP_ENV) != "1" and hasattr(torch.backends.cuda, "enable_cudnn_sdp"):
        torch.backends.cuda.enable_cudnn_sdp(False)


def resolve_device(name: str) -> torch.device:
    """``auto`` → cuda when available, else cpu; ``cpu``/``cuda`` as given (cuda: with
    ``configure_cuda``'s settings). Raises ValueError for another name or ``cuda`` without a GPU."""
    if name == "auto":
        name = "cuda" if torch.cuda.is_available() else "cpu"
    if name not in ("cpu", "cuda"):
        raise ValueError(f"device must be auto, cpu or cuda, got {name!r}")
    if name == "cuda" and not torch.cuda.is_available():
        raise ValueError("device cuda requested but torch sees no GPU (use device: auto or cpu)")
    if name == "cuda":
        configure_cuda()
    return torch.device(name)
