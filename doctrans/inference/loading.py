"""Loading a model to translate with: a checkpoint (``LoadedModel``, the native engine: model,
vocabularies, the text processors it carries, ``text_processors``; int8 dynamic quantization,
``quantize_int8``) or an exported CTranslate2 directory (``ct2.CT2Model``); ``load_model`` picks by
``ModelOptions.engine`` and returns an ``engine.Engine``."""
from __future__ import annotations

import logging
import warnings
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from doctrans.data.text import TextProcessor
from doctrans.data.vocab import Vocab
from doctrans.inference.config import ModelOptions, SearchOptions, TranslateConfig
from doctrans.inference.decode import decode_corpus
from doctrans.inference.documents import translate_documents
from doctrans.inference.engine import Decoded, Engine
from doctrans.inference.shortlist import Shortlist
from doctrans.models.interface import reads_documents
from doctrans.runtime.checkpoint import build_translation_model, config_of, load_checkpoint
from doctrans.runtime.device import resolve_device

log = logging.getLogger(__name__)


def text_processors(ckpt: dict, path: str, prepared: str = "", exp=None) -> tuple[TextProcessor, TextProcessor]:
    """Source and target ``TextProcessor`` of a checkpoint: from the settings it carries
    (``text``, doctrans ≥ issue 18), or from a prepared dataset — ``prepared`` when given (it
    overrides the checkpoint's), else the dataset path stored by an older checkpoint. Raises
    FileNotFoundError naming what is missing and how to supply it, ValueError naming ``path`` for
    text settings this doctrans cannot read (a newer version, a malformed recaser table). ``exp``:
    the checkpoint's experiment config when the caller has built it (``config_of(ckpt)``), read
    only for a dataset's language suffixes."""
    text = ckpt.get("text")
    if not prepared and isinstance(text, dict) and {"src", "tgt"} <= set(text):
        try:
            src, tgt = TextProcessor.from_settings(text["src"]), TextProcessor.from_settings(text["tgt"])
        except ValueError as e:
            raise ValueError(f"{path}: {e}") from None
        return src, with_recaser(tgt, path)
    where = prepared or ckpt.get("prepared", "")
    exp = exp if exp is not None else config_of(ckpt)
    langs = [exp.data.src_suffix.split(".")[-1], exp.data.tgt_suffix.split(".")[-1]]
    try:
        return TextProcessor.from_prepared(where, langs[0]), TextProcessor.from_prepared(where, langs[1])
    except FileNotFoundError as e:
        if prepared:
            raise
        raise FileNotFoundError(
            f"{path} carries no BPE codes or text settings (saved by an older doctrans) and the dataset it "
            f"names, {where!r}, is not usable here ({e}): pass --prepared DIR, the prepared dataset it was "
            f"trained on") from None


def with_recaser(proc: TextProcessor, path: str) -> TextProcessor:
    """``proc``, given the recaser of the shipped model ``path`` is (``runtime.shipped.recaser_for``)
    when it carries none of its own and lowercases."""
    if proc.recaser is None and proc.lowercase:
        from doctrans.runtime.shipped import recaser_for

        proc.recaser = recaser_for(path)
    return proc


@dataclass(frozen=True)
class LoadedModel:
    """A checkpoint loaded for translation, shared by the ``Translator``s of one checkpoint: the
    native ``engine.Engine`` (an ensemble of checkpoints is one model here).

    model: the ``Seq2SeqModel`` in eval mode on its device; src_vocab / tgt_vocab; src_proc /
    tgt_proc: the checkpoint's text processing; chunk_len: the training length (``data.max_len``,
    the pieces of an over-long line); protect_dp: the checkpoint was trained with
    ``data.bpe_protect_dp``; key: (checkpoint, context options, device, prepared, quantize,
    shortlist), what was loaded; shortlist: the ``Shortlist`` every search of this model uses
    (``ModelOptions.shortlist``), or None."""

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
    def key_of(opts: ModelOptions) -> tuple:
        """What ``opts`` loads: two configs of one key share a loaded model (``Translator.with_config``)."""
        if opts.engine == "ctranslate2":
            return opts.checkpoint, opts.device, opts.compute_type, opts.threads, opts.shortlist
        return (opts.checkpoint, tuple(opts.context_options), opts.device, opts.prepared, opts.quantize,
                opts.shortlist, tuple(opts.ensemble), tuple(opts.ensemble_weights), opts.ensemble_mode)

    @property
    def reads_documents(self) -> bool:
        """Whether the model translates documents with their context (``reads_documents``)."""
        return reads_documents(self.model)

    @property
    def max_target_len(self) -> int:
        return self.model.max_target_len

    def decode(self, ids: list[np.ndarray], search: SearchOptions, progress: bool = False) -> Decoded:
        """``decode_corpus`` of ``ids`` with ``search`` and the model's shortlist."""
        out = decode_corpus(self.model, ids, self.tgt_vocab, search, progress, shortlist=self.shortlist)
        return Decoded(*out) if search.nbest else Decoded(out)

    def decode_documents(self, docs: list[list[np.ndarray]], search: SearchOptions, progress: bool = False,
                         rerank=None, given: dict | None = None) -> list[list[str]]:
        """``documents.translate_documents`` of ``docs`` with ``search`` and the model's shortlist
        (``rerank``: a ``documents.DocumentReranker``; ``given``: sentences already translated)."""
        return translate_documents(self.model, docs, self.tgt_vocab, search, progress, shortlist=self.shortlist,
                                   rerank=rerank, given=given)

    def decode_variants(self, variants: list[list[np.ndarray]], weights: list[list[float]], combine: str,
                        search: SearchOptions, progress: bool = False) -> list[str]:
        """One translation per sentence of its weighted source variants (``engine.Engine``):
        ``1best`` the first, ``mixture`` one beam over all (``decode_corpus(weights=…)``), ``max``
        each variant of weight > 0 alone, the best-scoring kept."""
        v = self.tgt_vocab
        if combine == "1best":
            return decode_corpus(self.model, [s[0] for s in variants], v, search, progress, shortlist=self.shortlist)
        if combine == "mixture":
            return decode_corpus(self.model, variants, v, search, progress, weights=weights, shortlist=self.shortlist)
        real = [(k, i) for k, w in enumerate(weights) for i, wv in enumerate(w) if wv > 0]
        hyps, scores = decode_corpus(self.model, [variants[k][i] for k, i in real], v, search, progress,
                                     return_scores=True, shortlist=self.shortlist)
        best: dict[int, tuple[float, str]] = {}
        for (k, _), h, sc in zip(real, hyps, scores):
            if k not in best or sc > best[k][0]:
                best[k] = (sc, h)
        return [best[k][1] for k in range(len(variants))]

    @classmethod
    def load(cls, cfg: ModelOptions) -> "LoadedModel":
        """Load ``cfg.checkpoint`` (with ``cfg.context_options``) onto ``cfg.device``. Raises like
        ``load_checkpoint``, ``build_translation_model`` and ``text_processors``."""
        ckpt = load_checkpoint(cfg.checkpoint)
        # metadata, sizes, finite weights checked while the model is built (context options: e.g. a test-time ablation)
        exp, context, model = build_translation_model(ckpt, cfg.checkpoint, cfg.context_options)
        src_vocab, tgt_vocab = Vocab(ckpt["vocab"]["src"]), Vocab(ckpt["vocab"]["tgt"])
        if context is not exp.context:
            log.info("context model %s with %s", context.type, ", ".join(cfg.context_options))
        if cfg.ensemble:
            model = ensemble_of(model, ckpt, cfg)
        model.to(resolve_device(cfg.device))
        model.eval()
        if cfg.quantize != "none":
            model = quantize_int8(model, cfg.quantize)
        src_proc, tgt_proc = text_processors(ckpt, cfg.checkpoint, cfg.prepared, exp)     # the config built once
        shortlist = Shortlist.load(cfg.shortlist, src_vocab, tgt_vocab) if cfg.shortlist else None
        return cls(model, src_vocab, tgt_vocab, src_proc, tgt_proc, exp.data.max_len, exp.data.bpe_protect_dp,
                   cls.key_of(cfg), shortlist)


def ensemble_of(model: torch.nn.Module, ckpt: dict, cfg: ModelOptions) -> torch.nn.Module:
    """``model`` (from ``cfg.checkpoint``, its checkpoint ``ckpt``) and the models of
    ``cfg.ensemble`` (checkpoints or shipped names) as one ``models.ensemble.Ensemble`` with
    ``cfg.ensemble_weights`` (default uniform) and ``cfg.ensemble_mode``. Raises ValueError
    naming the file when a member's vocabularies or text settings (BPE codes, case) differ from
    the first model's, and like ``Ensemble`` for the weights and mode."""
    from doctrans.models.ensemble import Ensemble
    from doctrans.runtime.shipped import resolve

    members = [model]
    for spec in cfg.ensemble:
        path = resolve(spec)
        other = load_checkpoint(path)
        for key in ("vocab", "text"):
            if other.get(key) != ckpt.get(key):
                raise ValueError(f"--ensemble {path}: its {'vocabularies' if key == 'vocab' else 'text settings (BPE codes)'}"
                                 f" differ from {cfg.checkpoint}'s; an ensemble needs models of one dataset")
        members.append(build_translation_model(other, path)[2])
    weights = list(cfg.ensemble_weights) or [1.0] * len(members)
    log.info("ensemble of %d models (%s, weights %s)", len(members), cfg.ensemble_mode,
             ", ".join(f"{w:g}" for w in weights))
    return Ensemble(members, weights, cfg.ensemble_mode)


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


def load_model(cfg: TranslateConfig) -> Engine:
    """The engine ``cfg.model`` asks for (``engine.Engine``): ``LoadedModel.load`` (engine native)
    or an exported CTranslate2 directory (``ct2.CT2Model``, engine ctranslate2). Raises ValueError
    for an unknown engine, a checkpoint file given to ctranslate2 (naming the export command), an
    export given to native, or a setting ctranslate2 does not support, and like the loaders."""
    m, dp = cfg.model, cfg.dp
    path = Path(m.checkpoint)
    if m.engine == "native":
        from doctrans.inference.ct2 import is_exported

        if is_exported(path):
            raise ValueError(f"{path} is an exported CTranslate2 model: translate it with --engine ctranslate2")
        if path.is_dir():
            raise ValueError(f"{path} is a directory: give a checkpoint file (e.g. {path / 'best.pt'}), or an "
                             "exported model directory with --engine ctranslate2")
        return LoadedModel.load(m)
    if m.engine != "ctranslate2":
        raise ValueError(f"engine must be native or ctranslate2, got {m.engine!r}")
    from doctrans.inference.ct2 import CT2Model, export_command, is_exported

    unsupported = [(m.quantize != "none", "--quantize (use --compute-type int8)"),
                   (bool(dp.dp_generator), "--dp-generator"),
                   (bool(dp.rerank), "--rerank"), (bool(dp.dp_out), "--dp-out"),
                   (dp.dp_threshold is not None, "--dp-threshold"),
                   (cfg.io.explain_context > 0, "--explain-context"), (bool(m.context_options), "--context-option"),
                   (bool(m.prepared), "--prepared (the export carries its BPE codes)")]
    given = [name for on, name in unsupported if on]
    if given:
        raise ValueError(f"--engine ctranslate2 does not support {', '.join(given)}: use --engine native")
    if not is_exported(path):
        what = "a checkpoint" if path.is_file() else "not an exported model directory"
        raise ValueError(f"--engine ctranslate2 translates with an exported model directory; {path} is {what}: "
                         f"export it first with `{export_command(str(path))}` and pass -c DIR")
    return CT2Model(m.checkpoint, m.device, m.compute_type, m.threads, m.shortlist)
