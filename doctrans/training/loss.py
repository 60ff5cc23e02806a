"""Label-smoothed cross-entropy (Szegedy et al. 2016; Vaswani et al. 2017 §5.4).

The output projection and softmax are applied only to non-padding target positions, which
saves the (B·T − n_tokens)·H·V multiply-adds that padding would otherwise cost.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor


@dataclass
class LossOutput:
    total: Tensor                 # scalar: summed label-smoothed loss in nats (divide by n_tokens for the mean)
    terms: dict[str, float]       # {"nll_nats": summed negative log-likelihood}
    n_tokens: int


def label_smoothed_xent(model, hidden: Tensor, target: Tensor, pad_id: int, eps: float) -> LossOutput:
    """hidden: (B, T, H) decoder states; target: (B, T) ids, ``pad_id`` at padding.

    loss = (1 − ε)·(−log p(y)) + ε·mean_v(−log p(v)), summed over real tokens (nats).
    """
    keep = target.ne(pad_id)                                   # (B, T) True at real tokens
    h = hidden[keep]                                           # (N, H)
    y = target[keep]                                           # (N,)
    lprobs = F.log_softmax(model.logits(h).float(), dim=-1)    # (N, V)
    nll = -lprobs.gather(1, y[:, None]).squeeze(1)             # (N,)
    smooth = -lprobs.mean(dim=-1)                              # (N,)
    total = ((1.0 - eps) * nll + eps * smooth).sum()
    return LossOutput(total=total, terms={"nll_nats": float(nll.detach().sum())}, n_tokens=int(y.numel()))


@torch.no_grad()
def dev_xent(model, batches, pad_id: int) -> tuple[float, int]:
    """Mean NLL in nats per target token over an iterable of Batch objects → (nats, tokens)."""
    model.eval()
    total, n = 0.0, 0
    for batch in batches:
        memory, keep = model.encode(batch.src)
        hidden = model.decode_train(memory, keep, batch.tgt_in)
        out = label_smoothed_xent(model, hidden, batch.tgt_out, pad_id, 0.0)
        total += out.terms["nll_nats"]
        n += out.n_tokens
    return total / max(n, 1), n
