"""The concatenation models' inputs built in one gather (models/rows.py ragged_concat): the source
concatenation and the target prefix equal what the per-row loops they replace built (the loops
are kept here as the reference), for any context size, caps, rows without context and empty
batches."""
from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch

from doctrans.models.context.concat import ConcatContext
from doctrans.models.context.tgt_concat import BOS_ID, EOS_ID, TargetConcat
from doctrans.models.rows import ragged_concat

PAD = 0


def _reference_source(src, ctx, cap):
    lengths = src.ne(PAD).sum(1).tolist()
    seqs = []
    for b, rows in enumerate(ctx.tolist()):
        parts = [src[r, :lengths[r]] for r in rows if r >= 0]
        context = torch.cat(parts) if parts else src.new_zeros(0)
        if cap and context.numel() > cap:
            context = context[-cap:]
        seqs.append(torch.cat([context, src[b, :lengths[b]]]))
    return torch.nn.utils.rnn.pad_sequence(seqs, batch_first=True, padding_value=PAD)


def _reference_prefix(tgt_in, ctx, cap):
    if not bool(ctx.ge(0).any()):
        return tgt_in.new_zeros((tgt_in.size(0), 0))
    lengths = tgt_in.ne(PAD).sum(1).tolist()
    eos = tgt_in.new_full((1,), EOS_ID)
    seqs = []
    for rows in ctx.tolist():
        parts = [t for r in rows if r >= 0 for t in (tgt_in[r, :lengths[r]], eos)]
        seq = torch.cat(parts) if parts else tgt_in.new_zeros(0)
        if seq.numel() > cap:
            seq = torch.cat([tgt_in.new_full((1,), BOS_ID), seq[seq.numel() - cap + 1:]])
        seqs.append(seq)
    return torch.nn.utils.rnn.pad_sequence(seqs, batch_first=True, padding_value=PAD)


def _batch(gen, b, n, p_ctx=0.7):
    def padded(lo, hi, bos):
        lens = torch.randint(lo, hi, (b,), generator=gen)
        out = torch.zeros((b, int(lens.max())), dtype=torch.long)
        for i, l in enumerate(lens.tolist()):
            out[i, :l] = torch.randint(4, 50, (l,), generator=gen)
            if bos:
                out[i, 0] = BOS_ID
        return out
    ctx = torch.full((b, n), -1, dtype=torch.long)
    for i in range(b):
        for j in range(n):
            back = n - j
            if i - back >= 0 and torch.rand((), generator=gen) < p_ctx:
                ctx[i, j] = i - back
    return SimpleNamespace(src=padded(1, 12, False), tgt_in=padded(2, 14, True), ctx=ctx)


@pytest.mark.parametrize("n", [1, 2, 3])
@pytest.mark.parametrize("cap", [0, 1, 5, 40])
def test_source_concatenation_equals_the_per_row_loop(n, cap):
    gen = torch.Generator().manual_seed(n * 100 + cap)
    model = SimpleNamespace(pad_id=PAD, context_sents=n, cfg=SimpleNamespace(max_context_tokens=cap))
    for b in (1, 2, 7, 40):
        batch = _batch(gen, b, n)
        got, split = ConcatContext._concatenated(model, batch)
        assert torch.equal(got, _reference_source(batch.src, batch.ctx, cap))
        assert torch.equal(split, got.ne(PAD).sum(1) - batch.src.ne(PAD).sum(1))   # its context tokens


@pytest.mark.parametrize("n", [1, 2, 3])
@pytest.mark.parametrize("cap", [1, 2, 6, 13, 200])
def test_target_prefix_equals_the_per_row_loop(n, cap):
    gen = torch.Generator().manual_seed(n * 1000 + cap)
    model = SimpleNamespace(pad_id=PAD, context_sents=n, prefix_cap=cap)
    cut = 0
    for b in (1, 2, 7, 40):
        for p_ctx in (0.0, 0.5, 1.0):
            batch = _batch(gen, b, n, p_ctx)
            want = _reference_prefix(batch.tgt_in, batch.ctx, cap)
            got = TargetConcat.target_prefix(model, batch)
            assert torch.equal(got, want), (b, p_ctx)
            cut += int(want.ne(PAD).sum(1).ge(cap).sum()) if want.numel() else 0
    assert bool(cut) == (cap < 200), "the cut prefixes were not tested (or a 200-token prefix appeared)"


def test_ragged_concat_edges():
    tokens = torch.tensor([[5, 6, 7], [8, 0, 0]])
    rows = torch.tensor([[0, 1], [1, 0]])
    # segment lengths 0 are skipped; drop cuts the front; an all-empty batch is (B, 0)
    out = ragged_concat(tokens, rows, torch.tensor([[3, 1], [0, 2]]), torch.tensor([1, 0]), PAD)
    assert out.tolist() == [[6, 7, 8], [5, 6, PAD]]
    assert ragged_concat(tokens, rows, torch.zeros((2, 2), dtype=torch.long), torch.zeros(2, dtype=torch.long),
                         PAD).shape == (2, 0)
    assert ragged_concat(tokens, rows[:0], rows[:0], torch.zeros(0, dtype=torch.long), PAD).shape == (0, 0)
