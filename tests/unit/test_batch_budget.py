"""``train.max_tokens`` counts the padded positions a batch really has: rows × max(source width,
target width), the widths of the tensors ``collate`` builds (``src`` and ``tgt_in`` / ``tgt_out``,
whose width is the target's length *including* ``</s>``: ``<s> y…`` and ``y… </s>``), as
fairseq's ``--max-tokens``. Counting the target one position longer than it is made every batch
of short subtitle lines ≈ 8 % smaller than the budget allows (673 instead of ≈ 620 batches per
epoch of the quickstart slice, benchmarks/RESULTS.md 2026-11-24)."""
from __future__ import annotations

import numpy as np

from doctrans.data.batching import ParallelData, collate, make_batches
from doctrans.data.documents import _row_widths
from doctrans.data.vocab import SPECIALS, Vocab

VOCAB = Vocab(list(SPECIALS) + [f"w{i}" for i in range(10)])


def _pairs(lengths: list[tuple[int, int]]) -> ParallelData:
    """Pairs of the given (source, target) lengths, both counted with their ``</s>``."""
    eos = VOCAB.eos_id
    src = [np.array([7] * (s - 1) + [eos], dtype=np.int64) for s, _ in lengths]
    tgt = [np.array([8] * (t - 1) + [eos], dtype=np.int64) for _, t in lengths]
    return ParallelData(src, tgt, np.arange(len(lengths)))


def test_a_batch_holds_as_many_rows_as_its_padded_width_allows():
    data = _pairs([(4, 4)] * 8)                    # every batch row is 4 positions wide
    batches = make_batches(data, max_tokens=16, seed=0)
    assert sorted(len(b) for b in batches) == [4, 4]
    for b in batches:
        batch = collate(data, b, VOCAB)
        width = max(batch.src.size(1), batch.tgt_in.size(1), batch.tgt_out.size(1))
        assert width == 4 and width * len(b) <= 16


def test_the_budget_is_never_exceeded_and_no_batch_could_take_its_neighbour():
    rng = np.random.default_rng(0)
    data = _pairs([(int(rng.integers(2, 12)), int(rng.integers(2, 12))) for _ in range(300)])
    batches = make_batches(data, max_tokens=64, seed=1)
    assert sorted(np.concatenate(batches).tolist()) == list(range(300))
    order = np.concatenate(batches)                # make_batches returns them in length order
    start = 0
    for b in batches:
        batch = collate(data, b, VOCAB)
        assert max(batch.src.size(1), batch.tgt_in.size(1)) * len(b) <= 64
        nxt = start + len(b)
        if nxt < len(order):                       # greedy: one more sentence would not fit
            more = collate(data, order[start:nxt + 1], VOCAB)
            assert max(more.src.size(1), more.tgt_in.size(1)) * (len(b) + 1) > 64
        start = nxt


def test_document_rows_are_as_wide_as_their_tensors():
    class Doc:
        src = _pairs([(3, 5), (6, 2), (4, 4)]).src
        tgt = _pairs([(3, 5), (6, 2), (4, 4)]).tgt

        def __len__(self):
            return 3

    assert _row_widths(Doc()).tolist() == [5, 6, 4]
