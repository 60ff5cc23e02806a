"""Reconstruction decoding (``translate --rerank reconstructor`` / ``--dp-out``; docs/models.md §2.8
"Decoding", §2.10–2.12): beam search with the k best reranked by the model's reconstructor, and
the DP-completed source a joint DP model predicts. ``Translator`` calls ``translate_reconstructing``;
the reconstructor passes themselves are ``inference/reconstruction.py``."""
from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, replace

from doctrans.inference.config import TranslateConfig
from doctrans.inference.decode import decode_corpus
from doctrans.inference.dp_output import completed_words
from doctrans.inference.loading import LoadedModel
from doctrans.inference.reconstruction import predict_batch, predict_documents, rerank_batch
from doctrans.inference.transform import InputSetup
from doctrans.models.interface import reads_documents

log = logging.getLogger(__name__)

RERANK_BLOCK = 16     # --rerank: batches decoded before they are reranked (bounds the decoder states held)


@dataclass(frozen=True)
class Lines:
    """The lines of one ``Translator`` call: ``text`` (all of them), ``nonempty`` (the indices of
    the non-empty ones), their BPE source (``bpe``) and segmented words (``words``), by line index;
    ``at``: each line's location for warnings; ``doc_ids``: each line's document, or None."""

    text: list[str]
    nonempty: list[int]
    bpe: dict[int, str]
    words: dict[int, str]
    at: list[str]
    doc_ids: list[str] | None


def translate_reconstructing(loaded: LoadedModel, cfg: TranslateConfig, inputs: InputSetup, lines: Lines, limit: int,
                             progress: bool, translate_documents: Callable[..., dict[int, str]]
                             ) -> tuple[dict[int, str], list[str] | None]:
    """``rerank`` / ``dp_out`` (``inference/reconstruction.py``): the reconstruction target x̂ of
    each line (the source itself for spec.target "original", else the DP generator's 1-best
    DP/DPP completion), the encoder input (x, or x̂ for encoder_input "annotated"), beam
    search — with ``rerank`` its k best reranked in one teacher-forced reconstructor pass per
    batch —, and with ``dp_out`` the model's DP labels turned into the DP-completed source
    words. Returns (line → BPE 1-best, the DP-completed lines or None). A line over the
    model's length is left out (translated plainly by the caller; its DP line is the source).
    A model that reads documents (§2.12's cross-sentence DP labelling; ``dp_out`` only, target
    original) translates every line as documents (``lines.doc_ids``) and labels each line with its
    document's previous N labelled lines as context (``predict_documents``).
    ``lines.words``: line index → its segmented source words (``inputs``' transform makes x̂ from them);
    ``translate_documents(rec=…)``: the Translator's translation of these lines as documents (a
    model that reads documents)."""
    c, model, spec = cfg, loaded.model, loaded.model.reconstruction
    nonempty, bpe, words, at, doc_ids = lines.nonempty, lines.bpe, lines.words, lines.at, lines.doc_ids
    hat = bpe
    if spec.target in ("dp", "dpp"):
        tok: list[str | None] = [None] * len(lines.text)
        for i in nonempty:
            tok[i] = words[i]
        per_line = inputs.transform(tok)
        protect = inputs.transform.protect if loaded.protect_dp else frozenset()
        hat = dict(zip(nonempty, loaded.src_proc.apply_bpe([per_line[i][0][0] for i in nonempty], protect=protect)))
    enc_in = hat if spec.encoder_input == "annotated" else bpe
    ok = [i for i in nonempty if max(len(enc_in[i].split()), len(hat[i].split())) <= limit]
    for i in sorted(set(nonempty) - set(ok)):
        log.warning("%s: too long for the reconstructor (%d positions): translated without reranking or DP "
                    "prediction", at[i], limit + 1)
    src = [loaded.src_vocab.encode(enc_in[i]) for i in ok]
    rec = [loaded.src_vocab.encode(hat[i]) for i in ok]
    v, search, batch = loaded.tgt_vocab, replace(c.search, nbest=0), c.search.batch_sentences
    documents = reads_documents(model)
    if documents:                               # every line, as documents (long ones split)
        hyps = translate_documents(rec=dict(zip(ok, rec)) if c.dp.rerank else None)
        best = [hyps[i] for i in ok]
    elif c.dp.rerank:
        best = []
        block = RERANK_BLOCK * batch             # the n-best's decoder states are held for a block at a time
        kbest = replace(search, nbest=c.dp.rerank_k or c.search.beam)
        for a in range(0, len(ok), block):
            _, lists, states = decode_corpus(model, src[a:a + block], v, kbest, progress, shortlist=loaded.shortlist,
                                             keep_states=True)
            scored = [[(sc, v.encode(t, add_eos=False).tolist()) for t, sc in hl] for hl in lists]
            chosen: list[int] = []
            for b in range(0, len(lists), batch):
                part, whole = slice(b, b + batch), slice(a + b, a + b + batch)
                chosen += rerank_batch(model, src[whole], scored[part], rec[whole], spec.weight, v,
                                       states=states[part], top_words=c.dp.rerank_vocab)[0]
            best += [lists[n][j][0] for n, j in enumerate(chosen)]
    else:
        best = decode_corpus(model, src, v, search, progress, shortlist=loaded.shortlist) if ok else []
    if not documents:
        hyps = dict(zip(ok, best))
    if not c.dp.dp_out:
        return hyps, None
    out = [""] * len(lines.text)
    for i in nonempty:
        out[i] = words[i]
    ys = [v.encode(h, add_eos=False).tolist() for h in best]
    if documents:
        doc_of = doc_ids if doc_ids is not None else [""] * len(lines.text)
        runs: list[list[int]] = []
        for k, i in enumerate(ok):              # contiguous runs of one document
            if not runs or doc_of[i] != doc_of[ok[runs[-1][-1]]]:
                runs.append([])
            runs[-1].append(k)
        all_labels = predict_documents(model, runs, src, ys, rec, model.document.context_sents, v.pad_id,
                                       v.bos_id, batch, c.dp.dp_threshold)
    else:
        all_labels = []
        for b in range(0, len(ok), batch):
            part = slice(b, b + batch)
            all_labels += predict_batch(model, src[part], ys[part], rec[part], v.pad_id, v.bos_id,
                                        threshold=c.dp.dp_threshold)
    for i, lab in zip(ok, all_labels):
        out[i] = " ".join(completed_words(hat[i].split(), lab, model.dp_labels, spec.target))
    return hyps, out
