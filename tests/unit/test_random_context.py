"""The random-context control (Li et al. 2020; data/context_usage.py: foreign_context,
``train.random_context``): which rows it changes, what they read instead, and what it refuses."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from doctrans.data.batching import Batch
from doctrans.data.context_usage import foreign_context, usage_generator
from doctrans.data.documents import DocBatchSpec, DocData, collate_doc
from doctrans.data.vocab import Vocab

VOCAB = Vocab(["<pad>", "<s>", "</s>", "<unk>"] + [f"w{i}" for i in range(60)])


def _data(n_docs: int = 4, lines: int = 6) -> DocData:
    """``n_docs`` documents of ``lines`` lines; line k's source is the single word w<k mod 60>
    (plus </s>), its target w<k mod 60> w0, so every row names its own line."""
    n = n_docs * lines
    src = [np.array([4 + k % 60, 2]) for k in range(n)]
    tgt = [np.array([4 + k % 60, 4, 2]) for k in range(n)]
    doc = np.repeat(np.arange(n_docs), lines)
    pos = np.tile(np.arange(lines), n_docs)
    return DocData(src, tgt, doc, pos, np.ones(n, dtype=bool), [f"d{d}" for d in range(n_docs)],
                   np.arange(0, n + 1, lines))


def _batch(data: DocData, doc: int = 0, n_ctx: int = 2):
    """Document ``doc`` as one run: its first line context-only, the rest targets."""
    rows = np.flatnonzero(data.doc == doc)
    is_target = np.ones(len(rows), dtype=bool)
    is_target[0] = False
    return collate_doc(data, DocBatchSpec(rows, is_target, n_ctx), VOCAB)


def test_every_row_reads_the_lines_before_a_position_of_another_document():
    data = _data()
    b = _batch(data)
    out = foreign_context(b, data, 1.0, usage_generator(1, 0, 0))
    assert out is not b and b.src.size(0) == 6 and torch.equal(b.ctx, _batch(data).ctx)   # not in place
    assert torch.equal(out.src[:6, :b.src.size(1)], b.src) and torch.equal(out.tgt_out[:6], b.tgt_out)
    assert torch.equal(out.is_target[:6], b.is_target) and out.n_targets == b.n_targets
    extra = out.src.size(0) - 6
    assert extra > 0 and not out.is_target[6:].any() and bool(out.ctx[6:].eq(-1).all())
    for r in range(6, out.src.size(0)):                             # appended rows: their own line, unmasked
        assert out.src[r, 0].item() == 4 + int(out.index[r]) % 60
    shifts = set()
    for r in range(1, 6):                                            # every target row had context
        line = int(b.index[r])
        read = [int(out.index[c]) for c in out.ctx[r].tolist() if c >= 0]
        assert read and all(c >= 6 for c in out.ctx[r].tolist() if c >= 0)
        docs = {int(data.doc[x]) for x in read}
        assert len(docs) == 1 and docs != {0}                        # one other document
        assert read == list(range(read[0], read[0] + len(read)))     # consecutive, oldest first
        q = read[-1] + 1                                             # the position they precede
        assert data.doc[q] == data.doc[read[-1]] and len(read) == min(2, int(data.pos[q]))   # N = 2, within q's document
        shifts.add((q - line) % len(data))
    assert len(shifts) == 1                                          # one shift per batch: a coherent run
    assert out.ctx[0].eq(-1).all() == b.ctx[0].eq(-1).all()          # the context-only row is not touched


def test_rate_p_chooses_about_p_of_the_rows_with_context_and_zero_is_identity():
    data = _data(n_docs=10, lines=30)
    b = _batch(data, doc=3, n_ctx=3)
    assert foreign_context(b, data, 0.0, usage_generator(0, 0, 0)) is b
    changed = total = 0
    for seed in range(100):
        out = foreign_context(b, data, 0.3, usage_generator(seed, 0, 0))
        moved = (out.ctx[:30] != b.ctx).any(1)
        assert not moved[0]                                          # context-only row
        changed += int(moved.sum())
        total += 29
        for r in (~moved).nonzero().squeeze(1).tolist():             # the others keep their own context
            assert torch.equal(out.ctx[r], b.ctx[r])
    assert abs(changed / total - 0.3) < 0.03, changed / total


def test_refuses_sentence_batches_sub_documents_reconstructors_and_bad_rates():
    data = _data()
    b = _batch(data)
    with pytest.raises(ValueError, match="random_context"):
        foreign_context(b, data, 1.5, usage_generator(0, 0, 0))
    sent = Batch(b.src, b.tgt_in, b.tgt_out, b.index, b.n_targets)
    with pytest.raises(ValueError, match="document batches"):
        foreign_context(sent, data, 1.0, usage_generator(0, 0, 0))
    blocked = collate_doc(data, DocBatchSpec(np.arange(6), np.ones(6, dtype=bool), 0, block=3), VOCAB)
    with pytest.raises(ValueError, match="sub-document"):
        foreign_context(blocked, data, 1.0, usage_generator(0, 0, 0))
    rec = collate_doc(data, DocBatchSpec(np.arange(6), np.ones(6, dtype=bool), 2), VOCAB)
    rec.rec_tgt = rec.src.clone()
    with pytest.raises(ValueError, match="reconstruction"):
        foreign_context(rec, data, 1.0, usage_generator(0, 0, 0))
