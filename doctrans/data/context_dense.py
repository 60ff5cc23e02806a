"""Context-dense training data, the upweighting (issue 52; Mąka et al. 2025, arXiv 2509.14031):
``train.context_dense: {share, …}`` adds to each epoch extra document batches whose target rows are
the context-dense lines (selected from the DP annotation by ``dp/context_dense.py``), each with its N
previous lines as context-only rows, as every document batch, enough that dense lines make up
``share`` of the epoch's target rows; the lines are drawn without replacement in an order shuffled
with (seed, epoch), cycling when more are needed [I: oversampling, so the original data stays whole
(Mąka et al. mix the selected data with the original)]. A share at or below the corpus' own adds
nothing.
"""
from __future__ import annotations

import math
from dataclasses import replace

import numpy as np

from doctrans.data.documents import DocBatchSpec, DocData, make_sorted_doc_batches


def extra_dense_rows(n_targets: int, n_dense: int, share: float) -> int:
    """k ≥ 0 extra dense target rows so that (n_dense + k) / (n_targets + k) = share. Raises
    ValueError unless 0 ≤ share < 1."""
    if not 0.0 <= share < 1.0:
        raise ValueError(f"train.context_dense.share must be in [0, 1), got {share}")
    if n_dense == 0 or share * n_targets <= n_dense:
        return 0
    return math.ceil((share * n_targets - n_dense) / (1.0 - share))


def dense_batches(data: DocData, dense: np.ndarray, share: float, max_tokens: int, context_sents: int, seed: int,
                  epoch: int = 0) -> list[DocBatchSpec]:
    """The extra batches of one epoch (module doc): ``extra_dense_rows`` dense target lines
    (``dense`` (n,) bool, only lines that are targets count), drawn in an order shuffled with
    (seed, epoch), each with its N previous lines as context-only rows, packed by length as
    ``make_sorted_doc_batches`` does. Deterministic in (seed, epoch)."""
    pool = np.flatnonzero(dense & data.is_target)
    k = extra_dense_rows(int(data.is_target.sum()), int(pool.size), share)
    if k == 0:
        return []
    rng = np.random.default_rng(seed * 1000003 + epoch + 7919)
    picks = np.concatenate([rng.permutation(pool) for _ in range(math.ceil(k / pool.size))])[:k]
    batches: list[DocBatchSpec] = []
    for rnd in range(math.ceil(k / pool.size)):                 # a line at most once per round
        chosen = picks[rnd * pool.size:(rnd + 1) * pool.size]
        mask = np.zeros(len(data), dtype=bool)
        mask[chosen] = True
        batches += make_sorted_doc_batches(replace(data, is_target=mask), max_tokens, context_sents, seed,
                                           epoch * 1000 + rnd)
    return batches
