"""The reconstructor at test time: reranking a k-best list (``translate --rerank reconstructor``,
``rerank_batch``) and a joint model's DP labels (``translate --dp-out``, ``predict_batch``).

Tu et al. (2017) / Wang et al. (2018), docs/models.md §2.8 "Decoding" (thesis ch. 5): beam search
gives the k best translations y of x; each is scored by how well the decoder states s(y) it
induces let the reconstructor rebuild the DP-completed source x̂, and the best combined score
wins::

    score(y) = s_beam(y) + λ · log R(x̂ | s(y)) / |x̂|

``s_beam`` is the length-normalised log P(y|x) the beam ranks by (``log p / |y|^lenpen``), λ the
model's ``reconstruction.weight`` (the training weight, §2.8 footnote), |x̂| the reconstruction
target's length with ``</s>``. [Choice: the thesis writes log P(y|x) + λ log R without saying
how either is normalised; here both are per-token averages, as the two training losses are, so
λ weighs them as in training, and λ = 0 gives exactly the plain 1-best (the beam's order).
Dividing log R by |x̂|, the same for all candidates of a sentence, only rescales λ per sentence.]

The model is used only through the contract (``doctrans.models.interface``): ``encode`` (once per
chunk of its sources), ``EncoderOutput.select`` to repeat it per candidate, and one teacher-forced
``reconstruction_score`` pass over all candidates of all sentences of a batch, so reranking costs
one extra decoder + reconstructor pass over k·B rows, not k decodes — and no decoder pass when
the beam search kept each candidate's decoder states (``states``: ``beam_search(keep_states=True)``,
what ``translate --rerank`` does). ``top_words`` K > 0 normalises log R over the K most frequent
source words and the reconstructed word instead of the whole source vocabulary
(``translate --rerank-vocab``: an approximation, the reconstructor's softmax being most of the
remaining cost; ``Reconstructor._top_log_probs``). The k·B rows are sorted by
(|x̂|, |y|) and scored in chunks of ``rows_per_pass``, each chunk's sources encoded together, so
that a chunk's padding (source, candidate and x̂), and the reconstructor's recurrence over |x̂|
steps, follow its own longest row rather than the batch's (measured: the candidates of a
64-sentence batch are 2–4× shorter on average than its longest).
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

import numpy as np
import torch

from doctrans.models.interface import EncoderOutput, SearchBatch


def _padded(rows: Sequence[Sequence[int]], pad_id: int) -> torch.Tensor:
    width = max(1, max(len(r) for r in rows))
    out = torch.full((len(rows), width), pad_id, dtype=torch.long)
    for n, r in enumerate(rows):
        out[n, :len(r)] = torch.as_tensor(list(r), dtype=torch.long)
    return out


class Specials(NamedTuple):
    """The target vocabulary's ``<pad>`` and ``<s>`` ids (a ``Vocab`` has them too)."""

    pad_id: int
    bos_id: int


@torch.no_grad()
def rerank_batch(model, sources: Sequence[np.ndarray], nbest: Sequence[Sequence[tuple[float, Sequence[int]]]],
                 targets: Sequence[np.ndarray], weight: float, specials: Specials, rows_per_pass: int = 64,
                 states: Sequence[Sequence[torch.Tensor]] | None = None, top_words: int = 0,
                 encoded: EncoderOutput | None = None) -> tuple[list[int], list[list[float]]]:
    """Choose one candidate per sentence (module doc).

    sources: B source id arrays ending in ``</s>`` (what the encoder reads); nbest: per sentence
    its k_b ≥ 1 candidates as (normalised beam score, target ids without ``<s>``/``</s>``), as
    ``beam_search`` lists them; targets: B reconstruction targets x̂ (source-vocabulary ids
    ending in ``</s>``); weight: λ; specials: the target ``<pad>`` and ``<s>`` ids (a ``Vocab``
    or ``Specials``); rows_per_pass: candidates per
    ``reconstruction_score`` call, taken in (|x̂|, |y|) order (the scores do not depend on it);
    states: per sentence, per candidate, its decoder states (|y| + 1, D) of ``<s> y`` (None: the
    decoder runs teacher-forced); top_words: ``reconstruction_score``'s (0 = the full softmax);
    encoded: the B sentences' encoder output (B rows, in ``candidates``' order), used instead of
    encoding ``sources`` (which may then be None) — a context model's, encoded with each
    sentence's document context as the beam search encoded it (``DocumentRerank``).
    Returns (index of the chosen candidate per sentence — ties go to the earlier, i.e. the
    beam's, order —, the combined scores per candidate). Raises ``ValueError`` from
    ``model.reconstruction_score`` for a model without a reconstructor, for a sentence without
    candidates, or for ``rows_per_pass`` < 1."""
    candidates = [[ids for _, ids in hl] for hl in nbest]
    beam_scores = [[score for score, _ in hl] for hl in nbest]
    pad_id, bos_id = specials.pad_id, specials.bos_id
    if any(len(c) == 0 for c in candidates):
        raise ValueError("every sentence needs at least one candidate to rerank")
    if rows_per_pass < 1:
        raise ValueError(f"rows_per_pass must be ≥ 1, got {rows_per_pass}")
    if encoded is not None and encoded.states.size(0) != len(candidates):
        raise ValueError(f"encoded holds {encoded.states.size(0)} rows for {len(candidates)} sentences")
    device = next(model.parameters()).device
    owner = [b for b, cands in enumerate(candidates) for _ in cands]
    if states is not None and [len(s) for s in states] != [len(c) for c in candidates]:
        raise ValueError("states must hold one decoder-state tensor per candidate")
    flat = [c for cands in candidates for c in cands]
    flat_states = None if states is None else [h for hs in states for h in hs]        # aligned with ``flat``
    order = sorted(range(len(flat)), key=lambda i: (len(targets[owner[i]]), len(flat[i])))
    log_r = [0.0] * len(flat)                                                         # (Σ k_b,)
    for start in range(0, len(order), rows_per_pass):
        part = order[start:start + rows_per_pass]
        if encoded is not None:
            rows = encoded.select(torch.tensor([owner[i] for i in part], dtype=torch.long, device=device))
        else:
            sents = sorted({owner[i] for i in part})      # the chunk's sources, encoded at their own width
            enc = model.encode(SearchBatch(_padded([sources[b] for b in sents], pad_id).to(device)))
            at = {b: n for n, b in enumerate(sents)}
            rows = enc.select(torch.tensor([at[owner[i]] for i in part], dtype=torch.long, device=device))
        tgt_in = _padded([[bos_id, *flat[i]] for i in part], pad_id).to(device)
        rec = _padded([targets[owner[i]] for i in part], pad_id).to(device)
        hidden = None if flat_states is None else \
            torch.nn.utils.rnn.pad_sequence([flat_states[i] for i in part], batch_first=True).to(device)
        scores = model.reconstruction_score(rows, tgt_in, rec, hidden=hidden, top_words=top_words)
        for i, score in zip(part, scores.float().cpu().tolist()):
            log_r[i] = score
    chosen, combined, n = [], [], 0
    for b, cands in enumerate(candidates):
        length = max(1, len(targets[b]))
        sc = [float(beam_scores[b][j]) + weight * log_r[n + j] / length for j in range(len(cands))]
        n += len(cands)
        chosen.append(int(np.argmax(sc)))                  # first maximum: the beam's order breaks ties
        combined.append(sc)
    return chosen, combined


class DocumentRerank:
    """``documents.DocumentReranker`` for a context model with a reconstructor (``translate
    --rerank reconstructor`` on a model that reads documents): the k best of each batch's target
    rows are reranked by ``rerank_batch`` on the encoder states the search decoded from (encoded
    with their document context rows; not recomputed) and the kept decoder states, so log R reads
    the same context-aware states the translation was made from.

    targets: per document, per non-empty line in order, its x̂ (source-vocabulary ids ending in
    ``</s>``) or None (that sentence keeps the beam's 1-best); weight: λ; k: hypotheses kept per
    sentence; top_words: ``rerank_batch``'s."""

    def __init__(self, model, targets: Sequence[Sequence[np.ndarray | None]], weight: float, k: int,
                 pad_id: int, bos_id: int, top_words: int = 0):
        self.model, self.targets, self.weight, self.k = model, targets, weight, k
        self.pad_id, self.bos_id, self.top_words = pad_id, bos_id, top_words

    def __call__(self, batch, encoded: EncoderOutput, chunk, nbest, states) -> list[int]:
        """batch: the document batch (its first len(chunk) rows the targets); encoded: its
        ``model.encode`` (B rows, states (B, S, H)); chunk: the targets' ``translate_documents``
        keys (document, line), which index ``targets``; nbest / states: ``beam_search``'s per
        target row. → the chosen index per row (0 for a row without x̂)."""
        return [0 if sc is None else int(np.argmax(sc)) for sc in self.scores(batch, encoded, chunk, nbest, states)]

    @torch.no_grad()
    def scores(self, batch, encoded: EncoderOutput, chunk, nbest, states) -> list[list[float] | None]:
        """``__call__``'s combined scores s_beam + λ·log R / |x̂| per row and candidate (None for a
        row without x̂ or candidates). Raises ValueError as ``rerank_batch``."""
        out: list[list[float] | None] = [None] * len(chunk)
        rows = [r for r, (d, i) in enumerate(chunk) if self._target(d, i) is not None and nbest[r]]
        if not rows:
            return out
        index = torch.tensor(rows, dtype=torch.long, device=encoded.states.device)
        _, combined = rerank_batch(self.model, None, [nbest[r] for r in rows], [self._target(*chunk[r]) for r in rows],
                                   self.weight, Specials(self.pad_id, self.bos_id), states=[states[r] for r in rows],
                                   top_words=self.top_words, encoded=encoded.select(index))
        for r, sc in zip(rows, combined):
            out[r] = sc
        return out

    def _target(self, d: int, i: int):
        return self.targets[d][i]


@torch.no_grad()
def predict_batch(model, sources: Sequence[np.ndarray], translations: Sequence[Sequence[int]],
                  targets: Sequence[np.ndarray], pad_id: int, bos_id: int,
                  ctx: torch.Tensor | None = None, threshold: float | None = None) -> list[list[int]]:
    """A joint DP model's labels (``model.predict_dps``, docs/models.md §2.10–2.11) for B sentences
    in one teacher-forced pass: sources (what the encoder reads, ending in ``</s>``), their
    translations (target ids without ``<s>``/``</s>``: ``<s> y`` is teacher-forced), targets
    x̂ (source-vocabulary ids ending in ``</s>``). Returns per sentence one label per x̂
    position (len(targets[b]) labels, padding cut off). ``ctx`` (B, N): for a model that reads
    documents, each row's previous sentences as rows of this batch (``SearchBatch.ctx``).
    ``threshold``: the DP decision threshold τ (None = the model's own; ``predict_dps``). Raises
    ``ValueError`` from ``model.predict_dps`` for a model that predicts no DPs."""
    device = next(model.parameters()).device
    enc = model.encode(SearchBatch(_padded(sources, pad_id).to(device), None if ctx is None else ctx.to(device)))
    tgt_in = _padded([[bos_id, *t] for t in translations], pad_id).to(device)
    labels = model.predict_dps(enc, tgt_in, _padded(targets, pad_id).to(device), threshold).cpu()
    return [labels[b, :len(targets[b])].tolist() for b in range(len(targets))]


def predict_documents(model, documents: Sequence[Sequence[int]], sources: Sequence[np.ndarray],
                      translations: Sequence[Sequence[int]], targets: Sequence[np.ndarray], n: int,
                      pad_id: int, bos_id: int, batch_sentences: int,
                      threshold: float | None = None) -> list[list[int]]:
    """``predict_batch`` for a model that reads its document's previous ``n`` sentences (§2.12's
    cross-sentence DP labelling): ``documents`` lists, per document, the indices (into
    ``sources`` / ``translations`` / ``targets``) of its sentences in order. Each document is
    labelled in windows of ``batch_sentences`` sentences, every window preceded by its first
    sentence's ``n`` predecessors as context rows, so each sentence reads exactly its own
    document's previous ``n`` sentences whatever the window size. Returns one label list per
    sentence, in the order of ``sources`` (len(targets[i]) labels each). Raises ``ValueError``
    from ``model.predict_dps`` for a model that predicts no DPs."""
    out: list[list[int] | None] = [None] * len(sources)
    step = max(1, batch_sentences)
    for doc in documents:
        for a in range(0, len(doc), step):
            lo, hi = max(0, a - n), min(len(doc), a + step)
            rows = list(doc[lo:hi])
            ctx = torch.tensor([[r - k if r - k >= 0 else -1 for k in range(n, 0, -1)]
                                for r in range(len(rows))], dtype=torch.long).view(len(rows), n)
            labels = predict_batch(model, [sources[i] for i in rows], [translations[i] for i in rows],
                                   [targets[i] for i in rows], pad_id, bos_id, ctx, threshold)
            for r in range(a - lo, len(rows)):
                out[rows[r]] = labels[r]
    return [x if x is not None else [] for x in out]
