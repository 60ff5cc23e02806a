"""Translating documents with a context model (``model.context_sents`` = N > 0, or
``model.context_block`` = K > 0).

Each batch is a document batch (``models/context/base.py``): the sentences to translate are
``is_target`` rows and the N sentences before each of them in its document are context-only
rows, pointed to by ``ctx``. Two schedules:

* **source-side context** (``model.context_needs_target`` False: concatenation, HAN encoder):
  the context is known before anything is translated, so sentences of all documents are
  batched together in length order, ``batch_sentences`` target rows at a time, as a sentence
  model would be;
* **target-side context** (HAN decoder / joint): the context rows carry the model's own 1-best
  translations of the previous sentences (docs/models.md §1.1), so documents are translated in
  order, sentence m of every document in one batch (chunks of ``batch_sentences``) after
  sentence m − 1 of all of them.

* **sub-documents** (``context_block`` K > 0, HGC): the context is the source of the K
  consecutive sentences of the sentence's sub-document, so whole sub-documents are encoded
  together, every row a target, ``block`` (B,) saying which rows form one sub-document
  (``block_batches``); their sentences are then decoded like a sentence model's, in batches of
  similar source length (``REGROUP`` × ``batch_sentences`` sentences at a time: a sub-document
  mixes short and long sentences, and a batch decodes until its longest is done) [I].

The model's ``inference_cache`` (``models/context/base.py``) is on for the whole collection: a
sentence's context computations (e.g. HAN's projected states of a previous sentence) are made
once and reused by the batches of the next N sentences, so each sentence is encoded about once
[I]. Its capacity covers the N + 1 latest sentences of every document twice over (at least 4,096).
After each batch a ``HeapTrimmer`` (``utils/memory.py``) hands the heap memory the batch freed
back to the system once the process has grown by 64 MiB (glibc keeps it otherwise: issue 50).

Empty lines are not sentences: they give empty output and are skipped as context [I: the
previous N *sentences*]. Output keeps every line in place.
"""
from __future__ import annotations

from contextlib import nullcontext
from dataclasses import replace
from typing import Protocol

import numpy as np
import torch
from tqdm import tqdm

from doctrans.data.vocab import Vocab
from doctrans.inference.beam_search import beam_search
from doctrans.inference.config import SearchOptions
from doctrans.inference.token_batches import MAX_TOKENS, token_batches
from doctrans.models.interface import EncoderOutput
from doctrans.utils import bars_off
from doctrans.utils.memory import HeapTrimmer

Sentence = tuple[int, int]        # (document, line) of a non-empty line


class DocumentReranker(Protocol):
    """Chooses one of each sentence's ``k`` best translations (``translate_documents(rerank=…)``):
    called per batch with the batch (its first rows the target sentences ``chunk``, in order), its
    ``model.encode`` (every row; the one the search decoded from, so nothing is encoded twice), per
    sentence its n-best [(normalised score, ids)] best first and their decoder states
    (``beam_search(keep_states=True)``); returns the chosen index per sentence."""

    k: int

    def __call__(self, batch, encoded: EncoderOutput, chunk: list[Sentence],
                 nbest: list[list[tuple[float, list[int]]]], states: list[list[torch.Tensor]]) -> list[int]: ...


class _Batch:
    """A document batch for ``beam_search``: src (B, S), tgt_in (B, T), ctx (B, N), is_target (B,),
    block (B,) or None (sub-document of each row, ``context_block`` models)."""

    def __init__(self, src, tgt_in, ctx, is_target, block=None):
        self.src, self.tgt_in, self.ctx, self.is_target, self.block = src, tgt_in, ctx, is_target, block


def _pad(seqs: list[np.ndarray], pad: int, device) -> torch.Tensor:
    out = torch.full((len(seqs), max(len(s) for s in seqs)), pad, dtype=torch.long)
    for r, s in enumerate(seqs):
        out[r, :len(s)] = torch.as_tensor(s, dtype=torch.long)
    return out.to(device)


def _context(doc: list[int], k: int, n: int) -> list[int]:
    """The N lines before position k of a document's non-empty lines (oldest first; fewer at
    the document start)."""
    return doc[max(0, k - n):k]


def build_batch(targets: list[Sentence], sents: dict[Sentence, np.ndarray], order: dict[int, list[int]],
                position: dict[Sentence, int], n: int, hyps: dict[Sentence, list[int]], vocab: Vocab,
                device) -> _Batch:
    """Target rows first, then their context rows (each context sentence once); ``ctx`` points
    from each row to its context rows (−1 where missing); context rows' ``tgt_in`` is ``<s>``
    + their 1-best (``hyps``) when known, else ``<s>``."""
    rows: list[Sentence] = list(targets)
    index = {s: r for r, s in enumerate(rows)}
    ctx = []
    for d, line in targets:
        cl = [(d, c) for c in _context(order[d], position[(d, line)], n)]
        for s in cl:
            if s not in index:
                index[s] = len(rows)
                rows.append(s)
        ctx.append([-1] * (n - len(cl)) + [index[s] for s in cl])
    ctx += [[-1] * n for _ in range(len(rows) - len(targets))]           # context rows: no context
    src = _pad([sents[s] for s in rows], vocab.pad_id, device)
    tgt_in = _pad([np.asarray([vocab.bos_id] + hyps.get(s, []), dtype=np.int64) for s in rows],
                  vocab.pad_id, device)
    is_target = torch.zeros(len(rows), dtype=torch.bool, device=device)
    is_target[:len(targets)] = True
    return _Batch(src, tgt_in, torch.tensor(ctx, dtype=torch.long, device=device).view(len(rows), n),
                  is_target)


def block_batches(model, sents: dict[Sentence, np.ndarray], order: dict[int, list[int]], block: int,
                  batch_sentences: int, vocab: Vocab, device, max_tokens: int = MAX_TOKENS):
    """Batches of whole sub-documents (``block`` consecutive non-empty lines of a document, the
    context of a ``context_block`` model, docs/models.md §2.7), sub-documents of similar length
    together, about ``batch_sentences`` sentences per batch and rows × longest row within
    ``max_tokens`` (``token_batches``; at least one sub-document): yields
    (sentences (B,), _Batch with every row a target and ``block`` (B,))."""
    units = [[(d, line) for line in o[k:k + block]] for d, o in order.items() for k in range(0, len(o), block)]
    units.sort(key=lambda u: max(len(sents[s]) for s in u))
    n = model.document.context_sents
    chunk: list[list[Sentence]] = []
    n_rows = wide = 0
    for unit in units + [None]:
        w = max(len(sents[s]) for s in unit) if unit is not None else 0
        if chunk and (unit is None or n_rows + len(unit) > batch_sentences
                      or (n_rows + len(unit)) * max(wide, w) > max_tokens):
            rows = [s for u in chunk for s in u]
            blocks = torch.tensor([b for b, u in enumerate(chunk) for _ in u], dtype=torch.long, device=device)
            src = _pad([sents[s] for s in rows], vocab.pad_id, device)
            tgt_in = torch.full((len(rows), 1), vocab.bos_id, dtype=torch.long, device=device)
            ctx = torch.full((len(rows), n), -1, dtype=torch.long, device=device)
            yield rows, _Batch(src, tgt_in, ctx, torch.ones(len(rows), dtype=torch.bool, device=device), blocks)
            chunk, n_rows, wide = [], 0, 0
        if unit is not None:
            chunk.append(unit)
            n_rows += len(unit)
            wide = max(wide, w)


REGROUP = 32      # sub-document batches encoded before their sentences are decoded in length order


def _decode_encoded(model, pending: list, vocab: Vocab, search: SearchOptions, shortlist, hyps: dict, bar,
                    trim) -> None:
    """Decode sentences encoded beforehand — pending: [(sentence, ids (L,), states (L, H),
    padding mask (L,))], emptied — in batches of ``search.batch_sentences`` by source length (and
    ``MAX_TOKENS``: ``token_batches``), as a sentence model's are (``beam_search(encoded=…)``);
    1-best ids into ``hyps``."""
    pending.sort(key=lambda p: p[1].numel())
    for chunk in token_batches(pending, lambda p: p[1].numel(), search.batch_sentences, MAX_TOKENS):
        width = max(p[1].numel() for p in chunk)
        src = chunk[0][1].new_full((len(chunk), width), vocab.pad_id)
        states = chunk[0][2].new_zeros((len(chunk), width, chunk[0][2].size(-1)))
        mask = torch.ones((len(chunk), width), dtype=torch.bool, device=src.device)
        for r, (_, ids, st, m) in enumerate(chunk):
            src[r, :ids.numel()], states[r, :ids.numel()], mask[r, :ids.numel()] = ids, st, m
        res = beam_search(model, src, vocab, search, encoded=EncoderOutput(states, mask), shortlist=shortlist)
        hyps.update(zip([p[0] for p in chunk], res.tokens))
        bar.update(len(chunk))
        trim()
    pending.clear()


def _history_pieces(docs: list[list[np.ndarray | None]], chunk: int, n: int) -> list[tuple[int, list[int], int]]:
    """The pieces of ``translate_documents(history_chunk=chunk)``: per document, its non-empty
    lines cut into runs of ``chunk``, each run preceded by (up to) the ``n`` non-empty lines
    before it → [(document, line indices, warm-up count)], in document order; every non-empty
    line is kept (after the warm-up) in exactly one piece. A document without non-empty lines
    gives none."""
    pieces = []
    for d, lines in enumerate(docs):
        idx = [i for i, x in enumerate(lines) if x is not None]
        for start in range(0, len(idx), chunk):
            lo = max(0, start - n)
            pieces.append((d, idx[lo:start + chunk], start - lo))
    return pieces


AUTO = "auto"     # --history-chunk auto (the default): pieces that fill one batch (history_chunk_for)
MIN_CHUNK = 8     # auto: pieces of at least this many lines (each piece adds N warm-up sentences)


def history_chunk_for(docs: list[list], chunk: int | str, batch_sentences: int) -> int:
    """The piece length that ``history_chunk`` asks for (``translate_documents``, both engines):
    an int ≥ 0 as given (0: whole documents); ``"auto"``: the smallest C ≥ ``MIN_CHUNK`` whose
    pieces (Σ over the documents of ⌈non-empty lines / C⌉) fit one batch of ``batch_sentences``,
    so every step of the rolling history is one full batch rather than a few pieces' worth or two
    batches; 0 when the documents alone fill a batch (cutting would add warm-ups, not width) [I:
    on the TVsub test, 2 documents, C = 19 where 32 left half the batch empty: 1.37× the sentence
    model's time instead of 1.45×, docs/journal/2026-11-29-history-chunk-auto.md]. docs: per
    document, per line, anything (None for an empty line); → C in lines (0: whole documents).
    Raises ValueError for anything else (a negative int, another string)."""
    if chunk == AUTO:
        lengths = [sum(x is not None for x in d) for d in docs]
        if sum(1 for n in lengths if n) >= batch_sentences:
            return 0
        c = max(MIN_CHUNK, -(-sum(lengths) // max(1, batch_sentences)))   # B < 1: token_batches refuses it
        while sum(-(-n // c) for n in lengths) > batch_sentences:
            c += 1
        return c
    if isinstance(chunk, bool) or not isinstance(chunk, int) or chunk < 0:
        raise ValueError(f"history_chunk must be 'auto' or an integer ≥ 0 (0 = whole documents), got {chunk!r}")
    return chunk


def in_history_pieces(docs: list[list], chunk: int, n: int, translate) -> list[list[str]] | None:
    """The rolling history in pieces (``translate_documents(history_chunk=chunk)``, and the
    CTranslate2 engine's ``CT2Model.decode_documents``): ``docs`` (per document, per line, a
    sentence or None for an empty line) cut by ``_history_pieces`` into pieces of ``chunk`` lines,
    each after up to ``n`` warm-up lines; ``translate(piece_docs, warmup)`` (per piece its lines
    as a document, and per piece how many of its first lines are warm-up → per piece, per line, a
    translation) translates all of them as independent documents, and the warm-up's
    translations are dropped → per document, per line, the translation ("" for empty lines).
    None when no document is longer than ``chunk`` (nothing to cut: translate whole)."""
    pieces = _history_pieces(docs, chunk, n)
    if len(pieces) <= len(docs):
        return None
    out = translate([[docs[d][i] for i in lines] for d, lines, _ in pieces], [warm for _, _, warm in pieces])
    result = [[""] * len(lines) for lines in docs]
    for (d, lines, warm), hyp in zip(pieces, out):
        for i, h in list(zip(lines, hyp))[warm:]:
            result[d][i] = h
    return result


def translate_documents(model, docs: list[list[np.ndarray | None]], vocab: Vocab, search: SearchOptions,
                        progress: bool = False, context_cache: bool = True, shortlist=None,
                        rerank: DocumentReranker | None = None, given: dict[Sentence, list[int]] | None = None,
                        warmup: list[int] | None = None) -> list[list[str]]:
    """docs: per document, per line, source ids ending in ``</s>`` (None for an empty line) →
    per document, per line, target token strings ("" for empty lines). See the module doc for
    the two schedules. ``search``: the ``SearchOptions`` — beam, length penalty and limit,
    ``batch_sentences`` target sentences per batch (and rows × longest row within
    ``MAX_TOKENS`` source tokens: ``token_batches``), ``history_chunk`` and ``warmup_beam``.
    ``context_cache`` False: without the model's ``inference_cache`` (every batch computes its
    context rows again; the same translations, slower: for benchmarks and tests). ``shortlist``:
    a ``Shortlist`` for every ``beam_search``. ``rerank``: each batch's search keeps its
    ``rerank.k`` best hypotheses with their decoder states and ``rerank`` chooses one per sentence
    (``translate --rerank reconstructor``; a target-side model's later context rows then carry
    the chosen translation). ``given``: (document, line) → target ids of sentences already
    translated (e.g. the previous lines of a stream, ``inference/stream.py``): they are not
    translated again, only read as context (a target-side model's context rows carry these ids),
    and their output is these ids decoded. ``history_chunk`` C > 0 (target-side context only;
    without ``given``): each document's sentences are translated as independent pieces of C, each
    preceded by the N sentences before it as warm-up (translated with the context they have in
    the piece, their output discarded; ``_history_pieces``), so a document of L sentences takes
    C + N sequential steps instead of L and the pieces of all documents share each step's
    batches; every kept sentence reads N previous sentences of its document, the model's own
    translations — at a piece's start the warm-up's, made with less context [I]; ``"auto"``: C
    chosen so the pieces fill one batch (``history_chunk_for``); 0: whole documents.
    ``warmup_beam`` W > 0: the warm-up sentences are searched with beam W instead of ``beam``, in
    batches of their own (their translations are only context; W = 1 is greedy: 1.28× the
    sentence model's time instead of 1.33× with the default document model,
    docs/journal/2026-11-29-whole-corpus-rows.md; 0 keeps ``beam``); ``warmup``: per document,
    how many of its first non-empty lines are warm-up (``in_history_pieces`` passes it; those
    lines are searched with ``warmup_beam`` and not reranked). Raises ValueError if the model
    reads no context, for ``rerank`` or ``given`` with a sub-document model (``context_block``),
    or for a ``history_chunk`` neither ``"auto"`` nor an integer ≥ 0."""
    doc = model.document
    n, block = doc.context_sents, doc.context_block
    if not doc.reads_documents:
        raise ValueError("translate_documents needs a context model (model.context_sents or context_block > 0)")
    if rerank is not None and block > 0:
        raise ValueError("reranking is not supported for sub-document models (context_block > 0, e.g. HGC)")
    if given and block > 0:
        raise ValueError("given translations are not supported for sub-document models (context_block > 0, e.g. HGC)")
    search = replace(search, nbest=0) if search.nbest else search     # one translation per sentence
    beam, warmup_beam, batch_sentences, max_tokens = search.beam, search.warmup_beam, search.batch_sentences, MAX_TOKENS
    history_chunk = history_chunk_for(docs, search.history_chunk, batch_sentences)
    if history_chunk and doc.needs_target and not given and block == 0:
        whole = replace(search, history_chunk=0)
        result = in_history_pieces(
            docs, history_chunk, n,
            lambda piece_docs, warm: translate_documents(model, piece_docs, vocab, whole, progress, context_cache,
                                                         shortlist, rerank, None, warm))
        if result is not None:
            return result
    device = next(model.parameters()).device
    sents = {(d, i): x for d, lines in enumerate(docs) for i, x in enumerate(lines) if x is not None}
    order = {d: [i for i, x in enumerate(lines) if x is not None] for d, lines in enumerate(docs)}
    position = {(d, line): k for d, o in order.items() for k, line in enumerate(o)}
    hyps: dict[Sentence, list[int]] = dict(given or {})
    if doc.needs_target:
        steps = [[(d, o[m]) for d, o in order.items() if m < len(o) and (d, o[m]) not in hyps]
                 for m in range(max(map(len, order.values()), default=0))]
    else:
        steps = [sorted((s for s in sents if s not in hyps), key=lambda s: len(sents[s]))]
    bar = tqdm(total=len(sents) - len(hyps), unit="sent", disable=not progress or bars_off(), desc="translate documents")
    trim = HeapTrimmer()                    # freed batch memory back to the system (utils/memory.py)

    def context_of(s: Sentence) -> list[Sentence]:
        return [(s[0], c) for c in _context(order[s[0]], position[s], n)]

    def is_warmup(s: Sentence) -> bool:
        return warmup_beam not in (0, beam) and bool(warmup) and position[s] < warmup[s[0]]

    if block > 0:                                       # source-side sub-documents: no 1-best context
        pending: list = []
        model.eval()                                    # as beam_search would: encoding comes first here
        for rows, batch in block_batches(model, sents, order, block, batch_sentences, vocab, device, max_tokens):
            with torch.no_grad():
                enc = model.encode(batch)
            if enc.extra or enc.shared:                 # rows that cannot be regrouped: decode them here
                res = beam_search(model, batch, vocab, search, encoded=enc, shortlist=shortlist)
                hyps.update(zip(rows, res.tokens))
                bar.update(len(rows))
                trim()
                continue
            lengths = batch.src.ne(vocab.pad_id).sum(1).tolist()
            pending += [(s, batch.src[i, :n], enc.states[i, :n], enc.src_pad_mask[i, :n])
                        for i, (s, n) in enumerate(zip(rows, lengths))]
            if len(pending) >= REGROUP * batch_sentences:
                _decode_encoded(model, pending, vocab, search, shortlist, hyps, bar, trim)
        _decode_encoded(model, pending, vocab, search, shortlist, hyps, bar, trim)
        steps = []
    searches = {k: replace(search, beam=k) for k in {beam, warmup_beam} if k > 0}    # the lines' and the warm-up's
    with (model.inference_cache(capacity=max(4096, 2 * (n + 1) * len(order))) if context_cache else nullcontext()):
        for step in steps:
            if not step:
                continue
            step = sorted(step, key=lambda s: len(sents[s]))
            groups = [(beam, [s for s in step if not is_warmup(s)]), (warmup_beam, [s for s in step if is_warmup(s)])]
            for chunk, k in ((chunk, k) for k, group in groups if group
                             for chunk in token_batches(group, lambda s: max(len(sents[c]) for c in (s, *context_of(s))),
                                                        batch_sentences, max_tokens,
                                                        rows=lambda s: 1 + len(context_of(s)))):
                batch = build_batch(chunk, sents, order, position, n, hyps, vocab, device)
                if rerank is None or k != beam:
                    res = beam_search(model, batch, vocab, searches[k], shortlist=shortlist)
                    hyps.update(zip(chunk, res.tokens))
                else:                           # encoded once: the search and the reranker read it
                    model.eval()
                    with torch.no_grad():
                        enc = model.encode(batch)
                    res = beam_search(model, batch, vocab, replace(search, nbest=rerank.k), encoded=enc,
                                      shortlist=shortlist, keep_states=True)
                    chosen = rerank(batch, enc, chunk, res.nbest, res.nbest_states)
                    hyps.update((s, res.nbest[r][j][1]) for r, (s, j) in enumerate(zip(chunk, chosen)))
                bar.update(len(chunk))
                trim()
    bar.close()
    return [["" if x is None else vocab.decode(hyps[(d, i)]) for i, x in enumerate(lines)]
            for d, lines in enumerate(docs)]
