"""Whether bfloat16 autocast speeds training up on this CPU, or slows it down.

``train.autocast: bf16`` speeds training up on a CPU with native bfloat16 instructions
(``avx512_bf16``; Intel Cooper Lake / Sapphire Rapids (``amx_bf16``) and later, AMD Zen 4 and
later). Without them PyTorch emulates bf16 arithmetic (an AVX2-only host,
``torch.backends.cpu.get_cpu_capability() == "AVX2"``) and training runs many times slower than
fp32. Both measured in benchmarks/RESULTS.md, "train: doctrans Transformer-small throughput, fp32
vs bf16 autocast".
"""
from __future__ import annotations

import logging
from pathlib import Path

import torch

log = logging.getLogger(__name__)

BF16_FLAGS = ("avx512_bf16", "amx_bf16")        # /proc/cpuinfo flags of native bf16 arithmetic


def cpu_flags(cpuinfo: str | Path = "/proc/cpuinfo") -> set[str] | None:
    """The CPU feature flags of the first processor in ``cpuinfo`` (Linux), None if unreadable."""
    try:
        text = Path(cpuinfo).read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    for line in text.splitlines():
        key, _, value = line.partition(":")
        if key.strip() in ("flags", "Features"):
            return set(value.split())
    return None


def bf16_is_fast(flags: set[str] | None = None, capability: str | None = None) -> bool:
    """True when the CPU has native bfloat16 arithmetic (a ``BF16_FLAGS`` flag; where the flags
    cannot be read, an ``AVX512`` capability from ``torch.backends.cpu.get_cpu_capability()``)."""
    flags = cpu_flags() if flags is None else flags
    if flags is not None:
        return any(f in flags for f in BF16_FLAGS)
    capability = torch.backends.cpu.get_cpu_capability() if capability is None else capability
    return capability.upper().startswith("AVX512")


def warn_if_slow_bf16(autocast: str, device: torch.device) -> bool:
    """Log a warning when bf16 autocast is asked for on a CPU without native bf16 (it trains
    many times slower there than fp32; the config is left as given). Returns True if warned."""
    if autocast != "bf16" or device.type != "cpu" or bf16_is_fast():
        return False
    log.warning("train.autocast=bf16 on a CPU without native bfloat16 (torch capability %s, no %s): "
                "bf16 is emulated and training runs many times slower than fp32 (≈16× measured on an "
                "AVX2-only host): set train.autocast=none", torch.backends.cpu.get_cpu_capability(),
                "/".join(BF16_FLAGS))
    return True


AUTOCAST = ("none", "bf16", "auto")


def resolve_autocast(autocast: str, device: torch.device, cuda_bf16: bool | None = None) -> str:
    """``train.autocast`` as it runs: ``none`` or ``bf16``. ``auto`` is bf16 where the hardware
    has it natively — a CPU with ``BF16_FLAGS`` (``bf16_is_fast``), a CUDA GPU that supports
    bfloat16 (``torch.cuda.is_bf16_supported()``, Ampere and later; ``cuda_bf16`` overrides the
    query) — and fp32 (``none``) elsewhere; the choice and its reason are logged. ``none`` and
    ``bf16`` are kept as given. Raises ValueError for another value."""
    if autocast not in AUTOCAST:
        raise ValueError(f"train.autocast must be one of {', '.join(AUTOCAST)}, got {autocast!r}")
    if autocast != "auto":
        return autocast
    if device.type == "cuda":
        fast = torch.cuda.is_bf16_supported() if cuda_bf16 is None else cuda_bf16
        why = "the GPU supports bfloat16" if fast else "the GPU has no native bfloat16"
    elif device.type == "cpu":
        fast = bf16_is_fast()
        why = (f"the CPU has {'/'.join(BF16_FLAGS)}" if fast else
               f"the CPU has no {'/'.join(BF16_FLAGS)} (bf16 would be emulated, slower than fp32)")
    else:
        fast, why = False, f"device {device.type}"
    choice = "bf16" if fast else "none"
    log.info("train.autocast=auto → %s: %s", "bf16 autocast" if fast else "fp32", why)
    return choice
