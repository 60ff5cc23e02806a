"""Attention supervision toward the deciding context (issue 52; Yin et al. 2021, "Do Context-Aware
Translation Models Pay the Right Attention?", ACL, §5: attention regularisation toward the context
words humans marked as supporting): ``train.context_attention_supervision: λ``.

**Marks** (``dp/attention_marks.py``: ``supervision_table``, from ``doctrans annotate-dp``'s alignment instead of human
marks): a training pair's English pronoun that the alignment leaves dropped in the Chinese
(``evaluation.context_needed.dropped_pronouns``) and whose class a he/she/they of a previous
English line decides (the ``agreement_en`` rule, within ``max_distance`` lines) is a query; the
deciding English pronouns of that line are its keys. Positions are BPE units (a word's first
unit). [I: only the target-side rule gives a target token to point at; the source-side rules
(a 他/她 antecedent, the reply flip) would need a head over the source context.]

**Loss** (``attention_supervision_loss``): for each mark, −log of the attention mass the model's
supervised head (``Seq2SeqModel.context_attention``: e.g. the target-side concatenation model's
decoder self-attention over its target prefix) puts, at the position that predicts the pronoun,
on the deciding tokens; averaged over the batch's marks, × λ, added to the training loss
(reported as ``attn_sup``) [I: Yin et al. compare the attention with the marks; the log of the
mass on the marked tokens is their regulariser for a one-hot or uniform-over-marks target up to a
constant].
"""
from __future__ import annotations

import numpy as np
import torch
from torch import Tensor

EPS = 1e-9


def batch_targets(batch, table: dict, context_sents: int) -> Tensor:
    """The marks of a document batch's target rows as (M, 4) long: (target row, query position in
    its ``tgt_in``, context row, key position in that row's ``tgt_in``) — a BPE index i is
    position i of the row's ``tgt_in`` as a query (it predicts unit i) and i + 1 as a key (after
    ``<s>``). Marks whose line d back is not the row's ``ctx`` column N − d (context dropped, or
    out of the batch) are left out."""
    index = np.asarray(batch.index)
    ctx = batch.ctx.cpu().numpy()
    is_target = batch.is_target.cpu().numpy()
    t_len = batch.tgt_in.ne(0).sum(1).cpu().numpy()
    out = []
    for r in np.flatnonzero(is_target):
        for q, d, k in table.get(int(index[r]), ()):
            if d > context_sents:
                continue
            c = int(ctx[r, context_sents - d])
            if c >= 0 and int(index[c]) == int(index[r]) - d and q < t_len[r] and k + 1 < t_len[c]:
                out.append((int(r), q, c, k + 1))
    return torch.tensor(out, dtype=torch.long).view(-1, 4)


def attention_supervision_loss(att, targets: Tensor, target_rows: Tensor) -> Tensor:
    """Mean over the marks ``targets`` (M, 4) (``batch_targets``) of −log(Σ attention weight on
    the mark's key tokens + ε) at its query position. att: ``ContextAttention`` of the target
    rows ``target_rows`` (B',) (batch row of each of its rows, in order). Returns a scalar (0 with
    gradients when M = 0)."""
    if targets.numel() == 0:
        return att.weights.sum() * 0.0
    dev = att.weights.device
    targets = targets.to(dev)
    pos = torch.full((int(target_rows.max()) + 1,), -1, dtype=torch.long, device=dev)
    pos[target_rows.to(dev)] = torch.arange(target_rows.numel(), device=dev)
    b = pos[targets[:, 0]]
    w = att.weights[b, targets[:, 1]]                                           # (M, K)
    hit = att.key_row[b].eq(targets[:, 2:3]) & att.key_pos[b].eq(targets[:, 3:4])
    return -(w * hit).sum(1).clamp_min(0.0).add(EPS).log().mean()
