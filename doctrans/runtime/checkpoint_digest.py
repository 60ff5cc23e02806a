"""What "the same tensor" means in a checkpoint (tied weights), for the code that rebuilds state
dicts (fp16 shipping, checkpoint averaging). Depends on torch only.
"""
from __future__ import annotations

import torch


def storage_key(t: torch.Tensor) -> tuple:
    """What makes two state-dict entries one tensor (tied weights: the decoder embedding and the
    output projection): (storage address, offset, shape, stride). Entries with equal keys are
    written once by ``torch.save``; code that rebuilds a state dict (fp16 shipping, checkpoint
    averaging) keeps them one tensor by this key."""
    return (t.untyped_storage().data_ptr(), t.storage_offset(), tuple(t.shape), tuple(t.stride()))
