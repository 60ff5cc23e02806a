"""Split-sentence rows (Lupo et al. 2022 §3; ``train.split_sentences``, data/context_usage.py):
a split row's halves are the original's source and target cut at word boundaries, in order;
the second half reads the first as its most recent context sentence, then the original's own
context; the original becomes context-only; BPE words are never cut; every context model
trains on such a batch."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from doctrans.data.batching import Batch
from doctrans.data.context_usage import split_sentences, usage_generator
from doctrans.data.documents import DocBatch
from doctrans.training.loss import forward_loss

from test_context_models import N, VARIANTS, doc_batch, model


def _rows(src: list[list[int]], tgt: list[list[int]], n: int = 2) -> DocBatch:
    """One document, every row a target, row r's context rows r−n … r−1 (−1 before the start)."""
    b = len(src)
    s = torch.zeros(b, max(map(len, src)) + 1, dtype=torch.long)
    o = torch.zeros(b, max(map(len, tgt)) + 1, dtype=torch.long)
    i = torch.zeros_like(o)
    for r in range(b):
        s[r, :len(src[r]) + 1] = torch.tensor(src[r] + [2])
        o[r, :len(tgt[r]) + 1] = torch.tensor(tgt[r] + [2])
        i[r, :len(tgt[r]) + 1] = torch.tensor([1] + tgt[r])
    ctx = torch.tensor([[r - k if r - k >= 0 else -1 for k in range(n, 0, -1)] for r in range(b)])
    return DocBatch(s, i, o, np.arange(b), int(o.ne(0).sum()), torch.ones(b, dtype=torch.bool), ctx)


def _real(row: torch.Tensor) -> list[int]:
    return [t for t in row.tolist() if t not in (0, 1, 2)]


def test_halves_are_the_cut_original_and_the_second_reads_the_first():
    src = [[10, 11, 12, 13, 14, 15], [20, 21, 22, 23, 24, 25, 26, 27, 28], [30, 31]]
    tgt = [[40, 41, 42, 43, 44, 45], [50, 51, 52, 53, 54, 55], [60, 61, 62, 63]]
    b = _rows(src, tgt)
    out = split_sentences(b, 0.999, usage_generator(1, 0, 0))
    # rows 0 and 1 split (row 2's source is too short): 3 + 2·2 rows
    assert out.src.size(0) == 7 and out.is_target.tolist() == [False, False, True, False, True, False, True]
    for j, orig in enumerate((0, 1)):
        first, second = 3 + 2 * j, 4 + 2 * j
        assert _real(out.src[first]) + _real(out.src[second]) == src[orig]
        assert _real(out.tgt_out[first]) + _real(out.tgt_out[second]) == tgt[orig]
        n1 = len(_real(out.src[first]))
        assert len(src[orig]) / 3 <= n1 <= 2 * len(src[orig]) / 3                     # the middle third
        t1 = len(_real(out.tgt_out[first]))
        assert abs(t1 - n1 / len(src[orig]) * len(tgt[orig])) <= 0.5 + 1e-9           # the same relative place
        assert out.ctx[second].tolist() == b.ctx[orig, 1:].tolist() + [first]          # N−1 most recent, then the half
        assert out.ctx[first].tolist() == [-1, -1] and not out.is_target[first]
        assert out.tgt_in[second, 0] == 1 and _real(out.tgt_in[second]) == _real(out.tgt_out[second])
        assert out.tgt_out[second, len(_real(out.tgt_out[second]))] == 2               # ends in </s>
        assert out.index[first] == out.index[second] == orig
    assert out.ctx[:3].tolist() == b.ctx.tolist()                                      # originals: their readers unchanged
    assert out.n_targets == int(out.tgt_out[out.is_target].ne(0).sum())


def test_no_cut_inside_a_bpe_word_and_rate_zero_or_sentence_batches_are_untouched():
    src = [[10, 11, 12, 13, 14, 15, 16, 17, 18]]
    tgt = [[40, 41, 42, 43, 44, 45, 46, 47, 48]]
    joins = np.zeros(64, dtype=bool)
    joins[[11, 12, 13, 14, 15]] = True              # 11@@ 12@@ … 15@@ 16: one word from 11 to 16
    jt = np.zeros(64, dtype=bool)
    jt[[41, 42, 43, 44]] = True
    for seed in range(20):
        out = split_sentences(_rows(src, tgt, 1), 0.999, usage_generator(seed, 0, 0), joins, jt)
        first = _real(out.src[1])
        assert first in ([10], [10, 11, 12, 13, 14, 15, 16], [10, 11, 12, 13, 14, 15, 16, 17])
        assert _real(out.tgt_out[1]) in ([40], [40, 41, 42, 43, 44, 45], [40, 41, 42, 43, 44, 45, 46],
                                         [40, 41, 42, 43, 44, 45, 46, 47])
    b = _rows(src, tgt)
    assert split_sentences(b, 0.0, usage_generator(1, 0, 0)) is b
    sent = Batch(b.src, b.tgt_in, b.tgt_out, b.index, b.n_targets)
    assert split_sentences(sent, 0.5, usage_generator(1, 0, 0)) is sent
    with pytest.raises(ValueError, match="split_sentences"):
        split_sentences(b, 1.0, usage_generator(1, 0, 0))


def test_rate_is_the_share_of_splittable_rows():
    rng = np.random.default_rng(0)
    src = [list(rng.integers(4, 60, int(rng.integers(4, 12)))) for _ in range(400)]
    tgt = [list(rng.integers(4, 60, int(rng.integers(4, 12)))) for _ in range(400)]
    out = split_sentences(_rows([list(map(int, s)) for s in src], [list(map(int, t)) for t in tgt]),
                          0.3, usage_generator(3, 0, 0))
    split = (out.src.size(0) - 400) // 2
    assert 0.25 * 400 < split < 0.35 * 400


@pytest.mark.parametrize("name", sorted(VARIANTS))
def test_every_context_model_trains_on_split_rows(name):
    """Every pipelines/context model (tiny) takes a split batch (sub-documents included) and
    gets a finite loss over exactly its target rows' tokens."""
    stub = doc_batch(N[name])
    b = DocBatch(stub.src, stub.tgt_in, stub.tgt_in, np.arange(4), 0, stub.is_target, stub.ctx, stub.block)
    b.src = torch.tensor([[4, 5, 6, 7, 8, 2], [6, 7, 8, 9, 10, 2], [9, 10, 11, 12, 13, 2], [10, 11, 2, 0, 0, 0]])
    b.tgt_in = torch.tensor([[1, 12, 13, 14, 15], [1, 14, 15, 16, 17], [1, 15, 16, 17, 18], [1, 18, 0, 0, 0]])
    b.tgt_out = torch.cat([b.tgt_in[:, 1:], torch.zeros(4, 1, dtype=torch.long)], 1)
    for r in range(4):
        b.tgt_out[r, int(b.tgt_in[r].ne(0).sum()) - 1] = 2
    b.n_targets = int(b.tgt_out[b.is_target].ne(0).sum())
    out = split_sentences(b, 0.999, usage_generator(0, 0, 0))
    assert out.src.size(0) > 4
    m = model(name).train()
    loss = forward_loss(m, out, 0, 0.1)
    assert loss.n_tokens == out.n_targets and torch.isfinite(loss.total)
    loss.total.backward()
