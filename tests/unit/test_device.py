"""runtime.device: the device of a run and the settings a GPU run gets (``configure_cuda``)."""
from __future__ import annotations

import pytest
import torch

from doctrans.runtime import device as dev


@pytest.fixture
def cudnn_sdp_restored():
    before = torch.backends.cuda.cudnn_sdp_enabled()
    yield
    torch.backends.cuda.enable_cudnn_sdp(before)


def test_configure_cuda_turns_cudnn_attention_off(monkeypatch, cudnn_sdp_restored):
    """cuDNN's SDPA backend builds a plan per new shape: 8× slower updates on document batches
    (benchmarks/RESULTS.md, H200); every GPU run turns it off, flash / memory-efficient stay."""
    monkeypatch.delenv(dev.CUDNN_SDP_ENV, raising=False)
    torch.backends.cuda.enable_cudnn_sdp(True)
    flash, mem = torch.backends.cuda.flash_sdp_enabled(), torch.backends.cuda.mem_efficient_sdp_enabled()
    dev.configure_cuda()
    assert not torch.backends.cuda.cudnn_sdp_enabled()
    assert (torch.backends.cuda.flash_sdp_enabled(), torch.backends.cuda.mem_efficient_sdp_enabled()) == (flash, mem)
    dev.configure_cuda()                                   # idempotent
    assert not torch.backends.cuda.cudnn_sdp_enabled()


def test_configure_cuda_keeps_cudnn_attention_when_asked(monkeypatch, cudnn_sdp_restored):
    monkeypatch.setenv(dev.CUDNN_SDP_ENV, "1")
    torch.backends.cuda.enable_cudnn_sdp(True)
    dev.configure_cuda()
    assert torch.backends.cuda.cudnn_sdp_enabled()


def test_resolve_device_configures_only_cuda(monkeypatch, cudnn_sdp_restored):
    """A CPU run leaves the switch alone; a cuda run (here: torch told it has a GPU) sets it."""
    monkeypatch.delenv(dev.CUDNN_SDP_ENV, raising=False)
    torch.backends.cuda.enable_cudnn_sdp(True)
    assert dev.resolve_device("cpu").type == "cpu"
    assert torch.backends.cuda.cudnn_sdp_enabled()
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert dev.resolve_device("auto").type == "cuda"
    assert not torch.backends.cuda.cudnn_sdp_enabled()
    with pytest.raises(ValueError, match="device must be"):
        dev.resolve_device("tpu")
