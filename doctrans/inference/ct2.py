"""CTranslate2 (Klein et al. 2020, github.com/OpenNMT/CTranslate2): ``doctrans export --format
ctranslate2`` (written by ``inference/export.py``) and ``doctrans translate --engine ctranslate2``.

Export. A checkpoint whose model is a standard Transformer (``Seq2SeqModel.portable()``: the
sentence-level Transformer, and the concatenation model, whose input is one sequence) is written
as a CTranslate2 ``TransformerSpec`` (float32; ``--compute-type`` converts at load time) into a
directory that also holds ``doctrans.json``: the BPE codes and text settings of both sides, the
training length (pieces of over-long lines), the model's positions and its source context, so the
directory translates without the checkpoint or its dataset. The mapping: pre-/post-norm as the
model (a final LayerNorm per stack only pre-norm), embeddings scaled by ``embed_scale``
(sqrt(d_model)), doctrans' own sinusoid table as the position encodings (interleaved sin/cos,
which CTranslate2's built-in table is not), fused QKV and KV projections as they are, the tied
output layer copied, LayerNorm epsilon of the model. The output layer gets a bias of −1e9 on
``<pad>`` and ``<s>``: native search never emits them (``beam_search._Columns.mask_specials``).

Translation. ``CT2Model`` stands in for ``translate.LoadedModel`` inside a ``translate.Translator``,
so text processing, empty lines, over-long lines, documents and output format are the native
ones; only the search runs in CTranslate2. Sentences are sorted by length and batched
``batch_sentences`` at a time as natively; a concatenation model's source is built as natively
(``portable`` describes it: the previous N non-empty sentences of the document, each with its
``</s>``, cut to the newest ``max_context_tokens``). Differences from native search [I]: the
maximum output length is per batch in CTranslate2, so each hypothesis is cut to its own native
limit afterwards (identical for greedy search; a beam hypothesis that reaches the limit may
differ), and CTranslate2's beam search stops and normalises by length in its own way
(``length_penalty`` = ``lenpen``), so beam outputs can differ slightly; greedy outputs equal native
ones up to float rounding (``tests/integration/test_ct2_export.py``); on the TVsub test the
quickstart model's beam-5 float32 translations were native's exactly (benchmarks/RESULTS.md,
"decode engines").

Target context (the target-side concatenation model, ``models/context/tgt_concat.py``): the
export records ``target_context`` N and ``max_target_context_tokens``; documents are then
translated in order, position k of every document after position k − 1 of all of them, each
sentence with its document's own previous N translations as CTranslate2's forced
``target_prefix`` (``<s>``/``</s>`` included: the native decoder's prefix, ``CT2Model.target_prefix``)
and ``return_alternatives=False``; the prefix tokens come back at the head of each hypothesis and
are cut off. CTranslate2 (4.x) forces the prefix a token per step and divides a hypothesis'
log-probability by its length *with* the prefix, which weakens the length normalisation (shorter
translations, fewer pronouns); the search keeps its ``beam`` finished hypotheses and
``prefix_free_best`` re-ranks them by native's normalisation, so beam outputs are native's
(the shipped document model: 2 of the TVsub test's 1,154 lines differ, float rounding; without
the re-ranking 292 did, −0.79 BLEU). Greedy outputs equal the native engine's
(``tests/integration/test_ct2_export.py``). ``--no-repeat-ngram-size`` is CTranslate2's
``no_repeat_ngram_size`` for sentences; it is not given with a target prefix (CTranslate2 would
count the previous lines' prefix as part of the hypothesis; the native search blocks repeats
within the sentence only).
``--history-chunk`` C > 0 (or ``auto``: ``documents.history_chunk_for``) cuts each document into
pieces of C lines after N warm-up lines, as the native engine does (``documents.in_history_pieces``):
the pieces are translated side by side as independent documents, C + N sequential batches instead
of a document's length; outputs equal native's with the same C (tested), and with
``--warmup-beam`` W the warm-up lines are searched with beam W in calls of their own, as natively.

Shortlists. ``--shortlist FILE`` (a ``doctrans shortlist`` vocabulary map, CTranslate2's own
``vmap`` format) is checked against the export's vocabularies and given to CTranslate2 as the
model's ``vmap.txt``: the export is loaded from a temporary directory of links to its files plus
the map (the export itself is not changed), and every batch is translated with ``use_vmap``.
"""
from __future__ import annotations

import json
import logging
import math
from dataclasses import replace
from pathlib import Path

import numpy as np
from tqdm import tqdm

from doctrans.data.text import TextProcessor
from doctrans.data.vocab import Vocab
from doctrans.inference.config import COMPUTE_TYPES, SearchOptions
from doctrans.inference.documents import history_chunk_for, in_history_pieces
from doctrans.inference.engine import Decoded
from doctrans.utils import bars_off

log = logging.getLogger(__name__)

META = "doctrans.json"
FORMAT = "doctrans-ctranslate2"
FORMAT_VERSION = 1


def _with_vmap(ct2, path: Path, vmap: Path, **kwargs):
    """``ct2.Translator`` of the export ``path`` with ``vmap`` as its vocabulary map: loaded from
    a temporary directory of symbolic links to the export's files and a copy of the map as
    ``vmap.txt`` (CTranslate2 reads the directory when the translator is built; the directory
    is removed right after)."""
    import shutil
    import tempfile

    with tempfile.TemporaryDirectory(prefix="doctrans-ct2-") as tmp:
        for f in path.iterdir():
            if f.name != "vmap.txt":
                (Path(tmp) / f.name).symlink_to(f.resolve())
        shutil.copyfile(vmap, Path(tmp) / "vmap.txt")
        return ct2.Translator(tmp, **kwargs)


class MissingCTranslate2(ImportError, RuntimeError):
    """CTranslate2 is not installed (an ImportError; a RuntimeError, so the CLI prints one line)."""


def require_ctranslate2():
    """The ``ctranslate2`` module. Raises MissingCTranslate2 saying how to install it."""
    try:
        import ctranslate2
    except ImportError:
        raise MissingCTranslate2("CTranslate2 is not installed: pip install 'doctrans[ct2]' "
                                 "(or pip install ctranslate2)") from None
    return ctranslate2


def is_exported(path: str | Path) -> bool:
    """Whether ``path`` is a directory written by ``export_ctranslate2``."""
    return (Path(path) / META).is_file()


def export_command(checkpoint: str) -> str:
    return f"doctrans export --format ctranslate2 -c {checkpoint} -o DIR"


# --- translation ---------------------------------------------------------------------------


def prefix_free_best(hypotheses: list[list[str]], scores: list[float], prefix_len: int,
                     lenpen: float) -> list[str]:
    """The best of CTranslate2's finished hypotheses for a forced ``target_prefix`` of
    ``prefix_len`` tokens, ranked as the native search ranks them. CTranslate2 (4.x) divides a
    hypothesis' log-probability (the prefix's tokens not counted) by (prefix_len + n + 1)^lenpen, n
    its tokens after the prefix without ``</s>``; the native search (``beam_search``, fairseq's
    normalisation) by (n + 1)^lenpen. Counting the prefix weakens the length normalisation, so
    shorter translations win (on the TVsub test: 80 fewer words in 200 lines, fewer pronouns).
    The two searches keep and finish the same hypotheses (both rank by the raw sum); only the
    final choice differs, so re-ranking CTranslate2's ``beam`` finished hypotheses
    (``num_hypotheses=beam``, ``return_scores``) gives native's choice. hypotheses: token lists
    with the prefix at their head; scores: CTranslate2's normalised scores. → the chosen list
    (prefix still at its head; the first of equals)."""
    if not prefix_len or not lenpen:
        return hypotheses[0]
    best, best_score = hypotheses[0], -math.inf
    for h, sc in zip(hypotheses, scores):
        n = len(h) - prefix_len
        native = sc * ((prefix_len + n + 1) / (n + 1)) ** lenpen
        if native > best_score:
            best, best_score = h, native
    return best


class CT2Model:
    """An exported directory loaded into a ``ctranslate2.Translator``: the CTranslate2
    ``engine.Engine`` (what ``translator.Translator`` needs of a loaded model), with the search in
    CTranslate2. ``model`` is None (no torch module); ``shortlist`` None (a ``--shortlist`` is
    CTranslate2's vocabulary map, ``use_vmap``). ``threads``: CTranslate2's intra-op threads
    (0: torch's current count, which ``translate.translate_input`` and collection workers set). Raises
    MissingCTranslate2 without the package, ValueError for a ``doctrans.json`` that is not a
    readable export or an unknown compute type, and what ``ctranslate2.Translator`` raises (e.g.
    a compute type the device lacks)."""

    model = None
    shortlist = None

    def __init__(self, path: str, device: str, compute_type: str, threads: int, shortlist: str):
        ct2 = require_ctranslate2()
        meta_path = Path(path) / META
        try:
            meta = json.loads(meta_path.read_text(encoding="utf-8"))
        except json.JSONDecodeError as e:
            raise ValueError(f"{meta_path}: not valid JSON ({e}): export the model again") from None
        if not isinstance(meta, dict) or meta.get("format") != FORMAT or meta.get("version", 0) > FORMAT_VERSION:
            raise ValueError(f"{meta_path}: not a doctrans CTranslate2 export of a version this doctrans reads")
        if compute_type not in COMPUTE_TYPES:
            raise ValueError(f"compute type must be one of {', '.join(COMPUTE_TYPES)}, got {compute_type!r}")
        self.key = (path, device, compute_type, threads, shortlist)   # translate.LoadedModel.key_of
        if device == "auto":
            device = "cuda" if ct2.get_cuda_device_count() > 0 else "cpu"
        import torch

        # threads: this process's budget, as torch's (``translate.translate_input`` and collection workers set it)
        n_threads = threads or torch.get_num_threads()
        self.src_vocab, self.tgt_vocab = Vocab(meta["src_vocab"]), Vocab(meta["tgt_vocab"])
        self.use_vmap = bool(shortlist)
        if shortlist:
            from doctrans.inference.shortlist import Shortlist

            Shortlist.load(shortlist, self.src_vocab, self.tgt_vocab)          # a clear error for a wrong map
            self.translator = _with_vmap(ct2, Path(path), Path(shortlist), device=device, compute_type=compute_type,
                                         intra_threads=n_threads)
        else:
            self.translator = ct2.Translator(str(path), device=device, compute_type=compute_type,
                                             intra_threads=n_threads)
        log.info("CTranslate2 %s: %s on %s, compute type %s, %d thread(s)%s", ct2.__version__, path, device,
                 compute_type, n_threads, f", shortlist {shortlist}" if shortlist else "")
        try:
            self.src_proc = TextProcessor.from_settings(meta["text"]["src"])
            self.tgt_proc = TextProcessor.from_settings(meta["text"]["tgt"])
        except ValueError as e:
            raise ValueError(f"{meta_path}: {e}") from None
        self.chunk_len, self.protect_dp = int(meta["chunk_len"]), bool(meta["protect_dp"])
        self.max_target_len = int(meta["max_target_len"])
        self.source_context, self.max_context_tokens = int(meta["source_context"]), int(meta["max_context_tokens"])
        self.target_context = int(meta.get("target_context", 0))
        self.max_target_context_tokens = int(meta.get("max_target_context_tokens", 0))

    @property
    def reads_documents(self) -> bool:
        return self.source_context > 0 or self.target_context > 0

    def decode(self, ids: list[np.ndarray], search: SearchOptions, progress: bool = False,
               own_len: list[int] | None = None) -> Decoded:
        """Source ids (each ending in ``</s>``) → target BPE strings, in input order (see the
        module doc). ``own_len``: the length (with ``</s>``) that sets each output's maximum
        length (default: its source's; a concatenation's: its own sentence's). With ``search.nbest``
        > 0 also the n-best lists (``Decoded.nbest``) as ``decode.decode_corpus`` gives them: per
        sentence its ``nbest`` best hypotheses as (target BPE string, score), best first, the score
        CTranslate2's (``return_scores``: the sum of the token log-probabilities / length^lenpen,
        as the beam ranks them; native's normalisation, ``beam_search``)."""
        nbest = search.nbest
        if nbest > search.beam:
            raise ValueError(f"--nbest {nbest} exceeds --beam {search.beam}: the search keeps {search.beam} hypotheses")
        lens = own_len if own_len is not None else [len(x) for x in ids]
        cap = self.max_target_len - 1
        limits = [min(math.ceil(n * search.max_len_ratio) + search.max_len_extra, cap) for n in lens]
        order = sorted(range(len(ids)), key=lambda i: len(ids[i]))
        tokens = self.src_vocab.tokens
        out = [""] * len(ids)
        lists: list[list[tuple[str, float]]] = [[] for _ in ids]
        bar = tqdm(total=len(ids), unit="sent", disable=not progress or bars_off(), desc="translate (ctranslate2)")
        for start in range(0, len(order), search.batch_sentences):
            idx = order[start:start + search.batch_sentences]
            src = [[tokens[j] for j in ids[i][:-1]] for i in idx]          # </s> added by the model (add_source_eos)
            res = self.translator.translate_batch(
                src, beam_size=search.beam, length_penalty=search.lenpen, max_decoding_length=max(limits[i] for i in idx) + 1,
                min_decoding_length=0, max_input_length=self.max_target_len, num_hypotheses=max(1, nbest),
                no_repeat_ngram_size=search.no_repeat_ngram_size,
                return_scores=nbest > 0, use_vmap=self.use_vmap)
            for i, r in zip(idx, res):
                out[i] = " ".join(r.hypotheses[0][:limits[i]])
                if nbest:
                    lists[i] = [(" ".join(h[:limits[i]]), float(sc)) for h, sc in zip(r.hypotheses, r.scores)]
            bar.update(len(idx))
        bar.close()
        return Decoded(out, lists if nbest else None)

    def decode_variants(self, variants, weights, combine: str, search: SearchOptions, progress: bool = False):
        """Input variants (``--dp-generator``) need the native engine: ValueError."""
        raise ValueError("--dp-generator needs the native engine (--engine native)")

    def decode_documents(self, docs: list[list[np.ndarray]], search: SearchOptions, progress: bool = False,
                         rerank=None, given: dict | None = None, warmup: list[int] | None = None) -> list[list[str]]:
        """Per document, per sentence, source ids → target BPE strings; each source is the
        concatenation the model reads (its previous ``source_context`` sentences, cut to the
        newest ``max_context_tokens``, then itself; the oldest context tokens also dropped where
        the whole would exceed the model's positions). ``rerank`` (a reconstructor's, the native
        engine's ``LoadedModel.decode_documents``) and ``given`` are not supported: ValueError.
        ``warmup``: per document, how many first lines are a history piece's warm-up (searched with
        ``search.warmup_beam``, as ``documents.translate_documents`` does)."""
        if given:
            raise ValueError("translations given as context need the native engine")
        if rerank is not None:
            raise ValueError("--rerank reconstructor needs the native engine (a CTranslate2 export has no reconstructor)")
        n, m = self.source_context, self.max_context_tokens
        srcs, own = [], []
        for doc in docs:
            for k, x in enumerate(doc):
                ctx = np.concatenate(doc[max(0, k - n):k]) if k else np.zeros(0, dtype=np.int64)
                if m and len(ctx) > m:
                    ctx = ctx[-m:]
                room = self.max_target_len - len(x)
                ctx = ctx[len(ctx) - max(0, min(room, len(ctx))):]
                srcs.append(np.concatenate([ctx, x]))
                own.append(len(x))
        if self.target_context > 0:
            chunk = history_chunk_for(docs, search.history_chunk, search.batch_sentences)
            if chunk:
                result = in_history_pieces(docs, chunk, self.target_context,
                                           lambda piece_docs, warm: self.decode_documents(
                                               piece_docs, replace(search, history_chunk=0), progress, warmup=warm))
                if result is not None:
                    return result
            return self._decode_rolling(docs, srcs, own, search, progress, warmup)
        flat = iter(self.decode(srcs, replace(search, nbest=0), progress, own_len=own).hyps)
        return [[next(flat) for _ in doc] for doc in docs]

    def target_prefix(self, history: list[list[str]]) -> list[str]:
        """CTranslate2's ``target_prefix`` for a sentence whose previous translations (token
        lists, oldest first) are ``history`` (its newest ``target_context``): the native
        decoder's forced prefix ``<s> y </s> <s> y' </s>`` (``models/context/tgt_concat.py``,
        cut to the newest ``max_target_context_tokens`` after a leading ``<s>``) without its
        first ``<s>`` (CTranslate2's start token), then ``<s>``; [] without history."""
        seq = [t for h in history[-self.target_context:] for t in ("<s>", *h, "</s>")]
        cap = self.max_target_context_tokens
        if cap and len(seq) > cap:
            seq = ["<s>"] + seq[len(seq) - cap + 1:]
        return seq[1:] + ["<s>"] if seq else []

    def _decode_rolling(self, docs, srcs, own, search: SearchOptions, progress: bool, warmup: list[int] | None = None) -> list[list[str]]:
        """A target-context model (``PortableTransformer.target_context``): position k of every
        document in one run (batches of ``batch_sentences``, by length) after position k − 1 of
        all of them, each with its document's own previous translations as a forced
        ``target_prefix``; the prefix comes back with each hypothesis and is cut off. A
        document's first ``warmup[d]`` lines are searched with ``search.warmup_beam`` (when it is
        neither 0 nor ``search.beam``) in batches of their own."""
        if search.beam < 1:
            raise ValueError(f"beam must be ≥ 1, got {search.beam}")
        tokens = self.src_vocab.tokens
        cap = self.max_target_len - 1
        start = np.cumsum([0] + [len(d) for d in docs])
        out: list[list[list[str]]] = [[[] for _ in d] for d in docs]
        bar = tqdm(total=int(start[-1]), unit="sent", disable=not progress or bars_off(),
                   desc="translate (ctranslate2, rolling history)")
        for k in range(max((len(d) for d in docs), default=0)):
            step = sorted((d for d in range(len(docs)) if k < len(docs[d])), key=lambda d: len(srcs[start[d] + k]))
            warm = search.warmup_beam not in (0, search.beam) and warmup is not None
            groups = [(search.beam, [d for d in step if not (warm and k < warmup[d])]),
                      (search.warmup_beam, [d for d in step if warm and k < warmup[d]])]
            for beam, chunk in ((b, g[a:a + search.batch_sentences]) for b, g in groups
                                for a in range(0, len(g), search.batch_sentences)):
                src = [[tokens[j] for j in srcs[start[d] + k][:-1]] for d in chunk]
                prefix = [self.target_prefix(out[d][:k]) for d in chunk]
                limits = [min(math.ceil(own[start[d] + k] * search.max_len_ratio) + search.max_len_extra, cap) for d in chunk]
                res = self.translator.translate_batch(
                    src, target_prefix=prefix, return_alternatives=False, beam_size=beam,
                    length_penalty=search.lenpen, max_decoding_length=max(l + len(p) for l, p in zip(limits, prefix)) + 1,
                    min_decoding_length=0, max_input_length=self.max_target_len, num_hypotheses=beam,
                    return_scores=True, use_vmap=self.use_vmap)
                for d, p, lim, r in zip(chunk, prefix, limits, res):
                    best = prefix_free_best(r.hypotheses, r.scores, len(p), search.lenpen)
                    out[d][k] = list(best[len(p):len(p) + lim])
                bar.update(len(chunk))
        bar.close()
        return [[" ".join(h) for h in d] for d in out]
