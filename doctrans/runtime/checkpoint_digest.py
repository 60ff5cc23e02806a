"""The digest a checkpoint carries of its own content, and what "the same tensor" means.

``storage_key`` says which state-dict entries are one tensor (tied weights); ``content_digest``
is a SHA-256 of a checkpoint's content (tensors by their bytes, tied ones once, and every other
value); ``with_digest`` stamps a checkpoint with it, as ``DIGEST_KEY`` =
``{"scheme": DIGEST_SCHEME, "sha256": HEX}``. ``checkpoint_write.save_checkpoint`` writes every
checkpoint through ``with_digest``; ``checkpoint.load_torch_file`` checks it
(``checkpoint.verify_checkpoint``). Depends on torch only, so that both can use it.
"""
from __future__ import annotations

import hashlib
import json

import torch

DIGEST_KEY = "digest"                       # the checkpoint entry holding its content digest
DIGEST_SCHEME = "doctrans-1"                # how content_digest reads a checkpoint (below)


def storage_key(t: torch.Tensor) -> tuple:
    """What makes two state-dict entries one tensor (tied weights: the decoder embedding and the
    output projection): (storage address, offset, shape, stride). Entries with equal keys are
    written once by ``torch.save``; code that rebuilds a state dict (fp16 shipping, checkpoint
    averaging) keeps them one tensor by this key."""
    return (t.untyped_storage().data_ptr(), t.storage_offset(), tuple(t.shape), tuple(t.stride()))


def content_digest(ckpt: dict) -> str:
    """SHA-256 (64 hex digits) of a checkpoint's content, its ``digest`` entry left out (scheme
    ``doctrans-1``): the JSON text of the whole dict in its order — each tensor written as
    ``<tensor I DTYPE SHAPE>`` (a tensor that ``storage_key`` says is an earlier one, a tied
    weight, as ``<tensor I>``), another non-JSON value as its type and ``repr`` — followed by the
    bytes of each distinct tensor in that order (row-major, the machine's byte order, as
    ``torch.save`` writes them on the little-endian machines torch runs on). Tensors on a GPU are
    copied to the CPU to be read. ``torch.load`` returns what was saved in the same order and
    with the same sharing, so the digest of a loaded checkpoint is that of the object saved.

    Costs one pass over the bytes (hashlib's SHA-256; for the shipped 25.9 MB fp16 model ≈ 17 ms
    on this project's quiet CPU, ``benchmarks/checkpoint_verify_cost.py``). Raises TypeError for a dict
    key JSON cannot write (a checkpoint's keys are str and int), ValueError for a container that
    holds itself."""
    tensors: list[torch.Tensor] = []
    first: dict[tuple, int] = {}

    def placeholder(value):
        if not isinstance(value, torch.Tensor):
            return f"<{type(value).__name__} {value!r}>"
        key = storage_key(value) if value.numel() else None      # empty tensors: never "the same"
        if key in first:
            return f"<tensor {first[key]}>"
        if key is not None:
            first[key] = len(tensors)
        tensors.append(value)
        return f"<tensor {len(tensors) - 1} {str(value.dtype).removeprefix('torch.')} {list(value.shape)}>"

    text = json.dumps({k: v for k, v in ckpt.items() if k != DIGEST_KEY}, default=placeholder)
    h = hashlib.sha256(text.encode("ascii"))
    for t in tensors:
        h.update(t.detach().cpu().contiguous().reshape(-1).view(torch.uint8).numpy())
    return h.hexdigest()


def with_digest(obj: dict) -> dict:
    """``obj`` (a checkpoint) with its ``digest`` entry (re)written last: ``{"scheme":
    "doctrans-1", "sha256": content_digest(obj)}``. A script that edits a loaded checkpoint saves
    ``with_digest(ckpt)`` (or calls ``checkpoint_write.save_checkpoint``, which does)."""
    body = {k: v for k, v in obj.items() if k != DIGEST_KEY}
    return {**body, DIGEST_KEY: {"scheme": DIGEST_SCHEME, "sha256": content_digest(body)}}
