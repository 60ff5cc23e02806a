"""Row-level helpers shared by the context models and the loss: length buckets of a batch's
rows, encoding rows in buckets, and scattering sub-batch encodings back into one batch.

A document batch holds runs of consecutive sentences, which cannot be length-sorted; these
helpers let a model (or the loss) run the backbone on length-homogeneous sub-batches and put
the results back in row order, computing the same states at real positions.
"""
from __future__ import annotations

import numpy as np
import torch
from torch import Tensor, nn

from doctrans.models.interface import EncoderOutput, SearchBatch


def _cut_rows(src: Tensor, rows: Tensor, pad_id: int) -> Tensor:
    """src (B, S) → rows ``rows`` (B',), columns cut to their longest non-padding length."""
    part = src.index_select(0, rows)
    width = int(part.ne(pad_id).sum(1).max())
    return part[:, :width]


def scatter_rows(parts: list[tuple[Tensor, EncoderOutput]], b: int, s: int) -> EncoderOutput:
    """Encodings of disjoint row subsets [(rows (B_k,), EncoderOutput (B_k, S_k, H))] → one
    EncoderOutput of ``b`` rows padded to ``s``: states (b, s, H) (zeros at padding and at rows
    in no part), src_pad_mask (b, s) True there. Differentiable in the parts' states."""
    ref = parts[0][1].states
    states = ref.new_zeros((b, s, ref.size(-1)))
    mask = torch.ones((b, s), dtype=torch.bool, device=ref.device)
    for rows, enc in parts:
        pad = s - enc.states.size(1)
        states = states.index_copy(0, rows, torch.nn.functional.pad(enc.states, (0, 0, 0, pad)))
        mask = mask.index_copy(0, rows, torch.nn.functional.pad(enc.src_pad_mask, (0, pad), value=True))
    return EncoderOutput(states, mask)


def offset_positions(split: Tensor, width: int, offset: int) -> Tensor:
    """Position ids (B, width) of concatenated rows whose first ``split[b]`` tokens are context:
    those at ``offset`` … offset+split_b−1, the rest (the current sentence, then padding) at
    0, 1, … — the current sentence where a sentence model reads it, the context apart
    (``context_position_offset`` of the concatenation models) [I: our scheme; cf. Lupo et al.
    2023, "Encoding Sentence Position in Context-Aware NMT with Concatenation", who compare
    segment-position encodings for concatenation models]. split: (B,) long."""
    cols = torch.arange(width, device=split.device)[None, :]                       # (1, W)
    split = split[:, None]
    return torch.where(cols < split, cols + offset, cols - split)


def ragged_concat(tokens: Tensor, seg_rows: Tensor, seg_len: Tensor, drop: Tensor, pad_id: int) -> Tensor:
    """Each output row's segments concatenated, right-padded, in one gather (no loop over rows).

    tokens (R, L): the segments' source rows; seg_rows (B, K) long: row of ``tokens`` holding
    segment k of output row b (any value where ``seg_len`` is 0); seg_len (B, K) long: its length
    (segment k is ``tokens[seg_rows[b, k], :seg_len[b, k]]``); drop (B,) long: tokens cut from the
    front of each row's concatenation (0 ≤ drop ≤ its total length). Returns (B, W) with row b
    = the concatenation of its segments in order, without its first ``drop[b]`` tokens,
    right-padded with ``pad_id``; W = the longest row (0 when every row is empty). Same device as
    ``tokens``; one host synchronisation (W).

    The concatenation models build their inputs this way (``ConcatContext.concatenated_source``,
    ``TargetConcat.target_prefix``): a document batch holds thousands of rows, and a loop of
    per-row ``torch.cat`` launched thousands of kernels per batch
    (``benchmarks/concat_rows.py``) [I: our implementation]."""
    b, k = seg_rows.shape
    if b == 0 or k == 0:
        return tokens.new_full((b, 0), pad_id)
    ends = seg_len.cumsum(1)                                                        # (B, K)
    out_len = ends[:, -1] - drop                                                    # (B,)
    width = int(out_len.max())
    if width <= 0:
        return tokens.new_full((b, 0), pad_id)
    cols = torch.arange(width, device=tokens.device)
    pos = cols[None, :] + drop[:, None]                                             # (B, W) position in the concatenation
    seg = torch.searchsorted(ends, pos.contiguous(), right=True).clamp_(max=k - 1)  # its segment
    row = seg_rows.gather(1, seg).clamp(min=0, max=tokens.size(0) - 1)
    col = (pos - (ends - seg_len).gather(1, seg)).clamp_(min=0, max=max(tokens.size(1) - 1, 0))
    out = tokens[row, col]
    return out.masked_fill_(cols[None, :] >= out_len[:, None], pad_id)


def rows_per_group(groups: Tensor, hint: int = 0) -> int:
    """groups (R,) the group of each row (e.g. the sentence of each beam hypothesis) → g if the
    rows come in consecutive blocks of g rows of one group each, else 1; ``hint`` (the previous
    g) is tried first, one comparison instead of the run lengths. R = 0 → ``hint`` or 1. Used by
    decoder states that keep a sentence's shared tensors once for its K hypotheses (the
    Transformer's ``DecoderState``, HAN's decoder memory)."""
    n = groups.numel()
    if n == 0:
        return max(hint, 1)
    if hint > 1 and n % hint == 0:
        blocks = groups.view(-1, hint)
        if bool(blocks.eq(blocks[:, :1]).all()):
            return hint
    counts = torch.unique_consecutive(groups, return_counts=True)[1]
    return int(counts[0]) if bool(counts.eq(counts[0]).all()) else 1


LENGTH_BUCKETS = 8     # at most this many sub-batches per document batch (see length_buckets; 8 vs 4, and grid-minimising
                       # cuts vs equal-count groups: measured in benchmarks/RESULTS.md, "Document batches in 8 length
                       # buckets instead of 4" and "QCN + regularisation reaches the training-speed goal; …")


def length_buckets(lengths: Tensor, max_buckets: int | None = None, min_rows: int = 8) -> list[Tensor]:
    """Indices into ``lengths`` (R,) sorted by length and cut into at most ``max_buckets``
    (default ``LENGTH_BUCKETS``) groups of consecutive lengths, each of at least ``min_rows``
    rows (so one group for small batches), that minimise the padded grid Σ_g rows_g × longest_g
    (exact dynamic programme over the cuts between distinct lengths; of equal grids, the fewest
    groups). Returns [(R_g,) long] in increasing length; every index exactly once.

    A document batch holds runs of consecutive sentences, which cannot be length-sorted: padded
    to its longest row, much of its grid is padding (``benchmarks/RESULTS.md``). Rows never
    attend to each other inside the backbone, so encoding / decoding them in length buckets,
    each cut to its own longest row, computes the same states at real positions for a fraction
    of the padding. Equal-count groups leave the long tail in one group padded to its longest:
    these cuts pad less (measured in ``benchmarks/RESULTS.md``, "grid-minimising buckets")
    [I: our batching choice, not from a paper]."""
    order = lengths.argsort(stable=True)
    k = max(1, min(max_buckets or LENGTH_BUCKETS, order.numel() // min_rows))
    if k == 1:
        return [order]
    srt = lengths.index_select(0, order).cpu().numpy().astype(np.int64)
    r = srt.size
    cut = np.concatenate([[0], np.flatnonzero(np.diff(srt)) + 1, [r]])           # (M+1,) cut candidates
    rows = cut[None, :] - cut[:, None]                                           # rows of group cut i → cut j
    infeasible = np.iinfo(np.int64).max // 4                                     # + another stays < int64 max
    grid = np.where(rows >= min_rows, rows * srt[np.maximum(cut - 1, 0)][None, :], infeasible)
    best, back = np.full(cut.size, infeasible), []                               # best[j]: rows [0, cut j) in g groups
    best[0] = 0
    totals = []
    for _ in range(k):
        total = best[:, None] + grid                                             # (M+1, M+1)
        back.append(total.argmin(0))
        best = np.minimum(total[back[-1], np.arange(cut.size)], infeasible)
        totals.append(best[-1])
    if min(totals) >= infeasible:                                                # no cut satisfies min_rows
        return [order]
    j, bounds = cut.size - 1, [r]
    for g in range(int(np.argmin(totals)), -1, -1):                              # argmin: the fewest on ties
        j = int(back[g][j])
        bounds.append(int(cut[j]))
    bounds.reverse()
    return [order[a:b] for a, b in zip(bounds[:-1], bounds[1:])]


def encode_bucketed(backbone: nn.Module, src: Tensor, rows: Tensor,
                    positions: Tensor | None = None) -> list[tuple[Tensor, EncoderOutput]] | None:
    """``backbone.encode`` of rows ``rows`` (R,) of ``src`` (B, S) in length buckets → parts for
    ``scatter_rows`` [(rows_k, EncoderOutput (R_k, S_k, H))], or None if the backbone returns
    ``extra`` (its encoding may not be split). ``positions`` (B, S): the tokens' position ids
    (``backbone.encode_with(…, positions=…)``; default 0 … S−1)."""
    lengths = src.index_select(0, rows).ne(backbone.pad_id).sum(1)
    parts = []
    for group in length_buckets(lengths):
        r = rows[group]
        cut = _cut_rows(src, r, backbone.pad_id)
        enc = (backbone.encode(SearchBatch(cut)) if positions is None
               else backbone.encode_with(cut, positions=positions.index_select(0, r)[:, :cut.size(1)]))
        if enc.extra:
            return None
        parts.append((r, enc))
    return parts


def split_encode(backbone: nn.Module, batch, context_grad: bool) -> EncoderOutput:
    """``backbone.encode`` of every row of a document batch, target rows and context-only rows
    (``is_target`` False) as two sub-batches, each cut to its own longest source, the
    context-only ones without gradient unless ``context_grad``. Same states at real positions
    as one call (zeros at padding); a plain call when gradients are off, the batch has no
    ``is_target`` or one kind of row only, or the backbone returns ``extra``. Both kinds are
    encoded in length buckets (``length_buckets``): context-only rows are many in a batch with
    CoWord dropout's unmasked originals (``data.context_usage``), and one sub-batch padded to
    the longest of them spent most of its encoder time on padding (benchmarks/RESULTS.md,
    "context-usage training: cost"). batch.src: (B, S) → states (B, S, H)."""
    is_target = getattr(batch, "is_target", None)
    src = batch.src
    if is_target is None or not torch.is_grad_enabled() or bool(is_target.all()) or not bool(is_target.any()):
        return backbone.encode(batch)
    is_target = is_target.to(src.device)
    t_rows, c_rows = is_target.nonzero().squeeze(1), (~is_target).nonzero().squeeze(1)
    parts = encode_bucketed(backbone, src, t_rows)
    with torch.set_grad_enabled(context_grad):
        parts_c = encode_bucketed(backbone, src, c_rows)
    if parts is None or parts_c is None:
        return backbone.encode(batch)
    return scatter_rows(parts + parts_c, src.size(0), src.size(1))
