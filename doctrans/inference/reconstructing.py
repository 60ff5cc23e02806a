"""Reconstruction decoding (``translate --rerank reconstructor`` / ``--dp-out``; docs/models.md §2.8
"Decoding", §2.10–2.12): beam search with the k best reranked by the model's reconstructor, and
the DP-completed source a joint DP model predicts. ``Translator`` calls ``translate_reconstructing``;
the reconstructor passes themselves are ``inference/reconstruction.py``."""
from __future__ import annotations

import logging
from collections.abc import Callable

from doctrans.inference.config import TranslateConfig
from doctrans.inference.decode import decode_corpus
from doctrans.inference.dp_output import completed_words
from doctrans.inference.loading import LoadedModel
from doctrans.inference.reconstruction import predict_batch, predict_documents, rerank_batch
from doctrans.inference.transform import InputSetup
from doctrans.models.interface import reads_documents

log = logging.getLogger(__name__)

RERANK_BLOCK = 16     # --rerank: batches decoded before they are reranked (bounds the decoder states held)


def translate_reconstructing(loaded: LoadedModel, cfg: TranslateConfig, inputs: InputSetup, lines: list[str],
                             nonempty: list[int], bpe: dict[int, str], words: dict[int, str], limit: int,
                             at: list[str], progress: bool, doc_ids: list[str] | None,
                             translate_documents: Callable[..., dict[int, str]]
                             ) -> tuple[dict[int, str], list[str] | None]:
    """``rerank`` / ``dp_out`` (``inference/reconstruction.py``): the reconstruction target x̂ of
    each line (the source itself for spec.target "original", else the DP generator's 1-best
    DP/DPP completion), the encoder input (x, or x̂ for encoder_input "annotated"), beam
    search — with ``rerank`` its k best reranked in one teacher-forced reconstructor pass per
    batch —, and with ``dp_out`` the model's DP labels turned into the DP-completed source
    words. Returns (line → BPE 1-best, the DP-completed lines or None). A line over the
    model's length is left out (translated plainly by the caller; its DP line is the source).
    A model that reads documents (§2.12's cross-sentence DP labelling; ``dp_out`` only, target
    original) translates every line as documents (``doc_ids``) and labels each line with its
    document's previous N labelled lines as context (``predict_documents``).
    ``words``: line index → its segmented source words (``inputs``' transform makes x̂ from them);
    ``translate_documents(rec=…)``: the Translator's translation of these lines as documents (a
    model that reads documents)."""
    c, model, spec = cfg, loaded.model, loaded.model.reconstruction
    hat = bpe
    if spec.target in ("dp", "dpp"):
        tok: list[str | None] = [None] * len(lines)
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
    v, args = loaded.tgt_vocab, (c.beam, c.lenpen, c.max_len_ratio, c.max_len_extra, c.batch_sentences, progress)
    documents = reads_documents(model)
    if documents:                               # every line, as documents (long ones split)
        hyps = translate_documents(rec=dict(zip(ok, rec)) if c.rerank else None)
        best = [hyps[i] for i in ok]
    elif c.rerank:
        best = []
        block = RERANK_BLOCK * c.batch_sentences  # the n-best's decoder states are held for a block at a time
        for a in range(0, len(ok), block):
            _, lists, states = decode_corpus(model, src[a:a + block], v, *args, nbest=c.rerank_k or c.beam,
                                             shortlist=loaded.shortlist, keep_states=True)
            cands = [[v.encode(t, add_eos=False).tolist() for t, _ in hl] for hl in lists]
            chosen: list[int] = []
            for b in range(0, len(lists), c.batch_sentences):
                part, whole = slice(b, b + c.batch_sentences), slice(a + b, a + b + c.batch_sentences)
                chosen += rerank_batch(model, src[whole], cands[part], [[s for _, s in hl] for hl in lists[part]],
                                       rec[whole], spec.weight, v.pad_id, v.bos_id, states=states[part],
                                       top_words=c.rerank_vocab)[0]
            best += [lists[n][j][0] for n, j in enumerate(chosen)]
    else:
        best = decode_corpus(model, src, v, *args, shortlist=loaded.shortlist) if ok else []
    if not documents:
        hyps = dict(zip(ok, best))
    if not c.dp_out:
        return hyps, None
    out = [""] * len(lines)
    for i in nonempty:
        out[i] = words[i]
    ys = [v.encode(h, add_eos=False).tolist() for h in best]
    if documents:
        doc_of = doc_ids if doc_ids is not None else [""] * len(lines)
        runs: list[list[int]] = []
        for k, i in enumerate(ok):              # contiguous runs of one document
            if not runs or doc_of[i] != doc_of[ok[runs[-1][-1]]]:
                runs.append([])
            runs[-1].append(k)
        all_labels = predict_documents(model, runs, src, ys, rec, model.document.context_sents, v.pad_id,
                                       v.bos_id, c.batch_sentences, c.dp_threshold)
    else:
        all_labels = []
        for b in range(0, len(ok), c.batch_sentences):
            part = slice(b, b + c.batch_sentences)
            all_labels += predict_batch(model, src[part], ys[part], rec[part], v.pad_id, v.bos_id,
                                        threshold=c.dp_threshold)
    for i, lab in zip(ok, all_labels):
        out[i] = " ".join(completed_words(hat[i].split(), lab, model.dp_labels, spec.target))
    return hyps, out
