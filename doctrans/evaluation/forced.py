"""Teacher-forced scoring of targets with a chosen context (the building block of CXMI, the
contrastive pronoun test and the context-attention pictures).

An ``Item`` is one target to score: a source line, target ids and its N context lines. Items are
batched under a token budget into document batches (``data.documents.DocBatch``: the items as
target rows, each context line once as a context-only row carrying its reference — or 1-best —
target), and scored through the loss's decoding path (``training.loss.target_logits``), so a
score is the model's training-time log-likelihood without label smoothing or dropout.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np
import torch

from doctrans.data.batching import pad_sequences
from doctrans.data.documents import DocBatch


@dataclass(frozen=True)
class Item:
    """One target to score: the source of DocData-style line ``line`` (``src[line]``), the
    target ids ``tgt`` (ending in ``</s>``; the reference, or a contrastive variant of it) and
    its context ``context`` (N line indices, oldest first, −1 = none)."""

    line: int
    tgt: np.ndarray
    context: tuple[int, ...]


def previous_lines(doc: np.ndarray, line: int, n: int) -> tuple[int, ...]:
    """The N lines before ``line`` in its document (doc: (L,) document number per line, documents
    contiguous), oldest first, −1 before the document start."""
    out = []
    for k in range(n, 0, -1):
        p = line - k
        out.append(p if p >= 0 and doc[p] == doc[line] else -1)
    return tuple(out)


def random_context(doc: np.ndarray, line: int, n: int, rng: np.random.Generator) -> tuple[int, ...]:
    """The N lines before a random position of a random *other* document (a position ≥ N where
    the document is long enough, so the context is complete). Raises ValueError with fewer
    than two documents."""
    starts = np.flatnonzero(np.r_[True, doc[1:] != doc[:-1]])
    ends = np.r_[starts[1:], len(doc)]
    others = [k for k in range(len(starts)) if doc[starts[k]] != doc[line]]
    if not others:
        raise ValueError("a random context needs at least two documents")
    k = others[int(rng.integers(len(others)))]
    lo = min(starts[k] + n, ends[k] - 1)
    pos = int(rng.integers(lo, ends[k]))
    return previous_lines(doc, pos, n)


def sub_document(doc: np.ndarray, line: int, k: int) -> tuple[int, ...]:
    """The other lines of ``line``'s sub-document (its document cut into pieces of ``k`` lines
    from the start, Chen et al. 2020 §3.1, docs/models.md §2.7), in order."""
    start = line
    while start > 0 and doc[start - 1] == doc[line]:
        start -= 1
    first = start + (line - start) // k * k
    end = first
    while end < len(doc) and end < first + k and doc[end] == doc[line]:
        end += 1
    return tuple(i for i in range(first, end) if i != line)


def model_context(model, doc: np.ndarray, line: int) -> tuple[int, ...]:
    """The context lines ``model`` reads for ``line``: the N = ``context_sents`` previous ones
    (1 for a sentence model, which ignores them), or with ``context_block`` K > 0 the other
    lines of its sub-document."""
    spec = model.document
    k = spec.context_block
    return sub_document(doc, line, k) if k > 0 else previous_lines(doc, line, spec.context_sents or 1)


def model_random_context(model, doc: np.ndarray, line: int, rng: np.random.Generator) -> tuple[int, ...]:
    """A context of the same kind as ``model_context`` from a random *other* document: the N
    lines before a random position there, or (``context_block`` K) the other lines of a random
    line's sub-document there."""
    spec = model.document
    k = spec.context_block
    if k <= 0:
        return random_context(doc, line, spec.context_sents or 1, rng)
    others = np.flatnonzero(doc != doc[line])
    if not others.size:
        raise ValueError("a random context needs at least two documents")
    return sub_document(doc, int(others[int(rng.integers(others.size))]), k)


def _batches(items: Sequence[Item], src: Sequence[np.ndarray], max_tokens: int, shared: bool = True
             ) -> list[list[int]]:
    """Item indices grouped under a token budget (sum over rows of max(source, target), context
    rows included: once per batch if ``shared``, else once per item), items sorted by length so
    a batch pads little."""
    order = sorted(range(len(items)), key=lambda i: (len(items[i].tgt), len(src[items[i].line])))
    out, cur, seen, size = [], [], set(), 0
    for i in order:
        it = items[i]
        new = [c for c in it.context if c >= 0 and (c not in seen or not shared)]
        need = max(len(src[it.line]), len(it.tgt)) + sum(len(src[c]) + 8 for c in new)
        if cur and size + need > max_tokens:
            out.append(cur)
            cur, seen, size = [], set(), 0
            new = [c for c in it.context if c >= 0]
            need = max(len(src[it.line]), len(it.tgt)) + sum(len(src[c]) + 8 for c in new)
        cur.append(i)
        seen.update(new)
        size += need
    if cur:
        out.append(cur)
    return out


def _collate(items: Sequence[Item], src: Sequence[np.ndarray], tgt: Sequence[np.ndarray], n: int,
             pad_id: int, bos_id: int, blank: bool, blocks: bool = False) -> DocBatch:
    """Rows: the items (targets), then each context line once (context-only rows carrying the
    reference target ``tgt[line]``). ctx (B, N): an item's context rows; −1 for context-only
    rows and, with ``blank``, everywhere. With ``blocks`` (a sub-document model) each item has
    its own copies of its context lines, all of them one sub-document (``block`` (B,)); with
    ``blank`` no context rows (each item a sub-document of its own)."""
    if blocks:
        return _collate_blocks(items, src, tgt, n, pad_id, bos_id, blank)
    ctx_lines = sorted({c for it in items for c in it.context if c >= 0})
    row_of = {c: len(items) + k for k, c in enumerate(ctx_lines)}
    srcs = [src[it.line] for it in items] + [src[c] for c in ctx_lines]
    tgts = [it.tgt for it in items] + [tgt[c] for c in ctx_lines]
    ctx = np.full((len(srcs), n), -1, dtype=np.int64)
    if not blank:
        for r, it in enumerate(items):
            ctx[r] = [row_of[c] if c >= 0 else -1 for c in it.context]
    is_target = np.zeros(len(srcs), dtype=bool)
    is_target[:len(items)] = True
    return DocBatch(src=pad_sequences(srcs, pad_id), tgt_in=pad_sequences(tgts, pad_id, prefix=bos_id, drop_last=True),
                    tgt_out=pad_sequences(tgts, pad_id), index=np.arange(len(srcs)),
                    n_targets=int(sum(len(t) for t in tgts[:len(items)])),
                    is_target=torch.from_numpy(is_target), ctx=torch.from_numpy(ctx))


def _collate_blocks(items: Sequence[Item], src: Sequence[np.ndarray], tgt: Sequence[np.ndarray], n: int,
                    pad_id: int, bos_id: int, blank: bool) -> DocBatch:
    lines = [(it.line, it.tgt, k, True) for k, it in enumerate(items)]
    if not blank:
        lines += [(c, tgt[c], k, False) for k, it in enumerate(items) for c in it.context if c >= 0]
    srcs, tgts = [src[x[0]] for x in lines], [x[1] for x in lines]
    return DocBatch(src=pad_sequences(srcs, pad_id), tgt_in=pad_sequences(tgts, pad_id, prefix=bos_id, drop_last=True),
                    tgt_out=pad_sequences(tgts, pad_id), index=np.arange(len(srcs)),
                    n_targets=int(sum(len(t) for t in tgts[:len(items)])),
                    is_target=torch.tensor([x[3] for x in lines]), ctx=torch.full((len(srcs), n), -1, dtype=torch.long),
                    block=torch.tensor([x[2] for x in lines], dtype=torch.long))


@torch.no_grad()
def score_items(model, items: Sequence[Item], src: Sequence[np.ndarray], tgt: Sequence[np.ndarray],
                pad_id: int = 0, bos_id: int = 1, max_tokens: int = 3000, blank: Sequence[bool] = (False,),
                progress: bool = False) -> list[list[np.ndarray]]:
    """Teacher-forced log-probabilities (nats) of each item's target, one list per entry of
    ``blank``: ``out[c][i]`` (len(items[i].tgt),) float64 for condition c (``blank[c]`` True:
    the same batch with every context pointer removed, i.e. empty context).

    src / tgt: id arrays per line (ending in ``</s>``; ``tgt`` is what context rows carry).
    The model is any ``Seq2SeqModel`` (a context model reads ``batch.ctx``; N =
    ``len(items[0].context)`` and must equal the model's ``context_sents`` for a context model;
    a sub-document model, ``context_block`` > 0, reads an item's context lines as its
    sub-document instead: ``model_context``).
    The decoding path is the loss's (``training.loss.target_logits``), so a score here is the
    model's training-time log-likelihood without label smoothing or dropout. Items of the same
    line and context (e.g. a reference and its contrastive variants) are encoded once and
    decoded each (a model's encoding of a sentence reads sources and its context, never the
    sentence's own target)."""
    from tqdm import tqdm

    from doctrans.utils import bars_off

    from doctrans.training.loss import target_logits

    model.eval()
    device = next(model.parameters()).device
    blocks = model.document.context_block > 0
    n = model.document.context_sents if blocks else len(items[0].context) if items else 0
    out = [[None] * len(items) for _ in blank]
    unit_of: dict[tuple, int] = {}                  # items of one line and context are encoded once
    units: list[Item] = []
    members: list[list[int]] = []
    for i, it in enumerate(items):
        key = (it.line, it.context)
        if key not in unit_of:
            unit_of[key] = len(units)
            units.append(it)
            members.append([])
        members[unit_of[key]].append(i)
    groups = _batches(units, src, max_tokens, shared=not blocks)
    for group in tqdm(groups, desc="score", unit="batch", disable=not progress or bars_off()):
        idx = [i for u in group for i in members[u]]
        rows = torch.tensor([k for k, u in enumerate(group) for _ in members[u]], device=device)
        dec = _targets_batch([items[i].tgt for i in idx], pad_id, bos_id).to(device)
        for c, b in enumerate(blank):
            batch = _collate([units[u] for u in group], src, tgt, n, pad_id, bos_id, b, blocks).to(device)
            enc = model.encode(batch).select(rows)      # target rows come first in the batch
            for r, logits, gold, keep in target_logits(model, enc, dec, pad_id):
                lp = torch.log_softmax(logits.float(), -1).gather(1, gold[:, None]).squeeze(1).double().cpu()
                for k, piece in zip(r.tolist(), lp.split(keep.sum(1).tolist())):
                    out[c][idx[k]] = piece.numpy()
    return out


def _targets_batch(tgts: Sequence[np.ndarray], pad_id: int, bos_id: int) -> DocBatch:
    """The decoder side of scored items: tgt_in / tgt_out (R, T), every row a target (``src`` and
    ``ctx`` unused: the rows' encodings are given)."""
    r = len(tgts)
    return DocBatch(src=torch.zeros((r, 1), dtype=torch.long),
                    tgt_in=pad_sequences(list(tgts), pad_id, prefix=bos_id, drop_last=True),
                    tgt_out=pad_sequences(list(tgts), pad_id), index=np.arange(r),
                    n_targets=int(sum(len(t) for t in tgts)), is_target=torch.ones(r, dtype=torch.bool),
                    ctx=torch.zeros((r, 0), dtype=torch.long))
