"""Freed batch memory goes back to the system between translation batches (``utils/memory.py``;
issue 50 item 11: 2,000 long lines through the HAN encoder peaked at 1.87 GiB while the caches
held 256 MiB — the rest was free heap glibc kept)."""
from __future__ import annotations

import subprocess
import sys
import textwrap

import numpy as np
import pytest
import torch

from conftest import random_lines, tiny_transformer
from doctrans.data.vocab import SPECIALS, Vocab
from doctrans.inference import decode, documents
from doctrans.utils import memory
from doctrans.utils.memory import HeapTrimmer
from doctrans.inference.config import SearchOptions

VOCAB = Vocab(list(SPECIALS) + [f"w{i}" for i in range(40)])
HAN = "context={type: han, context_sents: 2, attach: encoder, heads: 2, d_ff: 32, dropout: 0.0}"


def _lines(n: int, length: int, seed: int = 0) -> list[np.ndarray]:
    return random_lines(VOCAB, n, length, seed)


def _model(*overrides: str):
    return tiny_transformer(VOCAB, *overrides)


def test_the_trimmer_trims_only_after_the_process_grew():
    sizes = iter([100, 150, 170, 100, 120, 400, 200])     # resident bytes, read in this order
    calls = []
    trim = HeapTrimmer(grow_bytes=60, trim=lambda: calls.append(1), rss=lambda: next(sizes))   # base 100
    assert trim() is False                  # 150: grew 50 < 60
    assert trim() is True and calls == [1]  # 170: grew 70 → trims; the base is then 100
    assert trim() is False                  # 120
    assert trim() is True and trim.trims == 2 and trim.base == 200     # 400 → trims; base 200
    with pytest.raises(ValueError):
        HeapTrimmer(grow_bytes=-1)


def test_without_malloc_trim_the_trimmer_does_nothing():
    trim = HeapTrimmer(grow_bytes=0, trim=None, rss=lambda: pytest.fail("read the size without a trim"))
    assert trim() is False and trim.trims == 0


@pytest.mark.skipif(memory._malloc_trim() is None or memory.resident_bytes() is None,
                    reason="needs glibc's malloc_trim and /proc/self/statm")
def test_malloc_trim_returns_the_free_heap_that_fragmentation_keeps():
    """The cause itself, in a fresh interpreter: after a large tensor is freed glibc serves tensors
    below its size from the heap; freeing them between small tensors still in use leaves the
    resident size where it was until ``malloc_trim``."""
    code = textwrap.dedent("""
        import torch
        from doctrans.utils.memory import HeapTrimmer, resident_bytes
        block = torch.ones(4 * 2**20)                    # 16 MiB, mmapped; freed: the threshold rises
        del block
        big, small = [], []
        for _ in range(96):
            big.append(torch.ones(2**18))                # 1 MiB each, from the heap now
            small.append(torch.ones(64))                 # kept between them
        before = resident_bytes()
        del big
        kept = resident_bytes()
        trim = HeapTrimmer(grow_bytes=0)
        assert trim() is True
        print(before >> 20, kept >> 20, resident_bytes() >> 20)
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    before, kept, after = map(int, out.stdout.split())
    assert kept > before - 32, (before, kept, after)       # freeing 96 MiB returned (almost) nothing
    assert after < kept - 64, (before, kept, after)        # the trim returned most of it


def _counting(monkeypatch, module) -> list[int]:
    made: list[int] = []

    class Counting(HeapTrimmer):
        def __init__(self):
            super().__init__(grow_bytes=0, trim=lambda: None, rss=lambda: 0)
            made.append(0)

        def __call__(self):
            made[-1] += 1
            return super().__call__()

    monkeypatch.setattr(module, "HeapTrimmer", Counting)
    return made


def test_sentence_and_document_translation_trim_after_every_batch(monkeypatch):
    made = _counting(monkeypatch, decode)
    out = decode.decode_corpus(_model(), _lines(24, 60), VOCAB, SearchOptions(beam=1, lenpen=1.0, max_len_ratio=0.01, max_len_extra=1, batch_sentences=64), max_tokens=200)
    assert len(out) == 24 and len(made) == 1 and made[0] > 1          # one trimmer, a call per batch
    made = _counting(monkeypatch, documents)
    docs = [list(_lines(12, 60)), list(_lines(6, 60, seed=1))]
    calls = []
    real = documents.beam_search
    monkeypatch.setattr(documents, "beam_search", lambda *a, **kw: calls.append(1) or real(*a, **kw))
    monkeypatch.setattr(documents, "MAX_TOKENS", 240)           # the batches' token budget
    out = documents.translate_documents(_model(HAN), docs, VOCAB, SearchOptions(beam=1, lenpen=1.0, max_len_ratio=0.01, max_len_extra=1, batch_sentences=64, history_chunk=0, warmup_beam=0))
    assert [len(d) for d in out] == [12, 6] and made == [len(calls)] and len(calls) > 1
