"""Pronoun dropout (train.pronoun_dropout, data/context_usage.py): whole-word source pronouns of
the current sentences are deleted at rate p — never in context rows, never inside a BPE word,
never every real token of a row — and the rest of the row keeps its order."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from doctrans.config import TrainConfig
from doctrans.data.batching import Batch
from doctrans.data.context_usage import apply_context_usage, delete_positions, usage_generator
from doctrans.data.documents import DocBatch
from doctrans.data.vocab import Vocab
from doctrans.dp.pronouns import CHINESE_BASIC
from doctrans.training.train import NMTTask

PRONOUNS = torch.tensor([10, 11])                 # the "pronoun" ids of these batches
JOINS = np.zeros(50, dtype=bool)
JOINS[5] = True                                   # id 5 is a BPE unit that continues ("…@@")


def _doc_batch(rows: int = 40, seed: int = 0) -> DocBatch:
    """One document of ``rows`` sentences of 10–30 tokens (ids 4…13: pronouns are frequent),
    then </s>, then padding; row 0 context-only, every row's context its predecessor."""
    g = torch.Generator().manual_seed(seed)
    lens = torch.randint(10, 31, (rows,), generator=g)
    src = torch.zeros(rows, 32, dtype=torch.long)
    for r, n in enumerate(lens.tolist()):
        src[r, :n] = torch.randint(4, 14, (n,), generator=g)
        src[r, n] = 2
    tgt = torch.randint(4, 50, (rows, 6), generator=g)
    tgt_in = torch.cat([torch.ones(rows, 1, dtype=torch.long), tgt[:, :5]], 1)
    tgt_out = torch.cat([tgt[:, :5], torch.full((rows, 1), 2)], 1)
    is_target = torch.ones(rows, dtype=torch.bool)
    is_target[0] = False
    return DocBatch(src, tgt_in, tgt_out, np.arange(rows), 6 * (rows - 1), is_target,
                    (torch.arange(rows) - 1)[:, None])


def _deleted(before: torch.Tensor, after: torch.Tensor) -> list[int]:
    """The positions of ``before`` (one row) that ``after`` lacks, ``after`` being ``before`` with
    some positions removed and padding appended (asserted)."""
    kept, j = [], 0
    real_after = after[after.ne(0)].tolist()
    for i, tok in enumerate(before[before.ne(0)].tolist()):
        if j < len(real_after) and real_after[j] == tok:
            kept.append(i)
            j += 1
    assert j == len(real_after), "not a subsequence"
    assert after[len(real_after):].eq(0).all(), "padding not at the end"
    n = int(before.ne(0).sum())
    return [i for i in range(n) if i not in kept]


def test_pronoun_dropout_deletes_whole_word_pronouns_of_current_sentences_at_rate_p():
    b = _doc_batch()
    b.src[5, 3], b.src[5, 4] = 5, 10              # "…@@ 10": a pronoun unit inside a word, never deleted
    p = 0.4
    out = apply_context_usage(b, generator=usage_generator(1, 0, 0), pronoun_dropout=p,
                              pronoun_ids=PRONOUNS, src_joins=JOINS)
    n = b.src.size(0)
    assert torch.equal(out.src[:n - 1], b.src[:n - 1])                   # rows others read: untouched
    assert out.n_targets == b.n_targets and int(out.is_target.sum()) == int(b.is_target.sum())
    assert torch.equal(out.tgt_out[n:], b.tgt_out[torch.tensor(out.index[n:])])   # targets unchanged
    deleted = eligible = 0
    rows = [(int(out.index[r]), out.src[r]) for r in range(out.src.size(0)) if out.is_target[r]]
    assert sorted(line for line, _ in rows) == list(range(1, n))       # every target once
    for line, cur in rows:
        before = b.src[line]
        gone = _deleted(before, cur)
        whole = [i for i in range(int(before.ne(0).sum())) if int(before[i]) in (10, 11)
                 and not (i > 0 and JOINS[int(before[i - 1])])]           # not inside a BPE word
        assert set(gone) <= set(whole)                                    # only whole-word pronouns
        assert not (line == 5 and 4 in gone)
        deleted, eligible = deleted + len(gone), eligible + len(whole)
        assert int(cur.eq(2).sum()) == 1                                  # </s> kept
    rate = deleted / eligible
    assert abs(rate - p) < 4 * (p * (1 - p) / eligible) ** 0.5, (rate, eligible)
    again = apply_context_usage(b, generator=usage_generator(1, 0, 0), pronoun_dropout=p,
                                pronoun_ids=PRONOUNS, src_joins=JOINS)
    assert torch.equal(again.src, out.src)                                # seeded per batch


def test_pronoun_dropout_never_empties_a_row_and_works_on_sentence_batches():
    src = torch.tensor([[10, 11, 2, 0], [10, 7, 11, 2], [7, 8, 2, 0]])
    tgt = torch.tensor([[4, 2], [5, 2], [6, 2]])
    sent = Batch(src, torch.ones_like(tgt), tgt, np.arange(3), 6)
    hits = 0
    for seed in range(30):
        out = apply_context_usage(sent, generator=usage_generator(seed, 0, 0), pronoun_dropout=0.9,
                                  pronoun_ids=PRONOUNS)
        assert out.src[0].tolist() in ([10, 11, 2, 0], [10, 2, 0, 0], [11, 2, 0, 0])   # never emptied
        assert torch.equal(out.src[2], src[2])                            # no pronoun
        assert out.src[1].tolist() in ([10, 7, 11, 2], [7, 11, 2, 0], [10, 7, 2, 0], [7, 2, 0, 0])
        hits += out.src[1].tolist() == [7, 2, 0, 0]
    assert hits > 15                                                      # both deleted ≈ 81% of draws


def test_pronoun_dropout_off_leaves_coword_and_context_dropout_draws_unchanged():
    b = _doc_batch()
    plain = apply_context_usage(b, coword_dropout=0.3, context_dropout=0.2, generator=usage_generator(2, 0, 0))
    same = apply_context_usage(b, coword_dropout=0.3, context_dropout=0.2, generator=usage_generator(2, 0, 0),
                               pronoun_dropout=0.0, pronoun_ids=PRONOUNS, src_joins=JOINS)
    assert torch.equal(plain.src, same.src) and torch.equal(plain.ctx, same.ctx)
    both = apply_context_usage(b, coword_dropout=0.3, context_dropout=0.2, generator=usage_generator(2, 0, 0),
                               pronoun_dropout=0.5, pronoun_ids=PRONOUNS, src_joins=JOINS)
    assert torch.equal(both.ctx[:b.src.size(0)], plain.ctx[:b.src.size(0)])   # the same rows lose context
    assert int(both.src.eq(3).sum()) > 0                                  # CoWord's <unk> still there


def test_delete_positions_keeps_order_and_pads():
    src = torch.tensor([[4, 10, 5, 11, 2, 0], [10, 6, 2, 0, 0, 0]])
    drop = torch.tensor([[0, 1, 0, 1, 0, 0], [1, 0, 0, 0, 0, 0]], dtype=torch.bool)
    assert delete_positions(src, drop).tolist() == [[4, 5, 2, 0, 0, 0], [6, 2, 0, 0, 0, 0]]
    assert delete_positions(src, torch.zeros_like(drop)) is src


def test_pronoun_dropout_bad_settings_are_errors():
    b = _doc_batch()
    with pytest.raises(ValueError, match="pronoun_dropout must be in"):
        apply_context_usage(b, pronoun_dropout=1.0, pronoun_ids=PRONOUNS)
    with pytest.raises(ValueError, match="pronoun_ids"):
        apply_context_usage(b, pronoun_dropout=0.2)
    b.rec_tgt = b.src.clone()
    with pytest.raises(ValueError, match="rec_tgt"):
        apply_context_usage(b, pronoun_dropout=0.2, pronoun_ids=PRONOUNS)
    vocab = Vocab(["<pad>", "<s>", "</s>", "<unk>", "好", "他", "我@@"])
    ids = NMTTask._pronoun_dropout_ids(TrainConfig(pronoun_dropout=0.3), vocab)
    assert ids.tolist() == [5]                                            # 他 (我@@ is not the word 我)
    assert NMTTask._pronoun_dropout_ids(TrainConfig(), vocab) is None
    with pytest.raises(ValueError, match="none of train.pronoun_dropout_words"):
        NMTTask._pronoun_dropout_ids(TrainConfig(pronoun_dropout=0.3), Vocab(["<pad>", "<s>", "</s>", "<unk>", "好"]))


def test_default_pronoun_words_are_table_4_3s_basic_forms():
    assert TrainConfig().pronoun_dropout_words == CHINESE_BASIC
