"""Parameter initialisations shared by several models."""
from __future__ import annotations

from collections.abc import Iterable

import torch
from torch import nn


def init_rnn_weights(named: Iterable[tuple[str, nn.Parameter]], pad_id: int) -> None:
    """The RNNSearch initialisation (module doc) of the parameters ``named`` (name, parameter):
    embeddings (names holding "embed") N(0, 0.01²) with a zero ``pad_id`` row, recurrent
    matrices orthogonal per gate, other matrices Xavier-uniform, biases zero. Meta tensors are
    skipped."""
    for name, p in named:
        if p.is_meta:                              # a parameter count on the meta device
            continue
        if "embed" in name:
            nn.init.normal_(p, std=0.01)
            with torch.no_grad():
                p[pad_id].zero_()
        elif "weight_hh" in name:
            for gate in p.chunk(3, dim=0):
                nn.init.orthogonal_(gate)
        elif p.dim() > 1:
            nn.init.xavier_uniform_(p)
        else:
            nn.init.zeros_(p)
