"""``decode_corpus``: batched beam search over id sequences (``beam_search.py``), sentences sorted
by length to limit padding; the search every sentence-level translation goes through."""
from __future__ import annotations

import numpy as np
import torch
from tqdm import tqdm

from doctrans.data.vocab import Vocab
from doctrans.inference.beam_search import beam_search
from doctrans.inference.config import SearchOptions
from doctrans.inference.token_batches import MAX_TOKENS, token_batches
from doctrans.utils import bars_off
from doctrans.utils.memory import HeapTrimmer


def decode_corpus(model, src: list[np.ndarray] | list[list[np.ndarray]], tgt_vocab: Vocab, search: SearchOptions,
                  progress: bool = False, weights: list[list[float]] | None = None, return_scores: bool = False,
                  shortlist=None, keep_states: bool = False, max_tokens: int = MAX_TOKENS):
    """Translate id sequences (each ending in ``</s>``) → target token strings, in input order.

    ``search``: the ``SearchOptions`` (beam, length penalty and limit, ``batch_sentences``, ``nbest``).
    Sentences are sorted by length and batched ``batch_sentences`` at a time to limit padding,
    a batch's rows × longest row within ``max_tokens`` source tokens (``token_batches``).
    With ``weights``, each item of ``src`` is a list of variants decoded as one mixture
    (``beam_search(variants=R)``), ``weights[i]`` their mixture weights. Variants of weight 0
    are dropped first and sentences are grouped by their number of remaining variants, so a
    sentence with one completion costs one decoder row per hypothesis, not R (the result is the
    same: a zero-weight variant adds exactly nothing to the mixture). A batch then holds about
    ``batch_sentences`` variant rows. ``shortlist``: a ``Shortlist`` for ``beam_search``. With
    ``return_scores`` also the normalised scores. With ``search.nbest`` > 0 returns (translations, n-best
    lists): per sentence its ``nbest`` best hypotheses as (target token string, normalised score),
    best first (the translations are the same as without it); with ``keep_states`` as well
    (translations, n-best lists, their decoder states): per sentence, per hypothesis of its list,
    the states (len + 1, D) of ``<s> y`` (``beam_search(keep_states=True)``).
    """
    nbest, batch_sentences = search.nbest, search.batch_sentences
    mixture = weights is not None
    if mixture:
        rows = [[x for x, w in zip(v, ws) if w > 0] for v, ws in zip(src, weights)]
        wts = [[w for w in ws if w > 0] for ws in weights]
    else:
        rows, wts = [[v] for v in src], [[1.0] for _ in src]
    out: list[str] = [""] * len(src)
    scores: list[float] = [0.0] * len(src)
    lists: list[list[tuple[str, float]]] = [[] for _ in src]
    states: list[list[torch.Tensor]] = [[] for _ in src]
    pad = tgt_vocab.pad_id
    device = next(model.parameters()).device
    bar = tqdm(total=len(src), unit="sent", disable=not progress or bars_off(), desc="translate")
    trim = HeapTrimmer()                   # freed batch memory back to the system (utils/memory.py)
    groups: dict[int, list[int]] = {}
    for i, v in enumerate(rows):
        groups.setdefault(len(v), []).append(i)
    for r_var, members in sorted(groups.items()):
        order = sorted(members, key=lambda i: max(len(x) for x in rows[i]))
        per_batch = max(1, batch_sentences // r_var) if mixture else batch_sentences
        for idx in token_batches(order, lambda i: max(len(x) for x in rows[i]), per_batch, max_tokens, r_var):
            width = max(len(x) for i in idx for x in rows[i])
            batch = torch.full((len(idx) * r_var, width), pad, dtype=torch.long)
            for n, i in enumerate(idx):
                for v, x in enumerate(rows[i]):
                    batch[n * r_var + v, :len(x)] = torch.from_numpy(x)
            w = torch.tensor([wts[i] for i in idx]) if r_var > 1 else None
            res = beam_search(model, batch.to(device), tgt_vocab, search, variants=r_var, weights=w,
                              shortlist=shortlist, keep_states=keep_states)
            for n, i in enumerate(idx):
                out[i] = tgt_vocab.decode(res.tokens[n])
                scores[i] = res.scores[n]
                if nbest > 0:
                    lists[i] = [(tgt_vocab.decode(t), sc) for sc, t in res.nbest[n]]
                if keep_states:
                    states[i] = res.nbest_states[n]
            bar.update(len(idx))
            trim()
    bar.close()
    if keep_states:
        return out, lists, states
    if nbest > 0:
        return out, lists
    return (out, scores) if return_scores else out
