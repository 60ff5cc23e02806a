"""Attention supervision toward the deciding context (training/attention_supervision.py, issue 52;
Yin et al. 2021): the loss on a hand-set attention, the marks of a batch, the target-side
concatenation model's exposed head, and a few steps of the loss moving that head."""
from __future__ import annotations

import math

import numpy as np
import torch

from doctrans.models.interface import ContextAttention
from doctrans.dp.attention_marks import line_marks, word_starts
from doctrans.training.attention_supervision import attention_supervision_loss, batch_targets

from test_tgt_concat import batch as tgt_batch, model as tgt_model


def test_loss_on_a_hand_set_attention():
    w = torch.tensor([[[1.0, 0.0, 0.0, 0.0], [0.5, 0.5, 0.0, 0.0], [0.1, 0.2, 0.3, 0.4]]])     # (1, T=3, K=4)
    key_row = torch.tensor([[0, 0, 0, -1]])
    key_pos = torch.tensor([[0, 1, 2, -1]])
    att = ContextAttention(w, key_row, key_pos)
    rows = torch.tensor([1])                                      # the attention's row 0 is batch row 1
    one = torch.tensor([[1, 2, 0, 2]])                            # query 2 → (row 0, position 2): weight 0.3
    assert math.isclose(float(attention_supervision_loss(att, one, rows)), -math.log(0.3), rel_tol=1e-6)
    two = torch.tensor([[1, 2, 0, 2], [1, 1, 0, 1]])              # and query 1 → position 1: weight 0.5
    want = -(math.log(0.3) + math.log(0.5)) / 2
    assert math.isclose(float(attention_supervision_loss(att, two, rows)), want, rel_tol=1e-6)
    missing = torch.tensor([[1, 0, 0, 2]])                         # no mass at all: −log ε, finite
    assert math.isfinite(float(attention_supervision_loss(att, missing, rows)))
    assert float(attention_supervision_loss(att, torch.zeros(0, 4, dtype=torch.long), rows)) == 0.0


def test_marks_of_a_line():
    assert word_starts("he is ti@@ red .") == [0, 1, 2, 4]
    seg = ["他 来 了", "很 累"]
    ref = ["he came .", "he is tired ."]
    bpe = ["he came .", "he is ti@@ red ."]
    assert line_marks(seg, ref, ["a", "a"], ["", ""], bpe, 1) == [(0, 1, 0)]    # "he" ← the "he" one line back
    assert line_marks(seg, ref, ["a", "b"], ["", ""], bpe, 1) == []             # another document
    overt = ["他 来 了", "他 很 累"]
    assert line_marks(overt, ref, ["a", "a"], ["", ""], bpe, 1) == []                  # overt 他: not dropped


class _Batch:
    def __init__(self, index, ctx, is_target, tgt_in):
        self.index, self.ctx, self.is_target, self.tgt_in = np.asarray(index), ctx, is_target, tgt_in


def test_batch_targets_follow_the_context_pointers():
    tgt_in = torch.tensor([[1, 5, 6, 0], [1, 7, 8, 9], [1, 4, 0, 0]])
    b = _Batch([10, 11, 30], torch.tensor([[-1], [0], [-1]]), torch.tensor([False, True, True]), tgt_in)
    table = {11: [(0, 1, 1), (2, 1, 0)], 30: [(0, 1, 0)], 10: [(0, 1, 0)]}
    got = batch_targets(b, table, 1).tolist()
    assert got == [[1, 0, 0, 2], [1, 2, 0, 1]]                     # line 30's context was dropped: no mark


def test_target_side_model_exposes_its_prefix_head_and_learns_toward_the_mark():
    m, b = tgt_model(), tgt_batch()
    m.train()
    att = m.context_attention(b)
    rows = b.is_target.nonzero().squeeze(1)
    assert att.weights.shape[:2] == (3, 4) and att.side == "target"
    assert bool((att.weights.sum(-1) <= 1 + 1e-5).all())
    prefix = m.target_prefix(b)
    for i, r in enumerate(rows.tolist()):                          # each prefix key points at its token
        for k in range(att.weights.size(-1)):
            kr, kp = int(att.key_row[i, k]), int(att.key_pos[i, k])
            if kr >= 0:
                assert int(prefix[r, k]) == int(b.tgt_in[kr, kp])
    targets = torch.tensor([[2, 1, 1, 1]])                         # row 2, query 1 → row 1's token t14
    opt = torch.optim.Adam(m.parameters(), lr=1e-1)
    first = None
    for _ in range(3):
        loss = attention_supervision_loss(m.context_attention(b), targets, rows)
        first = float(loss.detach()) if first is None else first
        opt.zero_grad()
        loss.backward()
        opt.step()
    assert float(attention_supervision_loss(m.context_attention(b), targets, rows)) < first - 0.3
