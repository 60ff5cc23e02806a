"""Batched beam search with incremental decoder state.

One beam of size K per sentence; every step scores the next token for all live hypotheses of
all live sentences at once (``model.decode_step``, keys/values cached, the prefix is never
re-run). Of the 2K best candidates, hypotheses ending in ``</s>`` that rank within the first K
are finished with score ``log p(y|x) / |y|^lenpen`` (fairseq's length normalisation; ``|y|``
counts ``</s>``); the best K others continue. A sentence stops when it has K finished
hypotheses, and it leaves the batch then, so no work is spent on it afterwards. At the maximum
length (``max_len_ratio * |x| + max_len_extra``) ``</s>`` is forced.

**Mixture over input variants** (``variants`` = R > 1, ``VariantMixture``; the NMT analogue of
confusion-network decoding of Wang 2019 thesis §4.3.3, docs/models.md §3.4): each sentence comes as R source variants (any
input transform's alternatives, e.g. the N best DP-completed versions), each encoded once; one shared beam per sentence scores the next token
with ``log Σ_r w_r p(y_t | y_<t, x^(r))`` (``weights`` (B, R), rows summing to 1; weight 0
drops a variant). Decoder states are kept per (sentence, hypothesis, variant) and reordered
together. With R = 1 this is exactly the plain search.

**Lexical shortlist** (``shortlist``, ``inference/shortlist.py``): the output layer runs for the
batch's candidate target ids only (``decode_step(…, vocab=…)``), the step's scores are normalised
over them, and the search works in candidate columns, mapped back to vocabulary ids.

**Decoder states of the n-best** (``keep_states``, for reranking with a reconstructor,
``inference/reconstruction.py``): each step runs ``decode_step_hidden`` + ``output_logits`` (what
``decode_step`` is, by the contract), keeps every live hypothesis' top decoder states beside its
token history, and returns with each finished hypothesis its states for ``<s> y_1 … y_n`` —
``decode_hidden``'s teacher-forced states of that candidate, so a reranker need not run the
decoder again.

**No repeated n-grams** (``SearchOptions.no_repeat_ngram_size`` = N > 0; fairseq's
``NGramRepeatBlock``, Paulus et al. 2018 §2.5): at each step a token that would complete an N-gram
already in the hypothesis gets −inf. The n-grams are of the hypothesis' target ids (BPE units, as
the model writes them, ``<s>`` excluded), not of merged words; ``</s>`` is never blocked.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor

from doctrans.data.vocab import Vocab
from doctrans.inference.config import SearchOptions
from doctrans.models.interface import EncoderOutput, SearchBatch


@dataclass
class SearchResult:
    """Best hypothesis per input sentence: ids without ``</s>`` and the normalised score; with
    ``SearchOptions.nbest`` = N > 0 also ``nbest``: per sentence its N (or fewer) best finished
    hypotheses, (normalised score, ids), best first (ties in the order they finished); with
    ``keep_states`` also ``nbest_states``: for each of them the decoder states (len(ids) + 1, D)
    of ``<s> ids`` (the rows ``decode_hidden`` gives when teacher-forced)."""

    tokens: list[list[int]]
    scores: list[float]
    nbest: list[list[tuple[float, list[int]]]] | None = None
    nbest_states: list[list[Tensor]] | None = None


def output_limit(src_len: int, search: SearchOptions, cap: int) -> int:
    """The most target tokens (without ``</s>``) an output of a source of ``src_len`` ids (with
    its ``</s>``) may have: ``ceil(max_len_ratio × src_len) + max_len_extra``, at most ``cap``
    (the model's positions − 1). The search forces ``</s>`` there, so an output of this length
    ended by the limit, not by the model (both engines)."""
    return min(math.ceil(src_len * search.max_len_ratio) + search.max_len_extra, cap)


def capped_owners(ids: list, hyps: list[str], owner: list[int], search: SearchOptions, cap: int) -> set[int]:
    """The owners (``owner[p]``, e.g. the line of each sentence) of the sentences whose translation
    ``hyps[p]`` (target BPE) has ``output_limit`` tokens for its source ``ids[p]`` (ids with
    ``</s>``): outputs ended by the length limit, not by ``</s>``."""
    return {k for x, h, k in zip(ids, hyps, owner) if len(h.split()) >= output_limit(len(x), search, cap)}


def _max_lengths(src: Tensor, pad_id: int, ratio: float, extra: int, cap: int) -> Tensor:
    src_len = src.ne(pad_id).sum(1)                                        # (B,)
    return torch.clamp((src_len.float() * ratio).ceil().long() + extra, max=cap)


def block_repeats(lprobs: Tensor, history: Tensor, n: int, cols: "_Columns") -> Tensor:
    """Give −inf to every token that would complete an n-gram already in its hypothesis.
    lprobs: (H, C) the step's scores per hypothesis (columns: ``cols``); history: (H, t + 1)
    ``<s> y_1 … y_t`` (target ids). For each earlier position i with y_i … y_{i+n−2} equal to the
    last n − 1 tokens, y_{i+n−1} is blocked — all hypotheses at once (``unfold`` + one
    ``scatter_reduce``, no host sync). Changed in place and returned."""
    hyp = history[:, 1:]                                                   # (H, t)
    t = hyp.size(1)
    if n < 1 or t < n:
        return lprobs
    grams = hyp.unfold(1, n, 1)                                            # (H, t − n + 1, n)
    same = grams[:, :, :n - 1].eq(hyp[:, None, t - n + 1:]).all(-1)        # (H, t − n + 1) prefix = last n − 1
    ban = torch.where(same, -math.inf, math.inf).to(lprobs.dtype)
    return lprobs.scatter_reduce_(1, cols.columns(grams[:, :, n - 1].contiguous()), ban, reduce="amin")


class VariantMixture:
    """The generic "score several input variants" hook of the search: decoder rows come in
    groups of R variants per hypothesis, and ``__call__`` turns their log-probabilities into
    one distribution per hypothesis, ``log Σ_r w_r p(y_t | y_<t, x^(r))``. R = 1 is the identity.

    weights: (B, R) mixture weights per sentence (rows sum to 1; 0 drops a variant)."""

    def __init__(self, variants: int, weights: Tensor | None, n_sentences: int, device: torch.device):
        self.r = variants
        if variants > 1:
            w = torch.full((n_sentences, variants), 1.0 / variants) if weights is None else weights.float()
            self.log_w = w.to(device).log()                                  # (B, R); -inf drops a variant

    def expand_tokens(self, tokens: Tensor) -> Tensor:
        """(nA*K,) last tokens → (nA*K*R,) one per decoder row."""
        return tokens if self.r == 1 else tokens.repeat_interleave(self.r)

    def __call__(self, lprobs: Tensor, active: Tensor, k: int) -> Tensor:
        """lprobs: (nA*K*R, V) per decoder row → (nA*K, V) per hypothesis."""
        if self.r == 1:
            return lprobs
        lp = lprobs.view(-1, self.r, lprobs.size(-1)) + self.log_w[active].repeat_interleave(k, 0)[:, :, None]
        return torch.logsumexp(lp, dim=1)

    def state_rows(self, rows: Tensor) -> Tensor:
        """Hypothesis rows (n,) kept → decoder-state rows (n*R,)."""
        if self.r == 1:
            return rows
        return (rows[:, None] * self.r + torch.arange(self.r, device=rows.device)).reshape(-1)


@torch.no_grad()
def beam_search(model, src, vocab: Vocab, search: SearchOptions = SearchOptions(), *, variants: int = 1,
                weights: Tensor | None = None, encoded: EncoderOutput | None = None, shortlist=None,
                keep_states: bool = False) -> SearchResult:
    """Translate a batch. src: (B·R, S) padded source ids (ending in ``</s>``), the R variants
    of sentence b in rows b·R … b·R + R - 1 (R = ``variants``, 1 = plain beam search), on the
    model's device — or a batch object with ``src`` (and, for a context model, ``ctx``,
    ``tgt_in`` and ``is_target``: only the ``is_target`` rows are translated, the others are
    their context; ``models/context/base.py``).

    ``weights``: (B, R) mixture weights (default uniform 1/R). The maximum output length
    follows the longest variant. ``model`` is used only through the contract in
    ``doctrans.models.interface`` (``encode``, ``init_state``, ``decode_step``,
    ``max_target_len``). ``search``: the ``SearchOptions`` read here — ``beam``, ``lenpen``,
    ``max_len_ratio``, ``max_len_extra``, ``no_repeat_ngram_size`` (module doc) and ``nbest``. Returns a SearchResult of length B, with
    the ``search.nbest`` (≤ ``beam``) best finished hypotheses of each sentence when it is > 0
    (the search itself is the same: the 1-best does not change). ``encoded``: ``model.encode`` of the batch's rows,
    computed beforehand (e.g. a sub-document model's sentences, encoded with their sub-documents
    and decoded in length-sorted batches: ``inference/documents.py``); ``encode`` is then not
    called. ``shortlist``: a ``Shortlist``; the search emits only ``shortlist.candidates`` of the
    batch's (target-row) sources, with the log-probabilities normalised over them (module doc).
    ``keep_states``: also return the n-best's decoder states (``SearchResult.nbest_states``;
    needs ``nbest`` > 0 and R = 1; the hypotheses and scores are the same).
    Raises ``ValueError`` if the rows are not a multiple of R, ``nbest`` exceeds ``beam``, or
    ``keep_states`` comes without ``nbest`` or with R > 1.
    """
    beam, lenpen, nbest = search.beam, search.lenpen, search.nbest
    if nbest > beam:
        raise ValueError(f"nbest={nbest} exceeds the beam size {beam}: the search keeps {beam} hypotheses")
    if keep_states and (nbest < 1 or variants != 1):
        raise ValueError("keep_states returns the n-best's decoder states: it needs nbest ≥ 1 and one input "
                         f"variant per sentence (got nbest={nbest}, variants={variants})")
    model.eval()
    batch = SearchBatch(src) if isinstance(src, Tensor) else src
    enc = model.encode(batch) if encoded is None else encoded
    src = batch.src
    is_target = getattr(batch, "is_target", None)
    if is_target is not None:                                              # context rows leave here
        rows = is_target.nonzero().squeeze(1)
        enc, src = enc.select(rows), src.index_select(0, rows)
    r, dev = variants, src.device
    if src.size(0) % r:
        raise ValueError(f"{src.size(0)} source rows is not a multiple of variants={r}")
    b, k = src.size(0) // r, beam
    mix = VariantMixture(r, weights, b, dev)
    # state rows are ordered (sentence, hypothesis, variant): row (b*kk + j)*R + r, kk hypotheses per
    # sentence. Step 0 has one live hypothesis (<s>), so it runs on the B*R encoder rows themselves
    # (kk = 1) and the state widens to K hypotheses by the first reorder [a beam of K copies of <s>
    # would decode K identical rows]; kk = K from then on (unless V < 2K: the old start, kk = K).
    state = model.init_state(enc)                                          # (sentence, variant) rows
    out_ids = None if shortlist is None else shortlist.candidates(src)     # (C,) vocabulary ids of the columns
    cols = _Columns(vocab, out_ids)
    kk = 1 if cols.size >= 2 * k else k
    if kk > 1:                                                             # tiny vocabulary: K copies of <s>
        state = state.reorder(mix.state_rows(torch.arange(b, device=dev).repeat_interleave(k)))
    max_len = _max_lengths(src, vocab.pad_id, search.max_len_ratio, search.max_len_extra,
                           model.max_target_len - 1).view(b, r).max(1).values   # (B,)
    scores = torch.full((b, kk), -math.inf, device=dev)
    scores[:, 0] = 0.0                                                     # only hypothesis 0 is live at step 0
    history = torch.full((b * kk, 1), vocab.bos_id, dtype=torch.long, device=dev)   # (nA*kk, t+1)
    active = torch.arange(b, device=dev)                                   # sentence ids still searching
    n_finished = torch.zeros(b, dtype=torch.long, device=dev)              # (B,) finished hypotheses
    records: list[tuple] = []                                              # per step: what finished
    kept: Tensor | None = None                                             # (nA*kk, t+1, D) keep_states
    step = 0
    while active.numel():
        if keep_states:
            hidden, state = model.decode_step_hidden(state, history[:, -1])
            lprobs = F.log_softmax(model.output_logits(hidden, out_ids).float(), dim=-1)
            kept = hidden[:, None] if kept is None else torch.cat([kept, hidden[:, None]], 1)
        elif out_ids is None:
            lprobs, state = model.decode_step(state, mix.expand_tokens(history[:, -1]))
        else:
            lprobs, state = model.decode_step(state, mix.expand_tokens(history[:, -1]), out_ids)
        at_max = max_len[active] <= step                                   # (nA,) </s> forced now
        lprobs = cols.mask_specials(mix(lprobs, active, kk), at_max.repeat_interleave(kk))
        if search.no_repeat_ngram_size:
            lprobs = block_repeats(lprobs, history, search.no_repeat_ngram_size, cols)
        n_active, vsize = active.numel(), lprobs.size(1)
        cand = (scores.view(-1, 1) + lprobs).view(n_active, kk * vsize)     # (nA, kk*C)
        top_s, top_i = cand.topk(2 * k, dim=1)                             # (nA, 2K)
        top_beam, top_tok = top_i // vsize, cols.ids(top_i % vsize)
        is_eos = top_tok.eq(vocab.eos_id) & torch.isfinite(top_s)
        had = n_finished.index_select(0, active)                           # (nA,)
        took = _finish(records, active, had, history, (top_s, top_beam, is_eos), k, kk, step, kept)
        done = (had + took).ge(k) | at_max                                 # (nA,)
        n_finished.index_copy_(0, active, had + took)
        cont_s, pos = top_s.masked_fill(is_eos, -math.inf).topk(k, dim=1)  # (nA, K)
        keep_rows = (~done).nonzero().squeeze(1)                           # (nA',)
        rows = (keep_rows[:, None] * kk + top_beam.gather(1, pos)[keep_rows]).reshape(-1)
        history = torch.cat([history.index_select(0, rows),
                             top_tok.gather(1, pos)[keep_rows].reshape(-1, 1)], dim=1)
        if kept is not None:
            kept = kept.index_select(0, rows)
        scores = cont_s[keep_rows]
        active = active[keep_rows]
        state = state.reorder(mix.state_rows(rows))
        kk = k
        step += 1
    finished = _finished_lists(records, b, lenpen)
    best = [max(f, key=lambda h: h[0]) for f in finished]
    ranked = [sorted(f, key=lambda h: -h[0])[:nbest] for f in finished] if nbest > 0 else None
    lists = None if ranked is None else [[(h[0], h[1]) for h in f] for f in ranked]
    states = [[h[2] for h in f] for f in ranked] if keep_states else None
    return SearchResult([h[1] for h in best], [h[0] for h in best], lists, states)


class _Columns:
    """The columns of a step's scores: the whole vocabulary, or a shortlist's candidates
    ``out_ids`` (C,) (sorted vocabulary ids, ``</s>`` among them, never ``<pad>``/``<s>``)."""

    def __init__(self, vocab: Vocab, out_ids: Tensor | None):
        self.out_ids = out_ids
        if out_ids is None:
            self.size, self.eos, self.banned = len(vocab), vocab.eos_id, [vocab.pad_id, vocab.bos_id]
        else:
            pos = torch.searchsorted(out_ids, torch.tensor([vocab.eos_id, vocab.pad_id, vocab.bos_id],
                                                           device=out_ids.device)).tolist()
            found = [p < out_ids.numel() and int(out_ids[p]) == i
                     for p, i in zip(pos, (vocab.eos_id, vocab.pad_id, vocab.bos_id))]
            if not found[0]:
                raise ValueError("the shortlist's candidates lack </s>")
            self.size, self.eos = out_ids.numel(), pos[0]
            self.banned = [p for p, f in zip(pos[1:], found[1:]) if f]

    def ids(self, cols: Tensor) -> Tensor:
        """Column indices → vocabulary ids."""
        return cols if self.out_ids is None else self.out_ids[cols]

    def columns(self, ids: Tensor) -> Tensor:
        """Vocabulary ids that are columns (e.g. emitted tokens) → their column indices."""
        return ids if self.out_ids is None else torch.searchsorted(self.out_ids, ids)

    def mask_specials(self, lprobs: Tensor, at_max: Tensor) -> Tensor:
        """Never emit ``<pad>``/``<s>``; rows at their maximum length (``at_max`` (nA*K,)) may
        only emit ``</s>``. lprobs: (nA*K, C), changed in place and returned."""
        for c in self.banned:
            lprobs[:, c] = -math.inf
        if at_max.any():
            eos_col = lprobs[:, self.eos].clone()
            lprobs[at_max] = -math.inf
            lprobs[at_max, self.eos] = eos_col[at_max]
        return lprobs


def _finish(records: list, active: Tensor, had: Tensor, history: Tensor, top: tuple[Tensor, Tensor, Tensor],
            k: int, kk: int, step: int, kept: Tensor | None = None) -> Tensor:
    """Record the hypotheses ending in ``</s>`` within the first K candidates of each sentence,
    in candidate order, until the sentence has K (``had`` (nA,) finished before this step;
    ``history`` holds kk hypotheses per sentence): one
    (sentences (n,), raw scores (n,), ids without ``<s>`` (n, step), step, their decoder states
    (n, step + 1, D) from ``kept`` or None) entry in ``records`` for all of them, no loop over
    hypotheses. ``top``: the step's 2K best candidates per sentence — their scores, hypotheses and
    whether each ends in ``</s>`` (nA, 2K). Returns how many each sentence took (nA,)."""
    top_s, top_beam, is_eos = top
    first_k = is_eos[:, :k]                                                # (nA, K)
    take = first_k & (had[:, None] + first_k.long().cumsum(1)).le(k)       # the first K − had of them
    took = take.sum(1)
    if bool(took.any()):
        a, j = take.nonzero(as_tuple=True)                                 # row-major: candidate order
        rows = a * kk + top_beam[a, j]
        records.append((active[a], top_s[a, j], history.index_select(0, rows)[:, 1:], step,
                        None if kept is None else kept.index_select(0, rows)))
    return took


def _finished_lists(records: list, b: int, lenpen: float) -> list[list[tuple[float, list[int], Tensor | None]]]:
    """Per sentence its finished hypotheses (normalised score ``log p / (step + 1)^lenpen``,
    ids, decoder states or None), in the order they finished; one ``tolist`` per step of ``records``."""
    finished: list[list[tuple[float, list[int], Tensor | None]]] = [[] for _ in range(b)]
    for sents, raw, ids, step, states in records:
        norm = (step + 1) ** lenpen if lenpen else 1.0
        for n, (sent, score, toks) in enumerate(zip(sents.tolist(), raw.tolist(), ids.tolist())):
            finished[sent].append((score / norm, toks, None if states is None else states[n]))
    return finished
