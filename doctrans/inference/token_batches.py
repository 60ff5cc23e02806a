"""Translation batches bounded by tokens as well as by sentences.

A batch of ``batch_sentences`` rows costs memory in proportion to rows × width (the padded
source tokens) — and its encoder self-attention to rows × width², so 64 lines of 1,000 source
tokens (a line within the model's 1,024 positions is not split) asked for gigabytes where 64
ordinary sentences of 30 tokens take a few MB (issue 50: 2,000 fuzzed lines took 3.45 GB through
the HAN model). ``token_batches`` cuts a length-sorted sequence into batches of at most
``max_items`` items whose rows × longest row stay within ``max_tokens`` padded source tokens
(CTranslate2's ``max_batch_size`` with ``batch_type="tokens"``, fairseq-generate's
``--max-tokens``); an item alone over the budget is a batch by itself. Ordinary input (≤ 64
sentences of ≤ 120 tokens, context rows included) is batched exactly as by sentences alone.
"""
from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import TypeVar

T = TypeVar("T")

MAX_TOKENS = 8192     # padded source tokens (rows × longest row, context rows included) per batch


def token_batches(items: Sequence[T], width: Callable[[T], int], max_items: int, max_tokens: int = MAX_TOKENS,
                  rows: Callable[[T], int] | int = 1) -> Iterator[list[T]]:
    """Consecutive runs of ``items`` (in the given order; sort by width first for little padding):
    each holds at most ``max_items`` items, and its rows (``rows(item)``, or ``rows`` per item:
    beam variants, context rows) × its widest item (``width(item)``, source tokens) are at most
    ``max_tokens`` — unless one item alone is over, which then forms its own batch. Raises
    ValueError for ``max_items`` or ``max_tokens`` < 1."""
    if max_items < 1 or max_tokens < 1:
        raise ValueError(f"batch limits must be ≥ 1, got max_items={max_items}, max_tokens={max_tokens}")
    batch: list[T] = []
    n_rows = wide = 0
    for item in items:
        w, r = width(item), rows(item) if callable(rows) else rows
        if batch and (len(batch) >= max_items or (n_rows + r) * max(wide, w) > max_tokens):
            yield batch
            batch, n_rows, wide = [], 0, 0
        batch.append(item)
        n_rows += r
        wide = max(wide, w)
    if batch:
        yield batch
