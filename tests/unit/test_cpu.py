"""bf16 autocast on CPUs without native bfloat16 is a trap: detected and warned about."""
from __future__ import annotations

import logging

import torch

from doctrans.utils import cpu


def test_bf16_is_fast_only_with_native_bf16_flags(tmp_path):
    info = tmp_path / "cpuinfo"
    info.write_text("processor\t: 0\nflags\t\t: fpu sse avx2 avx512f\n", encoding="utf-8")
    assert cpu.cpu_flags(info) == {"fpu", "sse", "avx2", "avx512f"}
    assert not cpu.bf16_is_fast(cpu.cpu_flags(info))                      # AVX-512 without bf16
    assert cpu.bf16_is_fast({"avx2", "avx512_bf16"}) and cpu.bf16_is_fast({"amx_bf16"})
    assert cpu.cpu_flags(tmp_path / "missing") is None
    assert not cpu.bf16_is_fast(set(), "AVX2")


def test_capability_decides_when_flags_are_unknown(monkeypatch):
    monkeypatch.setattr(cpu, "cpu_flags", lambda: None)
    assert cpu.bf16_is_fast(None, "AVX512") and not cpu.bf16_is_fast(None, "AVX2")


def test_warning_only_for_bf16_on_a_slow_cpu(monkeypatch, caplog):
    monkeypatch.setattr(cpu, "bf16_is_fast", lambda: False)
    with caplog.at_level(logging.WARNING):
        assert not cpu.warn_if_slow_bf16("none", torch.device("cpu"))
        assert not cpu.warn_if_slow_bf16("bf16", torch.device("cuda"))
        assert cpu.warn_if_slow_bf16("bf16", torch.device("cpu"))
    assert "train.autocast=bf16" in caplog.text and "set train.autocast=none" in caplog.text
    monkeypatch.setattr(cpu, "bf16_is_fast", lambda: True)
    assert not cpu.warn_if_slow_bf16("bf16", torch.device("cpu"))


def test_autocast_auto_is_bf16_only_where_native(monkeypatch, caplog):
    import pytest

    cpu_dev, gpu = torch.device("cpu"), torch.device("cuda")
    with caplog.at_level(logging.INFO):
        monkeypatch.setattr(cpu, "bf16_is_fast", lambda: True)
        assert cpu.resolve_autocast("auto", cpu_dev) == "bf16"
        assert "auto → bf16 autocast: the CPU has avx512_bf16/amx_bf16" in caplog.text
        monkeypatch.setattr(cpu, "bf16_is_fast", lambda: False)
        assert cpu.resolve_autocast("auto", cpu_dev) == "none"
        assert "auto → fp32: the CPU has no avx512_bf16/amx_bf16" in caplog.text
    assert cpu.resolve_autocast("auto", gpu, cuda_bf16=True) == "bf16"
    assert cpu.resolve_autocast("auto", gpu, cuda_bf16=False) == "none"
    assert cpu.resolve_autocast("bf16", cpu_dev) == "bf16" and cpu.resolve_autocast("none", gpu) == "none"
    with pytest.raises(ValueError, match="train.autocast must be one of none, bf16, auto"):
        cpu.resolve_autocast("fp16", cpu_dev)
