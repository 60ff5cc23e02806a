"""The output layer over a subset of the target vocabulary (lexical shortlists,
``inference/shortlist.py``)."""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn


def project(proj: nn.Module, hidden: Tensor, vocab: Tensor | None = None) -> Tensor:
    """``proj(hidden)`` (…, D) → (…, V) scores, or with ``vocab`` (C,) target ids only those
    columns, (…, C): ``proj(hidden)[..., vocab]``, computed as a (…, D) × (D, C) product.

    An ``nn.Linear``'s rows of ``vocab`` are gathered once per ``vocab`` tensor and kept on the
    module while no gradient is recorded (beam search calls this every step with the same
    candidates; the cache is keyed by the tensor object and the weight's version counter, so
    a new candidate set or an updated weight is gathered anew). Any other module (e.g. a
    dynamically quantized linear, ``translate --quantize int8``) runs whole and its columns are
    selected: the same scores, without the saving."""
    if vocab is None:
        return proj(hidden)
    if not isinstance(proj, nn.Linear):
        return proj(hidden).index_select(-1, vocab)
    if torch.is_grad_enabled():
        return F.linear(hidden, proj.weight.index_select(0, vocab),
                        None if proj.bias is None else proj.bias.index_select(0, vocab))
    key = (vocab, proj.weight._version, proj.weight.data_ptr())
    cached = proj.__dict__.get("_shortlist_rows")
    if cached is None or cached[0][0] is not vocab or cached[0][1:] != key[1:]:
        cached = (key, proj.weight.index_select(0, vocab),
                  None if proj.bias is None else proj.bias.index_select(0, vocab))
        proj.__dict__["_shortlist_rows"] = cached
    return F.linear(hidden, cached[1], cached[2])
