"""Parallel data in memory and token-based, length-bucketed batching.

Batches are built by sorting sentence pairs by length (source, then target) with a seeded
random tie-break and cutting the sorted list wherever the padded size
``n_sentences * max(longest source, longest target)`` would exceed ``max_tokens``. The order
of batches is shuffled per epoch with ``seed + epoch``, so a run resumed at (epoch, batch k)
sees exactly the batches an uninterrupted run would have.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from doctrans.data.vocab import Vocab
from doctrans.utils.io import read_lines

log = logging.getLogger(__name__)


@dataclass
class ParallelData:
    """src[i], tgt[i]: int64 id arrays ending in ``</s>``; ``line[i]`` the 0-based line index.
    rec[i], dp[i]: a reconstructor model's target x̂ (source ids ending in ``</s>``) and DP label
    ids (one per x̂ position), or None (``data/reconstruction.py``)."""

    src: list[np.ndarray]
    tgt: list[np.ndarray]
    line: np.ndarray
    rec: list[np.ndarray] | None = None
    dp: list[np.ndarray] | None = None

    def __len__(self) -> int:
        return len(self.src)


@dataclass
class Batch:
    """src: (B, S) ids; tgt_in: (B, T) = <s> y…; tgt_out: (B, T) = y… </s>; padded with 0.
    rec_tgt: (B, S') the reconstruction target x̂ (source ids ending in ``</s>``), dp_tgt: (B, S')
    DP label ids, both padded with 0, or None (a model without reconstructor / DP head)."""

    src: torch.Tensor
    tgt_in: torch.Tensor
    tgt_out: torch.Tensor
    index: np.ndarray             # (B,) positions in the ParallelData
    n_targets: int                # real target tokens, including </s> (what the loss sums over)
    rec_tgt: torch.Tensor | None = None
    dp_tgt: torch.Tensor | None = None


def read_targets(path: Path, n_lines: int) -> np.ndarray:
    """``train.target`` → (n_lines,) bool, True at training targets (``1``), False at filtered
    context-only lines (``0``). Raises ValueError naming the file (and line) when the line count
    differs from ``n_lines`` or a line is not ``0``/``1``."""
    flags = read_lines(path)
    if len(flags) != n_lines:
        raise ValueError(f"{path} has {len(flags)} lines but the text files have {n_lines}")
    for k, f in enumerate(flags):
        if f not in ("0", "1"):
            raise ValueError(f"{path}:{k + 1}: expected 0 or 1, got {f!r}")
    return np.asarray([f == "1" for f in flags], dtype=bool)


def load_parallel(src_path: Path, tgt_path: Path, src_vocab: Vocab, tgt_vocab: Vocab,
                  max_len: int = 0, target_path: Path | None = None) -> tuple[ParallelData, int]:
    """Read two line-aligned BPE files → (data, n_skipped). With ``target_path`` (a prepared
    ``train.target``) the ``0`` lines (filtered, context only) are left out first; ``None``
    (or a dataset of format 1, which has no such file) means every line is a target.
    ``max_len`` > 0 then skips longer pairs (and empty ones), counted in ``n_skipped``; 0 keeps
    every line (dev/test). ``data.line`` holds line indices in the files. Raises ValueError on
    a line-count mismatch."""
    src_lines, tgt_lines = read_lines(src_path), read_lines(tgt_path)
    if len(src_lines) != len(tgt_lines):
        raise ValueError(f"{src_path} has {len(src_lines)} lines but {tgt_path} has {len(tgt_lines)}")
    targets = read_targets(target_path, len(src_lines)) if target_path is not None else None
    src, tgt, lines = [], [], []
    for i, (s, t) in enumerate(zip(src_lines, tgt_lines)):
        if targets is not None and not targets[i]:
            continue
        a, b = src_vocab.encode(s), tgt_vocab.encode(t)
        if max_len and (len(a) > max_len + 1 or len(b) > max_len + 1 or len(a) == 1 or len(b) == 1):
            continue
        src.append(a)
        tgt.append(b)
        lines.append(i)
    n_candidates = len(src_lines) if targets is None else int(targets.sum())
    return ParallelData(src, tgt, np.asarray(lines, dtype=np.int64)), n_candidates - len(src)


def make_batches(data: ParallelData, max_tokens: int, seed: int) -> list[np.ndarray]:
    """Length-bucketed batches of indices, in length order (not yet shuffled). A batch holds as
    many pairs as fit ``max_tokens`` padded positions: rows × max(longest source, longest
    target), lengths with their ``</s>`` — the widths of ``src`` and ``tgt_in``/``tgt_out``
    (as fairseq's ``--max-tokens``); a pair longer than ``max_tokens`` is a batch of its own."""
    rng = np.random.default_rng(seed)
    src_len = np.fromiter((len(x) for x in data.src), dtype=np.int64, count=len(data))
    tgt_len = np.fromiter((len(x) for x in data.tgt), dtype=np.int64, count=len(data))
    order = np.lexsort((rng.random(len(data)), tgt_len, src_len))
    batches, start, longest = [], 0, 0
    for k, i in enumerate(order):
        need = max(longest, src_len[i], tgt_len[i])     # tgt ends in </s>: tgt_in/tgt_out are as wide
        if k > start and need * (k - start + 1) > max_tokens:
            batches.append(order[start:k])
            start, need = k, max(src_len[i], tgt_len[i])
        longest = need
    if start < len(order):
        batches.append(order[start:])
    return batches


def epoch_batches(batches: list[np.ndarray], seed: int, epoch: int) -> list[np.ndarray]:
    """The batch order for ``epoch`` (deterministic in seed and epoch)."""
    perm = np.random.default_rng(seed * 1000003 + epoch).permutation(len(batches))
    return [batches[i] for i in perm]


def pad_sequences(seqs: list[np.ndarray], pad: int, prefix: int | None = None, drop_last: bool = False) -> torch.Tensor:
    """(len(seqs), longest) int64 rows padded with ``pad``; ``prefix`` (e.g. ``<s>``) first and
    ``drop_last`` (the ``</s>``) give the teacher-forcing input ``tgt_in``."""
    n = max(len(s) for s in seqs) + (prefix is not None) - drop_last
    out = np.full((len(seqs), n), pad, dtype=np.int64)
    for r, s in enumerate(seqs):
        body = s[:-1] if drop_last else s
        if prefix is not None:
            out[r, 0] = prefix
            out[r, 1:1 + len(body)] = body
        else:
            out[r, :len(body)] = body
    return torch.from_numpy(out)


def collate(data: ParallelData, index: np.ndarray, vocab: Vocab) -> Batch:
    """Pad the pairs at ``index`` into a Batch (see Batch for the shapes)."""
    src = [data.src[i] for i in index]
    tgt = [data.tgt[i] for i in index]
    return Batch(
        src=pad_sequences(src, vocab.pad_id),
        tgt_in=pad_sequences(tgt, vocab.pad_id, prefix=vocab.bos_id, drop_last=True),
        tgt_out=pad_sequences(tgt, vocab.pad_id),
        index=np.asarray(index),
        n_targets=int(sum(len(t) for t in tgt)),
        rec_tgt=None if data.rec is None else pad_sequences([data.rec[i] for i in index], vocab.pad_id),
        dp_tgt=None if data.dp is None else pad_sequences([data.dp[i] for i in index], 0),
    )
