"""``doctrans translate``: batched beam search over a file, stdin, or a directory of documents.

Input lines are normalised, segmented (jieba), BPE-encoded with the training data's codes,
translated with beam search (``beam_search.py``), BPE-merged and Moses-detokenized (unless
``tokenized``). The output always has exactly as many lines as the input; an empty input line
gives an empty output line without running the model; a line longer than the model can read is
split, translated in pieces and joined back (``long_lines.py``). A directory input is mirrored
file by file under the output directory, so document files keep their boundaries; bad files are
reported and skipped (``collection.py``; which files, ``glob``, and the outputs' names,
``out_suffix``, are described there); the directory options given for a file or stdin are
ignored with a warning, and so is a context model given no documents (one document). An SGML
input gives text, or with ``output_format="sgml"`` its ``<DOC>`` blocks with the translations
(``data/sgml.format_sgml``). ``nbest`` > 0 also writes each line's best hypotheses with their
scores as JSON lines (``write_nbest``; sentence-level models). The checkpoint carries the BPE
codes and text settings, so it translates without its prepared dataset. Engines (``load_model``):
``native`` searches with ``beam_search`` (``quantize="int8"``: int8 output and feed-forward layers,
``quantize_int8``); ``ctranslate2`` runs the search of a ``doctrans export`` directory in
CTranslate2 (``ct2.py``) — the text processing, line handling and documents stay these.
"""
from __future__ import annotations

import json
import logging
import os
import sys
import time
import warnings
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

import numpy as np
import torch
from tqdm import tqdm

from doctrans.config import override_context
from doctrans.data.text import TextProcessor
from doctrans.data.vocab import Vocab
from doctrans.inference.beam_search import beam_search
from doctrans.inference.collection import GROUP_LINES, CollectionSummary, translate_collection
from doctrans.inference.documents import translate_documents
from doctrans.inference.shortlist import Shortlist
from doctrans.inference.long_lines import split_long_lines
from doctrans.inference.transform import InputSetup, InputTransform
from doctrans.models.build import build_model
from doctrans.models.interface import ReconstructionSpec, no_dp_message, no_reconstructor_message, reads_documents
from doctrans.runtime import distributed
from doctrans.runtime.checkpoint import config_of, load_checkpoint
from doctrans.runtime.device import resolve_device
from doctrans.utils import bars_off
from doctrans.utils.io import atomic_write_lines, atomic_write_text, decode_lines, read_lines

log = logging.getLogger(__name__)

SGML_SUFFIXES = (".sgm", ".sgml", ".xml")        # an input read as SGML (its <DOC> blocks are documents)
RERANK_BLOCK = 16     # --rerank: batches decoded before they are reranked (bounds the decoder states held)


@dataclass(frozen=True)
class TranslateConfig:
    checkpoint: str
    input: str = "-"                  # file, directory of document files, or "-" for stdin
    output: str = "-"                 # file, directory (when input is one), or "-" for stdout
    beam: int = 5
    lenpen: float = 1.0               # hypothesis score = log p / |y|^lenpen
    max_len_ratio: float = 1.5
    max_len_extra: int = 10
    batch_sentences: int = 64
    input_format: str = "raw"         # raw | tok (segmented, not BPE) | bpe
    tokenized: bool = False           # write tokenized (not detokenized) output
    prepared: str = ""                # dataset dir with the BPE codes; default: the checkpoint's
    threads: int = 0
    device: str = "auto"              # auto (cuda when available) | cpu | cuda
    docs: str = ""                    # doc_id<TAB>position per input line: documents for a context model
    # dropped pronouns (Wang 2019 thesis §4.3.3; docs/models.md §3.4): complete the input with a DP generator first
    dp_generator: str = ""            # DP generator checkpoint (doctrans train pipelines/dp/...)
    dp_input: str = "dp"              # dp: pronouns inserted; dpp: #DP# at detected positions
    dp_nbest: int = 1                 # N DP-completed variants per sentence (1 = 1-best)
    dp_combine: str = "mixture"       # mixture (one beam, log Σ w p) | max (best variant) | 1best
    dp_weights: str = "uniform"       # uniform 1/N (the thesis) | generator (normalised scores)
    dp_docs: str = ""                 # doc<TAB>position per input line, for the generator's context
    write_lattice: str = ""           # also write the DP input as Moses PLF confusion networks
    max_source_len: int = 0           # split lines over this many BPE units (0 = the model's limit)
    encoding_errors: str = "strict"   # strict: undecodable input is an error | replace: U+FFFD, warn
    resume: bool = False              # directory input: skip documents whose output is complete
    workers: int = 1                  # directory input: translating processes on this machine
    group_lines: int = GROUP_LINES    # directory input: documents translated together up to N lines
    explain_context: int = 0          # pictures of the context attention of N sampled sentences
    explain_dir: str = ""             # where they go [default: OUTPUT.explain/]
    context_options: tuple[str, ...] = ()   # KEY=VALUE overrides of the checkpoint's context config
    glob: str | None = None           # directory input: files taken (None: *SUFFIX, the most common top-level suffix)
    out_suffix: str = ""              # directory input: outputs' suffix replacing the source's (a.zh → a.en)
    output_format: str = "text"       # text | sgml (SGML input only: the input's <DOC> blocks, translations as <seg>)
    nbest: int = 0                    # write the N best hypotheses with scores to nbest_out (0 = none; N ≤ beam)
    nbest_out: str = ""               # JSON lines: {"line": i, "hypotheses": [{"text", "score", "tokens"}]}
    engine: str = "native"            # native (torch) | ctranslate2 (checkpoint: a `doctrans export` directory)
    compute_type: str = "default"     # ctranslate2: float32 | int8 | int8_float32 | … (default: as exported, float32)
    quantize: str = "none"            # native: none | int8 (dynamic int8 output layer + FFN, CPU)
    shortlist: str = ""               # lexical shortlist file (doctrans shortlist): the output layer over each
                                      # batch's candidate target tokens only (inference/shortlist.py; ctranslate2: vmap)
    # the reconstructor at test time (docs/models.md §2.8 "Decoding", §2.10–2.11; inference/reconstruction.py)
    rerank: str = ""                  # "reconstructor": rerank the k-best by s_beam + λ·log R(x̂|s(y))/|x̂|
    rerank_k: int = 0                 # candidates per sentence reranked (0 = beam)
    rerank_vocab: int = 0             # log R normalised over the N most frequent source words + the word itself
                                      # (0 = the whole source vocabulary, exact; an approximation for speed)
    dp_out: str = ""                  # write the DP-completed source a joint DP model predicts here
    dp_threshold: float | None = None  # dp_out: τ of the DP decision (pronoun where P(NONE) < τ; 0 = arg-max;
                                       # None = the model's model.reconstructor.dp_threshold)


def decode_corpus(model, src: list[np.ndarray] | list[list[np.ndarray]], tgt_vocab: Vocab, beam: int,
                  lenpen: float, max_len_ratio: float, max_len_extra: int, batch_sentences: int,
                  progress: bool = False, weights: list[list[float]] | None = None,
                  return_scores: bool = False, nbest: int = 0, shortlist=None, keep_states: bool = False):
    """Translate id sequences (each ending in ``</s>``) → target token strings, in input order.

    Sentences are sorted by length and batched ``batch_sentences`` at a time to limit padding.
    With ``weights``, each item of ``src`` is a list of variants decoded as one mixture
    (``beam_search(variants=R)``), ``weights[i]`` their mixture weights. Variants of weight 0
    are dropped first and sentences are grouped by their number of remaining variants, so a
    sentence with one completion costs one decoder row per hypothesis, not R (the result is the
    same: a zero-weight variant adds exactly nothing to the mixture). A batch then holds about
    ``batch_sentences`` variant rows. ``shortlist``: a ``Shortlist`` for ``beam_search``. With
    ``return_scores`` also the normalised scores. With ``nbest`` > 0 returns (translations, n-best
    lists): per sentence its ``nbest`` best hypotheses as (target token string, normalised score),
    best first (the translations are the same as without it); with ``keep_states`` as well
    (translations, n-best lists, their decoder states): per sentence, per hypothesis of its list,
    the states (len + 1, D) of ``<s> y`` (``beam_search(keep_states=True)``).
    """
    mixture = weights is not None
    if mixture:
        rows = [[x for x, w in zip(v, ws) if w > 0] for v, ws in zip(src, weights)]
        wts = [[w for w in ws if w > 0] for ws in weights]
    else:
        rows, wts = [[v] for v in src], [[1.0] for _ in src]
    out: list[str] = [""] * len(src)
    scores: list[float] = [0.0] * len(src)
    lists: list[list[tuple[str, float]]] = [[] for _ in src]
    states: list[list[torch.Tensor]] = [[] for _ in src]
    pad = tgt_vocab.pad_id
    device = next(model.parameters()).device
    bar = tqdm(total=len(src), unit="sent", disable=not progress or bars_off(), desc="translate")
    groups: dict[int, list[int]] = {}
    for i, v in enumerate(rows):
        groups.setdefault(len(v), []).append(i)
    for r_var, members in sorted(groups.items()):
        order = sorted(members, key=lambda i: max(len(x) for x in rows[i]))
        per_batch = max(1, batch_sentences // r_var) if mixture else batch_sentences
        for start in range(0, len(order), per_batch):
            idx = order[start:start + per_batch]
            width = max(len(x) for i in idx for x in rows[i])
            batch = torch.full((len(idx) * r_var, width), pad, dtype=torch.long)
            for n, i in enumerate(idx):
                for v, x in enumerate(rows[i]):
                    batch[n * r_var + v, :len(x)] = torch.from_numpy(x)
            w = torch.tensor([wts[i] for i in idx]) if r_var > 1 else None
            res = beam_search(model, batch.to(device), tgt_vocab, beam, lenpen, max_len_ratio, max_len_extra,
                              variants=r_var, weights=w, nbest=nbest, shortlist=shortlist, keep_states=keep_states)
            for n, i in enumerate(idx):
                out[i] = tgt_vocab.decode(res.tokens[n])
                scores[i] = res.scores[n]
                if nbest > 0:
                    lists[i] = [(tgt_vocab.decode(t), sc) for sc, t in res.nbest[n]]
                if keep_states:
                    states[i] = res.nbest_states[n]
            bar.update(len(idx))
    bar.close()
    if keep_states:
        return out, lists, states
    if nbest > 0:
        return out, lists
    return (out, scores) if return_scores else out


def text_processors(ckpt: dict, path: str, prepared: str = "") -> tuple[TextProcessor, TextProcessor]:
    """Source and target ``TextProcessor`` of a checkpoint: from the settings it carries
    (``text``, doctrans ≥ issue 18), or from a prepared dataset — ``prepared`` when given (it
    overrides the checkpoint's), else the dataset path stored by an older checkpoint. Raises
    FileNotFoundError naming what is missing and how to supply it."""
    exp = config_of(ckpt)
    langs = [exp.data.src_suffix.split(".")[-1], exp.data.tgt_suffix.split(".")[-1]]
    text = ckpt.get("text")
    if not prepared and isinstance(text, dict) and {"src", "tgt"} <= set(text):
        return TextProcessor.from_settings(text["src"]), TextProcessor.from_settings(text["tgt"])
    where = prepared or ckpt.get("prepared", "")
    try:
        return TextProcessor.from_prepared(where, langs[0]), TextProcessor.from_prepared(where, langs[1])
    except FileNotFoundError as e:
        if prepared:
            raise
        raise FileNotFoundError(
            f"{path} carries no BPE codes or text settings (saved by an older doctrans) and the dataset it "
            f"names, {where!r}, is not usable here ({e}): pass --prepared DIR, the prepared dataset it was "
            f"trained on") from None


@dataclass(frozen=True)
class LoadedModel:
    """A checkpoint loaded for translation, shared by the ``Translator``s of one checkpoint.

    model: the ``Seq2SeqModel`` in eval mode on its device; src_vocab / tgt_vocab; src_proc /
    tgt_proc: the checkpoint's text processing; chunk_len: the training length (``data.max_len``,
    the pieces of an over-long line); protect_dp: the checkpoint was trained with
    ``data.bpe_protect_dp``; key: (checkpoint, context options, device, prepared, quantize,
    shortlist), what was loaded; shortlist: the ``Shortlist`` every search of this model uses
    (``TranslateConfig.shortlist``), or None."""

    model: torch.nn.Module
    src_vocab: Vocab
    tgt_vocab: Vocab
    src_proc: TextProcessor
    tgt_proc: TextProcessor
    chunk_len: int
    protect_dp: bool
    key: tuple
    shortlist: Shortlist | None = None

    @staticmethod
    def key_of(cfg: TranslateConfig) -> tuple:
        if cfg.engine == "ctranslate2":
            return cfg.checkpoint, cfg.device, cfg.compute_type, cfg.threads, cfg.shortlist
        return cfg.checkpoint, tuple(cfg.context_options), cfg.device, cfg.prepared, cfg.quantize, cfg.shortlist

    @property
    def reads_documents(self) -> bool:
        """Whether the model translates documents with their context (``reads_documents``)."""
        return reads_documents(self.model)

    @property
    def max_target_len(self) -> int:
        return self.model.max_target_len

    def decode(self, ids: list[np.ndarray], cfg: TranslateConfig, progress: bool = False, nbest: int = 0):
        """``decode_corpus`` of ``ids`` with ``cfg``'s search settings and the model's shortlist."""
        return decode_corpus(self.model, ids, self.tgt_vocab, cfg.beam, cfg.lenpen, cfg.max_len_ratio,
                             cfg.max_len_extra, cfg.batch_sentences, progress, nbest=nbest, shortlist=self.shortlist)

    def decode_documents(self, docs: list[list[np.ndarray]], cfg: TranslateConfig,
                         progress: bool = False, rerank=None) -> list[list[str]]:
        """``documents.translate_documents`` of ``docs`` with ``cfg``'s search settings and the
        model's shortlist (``rerank``: a ``documents.DocumentReranker``)."""
        return translate_documents(self.model, docs, self.tgt_vocab, cfg.beam, cfg.lenpen, cfg.max_len_ratio,
                                   cfg.max_len_extra, cfg.batch_sentences, progress, shortlist=self.shortlist,
                                   rerank=rerank)

    @classmethod
    def load(cls, cfg: TranslateConfig) -> "LoadedModel":
        """Load ``cfg.checkpoint`` (with ``cfg.context_options``) onto ``cfg.device``. Raises like
        ``load_checkpoint``, ``build_model`` and ``text_processors``."""
        ckpt = load_checkpoint(cfg.checkpoint)
        exp = config_of(ckpt)
        src_vocab, tgt_vocab = Vocab(ckpt["vocab"]["src"]), Vocab(ckpt["vocab"]["tgt"])
        context = override_context(exp.context, cfg.context_options)       # e.g. a test-time ablation
        if context is not exp.context:
            log.info("context model %s with %s", context.type, ", ".join(cfg.context_options))
        model = build_model(exp.model, len(src_vocab), len(tgt_vocab), context=context)
        model.load_state_dict(ckpt["model"])
        model.to(resolve_device(cfg.device))
        model.eval()
        if cfg.quantize != "none":
            model = quantize_int8(model, cfg.quantize)
        src_proc, tgt_proc = text_processors(ckpt, cfg.checkpoint, cfg.prepared)
        shortlist = Shortlist.load(cfg.shortlist, src_vocab, tgt_vocab) if cfg.shortlist else None
        return cls(model, src_vocab, tgt_vocab, src_proc, tgt_proc, exp.data.max_len, exp.data.bpe_protect_dp,
                   cls.key_of(cfg), shortlist)


QUANTIZE = ("none", "int8")


def quantize_int8(model: torch.nn.Module, mode: str = "int8") -> torch.nn.Module:
    """``model`` with its ``quantizable_linears`` (output layer and feed-forward layers, the
    model contract) replaced by dynamically quantized int8 ones (``torch.ao.quantization.
    quantize_dynamic``: int8 weights with a scale per output channel — per tensor lost 3.4
    BLEU where this loses < 2 on ``tests/system/test_quantize.py`` —, activations quantized per
    batch at run time; CPU only). The other layers stay float32; a tied output layer gets its own int8 copy and
    the embedding keeps the float weights. Raises ValueError for another mode or a model not
    on the CPU."""
    if mode not in QUANTIZE:
        raise ValueError(f"quantize must be one of {', '.join(QUANTIZE)}, got {mode!r}")
    if mode == "none":
        return model
    if next(model.parameters()).device.type != "cpu":
        raise ValueError("--quantize int8 is dynamic int8 quantization for CPU decoding: use --device cpu")
    chosen = {id(m) for m in model.quantizable_linears()}
    names = {name for name, m in model.named_modules() if id(m) in chosen}
    from torch.ao.quantization import per_channel_dynamic_qconfig, quantize_dynamic

    engines = torch.backends.quantized.supported_engines
    if torch.backends.quantized.engine == "none" or torch.backends.quantized.engine not in engines:
        torch.backends.quantized.engine = next(e for e in ("x86", "fbgemm", "qnnpack") if e in engines)
    with warnings.catch_warnings():           # torch ≥ 2.10 marks quantized tensor creation as deprecated
        warnings.filterwarnings("ignore", message=".*quantize_per_tensor.*", category=UserWarning)
        warnings.filterwarnings("ignore", message=".*torch.ao.quantization is deprecated.*", category=DeprecationWarning)
        return quantize_dynamic(model, {n: per_channel_dynamic_qconfig for n in names}, dtype=torch.qint8)


def load_model(cfg: TranslateConfig):
    """The loaded model ``cfg`` asks for: ``LoadedModel.load`` (engine native) or an exported
    CTranslate2 directory (``ct2.CT2Model``, engine ctranslate2). Raises ValueError for an
    unknown engine, a checkpoint file given to ctranslate2 (naming the export command) or an
    export given to native, and like the loaders."""
    path = Path(cfg.checkpoint)
    if cfg.engine == "native":
        from doctrans.inference.ct2 import is_exported

        if is_exported(path):
            raise ValueError(f"{path} is an exported CTranslate2 model: translate it with --engine ctranslate2")
        if path.is_dir():
            raise ValueError(f"{path} is a directory: give a checkpoint file (e.g. {path / 'best.pt'}), or an "
                             "exported model directory with --engine ctranslate2")
        return LoadedModel.load(cfg)
    if cfg.engine != "ctranslate2":
        raise ValueError(f"engine must be native or ctranslate2, got {cfg.engine!r}")
    from doctrans.inference.ct2 import CT2Model, export_command, is_exported

    unsupported = [(cfg.quantize != "none", "--quantize (use --compute-type int8)"),
                   (bool(cfg.dp_generator), "--dp-generator"), (cfg.nbest > 0, "--nbest"),
                   (bool(cfg.rerank), "--rerank"), (bool(cfg.dp_out), "--dp-out"),
                   (cfg.dp_threshold is not None, "--dp-threshold"),
                   (cfg.explain_context > 0, "--explain-context"), (bool(cfg.context_options), "--context-option"),
                   (bool(cfg.prepared), "--prepared (the export carries its BPE codes)")]
    given = [name for on, name in unsupported if on]
    if given:
        raise ValueError(f"--engine ctranslate2 does not support {', '.join(given)}: use --engine native")
    if not is_exported(path):
        what = "a checkpoint" if path.is_file() else "not an exported model directory"
        raise ValueError(f"--engine ctranslate2 translates with an exported model directory; {path} is {what}: "
                         f"export it first with `{export_command(str(path))}` and pass -c DIR")
    return CT2Model(cfg.checkpoint, cfg.device, cfg.compute_type, cfg.threads, cfg.shortlist)


@dataclass(frozen=True)
class Translation:
    """``Translator.translate_detailed``'s result: lines (the output, one per input line); bpe:
    line index → its BPE source; hyps: line index → its BPE 1-best (non-empty lines); nbest
    (``cfg.nbest`` > 0): line index → its best hypotheses as (output text, normalised score),
    best first, for the non-empty lines (a line split into pieces, ``long_lines``, has one: its
    joined 1-best with score None)."""

    lines: list[str]
    bpe: dict[int, str]
    hyps: dict[int, str]
    nbest: dict[int, list[tuple[str, float | None]]] = field(default_factory=dict)
    dp_lines: list[str] | None = None       # cfg.dp_out: the DP-completed source, one per input line


class Translator:
    """A loaded model plus the text processing of its training data, for one ``TranslateConfig``.

    ``translate(lines) -> list[str]`` keeps line count and empty lines. A Translator does not
    change after construction: its config and input transform are the ones it was built with
    (``inputs``: ``InputSetup``, needed for ``cfg.dp_generator`` and for ``tok`` input to a
    checkpoint trained with ``data.bpe_protect_dp``); another config is another Translator,
    which ``with_config`` builds around the same loaded model. Raises ValueError for a config
    the inputs cannot serve, and like ``LoadedModel.load``.
    """

    def __init__(self, cfg: TranslateConfig, inputs: InputSetup | None = None, loaded: LoadedModel | None = None):
        inputs = inputs or InputSetup()
        if cfg.input_format not in ("raw", "tok", "bpe"):
            raise ValueError(f"input_format must be raw, tok or bpe, got {cfg.input_format!r}")
        if loaded is not None and loaded.key != LoadedModel.key_of(cfg):
            raise ValueError(f"this loaded model is {loaded.key}, the config asks for {LoadedModel.key_of(cfg)}")
        if cfg.dp_generator and inputs.transform is None:
            raise ValueError("--dp-generator needs a DP input transform: give the Translator "
                             "doctrans.dp.apply.dp_inputs(cfg) (the CLI does)")
        if cfg.nbest > cfg.beam:
            raise ValueError(f"--nbest {cfg.nbest} exceeds --beam {cfg.beam}: the search keeps {cfg.beam} hypotheses")
        if cfg.nbest and cfg.dp_generator:
            raise ValueError("--nbest is not supported with --dp-generator (several input variants per sentence)")
        self._cfg, self._inputs = cfg, inputs
        self._loaded = loaded or load_model(cfg)
        if cfg.nbest and self._loaded.reads_documents:
            raise ValueError(f"--nbest is for sentence-level models; {cfg.checkpoint} is a context model, whose "
                             "documents are translated with their 1-best context: translate without --nbest")
        if self._loaded.protect_dp and cfg.input_format == "tok" and not inputs.protect:
            raise ValueError(f"{cfg.checkpoint} was trained with data.bpe_protect_dp: tok input needs the DP "
                             "tokens BPE keeps whole (doctrans.dp.apply.dp_inputs(cfg), as the CLI gives)")
        if cfg.rerank or cfg.dp_out or cfg.rerank_k or cfg.rerank_vocab or cfg.dp_threshold is not None or (
                cfg.dp_generator and self._loaded.model.reconstruction.encoder_input == "original"):
            self._check_reconstruction(cfg)

    def _check_reconstruction(self, cfg: TranslateConfig) -> None:
        """ValueError for a ``rerank`` / ``dp_out`` request the model or the options cannot serve."""
        model, spec = self._loaded.model, self._loaded.model.reconstruction
        if cfg.rerank not in ("", "reconstructor"):
            raise ValueError(f"--rerank must be 'reconstructor', got {cfg.rerank!r}")
        if cfg.rerank_k and not cfg.rerank:
            raise ValueError("--rerank-k needs --rerank reconstructor")
        if cfg.rerank_vocab and not cfg.rerank:
            raise ValueError("--rerank-vocab needs --rerank reconstructor")
        if cfg.rerank_vocab < 0:
            raise ValueError(f"--rerank-vocab must be ≥ 0 (0 = the whole source vocabulary), got {cfg.rerank_vocab}")
        if cfg.rerank_k > cfg.beam:
            raise ValueError(f"--rerank-k {cfg.rerank_k} exceeds --beam {cfg.beam}: the search keeps {cfg.beam} "
                             "hypotheses")
        if reads_documents(model) and cfg.rerank and model.document.context_block > 0:
            raise ValueError(f"--rerank: {cfg.checkpoint} reads sub-documents (context_block); reranking "
                             "supports sentence models and models with N previous sentences as context")
        if reads_documents(model) and spec.target in ("dp", "dpp"):
            raise ValueError(f"{cfg.checkpoint} reads documents and reconstructs the {spec.target.upper()}-completed "
                             "source: translate supports a document model's --dp-out for the joint labeler "
                             "(target original) only")
        if cfg.rerank and not spec.reranks:
            raise ValueError(f"{cfg.checkpoint}: " + (no_reconstructor_message(model) if not spec.target else (
                "its reconstructor reads only the encoder states, so log R is the same for every candidate "
                "translation; --rerank reconstructor needs one that reads the decoder states "
                "(pipelines/dp/rec_dec.yaml, rec_both.yaml, rec_shared.yaml …)")))
        if cfg.dp_threshold is not None and not cfg.dp_out:
            raise ValueError("--dp-threshold sets the DP decision of --dp-out: give --dp-out FILE too")
        if cfg.dp_threshold is not None and not 0.0 <= cfg.dp_threshold <= 1.0:
            raise ValueError(f"--dp-threshold must be in [0, 1], got {cfg.dp_threshold}")
        if cfg.dp_out and not spec.predicts_dps:
            raise ValueError(f"{cfg.checkpoint}: " + no_dp_message(model))
        if cfg.rerank and cfg.nbest:
            raise ValueError("--nbest lists the beam's hypotheses: not with --rerank (its 1-best is the reranked one)")
        if spec.target in ("dp", "dpp"):
            if not cfg.dp_generator:
                raise ValueError(f"{cfg.checkpoint} reconstructs the {spec.target.upper()}-completed source x̂: give "
                                 "--dp-generator (the DP generator that makes x̂ at test time)")
            if cfg.dp_input != spec.target or cfg.dp_nbest != 1:
                raise ValueError(f"{cfg.checkpoint} reconstructs x̂_{spec.target.upper()}: give --dp-input "
                                 f"{spec.target} and --dp-nbest 1 (one x̂ per sentence)")
            if cfg.input_format == "bpe":
                raise ValueError("--dp-generator needs raw or tok input (the generator reads words, not BPE)")

    def with_config(self, cfg: TranslateConfig, inputs: InputSetup | None = None) -> "Translator":
        """A Translator for ``cfg`` (and ``inputs``) sharing this one's loaded model. Raises
        ValueError if ``cfg`` names another checkpoint, context options, device or dataset."""
        return Translator(cfg, inputs, self._loaded)

    @property
    def cfg(self) -> TranslateConfig:
        return self._cfg

    @property
    def inputs(self) -> InputSetup:
        """The ``InputSetup`` this Translator was built with (for ``with_config`` of the same inputs)."""
        return self._inputs

    @property
    def model(self) -> torch.nn.Module | None:
        """The torch model (None for ``engine`` ctranslate2)."""
        return self._loaded.model

    @property
    def reads_documents(self) -> bool:
        """Whether the model translates documents with their context."""
        return self._loaded.reads_documents

    @property
    def src_vocab(self) -> Vocab:
        return self._loaded.src_vocab

    @property
    def tgt_vocab(self) -> Vocab:
        return self._loaded.tgt_vocab

    @property
    def src_proc(self) -> TextProcessor:
        return self._loaded.src_proc

    @property
    def tgt_proc(self) -> TextProcessor:
        return self._loaded.tgt_proc

    def _to_bpe(self, lines: list[str]) -> list[str]:
        if self.cfg.input_format == "bpe":
            return lines
        if self.cfg.input_format == "tok":
            protect = self._inputs.protect if self._loaded.protect_dp else frozenset()
            return self.src_proc.apply_bpe(lines, protect=protect)
        return self.src_proc.encode(lines)

    def max_source_units(self) -> int:
        """Source BPE units a line may have (``</s>`` not counted): the model's positions
        (``max_target_len``, which bounds the source too) minus one, or ``--max-source-len`` if lower."""
        limit = self._loaded.max_target_len - 1
        return min(limit, self.cfg.max_source_len) if self.cfg.max_source_len > 0 else limit

    def translate(self, lines: list[str], progress: bool = False, name: str = "<input>",
                  doc_ids: list[str] | None = None, where: list[str] | None = None) -> list[str]:
        """Translations of ``lines``, one per line, empty for an empty line (``translate_detailed``)."""
        return self.translate_detailed(lines, progress, name, doc_ids, where).lines

    def translate_detailed(self, lines: list[str], progress: bool = False, name: str = "<input>",
                           doc_ids: list[str] | None = None, where: list[str] | None = None) -> Translation:
        """Translations of ``lines``, one per line, empty for an empty line, with each line's BPE
        source and 1-best (``Translation``). A line over ``max_source_units`` is split,
        translated piece by piece and joined (``long_lines``), with a warning naming ``name``
        and the line; with an input transform such a line (or one that DP insertions could push
        over: 2 × units + 1 > limit) is translated without it. ``doc_ids``: the document of
        each line (contiguous runs); a context model translates each document in order with its
        own context (``inference/documents.py``; default: all lines one document; the pieces of
        a split line are consecutive sentences there), a sentence model ignores them. ``where``:
        each line's location for warnings (``file:line``; default ``name:line``), for lines of
        several files translated together."""
        at = where if where is not None else [f"{name}:{i + 1}" for i in range(len(lines))]
        nonempty = [i for i, line in enumerate(lines) if line.strip()]
        c = self.cfg
        limit = self.max_source_units()
        bpe = dict(zip(nonempty, self._to_bpe([lines[i] for i in nonempty])))
        hyps: dict[int, str] = {}
        plain = nonempty
        transform = self._inputs.transform if c.dp_generator else None
        dp_lines = None
        spec = self.model.reconstruction if self.model is not None else ReconstructionSpec()   # (ctranslate2)
        if c.rerank or c.dp_out or (c.dp_generator and spec.encoder_input == "original"):
            # (a reconstructor model reading x: the generator makes x̂ only, never the encoder input)
            rec_hyps, dp_lines = self._translate_reconstructing(lines, nonempty, bpe, limit, at, progress, doc_ids)
            hyps.update(rec_hyps)
            plain = [i for i in nonempty if i not in rec_hyps]
        elif self.reads_documents:
            if transform is not None:
                raise ValueError("--dp-generator is for sentence-level +DP models, not context models")
            hyps.update(self._translate_documents(bpe, nonempty, doc_ids, limit, at, progress))
            plain = []
        elif transform is not None:
            plain = [i for i in nonempty if 2 * len(bpe[i].split()) + 1 > limit]
            short = [i for i in nonempty if 2 * len(bpe[i].split()) + 1 <= limit]
            for i in plain:
                log.warning("%s: too long for DP completion within the model's %d positions: translated "
                            "without it", at[i], limit + 1)
            if short:
                hyps.update(zip(short, self._translate_variants(transform, lines, short, progress)))
        if plain:
            split = split_long_lines([bpe[i] for i in plain], limit, chunk_len=self._loaded.chunk_len,
                                     locations=[at[i] for i in plain])
            ids = [self.src_vocab.encode(s) for s in split.pieces]
            res = self._loaded.decode(ids, c, progress, nbest=c.nbest)
            if c.nbest:
                res, lists = res
            hyps.update(zip(plain, split.join(res, len(plain))))
        nbest: dict[int, list[tuple[str, float | None]]] = {}
        if c.nbest and plain:
            pieces: dict[int, list[int]] = {}
            for p, k in enumerate(split.owner):
                pieces.setdefault(k, []).append(p)
            for k, i in enumerate(plain):
                ps = pieces.get(k, [])
                nbest[i] = lists[ps[0]] if len(ps) == 1 else [(hyps[i], None)]
        merged = self._postprocess([hyps[i] for i in nonempty])
        out = [""] * len(lines)
        for i, h in zip(nonempty, merged):
            out[i] = h
        if nbest:
            flat = iter(self._postprocess([h for i in sorted(nbest) for h, _ in nbest[i]]))
            nbest = {i: [(next(flat), sc) for _, sc in nbest[i]] for i in sorted(nbest)}
        return Translation(out, bpe, hyps, nbest, dp_lines)

    def _source_words(self, lines: list[str], nonempty: list[int], bpe: dict[int, str]) -> dict[int, str]:
        """Line index → the tokenized (segmented) source words of the non-empty lines."""
        c = self.cfg
        if c.input_format == "tok":
            return {i: lines[i] for i in nonempty}
        if c.input_format == "bpe":
            return {i: self.src_proc.merge_bpe(bpe[i]) for i in nonempty}
        return dict(zip(nonempty, self.src_proc.tokenize([lines[i] for i in nonempty])))

    def _translate_reconstructing(self, lines: list[str], nonempty: list[int], bpe: dict[int, str], limit: int,
                                  at: list[str], progress: bool, doc_ids: list[str] | None = None
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
        document's previous N labelled lines as context (``predict_documents``)."""
        from doctrans.inference.dp_output import completed_words
        from doctrans.inference.reconstruction import predict_batch, predict_documents, rerank_batch

        c, model, spec = self.cfg, self.model, self.model.reconstruction
        words = self._source_words(lines, nonempty, bpe)
        hat = bpe
        if spec.target in ("dp", "dpp"):
            tok: list[str | None] = [None] * len(lines)
            for i in nonempty:
                tok[i] = words[i]
            per_line = self._inputs.transform(tok)
            protect = self._inputs.transform.protect if self._loaded.protect_dp else frozenset()
            hat = dict(zip(nonempty, self.src_proc.apply_bpe([per_line[i][0][0] for i in nonempty], protect=protect)))
        enc_in = hat if spec.encoder_input == "annotated" else bpe
        ok = [i for i in nonempty if max(len(enc_in[i].split()), len(hat[i].split())) <= limit]
        for i in sorted(set(nonempty) - set(ok)):
            log.warning("%s: too long for the reconstructor (%d positions): translated without reranking or DP "
                        "prediction", at[i], limit + 1)
        src = [self.src_vocab.encode(enc_in[i]) for i in ok]
        rec = [self.src_vocab.encode(hat[i]) for i in ok]
        v, args = self.tgt_vocab, (c.beam, c.lenpen, c.max_len_ratio, c.max_len_extra, c.batch_sentences, progress)
        documents = reads_documents(model)
        if documents:                               # every line, as documents (long ones split)
            hyps = self._translate_documents(bpe, nonempty, doc_ids, limit, at, progress,
                                             rec=dict(zip(ok, rec)) if c.rerank else None)
            best = [hyps[i] for i in ok]
        elif c.rerank:
            best = []
            block = RERANK_BLOCK * c.batch_sentences  # the n-best's decoder states are held for a block at a time
            for a in range(0, len(ok), block):
                _, lists, states = decode_corpus(model, src[a:a + block], v, *args, nbest=c.rerank_k or c.beam,
                                                 shortlist=self._loaded.shortlist, keep_states=True)
                cands = [[v.encode(t, add_eos=False).tolist() for t, _ in hl] for hl in lists]
                chosen: list[int] = []
                for b in range(0, len(lists), c.batch_sentences):
                    part, whole = slice(b, b + c.batch_sentences), slice(a + b, a + b + c.batch_sentences)
                    chosen += rerank_batch(model, src[whole], cands[part], [[s for _, s in hl] for hl in lists[part]],
                                           rec[whole], spec.weight, v.pad_id, v.bos_id, states=states[part],
                                           top_words=c.rerank_vocab)[0]
                best += [lists[n][j][0] for n, j in enumerate(chosen)]
        else:
            best = decode_corpus(model, src, v, *args, shortlist=self._loaded.shortlist) if ok else []
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

    def _postprocess(self, hyps: list[str]) -> list[str]:
        """BPE 1-best strings → output text: BPE merged, then detokenized unless ``tokenized``."""
        merged = [self.tgt_proc.merge_bpe(h) for h in hyps]
        return merged if self.cfg.tokenized else self.tgt_proc.detokenize(merged)

    def _translate_documents(self, bpe: dict[int, str], nonempty: list[int], doc_ids: list[str] | None,
                             limit: int, at: list[str], progress: bool,
                             rec: dict[int, np.ndarray] | None = None) -> dict[int, str]:
        """Line index → translation of the non-empty lines, each document with its context.
        ``rec``: line index → its reconstruction target x̂ (ids): the k best of each such line
        are reranked by the reconstructor (``--rerank reconstructor``;
        ``reconstruction.DocumentRerank``) with the encoder states of its own document batch; a
        line split for length, or one without x̂, keeps the beam's 1-best."""
        split = split_long_lines([bpe[i] for i in nonempty], limit, chunk_len=self._loaded.chunk_len,
                                 locations=[at[i] for i in nonempty])
        doc_of = doc_ids if doc_ids is not None else [""] * (max(nonempty, default=0) + 1)
        pieces_of = Counter(split.owner)            # a line split for length: > 1 piece
        docs: list[list] = []
        targets: list[list] = []                    # per document, per piece: x̂ or None
        last = None
        for piece, k in zip(split.pieces, split.owner):
            d = doc_of[nonempty[k]]
            if not docs or d != last:
                docs.append([])
                targets.append([])
            docs[-1].append(self.src_vocab.encode(piece))
            targets[-1].append(rec.get(nonempty[k]) if rec is not None and pieces_of[k] == 1 else None)
            last = d
        reranker = None
        if rec is not None:
            from doctrans.inference.reconstruction import DocumentRerank

            c = self.cfg
            reranker = DocumentRerank(self.model, targets, self.model.reconstruction.weight, c.rerank_k or c.beam,
                                      self.tgt_vocab.pad_id, self.tgt_vocab.bos_id, c.rerank_vocab)
        out = self._loaded.decode_documents(docs, self.cfg, progress, rerank=reranker)
        return dict(zip(nonempty, split.join([h for doc in out for h in doc], len(nonempty))))

    def _translate_variants(self, transform: InputTransform, lines: list[str], nonempty: list[int],
                            progress: bool) -> list[str]:
        """Translation of input variants (``inference/transform.py``): the input transform turns
        each tokenized line into weighted source variants; they are BPE-encoded (its protected
        tokens kept whole when the checkpoint was trained with ``data.bpe_protect_dp``, else as
        any source, as the model saw them in training) and decoded by its combine mode: ``1best`` the first variant,
        ``mixture`` all in one beam (log Σ w p), ``max`` each alone, the best-scoring kept."""
        c = self.cfg
        if c.input_format == "bpe":
            raise ValueError("--dp-generator needs raw or tok input (the generator reads words, not BPE)")
        sub = [lines[i] for i in nonempty]
        tok: list[str | None] = [None] * len(lines)
        for i, t in zip(nonempty, sub if c.input_format == "tok" else self.src_proc.tokenize(sub)):
            tok[i] = t
        per_line = transform(tok)
        variants = [per_line[i] for i in nonempty]
        protect = transform.protect if self._loaded.protect_dp else frozenset()   # BPE as in training
        bpe = iter(self.src_proc.apply_bpe([x for vs in variants for x, _ in vs], protect=protect))
        src = [[self.src_vocab.encode(next(bpe)) for _ in vs] for vs in variants]
        weights = [[w for _, w in vs] for vs in variants]
        args = (self.tgt_vocab, c.beam, c.lenpen, c.max_len_ratio, c.max_len_extra, c.batch_sentences, progress)
        if transform.combine == "1best":
            return decode_corpus(self.model, [s[0] for s in src], *args, shortlist=self._loaded.shortlist)
        if transform.combine == "mixture":
            return decode_corpus(self.model, src, *args, weights=weights, shortlist=self._loaded.shortlist)
        real = [(k, v) for k, w in enumerate(weights) for v, wv in enumerate(w) if wv > 0]
        hyps, scores = decode_corpus(self.model, [src[k][v] for k, v in real], *args, return_scores=True,
                                     shortlist=self._loaded.shortlist)
        best: dict[int, tuple[float, str]] = {}
        for (k, _), h, s in zip(real, hyps, scores):
            if k not in best or s > best[k][0]:
                best[k] = (s, h)
        return [best[k][1] for k in range(len(src))]


InputsOf = Callable[[TranslateConfig], InputSetup]
"""Builds a config's ``InputSetup`` (e.g. ``doctrans.dp.apply.dp_inputs``); picklable when
given to ``run`` for ``--workers``."""


def build_translator(cfg: TranslateConfig, inputs_of: InputsOf | None = None) -> Translator:
    """``Translator(cfg, inputs_of(cfg))`` (no inputs without ``inputs_of``): a picklable
    factory for collection workers (``partial(build_translator, cfg, inputs_of)``)."""
    return Translator(cfg, inputs_of(cfg) if inputs_of is not None else None)


def read_input(path: str, errors: str = "strict") -> list[str]:
    """Lines of a file, or of stdin for ``-`` (named ``<stdin>`` in errors); see
    ``utils.io.decode_lines`` for ``errors``. Raises TextDecodeError naming the file and line."""
    if path == "-":
        buf = getattr(sys.stdin, "buffer", None)
        data = buf.read() if buf is not None else sys.stdin.read().encode("utf-8")
        return decode_lines(data, "<stdin>", errors)
    return read_lines(path, errors=errors)


def read_documents(cfg: TranslateConfig) -> tuple[list[str], list[str] | None]:
    """The input lines and their document ids: from ``cfg.docs`` (``doc_id<TAB>position`` per
    input line, as ``PREP/{split}.docs``), or the ``<DOC>`` blocks of an SGML input (``.sgm`` /
    ``.xml``: its first system's segments are the lines), else None (one document). Raises
    ValueError naming the file and line for a docs file whose line count differs from the
    input, positions that do not go up by one, a document that is not contiguous, or an SGML
    file without ``<DOC>`` blocks."""
    from doctrans.data.documents import read_doc_positions
    from doctrans.data.sgml import read_sgml

    if _is_sgml(cfg.input):
        if cfg.docs:
            raise ValueError(f"--docs given for an SGML input {cfg.input}: its <DOC> blocks are the documents")
        first = read_sgml(cfg.input)[0]
        return list(first.segments), first.doc_ids()
    lines = read_input(cfg.input, cfg.encoding_errors)
    if not cfg.docs:
        return lines, None
    names, doc, _ = read_doc_positions(Path(cfg.docs), len(lines))
    return lines, [names[d] for d in doc]


def process_threads(threads: int, processes: int) -> int:
    """torch threads of each of ``processes`` translating processes on this machine when
    ``threads`` (0 = the usable cores) is the machine's budget: max(1, budget // processes)."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    return max(1, (threads or cores) // max(1, processes))


def _gather_summaries(s: CollectionSummary) -> CollectionSummary | None:
    """All ranks' summaries added up on rank 0 (seconds: the slowest rank's), None elsewhere."""
    parts = distributed.all_gather(s)
    if distributed.rank() != 0:
        return None
    total = CollectionSummary(seconds=max(p.seconds for p in parts))
    for p in parts:
        total.add(p)
    return total


def translate_directory(cfg: TranslateConfig, inputs_of: InputsOf | None = None) -> Path:
    """Translate the directory ``cfg.input`` into ``cfg.output`` as a collection, with
    ``cfg.workers`` processes, and sharded by rank under torchrun (WORLD_SIZE > 1: a gloo/nccl
    process group only to gather the summary). Raises like ``translate_collection``."""
    world = distributed.env_world()
    local = int(os.environ.get("LOCAL_WORLD_SIZE", "1") or 1) if world > 1 else 1
    threads = process_threads(cfg.threads, local * max(1, cfg.workers))
    if world > 1 or cfg.workers > 1 or cfg.threads:
        torch.set_num_threads(threads)
    try:
        if world > 1:
            distributed.setup(resolve_device(cfg.device))
        translate_collection(partial(build_translator, cfg, inputs_of), Path(cfg.input), Path(cfg.output), cfg.resume,
                             cfg.encoding_errors, progress=distributed.env_rank() == 0, workers=cfg.workers,
                             threads=threads, shard=(distributed.rank(), distributed.world()),
                             gather=_gather_summaries if world > 1 else None, group_lines=cfg.group_lines,
                             pattern=cfg.glob, out_suffix=cfg.out_suffix)
    finally:
        distributed.shutdown()
    return Path(cfg.output)


def _warn_directory_options(cfg: TranslateConfig, name: str) -> None:
    """A warning for each directory-only option given for a file or stdin (they do nothing there)."""
    given = [(cfg.workers > 1, f"--workers {cfg.workers}"), (cfg.resume, "--resume"),
             (cfg.glob is not None, "--glob"), (bool(cfg.out_suffix), "--out-suffix")]
    for on, option in given:
        if on:
            log.warning("%s is for a directory input: ignored for %s (translated by this one process)", option, name)


def run(cfg: TranslateConfig, inputs_of: InputsOf | None = None,
        after: Callable[[Translator, Translation, list[str] | None], None] | None = None) -> Path | None:
    """Translate ``cfg.input`` to ``cfg.output``; returns the output path (None for stdout).

    ``inputs_of``: builds each Translator's ``InputSetup`` from ``cfg`` (``dp_generator`` needs
    one: ``doctrans.dp.apply.dp_inputs``). ``after``: called for a file or stdin with the
    translator, the ``Translation`` and the document ids once translated (e.g. the
    ``--explain-context`` pictures), before the output is written.

    A directory is translated as a collection (``translate_directory``: bad files skipped,
    ``resume``, ``workers``, torchrun ranks, summary). Raises FileNotFoundError for a missing
    input, ValueError (TextDecodeError) for undecodable input under ``encoding_errors="strict"``
    and for a file or stdin under torchrun (only a directory is sharded), CollectionError when
    documents of a collection failed (the others are written)."""
    inp = Path(cfg.input)
    if cfg.input != "-" and not inp.exists():
        raise FileNotFoundError(f"input not found: {inp}")
    _check_outputs(cfg)
    if cfg.input != "-" and inp.is_dir():
        if cfg.output == "-":
            raise ValueError(f"input {inp} is a directory: give --output DIR")
        return translate_directory(cfg, inputs_of)
    if distributed.env_world() > 1:
        raise ValueError("torchrun (WORLD_SIZE > 1) shards a directory of documents: translate a single file "
                         "or stdin without torchrun")
    name = "<stdin>" if cfg.input == "-" else cfg.input
    _warn_directory_options(cfg, name)
    if cfg.threads:
        torch.set_num_threads(cfg.threads)
    translator = build_translator(cfg, inputs_of)
    lines, doc_ids = read_documents(cfg)
    if doc_ids is None and translator.reads_documents and any(x.strip() for x in lines):
        log.warning("%s: no documents given: the context model translates the whole input as one document "
                    "(give documents with --docs FILE, an .sgm input, or a directory of document files)", name)
    t0 = time.time()
    res = translator.translate_detailed(lines, progress=cfg.output != "-", name=name, doc_ids=doc_ids)
    out = res.lines
    dt = time.time() - t0
    log.info("translated %d lines in %.1f s (%.1f sent/s, beam %d)", len(lines), dt,
             len(lines) / max(dt, 1e-9), cfg.beam)
    if after is not None:
        after(translator, res, doc_ids)
    if cfg.nbest:
        write_nbest(cfg.nbest_out, len(lines), res.nbest)
    if cfg.dp_out:
        atomic_write_lines(cfg.dp_out, res.dp_lines)
        log.info("wrote the predicted DP-completed source to %s (score it: doctrans score dp %s --base …)",
                 cfg.dp_out, cfg.dp_out)
    text = "".join(f"{line}\n" for line in out)
    if cfg.output_format == "sgml":
        from doctrans.data.sgml import format_sgml, read_sgml, set_attributes

        attrs = set_attributes(cfg.input)
        text = format_sgml(read_sgml(cfg.input)[0].docs, out, setid=attrs.get("setid", "doctrans"),
                           srclang=attrs.get("srclang", "zh"), trglang=attrs.get("trglang", "en"))
    if cfg.output == "-":
        sys.stdout.write(text)
        return None
    atomic_write_text(cfg.output, text)
    return Path(cfg.output)


def _is_sgml(path: str) -> bool:
    return path != "-" and Path(path).suffix.lower() in SGML_SUFFIXES


def _check_outputs(cfg: TranslateConfig) -> None:
    """ValueError for output options the input cannot have (before the model is loaded)."""
    if cfg.output_format not in ("text", "sgml"):
        raise ValueError(f"output_format must be text or sgml, got {cfg.output_format!r}")
    is_dir = cfg.input != "-" and Path(cfg.input).is_dir()
    if cfg.output_format == "sgml" and (is_dir or not _is_sgml(cfg.input)):
        raise ValueError(f"--output-format sgml needs an SGML input file ({', '.join(SGML_SUFFIXES)}), whose <DOC> "
                         f"blocks it mirrors; {cfg.input} is not one")
    if cfg.nbest and not cfg.nbest_out:
        raise ValueError("--nbest N needs --nbest-out FILE (where the n-best lists go)")
    if cfg.nbest_out and not cfg.nbest:
        raise ValueError("--nbest-out needs --nbest N (how many hypotheses per line)")
    if cfg.nbest and cfg.nbest_out == "-" and cfg.output == "-":
        raise ValueError("--nbest-out - and the translations both go to stdout: give --output FILE or a --nbest-out FILE")
    if cfg.nbest and is_dir:
        raise ValueError("--nbest is for a file or stdin input, not a directory")
    if cfg.dp_out and is_dir:
        raise ValueError("--dp-out is for a file or stdin input, not a directory")


def write_nbest(path: str, n_lines: int, nbest: dict[int, list[tuple[str, float | None]]]) -> None:
    """``--nbest-out``: one JSON object per input line, ``{"line": k (from 1), "hypotheses":
    [{"rank": r (from 1), "text": …, "score": normalised log-prob or null}, …]}``, best first,
    an empty list for an empty line; written atomically, or to stdout for ``-``."""
    rows = []
    for i in range(n_lines):
        hyps = [{"rank": r + 1, "text": t, "score": None if sc is None else round(sc, 6)}
                for r, (t, sc) in enumerate(nbest.get(i, []))]
        rows.append(json.dumps({"line": i + 1, "hypotheses": hyps}, ensure_ascii=False))
    if path == "-":
        sys.stdout.write("".join(f"{r}\n" for r in rows))
    else:
        atomic_write_lines(path, rows)
