"""The engine interface: what a ``Translator`` (``translator.py``) needs of a loaded model, so it
depends on this and not on how the search runs (as OpenNMT-py's ``onmt/inference_engine.py``
puts its engines behind one interface). Two engines implement it:

* ``loading.LoadedModel`` — native: doctrans' own beam search (``decode.decode_corpus``,
  ``documents.translate_documents``) over a checkpoint's torch model, or over an ensemble of
  several (``models/ensemble.py``: the ensemble is one model to the search);
* ``ct2.CT2Model`` — an exported directory searched by CTranslate2 (no torch model: ``model`` is
  None; input variants, reranking and given context are not supported: ValueError).

``loading.load_model`` returns the one a ``ModelOptions`` asks for. Every search is given the
``SearchOptions`` as one object."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import numpy as np
import torch

from doctrans.data.text import TextProcessor
from doctrans.data.vocab import Vocab
from doctrans.inference.config import SearchOptions


@dataclass(frozen=True)
class Decoded:
    """An engine's translations of a list of sentences: ``hyps``, target BPE strings in input
    order; ``nbest`` (``search.nbest`` > 0, else None): per sentence its best hypotheses as
    (target BPE string, length-normalised score), best first."""

    hyps: list[str]
    nbest: list[list[tuple[str, float]]] | None = None


class Engine(Protocol):
    """A loaded model a ``Translator`` translates with.

    src_vocab / tgt_vocab, src_proc / tgt_proc: the model's vocabularies and text processing;
    chunk_len: the training length (the pieces of an over-long line); protect_dp: trained with
    ``data.bpe_protect_dp``; key: what was loaded (``loading.LoadedModel.key_of``); model: the
    torch model, or None (CTranslate2); shortlist: the ``Shortlist`` every search uses, or None."""

    src_vocab: Vocab
    tgt_vocab: Vocab
    src_proc: TextProcessor
    tgt_proc: TextProcessor
    chunk_len: int
    protect_dp: bool
    key: tuple

    @property
    def model(self) -> torch.nn.Module | None: ...

    @property
    def shortlist(self): ...

    @property
    def reads_documents(self) -> bool:
        """Whether the model translates documents with their context."""

    @property
    def max_target_len(self) -> int:
        """The model's positions (they bound the source too)."""

    def decode(self, ids: list[np.ndarray], search: SearchOptions, progress: bool = False) -> Decoded:
        """Sentences (source ids, each ending in ``</s>``) → their translations (``Decoded``)."""

    def decode_documents(self, docs: list[list[np.ndarray]], search: SearchOptions, progress: bool = False,
                         rerank=None, given: dict | None = None) -> list[list[str]]:
        """Per document, per sentence, source ids → target BPE strings, each sentence with its
        document's context; ``rerank``: a ``documents.DocumentReranker``; ``given``: sentences
        already translated, read as context only (``documents.translate_documents``)."""

    def decode_variants(self, variants: list[list[np.ndarray]], weights: list[list[float]], combine: str,
                        search: SearchOptions, progress: bool = False) -> list[str]:
        """Per sentence, its source variants (an input transform's, ``transform.py``) with their
        weights → one target BPE string per sentence, by ``combine``: ``1best`` the first variant,
        ``mixture`` all in one beam (log Σ w p), ``max`` each alone, the best-scoring kept."""
