"""Translation batches are bounded by source tokens (issue 50, item 11: memory grew with line
length): on long lines no batch's rows × longest row exceeds the budget, for sentence models
(``decode_corpus``) and for a context model's documents (``translate_documents``: targets and
their context rows); ordinary short lines are batched by sentences as before."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from conftest import random_lines, tiny_transformer
from doctrans.data.vocab import SPECIALS, Vocab
from doctrans.inference import decode, documents
from doctrans.inference.token_batches import MAX_TOKENS, token_batches
from doctrans.inference.config import SearchOptions

VOCAB = Vocab(list(SPECIALS) + [f"w{i}" for i in range(40)])
HAN = "context={type: han, context_sents: 2, attach: encoder, heads: 2, d_ff: 32, dropout: 0.0}"


@pytest.fixture(autouse=True)
def one_thread():
    old = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(old)


def _lines(n: int, length: int, seed: int = 0) -> list[np.ndarray]:
    return random_lines(VOCAB, n, length, seed)


def _model(*overrides: str):
    return tiny_transformer(VOCAB, *overrides)


def _spy(monkeypatch, module) -> list[tuple[int, int]]:
    shapes: list[tuple[int, int]] = []
    real = module.beam_search

    def recording(model, batch, *a, **kw):
        src = batch if isinstance(batch, torch.Tensor) else batch.src
        shapes.append(tuple(src.shape))
        return real(model, batch, *a, **kw)

    monkeypatch.setattr(module, "beam_search", recording)
    return shapes


def test_token_batches_respects_both_limits():
    items = [1, 2, 3, 50, 60, 100, 400]
    batches = list(token_batches(items, lambda x: x, max_items=3, max_tokens=120))
    assert [x for b in batches for x in b] == items
    assert batches == [[1, 2, 3], [50, 60], [100], [400]]        # 400 alone is over: its own batch
    assert list(token_batches([5, 5, 5], lambda x: x, 10, 30, rows=2)) == [[5, 5, 5]]
    assert list(token_batches([5, 5, 5, 5], lambda x: x, 10, 30, rows=2)) == [[5, 5, 5], [5]]
    with pytest.raises(ValueError):
        list(token_batches(items, lambda x: x, 0, 10))


def test_sentence_batches_stay_within_the_token_budget_on_long_lines(monkeypatch):
    shapes = _spy(monkeypatch, decode)
    src = _lines(24, 60)
    out = decode.decode_corpus(_model(), src, VOCAB, SearchOptions(beam=1, lenpen=1.0, max_len_ratio=0.01, max_len_extra=1, batch_sentences=64), max_tokens=200)
    assert len(out) == 24 and sum(r for r, _ in shapes) == 24
    assert all(r * w <= 200 for r, w in shapes), shapes
    assert len(shapes) > 1
    shapes.clear()
    decode.decode_corpus(_model(), _lines(64, 20), VOCAB, SearchOptions(beam=1, lenpen=1.0, max_len_ratio=0.01, max_len_extra=1, batch_sentences=64))    # ordinary lines, the
    assert [r for r, _ in shapes] == [64] and 64 * 20 < MAX_TOKENS                     # default budget: one batch


def test_document_batches_stay_within_the_token_budget_on_long_lines(monkeypatch):
    shapes = _spy(monkeypatch, documents)
    model = _model(HAN)
    docs = [list(_lines(12, 60)), list(_lines(6, 60, seed=1))]
    monkeypatch.setattr(documents, "MAX_TOKENS", 240)           # the batches' token budget
    out = documents.translate_documents(model, docs, VOCAB, SearchOptions(beam=1, lenpen=1.0, max_len_ratio=0.01, max_len_extra=1, batch_sentences=64, history_chunk=0, warmup_beam=0))
    assert [len(d) for d in out] == [12, 6]
    assert all(r * w <= 240 for r, w in shapes), shapes              # targets and their context rows
    assert len(shapes) > 1


def test_the_context_cache_is_bounded_by_elements_too():
    from doctrans.models.context.base import RowCache

    cache = RowCache(capacity=100, max_elements=1000)
    for k in range(10):
        cache.put(k, (torch.zeros(300),))          # 300 elements each: only 3 fit
    assert list(cache.items) == [7, 8, 9] and cache.elements == 900
    cache.put("big", (torch.zeros(5000),))         # alone over the bound: kept, the others dropped
    assert list(cache.items) == ["big"] and cache.elements == 5000


def test_the_context_cache_keeps_no_batch_tensor_alive():
    """A row sliced out of a batch tensor is cached as its own copy: a cached view kept the whole
    batch tensor alive while the element bound counted only the row (issue 50 item 11: 1.8 GB for
    200 long lines through the HAN encoder)."""
    import weakref

    from doctrans.models.context.base import RowCache

    cache = RowCache(capacity=100, max_elements=1000)
    batch = torch.arange(4 * 1000, dtype=torch.float32).view(4, 1000)
    gone = weakref.ref(batch)
    cache.put("row", (batch[2, :10], batch[1]))
    stored = cache.get("row")
    assert torch.equal(stored[0], torch.arange(2000, 2010, dtype=torch.float32))
    assert torch.equal(stored[1], torch.arange(1000, 2000, dtype=torch.float32))
    assert [t.untyped_storage().nbytes() for t in stored] == [10 * 4, 1000 * 4]
    del batch
    assert gone() is None                          # nothing in the cache holds the batch tensor
    own = torch.zeros(5)
    cache.put("own", own)                          # a tensor with its own storage is not copied
    assert cache.get("own") is own
