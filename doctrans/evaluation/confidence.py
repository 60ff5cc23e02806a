"""The scores of ``translate --scores`` (``inference/scores.py``): the log-probability a model
gives its own translations, teacher-forced (``forced.score_items``) with the context the model
reads (``forced.model_context``), whose target side is the model's own translations of the
previous lines, as in a document translation.

For a sentence model this is the beam's own score of its 1-best: ``length_normalized`` equals
the ``--nbest`` score (log p / length with ``--lenpen 1``) to float precision [test:
tests/integration/test_translate_scores.py]. For a context model that translates a document in
history pieces (``--history-chunk``) a piece's first line was searched with a warm-up
translation as context; its score here reads the kept translation instead.
"""
from __future__ import annotations

import numpy as np

from doctrans.data.documents import document_numbers
from doctrans.evaluation.forced import Item, model_context, score_items


def line_scores(translator, translation, doc_ids: list[str] | None = None,
                max_tokens: int = 3000) -> list[tuple[float, int] | None]:
    """Per line of ``translation`` (a ``Translation`` made by ``translator``, a native-engine
    ``Translator``; ``doc_ids``: the lines' documents, as given to it) its (log-probability in
    nats, target tokens with ``</s>``), or None for an empty line and for a line translated in
    pieces (longer than the model reads). Raises ValueError for a translator without a torch
    model (``--engine ctranslate2``)."""
    model = translator.model
    if model is None:
        raise ValueError("--scores needs the native engine (a torch model to score the translations with)")
    out: list[tuple[float, int] | None] = [None] * len(translation.lines)
    lines = sorted(translation.hyps)
    if not lines:
        return out
    src = [translator.src_vocab.encode(translation.bpe[i]) for i in lines]
    tgt = [translator.tgt_vocab.encode(translation.hyps[i]) for i in lines]
    doc = document_numbers([doc_ids[i] for i in lines] if doc_ids is not None else [""] * len(lines))
    limit = translator.max_source_units()
    keep = [k for k, i in enumerate(lines) if len(src[k]) - 1 <= limit]
    if not keep:
        return out
    items = [Item(k, tgt[k], model_context(model, doc, k)) for k in keep]
    vocab = translator.tgt_vocab
    scored, = score_items(model, items, src, tgt, pad_id=vocab.pad_id, bos_id=vocab.bos_id, max_tokens=max_tokens)
    for k, lp in zip(keep, scored):
        out[lines[k]] = (float(lp.sum()), int(lp.size))
    return out
