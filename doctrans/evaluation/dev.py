"""Dev BLEU during training: the scorer ``training.train`` is given (``DevScorer``), so the
training layer never imports decoding or BLEU."""
from __future__ import annotations

import numpy as np
import torch

from doctrans.config import DecodeConfig
from doctrans.data.vocab import Vocab
from doctrans.evaluation.score import bleu_tok_lc
from doctrans.inference.documents import translate_documents
from doctrans.inference.translate import decode_corpus
from doctrans.models.interface import reads_documents


def dev_bleu(model: torch.nn.Module, tgt_vocab: Vocab, docs: list[list[np.ndarray]], refs: list[str], beam: int,
             decode: DecodeConfig) -> float:
    """BLEU (thesis setting: tokenized, lowercased; one reference) of ``model``'s translations of
    ``docs`` (per document, per line, source ids ending in ``</s>``) against ``refs`` (one
    tokenized line per source line, in order): a context model translates each document with
    its context (``inference.documents``), a sentence model the lines alone (``decode_corpus``),
    beam ``beam`` and ``decode``'s length settings. BPE is merged before scoring."""
    if reads_documents(model):
        out = translate_documents(model, docs, tgt_vocab, beam, decode.lenpen, decode.max_len_ratio,
                                  decode.max_len_extra, decode.batch_sentences)
        hyps = [h for doc in out for h in doc]
    else:
        hyps = decode_corpus(model, [x for doc in docs for x in doc], tgt_vocab, beam, decode.lenpen,
                             decode.max_len_ratio, decode.max_len_extra, decode.batch_sentences)
    hyps = [h.replace("@@ ", "").removesuffix("@@") for h in hyps]
    return bleu_tok_lc(hyps, [refs])
