"""Data-parallel training under ``torchrun`` (PyTorch ``torch.distributed``), in one place.

``torchrun --nproc_per_node=K -m doctrans.cli train CONFIG …`` starts K processes with
``WORLD_SIZE``/``RANK``/``LOCAL_RANK`` set; ``setup`` joins them into one process group (gloo on
CPU, nccl on GPU, each process on ``cuda:LOCAL_RANK``). Without those variables (or with
WORLD_SIZE 1) every helper here is a no-op and training is the single-process loop.

How the loop uses it (``training.trainer``):

* sharding — one optimizer update consumes ``world × train.accum`` consecutive batch keys of the
  epoch order (identical on every rank: a function of (seed, epoch)); rank r collates the keys
  at offsets r, r + world, r + 2·world, … of that group. Document batches (``DocNMTTask``) are
  document-contiguous runs, so sharding batches shards documents;
* gradients — every rank divides its summed loss by the target count of the whole update
  (all-reduced before the backward pass, or after the forward pass when only that knows it),
  then ``all_reduce_grads`` sums the gradients before clipping and the Adam step: exactly the
  single-process update with ``train.accum = world × accum`` (up to float summation order);
* rank 0 alone evaluates, logs metrics/TensorBoard, writes checkpoints and the curves; the stop
  decision (max_time_min, early stopping) is made there and broadcast.
"""
from __future__ import annotations

import datetime
import logging
import os
from typing import Any

import torch

log = logging.getLogger(__name__)

# rank 0 evaluates on its own while the others wait in the next collective: allow a long dev pass
TIMEOUT = datetime.timedelta(hours=3)


def env_world() -> int:
    """WORLD_SIZE as set by torchrun (1 when unset)."""
    return int(os.environ.get("WORLD_SIZE", "1") or 1)


def env_rank() -> int:
    """RANK as set by torchrun (0 when unset) — usable before ``setup`` (logging)."""
    return int(os.environ.get("RANK", "0") or 0)


def active() -> bool:
    return torch.distributed.is_available() and torch.distributed.is_initialized()


def world() -> int:
    return torch.distributed.get_world_size() if active() else 1


def rank() -> int:
    return torch.distributed.get_rank() if active() else 0


def is_main() -> bool:
    return rank() == 0


def setup(device: torch.device) -> torch.device:
    """Join the torchrun process group if WORLD_SIZE > 1 (idempotent) and return the device this
    process trains on: ``device``, or ``cuda:LOCAL_RANK`` for cuda. Raises RuntimeError if
    this torch has no ``torch.distributed``."""
    if env_world() <= 1:
        return device
    if not torch.distributed.is_available():
        raise RuntimeError("WORLD_SIZE > 1 but this torch build has no torch.distributed")
    if device.type == "cuda":
        device = torch.device("cuda", int(os.environ.get("LOCAL_RANK", "0")))
        torch.cuda.set_device(device)
    if not active():
        torch.distributed.init_process_group("nccl" if device.type == "cuda" else "gloo", timeout=TIMEOUT)
        log.info("distributed: rank %d of %d (%s, device %s)", rank(), world(),
                 torch.distributed.get_backend(), device)
    return device


def shutdown() -> None:
    if active():
        torch.distributed.destroy_process_group()


def barrier() -> None:
    if active():
        torch.distributed.barrier()


def all_reduce_sum(values: list[float], device: torch.device, dtype=torch.float64) -> list[float]:
    """Element-wise sum over ranks of a short list of numbers (one collective)."""
    if not active():
        return list(values)
    t = torch.tensor(values, dtype=dtype, device=device)
    torch.distributed.all_reduce(t)
    return t.tolist()


def broadcast(obj: Any, src: int = 0) -> Any:
    """Rank ``src``'s picklable ``obj`` on every rank."""
    if not active():
        return obj
    box = [obj]
    torch.distributed.broadcast_object_list(box, src=src)
    return box[0]


def all_gather(obj: Any) -> list:
    """Every rank's picklable ``obj``, in rank order."""
    if not active():
        return [obj]
    out: list = [None] * world()
    torch.distributed.all_gather_object(out, obj)
    return out


def broadcast_module(module: torch.nn.Module) -> None:
    """Rank 0's parameters and buffers on every rank."""
    if not active():
        return
    with torch.no_grad():
        for t in list(module.parameters()) + list(module.buffers()):
            torch.distributed.broadcast(t.data, src=0)


def all_reduce_grads(dense: list[torch.Tensor], sparse: list[torch.Tensor], extra: list[float]) -> list[float]:
    """Sum the gradients of ``dense`` and ``sparse`` parameters (and the numbers ``extra``) over
    ranks, in place, with one all-reduce; returns the summed ``extra``.

    A parameter whose gradient is None on every rank keeps None (Adam skips it, as in a single
    process). Sparse embedding gradients (``nn.Embedding(sparse=True)``) are densified for the
    reduction and made sparse again over the rows any rank touched, so lazy Adam moves exactly
    the rows a single process over the combined batches would (the reduction costs a dense
    table per update — the price of exactness)."""
    if not active():
        return list(extra)
    params = dense + sparse
    if not params:
        return all_reduce_sum(extra, torch.device("cpu"))
    device = params[0].device
    parts, flags = [], []
    for p in dense:
        flags.append(float(p.grad is not None))
        parts.append((p.grad if p.grad is not None else torch.zeros_like(p)).reshape(-1).float())
    for p in sparse:
        g = p.grad.coalesce() if p.grad is not None else None
        dense_g = torch.zeros_like(p, dtype=torch.float32)
        touched = torch.zeros(p.shape[0], dtype=torch.float32, device=device)
        if g is not None:
            rows = g.indices()[0]
            dense_g.index_add_(0, rows, g.values().float())
            touched[rows] = 1.0
        flags.append(float(g is not None))
        parts += [dense_g.reshape(-1), touched]
    parts.append(torch.tensor(flags + list(extra), dtype=torch.float32, device=device))
    flat = torch.cat(parts)
    torch.distributed.all_reduce(flat)
    tail = flat[flat.numel() - len(flags) - len(extra):].tolist()
    got, summed = tail[:len(flags)], tail[len(flags):]
    off = 0
    for p, f in zip(dense, got[:len(dense)]):
        n = p.numel()
        if f > 0:
            p.grad = flat[off:off + n].view_as(p).to(p.dtype).clone()
        off += n
    for p, f in zip(sparse, got[len(dense):]):
        n, rows_n = p.numel(), p.shape[0]
        values, touched = flat[off:off + n].view(p.shape), flat[off + n:off + n + rows_n]
        off += n + rows_n
        if f > 0:
            rows = touched.nonzero().reshape(-1)
            p.grad = torch.sparse_coo_tensor(rows.unsqueeze(0), values[rows].to(p.dtype), p.shape,
                                             check_invariants=True, is_coalesced=True)   # rows: sorted, unique
    return summed
