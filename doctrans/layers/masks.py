"""All attention masks are built here.

Naming rule: a mask's name says what True means. ``src_pad_mask`` is True at padding;
``attn_keep_mask`` is True where attention is allowed (the convention of
``torch.nn.functional.scaled_dot_product_attention`` for boolean masks).
"""
from __future__ import annotations

from torch import Tensor


def pad_mask(tokens: Tensor, pad_id: int) -> Tensor:
    """True at padding. tokens: (B, S) → (B, S) bool."""
    return tokens.eq(pad_id)


def attn_keep_mask(key_pad_mask: Tensor | None) -> Tensor | None:
    """Key padding mask (B, S), True at padding → SDPA mask (B, 1, 1, S), True = attend.

    Returns None when nothing is padded, so SDPA can take its fastest path.
    """
    if key_pad_mask is None or not bool(key_pad_mask.any()):
        return None
    return ~key_pad_mask[:, None, None, :]
