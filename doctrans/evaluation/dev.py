"""Dev BLEU during training: the scorer ``training.train`` is given (``DevScorer``), so the
training layer never imports decoding or BLEU."""
from __future__ import annotations

from dataclasses import asdict

import numpy as np
import torch

from doctrans.decoding import DecodeConfig
from doctrans.data.vocab import Vocab
from doctrans.evaluation.score import bleu_tok_lc
from doctrans.inference.config import SearchOptions
from doctrans.inference.documents import translate_documents
from doctrans.inference.translate import decode_corpus
from doctrans.models.interface import reads_documents


def dev_bleu(model: torch.nn.Module, tgt_vocab: Vocab, docs: list[list[np.ndarray]], refs: list[str], beam: int,
             decode: DecodeConfig) -> float:
    """BLEU (thesis setting: tokenized, lowercased; one reference) of ``model``'s translations of
    ``docs`` (per document, per line, source ids ending in ``</s>``) against ``refs`` (one
    tokenized line per source line, in order): a context model translates each document with
    its context (``inference.documents``), a sentence model the lines alone (``decode_corpus``),
    beam ``beam`` and ``decode``'s length settings (a context model's documents whole: no history
    pieces). BPE is merged before scoring."""
    search = SearchOptions(**{**asdict(decode), "beam": beam}, history_chunk=0)
    if reads_documents(model):
        out = translate_documents(model, docs, tgt_vocab, search)
        hyps = [h for doc in out for h in doc]
    else:
        hyps = decode_corpus(model, [x for doc in docs for x in doc], tgt_vocab, search)
    hyps = [h.replace("@@ ", "").removesuffix("@@") for h in hyps]
    return bleu_tok_lc(hyps, [refs])


def dev_cxmi(model: torch.nn.Module, src: list[np.ndarray], tgt: list[np.ndarray], doc: np.ndarray, k: int,
             seed: int = 1) -> dict[str, float]:
    """Dev context usage during training (``training.train.DevContextScorer``): CXMI (Fernandes
    et al. 2021 §3 eq. 3; ``evaluation.cxmi``) of the first ``k`` dev lines against an empty
    context (``cxmi_empty_nats``) and against a random context from another document of the
    whole dev set (``cxmi_random_nats``, the same draws at every evaluation: ``seed``), in nats
    per sentence; the teacher-forced dev cross-entropy of those lines with their real context
    (``cxmi_xent_nats``, nats per target unit). src / tgt: id arrays per dev line (ending in
    ``</s>``); doc: (L,) document number per line (documents contiguous). A dev set of one
    document has no random context: ``cxmi_random_nats`` is then left out. ``{}`` for a
    sentence model or k ≤ 0."""
    from doctrans.evaluation.forced import Item, model_context, model_random_context, score_items

    if not reads_documents(model) or k <= 0:
        return {}
    was_training = model.training
    lines = range(min(k, len(src)))
    items = [Item(i, tgt[i], model_context(model, doc, i)) for i in lines]
    real, empty = score_items(model, items, src, tgt, blank=(False, True))
    n = max(len(items), 1)
    out = {"cxmi_empty_nats": float(sum(r.sum() - e.sum() for r, e in zip(real, empty)) / n)}
    if len(np.unique(doc)) > 1:
        rng = np.random.default_rng(seed)
        rand_items = [Item(i, tgt[i], model_random_context(model, doc, i, rng)) for i in lines]
        rand, = score_items(model, rand_items, src, tgt)
        out["cxmi_random_nats"] = float(sum(r.sum() - o.sum() for r, o in zip(real, rand)) / n)
    model.train(was_training)
    out["cxmi_xent_nats"] = float(-sum(r.sum() for r in real) / max(sum(len(r) for r in real), 1))
    return out
