"""Batched beam search with incremental decoder state.

One beam of size K per sentence; every step scores the next token for all live hypotheses of
all live sentences at once (``model.decode_step``, keys/values cached, the prefix is never
re-run). Of the 2K best candidates, hypotheses ending in ``</s>`` that rank within the first K
are finished with score ``log p(y|x) / |y|^lenpen`` (fairseq's length normalisation; ``|y|``
counts ``</s>``); the best K others continue. A sentence stops when it has K finished
hypotheses, and it leaves the batch then, so no work is spent on it afterwards. At the maximum
length (``max_len_ratio * |x| + max_len_extra``) ``</s>`` is forced.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import Tensor

from doctrans.data.vocab import Vocab


@dataclass
class SearchResult:
    """Best hypothesis per input sentence: ids without ``</s>`` and the normalised score."""

    tokens: list[list[int]]
    scores: list[float]


def _max_lengths(src: Tensor, pad_id: int, ratio: float, extra: int, cap: int) -> Tensor:
    src_len = src.ne(pad_id).sum(1)                                        # (B,)
    return torch.clamp((src_len.float() * ratio).ceil().long() + extra, max=cap)


@torch.no_grad()
def beam_search(model, src: Tensor, vocab: Vocab, beam: int = 5, lenpen: float = 1.0,
                max_len_ratio: float = 1.5, max_len_extra: int = 10) -> SearchResult:
    """Translate a batch. src: (B, S) padded source ids (ending in ``</s>``).

    ``model`` must provide ``encode``, ``init_state``, ``decode_step`` (see
    ``doctrans.models.backbones.transformer.Transformer``). Returns a SearchResult of length B.
    """
    model.eval()
    b, k = src.size(0), beam
    memory, keep = model.encode(src)
    expand = torch.arange(b).repeat_interleave(k)                          # (B*K,)
    state = model.init_state(memory.index_select(0, expand),
                             None if keep is None else keep.index_select(0, expand))
    max_len = _max_lengths(src, vocab.pad_id, max_len_ratio, max_len_extra,
                           model.cfg.max_positions - 1)                    # (B,)
    scores = torch.full((b, k), -math.inf)
    scores[:, 0] = 0.0                                                     # only beam 0 is live at step 0
    history = torch.full((b * k, 1), vocab.bos_id, dtype=torch.long)       # (nA*K, t+1)
    active = torch.arange(b)                                               # sentence ids still searching
    finished: list[list[tuple[float, list[int]]]] = [[] for _ in range(b)]
    step = 0
    while active.numel():
        lprobs = model.decode_step(history[:, -1], state)                  # (nA*K, V)
        lprobs[:, vocab.pad_id] = -math.inf
        lprobs[:, vocab.bos_id] = -math.inf
        at_max = (max_len[active] <= step).repeat_interleave(k)            # (nA*K,)
        if at_max.any():
            eos_col = lprobs[:, vocab.eos_id].clone()
            lprobs[at_max] = -math.inf
            lprobs[at_max, vocab.eos_id] = eos_col[at_max]
        n_active, vsize = active.numel(), lprobs.size(1)
        cand = (scores.view(-1, 1) + lprobs).view(n_active, k * vsize)      # (nA, K*V)
        top_s, top_i = cand.topk(2 * k, dim=1)                             # (nA, 2K)
        top_beam, top_tok = top_i // vsize, top_i % vsize
        is_eos = top_tok.eq(vocab.eos_id) & torch.isfinite(top_s)
        _finish(finished, active, history, top_s, top_beam, is_eos, k, step, lenpen)
        done = torch.tensor([len(finished[int(s)]) >= k for s in active], dtype=torch.bool)
        done |= max_len[active] <= step                                    # </s> was forced
        cont_s, pos = top_s.masked_fill(is_eos, -math.inf).topk(k, dim=1)  # (nA, K)
        keep_rows = (~done).nonzero().squeeze(1)                           # (nA',)
        rows = (keep_rows[:, None] * k + top_beam.gather(1, pos)[keep_rows]).reshape(-1)
        history = torch.cat([history.index_select(0, rows),
                             top_tok.gather(1, pos)[keep_rows].reshape(-1, 1)], dim=1)
        scores = cont_s[keep_rows]
        active = active[keep_rows]
        state = state.reorder(rows)
        step += 1
    best = [max(f, key=lambda h: h[0]) for f in finished]
    return SearchResult([h[1] for h in best], [h[0] for h in best])


def _finish(finished, active: Tensor, history: Tensor, top_s: Tensor, top_beam: Tensor,
            is_eos: Tensor, k: int, step: int, lenpen: float) -> None:
    """Record hypotheses ending in ``</s>`` within the first K candidates of each sentence."""
    first_k = is_eos[:, :k]
    if not first_k.any():
        return
    norm = (step + 1) ** lenpen if lenpen else 1.0
    for a, j in first_k.nonzero().tolist():
        sent = int(active[a])
        if len(finished[sent]) >= k:
            continue
        row = a * k + int(top_beam[a, j])
        finished[sent].append((float(top_s[a, j]) / norm, history[row, 1:].tolist()))
