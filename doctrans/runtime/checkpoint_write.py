"""Writing checkpoints safely: never a non-finite model, never a half-written file, and a full
disk or the file size limit reported as such (torch's own message is ``[enforce fail at
inline_container.cc:…] … file write failed`` or ``… unexpected pos N vs M``, with neither the
path nor the cause).

The file size limit (``ulimit -f``, RLIMIT_FSIZE): the kernel sends SIGXFSZ to a process that
writes past it, which CPython ignores from start-up, so the write fails with EFBIG instead of
killing the process [I: ``signal.getsignal(SIGXFSZ)`` is SIG_IGN]; ``save_checkpoint`` names the
limit and the checkpoint's tensor bytes.

``save_checkpoint(obj, path)`` writes through a temporary file in the same directory, renamed
at the end (``utils.io.atomic_torch_save``), so the previous file of that name survives any
failure, and stamps the checkpoint with the digest of its content (``with_digest``), which
``runtime.checkpoint.load_torch_file`` checks when it is loaded. Every checkpoint doctrans
writes goes through it: ``Trainer.save`` (NMT and DP generator runs), ``doctrans average``,
``doctrans models add`` (``shipping.make_shippable``).
"""
from __future__ import annotations

import errno
import os
import shutil
from pathlib import Path

import torch

from doctrans.runtime.checkpoint_digest import with_digest
from doctrans.utils.io import atomic_torch_save

LOW_SPACE_BYTES = 1 << 20        # less free than this after a failed write: the disk is full


class NonFiniteWeights(FloatingPointError):
    """A model holding NaN or ±inf weights (a diverged training), refused for saving or translating."""


def non_finite_tensors(state: dict) -> list[str]:
    """Names of the floating-point tensors of a state dict holding NaN or ±inf (in order)."""
    return [k for k, v in state.items()
            if isinstance(v, torch.Tensor) and v.is_floating_point() and not bool(torch.isfinite(v).all())]


def check_finite(state: dict, what: str) -> None:
    """Raise NonFiniteWeights naming ``what`` and the first tensors with NaN/inf values."""
    bad = non_finite_tensors(state)
    if bad:
        raise NonFiniteWeights(f"{what}: non-finite (NaN/inf) weights in {len(bad)} tensor(s) "
                               f"({', '.join(bad[:3])}{' …' if len(bad) > 3 else ''}): the training diverged")


def _disk_full(exc: BaseException, directory: Path) -> bool:
    if isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, errno.EDQUOT):
        return True
    if "No space left" in str(exc) or "Disk quota" in str(exc):
        return True
    try:
        return shutil.disk_usage(directory).free < LOW_SPACE_BYTES
    except OSError:
        return False


def file_size_limit() -> int | None:
    """The process' file size limit in bytes (RLIMIT_FSIZE's soft limit, ``ulimit -f``), None
    when unlimited (or unknown)."""
    try:
        import resource
    except ImportError:                     # (not on Windows)
        return None
    soft = resource.getrlimit(resource.RLIMIT_FSIZE)[0]
    return None if soft == resource.RLIM_INFINITY else soft


def tensor_bytes(obj) -> int:
    """Bytes of the tensor storages in ``obj`` (nested dicts, lists and tuples), each storage
    once, as ``torch.save`` writes them (tied weights share one): a lower bound of its
    checkpoint's size."""
    storages: dict[int, int] = {}

    def walk(x) -> None:
        if isinstance(x, torch.Tensor):
            st = x.untyped_storage()
            storages[st.data_ptr()] = st.nbytes()
        elif isinstance(x, dict):
            for v in x.values():
                walk(v)
        elif isinstance(x, (list, tuple)):
            for v in x:
                walk(v)

    walk(obj)
    return sum(storages.values())


def save_checkpoint(obj: dict, path: str | Path) -> None:
    """``torch.save(with_digest(obj))`` to ``path`` atomically. Raises NonFiniteWeights (nothing
    written) when ``obj["model"]`` holds NaN/inf; OSError(EFBIG) "cannot write checkpoint PATH:
    file too large: the file size limit (ulimit -f) is N bytes …" when the write failed with EFBIG
    or the checkpoint's tensors alone exceed the limit; OSError(ENOSPC) "cannot write checkpoint
    PATH: no space left on device (N bytes free in DIR) …" when the write failed on a full disk
    (torch reports both as a RuntimeError without the path); OSError naming the path (and a
    finite file size limit) for another write failure. The previous file at ``path`` is untouched
    by a failure."""
    path = Path(path)
    if isinstance(obj.get("model"), dict):
        check_finite(obj["model"], f"not saving {path}")
    obj = with_digest(obj)
    try:
        atomic_torch_save(obj, path)
    except (OSError, RuntimeError) as e:
        detail = str(e).strip().splitlines()[0][:200] if str(e).strip() else type(e).__name__
        limit, size = file_size_limit(), tensor_bytes(obj)
        if (isinstance(e, OSError) and e.errno == errno.EFBIG) or (limit is not None and size >= limit):
            why = (f"the file size limit (ulimit -f) is {limit:,} bytes and the checkpoint holds {size:,} bytes of "
                   f"tensors; raise it (ulimit -f unlimited)" if limit is not None else
                   f"over the largest file {path.parent}'s file system takes ({size:,} bytes of tensors)")
            raise OSError(errno.EFBIG, f"cannot write checkpoint {path}: file too large: {why}; the previous "
                          f"{path.name}, if any, is untouched [{detail}]") from None
        if _disk_full(e, path.parent):
            try:
                free = f"{shutil.disk_usage(path.parent).free:,} bytes free in {path.parent}"
            except OSError:
                free = f"in {path.parent}"
            raise OSError(errno.ENOSPC, f"cannot write checkpoint {path}: no space left on device ({free}); "
                          f"the previous {path.name}, if any, is untouched [{detail}]") from None
        hint = f" (the file size limit, ulimit -f, is {limit:,} bytes)" if limit is not None else ""
        raise OSError(getattr(e, "errno", None) or errno.EIO,
                      f"cannot write checkpoint {path}: {detail}{hint}") from None
