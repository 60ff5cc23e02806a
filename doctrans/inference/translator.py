"""``Translator``: a loaded model (``inference/loading.py``) plus the text processing of its
training data, translating lists of lines: empty lines kept, a line's sentences translated one
by one (``sentences.py``) and over-long lines split, then joined (``long_lines.py``), documents
in order for a context model (``documents.py``), input variants of an input transform
(``transform.py``: DP completion), n-best lists, and reconstruction decoding
(``reconstructing.py``); around the model, lines without Chinese passed through and spans kept
(Latin-script text, numbers, URLs, tags, glossary terms: ``spans.py``). The stage around it
(files, directories, outputs) is ``translate.py``."""
from __future__ import annotations

import logging
import re
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial

import numpy as np
import torch

from doctrans.data.text import TextProcessor, tokenize_en
from doctrans.data.vocab import SPECIALS, Vocab
from doctrans.inference.beam_search import capped_owners
from doctrans.inference.config import RECASE, SEGMENT, TranslateConfig
from doctrans.inference.engine import Engine
from doctrans.inference.loading import LoadedModel, load_model
from doctrans.inference.long_lines import split_long_lines
from doctrans.inference.options import native_compute_type
from doctrans.inference.spans import HAN, NAME_PLACEHOLDERS, Glossary, Masked, SpanProtector, SpanStats
from doctrans.inference.transform import InputSetup, InputTransform
from doctrans.models.interface import reads_documents
from doctrans.models.reconstruction_spec import ReconstructionSpec, no_dp_message, no_reconstructor_message

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Translation:
    """``Translator.translate_detailed``'s result: lines (the output, one per input line); bpe:
    line index → its BPE source; hyps: line index → its BPE 1-best (non-empty lines); nbest
    (``cfg.search.nbest`` > 0): line index → its best hypotheses as (output text, normalised score),
    best first, for the non-empty lines (a line split into pieces, ``long_lines``, has one: its
    joined 1-best with score None; a line passed through, ``spans.py``, itself with score 0.0);
    spans: the spans transform's counts (``spans.SpanStats``); pieces: line index → how many
    pieces (sentences, or chunks of an over-long line) it was translated in, for the lines of
    more than one (their ``hyps`` are the pieces' 1-best joined)."""

    lines: list[str]
    bpe: dict[int, str]                     # (of the masked lines the model read: spans.py)
    hyps: dict[int, str]
    nbest: dict[int, list[tuple[str, float | None]]] = field(default_factory=dict)
    dp_lines: list[str] | None = None       # cfg.dp.dp_out: the DP-completed source, one per input line
    spans: SpanStats = field(default_factory=SpanStats)   # lines passed through, spans kept / lost (spans.py)
    pieces: dict[int, int] = field(default_factory=dict)


class Translator:
    """A loaded model plus the text processing of its training data, for one ``TranslateConfig``.

    ``translate(lines) -> list[str]`` keeps line count and empty lines. A Translator does not
    change after construction: its config and input transform are the ones it was built with
    (``inputs``: ``InputSetup``, needed for ``cfg.dp.dp_generator`` and for ``tok`` input to a
    checkpoint trained with ``data.bpe_protect_dp``); another config is another Translator,
    which ``with_config`` builds around the same loaded model. Raises ValueError for a config
    the inputs cannot serve, and like ``LoadedModel.load``.
    """

    def __init__(self, cfg: TranslateConfig, inputs: InputSetup | None = None, loaded: Engine | None = None):
        inputs = inputs or InputSetup()
        cfg = native_compute_type(cfg)                  # --compute-type int8 with native: --quantize int8
        if cfg.search.beam < 1 or cfg.search.batch_sentences < 1:
            raise ValueError(f"beam size and batch size must be ≥ 1, got beam {cfg.search.beam}, "
                             f"batch {cfg.search.batch_sentences}")
        if cfg.io.input_format not in ("raw", "tok", "bpe"):
            raise ValueError(f"input_format must be raw, tok or bpe, got {cfg.io.input_format!r}")
        if cfg.io.recase not in RECASE:
            raise ValueError(f"recase must be one of {', '.join(RECASE)}, got {cfg.io.recase!r}")
        if cfg.io.segment not in SEGMENT:
            raise ValueError(f"segment must be one of {', '.join(SEGMENT)}, got {cfg.io.segment!r}")
        if loaded is not None and loaded.key != LoadedModel.key_of(cfg.model):
            raise ValueError(f"this loaded model is {loaded.key}, the config asks for {LoadedModel.key_of(cfg.model)}")
        if cfg.dp.dp_generator and inputs.transform is None:
            raise ValueError("--dp-generator needs a DP input transform: give the Translator "
                             "doctrans.dp.apply.dp_inputs(cfg) (the CLI does)")
        if cfg.search.nbest > cfg.search.beam:
            raise ValueError(f"--nbest {cfg.search.nbest} exceeds --beam {cfg.search.beam}: the search keeps "
                             f"{cfg.search.beam} hypotheses")
        if cfg.search.nbest and cfg.dp.dp_generator:
            raise ValueError("--nbest is not supported with --dp-generator (several input variants per sentence)")
        if cfg.io.glossary and cfg.io.input_format == "bpe":
            raise ValueError("--glossary needs raw or tok input (its terms are words, not BPE units)")
        glossary = Glossary.load(cfg.io.glossary) if cfg.io.glossary else None
        self._cfg, self._inputs = cfg, inputs
        self._engine: Engine = loaded or load_model(cfg)
        self._spans = self._span_protector(glossary)
        self._spans_plain = self._span_protector(None)      # (a glossary's lines, first translated without it)
        if cfg.search.nbest and self._engine.reads_documents:
            raise ValueError(f"--nbest is for sentence-level models; {cfg.model.checkpoint} is a context model, whose "
                             "documents are translated with their 1-best context: translate without --nbest")
        if cfg.io.recase == "yes" and self._engine.tgt_proc.recaser is None:
            raise ValueError(f"--recase yes: {cfg.model.checkpoint} carries no recaser (a model trained on data prepared "
                             "before doctrans learnt one, or with --keep-case): translate with --recase auto or no")
        if self._engine.protect_dp and cfg.io.input_format == "tok" and not inputs.protect:
            raise ValueError(f"{cfg.model.checkpoint} was trained with data.bpe_protect_dp: tok input needs the DP "
                             "tokens BPE keeps whole (doctrans.dp.apply.dp_inputs(cfg), as the CLI gives)")
        dp = cfg.dp
        if dp.rerank or dp.dp_out or dp.rerank_k or dp.rerank_vocab or dp.dp_threshold is not None or (
                dp.dp_generator and self._engine.model.reconstruction.encoder_input == "original"):
            self._check_reconstruction(cfg)
        whole = [name for on, name in ((cfg.search.nbest, "--nbest"), (cfg.dp.rerank, "--rerank"), (cfg.dp.dp_out, "--dp-out"),
                                       (cfg.dp.dp_generator, "--dp-generator")) if on]
        if cfg.io.segment != "off" and whole:
            log.info("%s: each line is translated whole (no sentence segmentation, --segment): its result is the "
                     "line's own", ", ".join(whole))
        self._segment = cfg.io.segment != "off" and not whole
        self._boundaries = None
        if self._segment and cfg.io.segment == "model":
            from doctrans.inference.boundaries import BoundaryModel, shipped_model

            self._boundaries = BoundaryModel.load(shipped_model())

    def _span_protector(self, glossary: Glossary | None) -> SpanProtector:
        """The spans transform of this config and model (``spans.py``). Lines are checked for
        Chinese and their spans protected only for a model that reads Chinese (at least half its
        source vocabulary has Han characters: the shipped models 97.5%; a model of other text
        gets its lines as they are) and for raw or tok input (BPE input is what the model reads);
        the glossary applies to raw and tok input of any model. Name placeholders: those of
        ``NAME_PLACEHOLDERS`` that are one BPE unit of the source and a target token (all of
        them when none is)."""
        c = self.cfg
        vocab = self.src_vocab.tokens[len(SPECIALS):]
        chinese = c.io.input_format != "bpe" and 2 * sum(1 for t in vocab if HAN.search(t)) >= len(vocab) > 0
        names = tuple(p for p in NAME_PLACEHOLDERS
                      if self.src_proc.apply_bpe([p]) == [p] and p in self.tgt_vocab.index) or NAME_PLACEHOLDERS
        return SpanProtector(glossary, protect=c.io.protect and chinese, translate_all=c.io.translate_all or not chinese,
                             spaced=c.io.input_format == "tok", names=names)

    def _check_reconstruction(self, cfg: TranslateConfig) -> None:
        """ValueError for a ``rerank`` / ``dp_out`` request the model or the options cannot serve."""
        model, spec = self._engine.model, self._engine.model.reconstruction
        if cfg.dp.rerank not in ("", "reconstructor"):
            raise ValueError(f"--rerank must be 'reconstructor', got {cfg.dp.rerank!r}")
        if cfg.dp.rerank_k and not cfg.dp.rerank:
            raise ValueError("--rerank-k needs --rerank reconstructor")
        if cfg.dp.rerank_vocab and not cfg.dp.rerank:
            raise ValueError("--rerank-vocab needs --rerank reconstructor")
        if cfg.dp.rerank_vocab < 0:
            raise ValueError(f"--rerank-vocab must be ≥ 0 (0 = the whole source vocabulary), got "
                             f"{cfg.dp.rerank_vocab}")
        if cfg.dp.rerank_k > cfg.search.beam:
            raise ValueError(f"--rerank-k {cfg.dp.rerank_k} exceeds --beam {cfg.search.beam}: the search keeps "
                             f"{cfg.search.beam} "
                             "hypotheses")
        if reads_documents(model) and cfg.dp.rerank and model.document.context_block > 0:
            raise ValueError(f"--rerank: {cfg.model.checkpoint} reads sub-documents (context_block); reranking "
                             "supports sentence models and models with N previous sentences as context")
        if reads_documents(model) and spec.target in ("dp", "dpp"):
            raise ValueError(f"{cfg.model.checkpoint} reads documents and reconstructs the {spec.target.upper()}-completed "
                             "source: translate supports a document model's --dp-out for the joint labeler "
                             "(target original) only")
        if cfg.dp.rerank and not spec.reranks:
            raise ValueError(f"{cfg.model.checkpoint}: " + (no_reconstructor_message(model) if not spec.target else (
                "its reconstructor reads only the encoder states, so log R is the same for every candidate "
                "translation; --rerank reconstructor needs one that reads the decoder states "
                "(pipelines/dp/rec_dec.yaml, rec_both.yaml, rec_shared.yaml …)")))
        if cfg.dp.dp_threshold is not None and not cfg.dp.dp_out:
            raise ValueError("--dp-threshold sets the DP decision of --dp-out: give --dp-out FILE too")
        if cfg.dp.dp_threshold is not None and not 0.0 <= cfg.dp.dp_threshold <= 1.0:
            raise ValueError(f"--dp-threshold must be in [0, 1], got {cfg.dp.dp_threshold}")
        if cfg.dp.dp_out and not spec.predicts_dps:
            raise ValueError(f"{cfg.model.checkpoint}: " + no_dp_message(model))
        if cfg.dp.rerank and cfg.search.nbest:
            raise ValueError("--nbest lists the beam's hypotheses: not with --rerank (its 1-best is the reranked one)")
        if spec.target in ("dp", "dpp"):
            if not cfg.dp.dp_generator:
                raise ValueError(f"{cfg.model.checkpoint} reconstructs the {spec.target.upper()}-completed source x̂: give "
                                 "--dp-generator (the DP generator that makes x̂ at test time)")
            if cfg.dp.dp_input != spec.target or cfg.dp.dp_nbest != 1:
                raise ValueError(f"{cfg.model.checkpoint} reconstructs x̂_{spec.target.upper()}: give --dp-input "
                                 f"{spec.target} and --dp-nbest 1 (one x̂ per sentence)")
            if cfg.io.input_format == "bpe":
                raise ValueError("--dp-generator needs raw or tok input (the generator reads words, not BPE)")

    def with_config(self, cfg: TranslateConfig, inputs: InputSetup | None = None) -> "Translator":
        """A Translator for ``cfg`` (and ``inputs``) sharing this one's loaded model. Raises
        ValueError if ``cfg`` names another checkpoint, context options, device or dataset."""
        return Translator(cfg, inputs, self._engine)

    @property
    def cfg(self) -> TranslateConfig:
        return self._cfg

    @property
    def segments(self) -> bool:
        """Whether a line's sentences are translated one by one (``cfg.io.segment``, not ``off``; off
        with ``nbest``, ``rerank``, ``dp_out`` and ``dp_generator``, whose results are per line)."""
        return self._segment

    def split_source(self, bpe: list[str], locations: list[str] | None = None):
        """BPE lines → their pieces as this Translator translates them (``long_lines.SplitLines``):
        each line's sentences (``segments``), an over-long piece chunked (with a warning naming
        ``locations[k]``, default ``<input>:k+1``)."""
        return split_long_lines(bpe, self.max_source_units(), chunk_len=self._engine.chunk_len, locations=locations,
                                segment=self._segment, boundaries=self._boundaries)

    @property
    def inputs(self) -> InputSetup:
        """The ``InputSetup`` this Translator was built with (for ``with_config`` of the same inputs)."""
        return self._inputs

    @property
    def engine(self) -> Engine:
        """The loaded model this Translator translates with (``engine.Engine``: native or CTranslate2)."""
        return self._engine

    @property
    def model(self) -> torch.nn.Module | None:
        """The torch model (None for ``engine`` ctranslate2)."""
        return self._engine.model

    @property
    def reads_documents(self) -> bool:
        """Whether the model translates documents with their context."""
        return self._engine.reads_documents

    @property
    def src_vocab(self) -> Vocab:
        return self._engine.src_vocab

    @property
    def tgt_vocab(self) -> Vocab:
        return self._engine.tgt_vocab

    @property
    def src_proc(self) -> TextProcessor:
        return self._engine.src_proc

    @property
    def tgt_proc(self) -> TextProcessor:
        return self._engine.tgt_proc

    @property
    def shortlist(self):
        """The lexical shortlist every search uses (``cfg.model.shortlist``; a ``Shortlist``), or None."""
        return self._engine.shortlist

    def source_bpe(self, lines: list[str]) -> list[str]:
        """The BPE source the model reads for each line (as ``translate`` makes it: by ``cfg.io.input_format``)."""
        return self._to_bpe(lines)

    def postprocess(self, hyps: list[str]) -> list[str]:
        """BPE 1-best strings → output text, as ``translate`` returns it (BPE merged, detokenized unless ``tokenized``)."""
        return self._postprocess(hyps)

    def _to_bpe(self, lines: list[str]) -> list[str]:
        if self.cfg.io.input_format == "bpe":
            return lines
        if self.cfg.io.input_format == "tok":
            protect = self._inputs.protect if self._engine.protect_dp else frozenset()
            return self.src_proc.apply_bpe(lines, protect=protect)
        return self.src_proc.encode(lines)

    def max_source_units(self) -> int:
        """Source BPE units a line may have (``</s>`` not counted): the model's positions
        (``max_target_len``, which bounds the source too) minus one, or ``--max-source-len`` if lower."""
        limit = self._engine.max_target_len - 1
        return min(limit, self.cfg.io.max_source_len) if self.cfg.io.max_source_len > 0 else limit

    def translate(self, lines: list[str], progress: bool = False, name: str = "<input>",
                  doc_ids: list[str] | None = None, where: list[str] | None = None) -> list[str]:
        """Translations of ``lines``, one per line, empty for an empty line (``translate_detailed``)."""
        return self.translate_detailed(lines, progress, name, doc_ids, where).lines

    def translate_detailed(self, lines: list[str], progress: bool = False, name: str = "<input>",
                           doc_ids: list[str] | None = None, where: list[str] | None = None) -> Translation:
        """Translations of ``lines``, one per line, empty for an empty line, with each line's BPE
        source and 1-best (``Translation``; ``_translate_model``), around the model the spans
        transform (``spans.py``): a line without Chinese is its own output and not sent to the
        model (so not a context model's context either; ``cfg.io.translate_all``: sent as it is),
        the spans of a Chinese line (``cfg.io.protect``) are placeholders for the model and put back
        in its output. A line with glossary terms (``cfg.io.glossary``) keeps the model's own
        translation when that has every term's target (a whole word, any case: then spelt as the
        glossary has it, ``_with_targets``); else it is
        translated again with the terms as placeholders (a context model: its document again,
        the other lines keeping their first translation). Their counts are logged (INFO), naming
        ``name``."""
        stats = SpanStats()
        masked = [self._spans.mask(line, stats) for line in lines]
        glossed = [i for i, m in enumerate(masked) if any(s.kind == "glossary" for s in m.spans)]
        used = list(masked)
        for i in glossed:                   # first the model's own words for the terms
            used[i] = self._spans_plain.mask(lines[i])
        res = self._translate_model([m.text for m in used], progress, name, doc_ids, where)
        if not any(m.passed or m.spans or m.lead or m.trail for m in masked):
            return res                      # (its stats: empty)
        model = {"lines": list(res.lines), "bpe": dict(res.bpe), "hyps": dict(res.hyps), "nbest": dict(res.nbest),
                 "dp": list(res.dp_lines) if res.dp_lines is not None else None}
        own = {i: self._with_targets(masked[i], self._spans.restore(used[i], res.lines[i], self._render))
               for i in glossed}
        redo = {i for i in glossed if own[i] is None}
        if redo:
            self._translate_glossed(lines, masked, used, redo, model, progress, name, doc_ids, where)
        stats.glossary_kept, stats.glossary_again = len(glossed) - len(redo), len(redo)
        out = [self._spans.restore(m, h, self._render, stats) for m, h in zip(used, model["lines"])]
        out = [own[i] if own.get(i) is not None else x for i, x in enumerate(out)]
        nbest = {i: [(self._spans.restore(used[i], t, self._render), sc) for t, sc in hs]
                 for i, hs in model["nbest"].items()}
        if self.cfg.search.nbest:
            nbest.update({i: [(m.original, 0.0)] for i, m in enumerate(used) if m.passed})
        dp_lines = model["dp"]
        if dp_lines is not None:
            dp_lines = [m.original if m.passed else self._spans.restore(m, d, source=True)
                        for m, d in zip(used, dp_lines)]
        _log_spans(stats, name)
        return Translation(out, model["bpe"], model["hyps"], dict(sorted(nbest.items())), dp_lines, stats,
                           res.pieces)

    def _with_targets(self, masked: Masked, output: str) -> str | None:
        """``output`` with the target of every glossary span of ``masked`` in it spelt as the
        glossary has it (found as a whole word in any case; its first letter left upper-case at
        the start of a sentence), or None when one is missing."""
        for s in masked.spans:
            if s.kind != "glossary":
                continue
            target = self._render(s.target)
            rx = re.compile(rf"(?<!\w){re.escape(target)}(?!\w)", re.IGNORECASE)
            if not rx.search(output):
                return None
            output = rx.sub(lambda m: target if not m.group(0)[:1].isupper() else target[:1].upper() + target[1:],
                            output)
        return output

    def _translate_glossed(self, lines: list[str], masked: list[Masked], used: list[Masked], redo: set[int],
                           model: dict, progress: bool, name: str, doc_ids: list[str] | None,
                           where: list[str] | None) -> None:
        """The lines ``redo`` translated again with their glossary terms as placeholders
        (``masked``), in ``used`` and the model's results ``model``: a sentence model's alone, a
        context model's with the documents that hold them (their other lines as first read)."""
        if self.reads_documents:
            docs = {doc_ids[i] for i in redo} if doc_ids is not None else None
            sub = [i for i in range(len(lines)) if docs is None or doc_ids[i] in docs]
        else:
            sub = sorted(redo)
        at = where if where is not None else [f"{name}:{i + 1}" for i in range(len(lines))]
        again = self._translate_model([(masked if i in redo else used)[i].text for i in sub], progress, name,
                                      [doc_ids[i] for i in sub] if doc_ids is not None else None, [at[i] for i in sub])
        for k, i in enumerate(sub):
            if i not in redo:
                continue
            used[i] = masked[i]
            model["lines"][i] = again.lines[k]
            for key, part in (("bpe", again.bpe), ("hyps", again.hyps), ("nbest", again.nbest)):
                if k in part:
                    model[key][i] = part[k]
            if model["dp"] is not None and again.dp_lines is not None:
                model["dp"][i] = again.dp_lines[k]

    @property
    def protects_spans(self) -> bool:
        """Whether Latin-script text, numbers, URLs and tags of a line are kept (``cfg.io.protect``,
        for a model that reads Chinese and raw or tok input: ``_span_protector``)."""
        return self._spans.protect

    def mask(self, line: str) -> Masked:
        """``line`` as the model reads it (``spans.SpanProtector.mask`` under this config; a line
        without Chinese comes back ``passed``), for ``restore``."""
        return self._spans.mask(line)

    def restore(self, masked: Masked, output: str) -> str:
        """The output line of a ``mask``-ed line from the model's (post-processed) translation."""
        return self._spans.restore(masked, output, self._render)

    def _render(self, text: str) -> str:
        """A kept span as the output writes it: as it is; Moses-tokenized for ``tokenized`` output
        (lowercased too when the model lowercases and the output is not recased)."""
        if not self.cfg.io.tokenized or self.tgt_proc.lang != "en":
            return text
        return tokenize_en([text], lowercase=self.tgt_proc.lowercase and not self.recases)[0]

    def _translate_model(self, lines: list[str], progress: bool = False, name: str = "<input>",
                         doc_ids: list[str] | None = None, where: list[str] | None = None) -> Translation:
        """Translations of ``lines`` by the model, one per line, empty for an empty line, with each line's BPE
        source and 1-best (``Translation``). A line of several sentences is translated sentence
        by sentence (``segments``: ``sentences.py``) and joined, as is a line over
        ``max_source_units``, split into pieces (``long_lines``, with a warning naming ``name``
        and the line); with an input transform such a line (or one that DP insertions could push
        over: 2 × units + 1 > limit) is translated without it. ``doc_ids``: the document of
        each line (contiguous runs); a context model translates each document in order with its
        own context (``inference/documents.py``; default: all lines one document; the sentences
        and pieces of a split line are consecutive sentences there), a sentence model ignores
        them. ``where``: each line's location for warnings (``file:line``; default
        ``name:line``), for lines of several files translated together."""
        at = where if where is not None else [f"{name}:{i + 1}" for i in range(len(lines))]
        nonempty = [i for i, line in enumerate(lines) if line.strip()]
        c = self.cfg
        limit = self.max_source_units()
        bpe = dict(zip(nonempty, self._to_bpe([lines[i] for i in nonempty])))
        hyps: dict[int, str] = {}
        pieces: dict[int, int] = {}
        capped: set[int] = set()            # lines with a sentence ended by the length limit
        plain = nonempty
        transform = self._inputs.transform if c.dp.dp_generator else None
        dp_lines = None
        spec = self.model.reconstruction if self.model is not None else ReconstructionSpec()   # (ctranslate2)
        if c.dp.rerank or c.dp.dp_out or (c.dp.dp_generator and spec.encoder_input == "original"):
            # (a reconstructor model reading x: the generator makes x̂ only, never the encoder input)
            rec_hyps, dp_lines = self._translate_reconstructing(lines, nonempty, bpe, limit, at, progress, doc_ids)
            hyps.update(rec_hyps)
            plain = [i for i in nonempty if i not in rec_hyps]
        elif self.reads_documents:
            if transform is not None:
                raise ValueError("--dp-generator is for sentence-level +DP models, not context models")
            hyps.update(self._translate_documents(bpe, nonempty, doc_ids, limit, at, progress, pieces=pieces,
                                                  capped=capped))
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
            split = self.split_source([bpe[i] for i in plain], [at[i] for i in plain])
            pieces.update(_counts(split.owner, plain))
            ids = [self.src_vocab.encode(s) for s in split.pieces]
            decoded = self._engine.decode(ids, c.search, progress)
            capped.update(plain[k] for k in capped_owners(ids, decoded.hyps, split.owner, c.search,
                                                                self._engine.max_target_len - 1))
            lists = decoded.nbest
            hyps.update(zip(plain, split.join(decoded.hyps, len(plain))))
        nbest: dict[int, list[tuple[str, float | None]]] = {}
        if c.search.nbest and plain:
            of_line: dict[int, list[int]] = {}
            for p, k in enumerate(split.owner):
                of_line.setdefault(k, []).append(p)
            for k, i in enumerate(plain):
                ps = of_line.get(k, [])
                nbest[i] = lists[ps[0]] if len(ps) == 1 else [(hyps[i], None)]
        merged = self._postprocess([hyps[i] for i in nonempty])
        out = [""] * len(lines)
        for i, h in zip(nonempty, merged):
            out[i] = h
        if nbest:
            flat = iter(self._postprocess([h for i in sorted(nbest) for h, _ in nbest[i]]))
            nbest = {i: [(next(flat), sc) for _, sc in nbest[i]] for i in sorted(nbest)}
        if pieces:
            log.info("%s: %d lines translated in %d pieces (their sentences, --segment %s; or chunks of over-long "
                     "lines)", name, len(pieces), sum(pieces.values()), c.io.segment)
        if capped:
            log.warning("%s: %d line(s) of %d ended by the length limit (--max-len-ratio %g × source + "
                        "--max-len-extra %d), not by the model (possibly degenerate output): %s", name, len(capped),
                        len(nonempty), c.search.max_len_ratio, c.search.max_len_extra,
                        ", ".join(at[i] for i in sorted(capped)[:10]) + (", …" if len(capped) > 10 else ""))
        return Translation(out, bpe, hyps, nbest, dp_lines, pieces=pieces)

    def _source_words(self, lines: list[str], nonempty: list[int], bpe: dict[int, str]) -> dict[int, str]:
        """Line index → the tokenized (segmented) source words of the non-empty lines."""
        c = self.cfg
        if c.io.input_format == "tok":
            return {i: lines[i] for i in nonempty}
        if c.io.input_format == "bpe":
            return {i: self.src_proc.merge_bpe(bpe[i]) for i in nonempty}
        return dict(zip(nonempty, self.src_proc.tokenize([lines[i] for i in nonempty])))

    def _translate_reconstructing(self, lines: list[str], nonempty: list[int], bpe: dict[int, str], limit: int,
                                  at: list[str], progress: bool, doc_ids: list[str] | None = None
                                  ) -> tuple[dict[int, str], list[str] | None]:
        """``reconstructing.translate_reconstructing`` of these lines with this Translator's model,
        config, inputs and document translation."""
        from doctrans.inference.reconstructing import Lines, translate_reconstructing

        return translate_reconstructing(
            self._engine, self.cfg, self._inputs,
            Lines(lines, nonempty, bpe, self._source_words(lines, nonempty, bpe), at, doc_ids), limit, progress,
            partial(self._translate_documents, bpe, nonempty, doc_ids, limit, at, progress))

    @property
    def recases(self) -> bool:
        """Whether the output is recased (``cfg.io.recase``: yes; auto: detokenized output of a
        lowercasing model that carries a recaser)."""
        proc, mode = self.tgt_proc, self.cfg.io.recase
        return mode == "yes" or (mode == "auto" and not self.cfg.io.tokenized and proc.lowercase
                                 and proc.recaser is not None)

    def _postprocess(self, hyps: list[str]) -> list[str]:
        """BPE 1-best strings → output text: BPE merged, recased (``recases``), then detokenized
        unless ``tokenized``."""
        merged = [self.tgt_proc.merge_bpe(h) for h in hyps]
        if self.recases:
            merged = self.tgt_proc.recase(merged)
        return merged if self.cfg.io.tokenized else self.tgt_proc.detokenize(merged)

    def _translate_documents(self, bpe: dict[int, str], nonempty: list[int], doc_ids: list[str] | None,
                             limit: int, at: list[str], progress: bool,
                             rec: dict[int, np.ndarray] | None = None, pieces: dict[int, int] | None = None,
                             capped: set[int] | None = None) -> dict[int, str]:
        """Line index → translation of the non-empty lines, each document with its context, a
        line's pieces (``split_source``: its sentences, or chunks) consecutive sentences of its
        document. ``rec``: line index → its reconstruction target x̂ (ids): the k best of each
        such line are reranked by the reconstructor (``--rerank reconstructor``;
        ``reconstruction.DocumentRerank``) with the encoder states of its own document batch; a
        line split for length, or one without x̂, keeps the beam's 1-best. ``pieces``: filled
        with line index → piece count of the lines split in more than one. ``capped``: filled with
        the index of each line a sentence of which was ended by the length limit."""
        split = self.split_source([bpe[i] for i in nonempty], [at[i] for i in nonempty])
        if pieces is not None:
            pieces.update(_counts(split.owner, nonempty))
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
            reranker = DocumentRerank(self.model, targets, self.model.reconstruction.weight,
                                      c.dp.rerank_k or c.search.beam, self.tgt_vocab.pad_id, self.tgt_vocab.bos_id,
                                      c.dp.rerank_vocab)
        out = self._engine.decode_documents(docs, self.cfg.search, progress, rerank=reranker)
        flat = [h for doc in out for h in doc]
        if capped is not None:
            capped.update(nonempty[k] for k in capped_owners([x for d in docs for x in d], flat, split.owner, self.cfg.search,
                                        self._engine.max_target_len - 1))
        return dict(zip(nonempty, split.join(flat, len(nonempty))))

    def _translate_variants(self, transform: InputTransform, lines: list[str], nonempty: list[int],
                            progress: bool) -> list[str]:
        """Translation of input variants (``inference/transform.py``): the input transform turns
        each tokenized line into weighted source variants; they are BPE-encoded (its protected
        tokens kept whole when the checkpoint was trained with ``data.bpe_protect_dp``, else as
        any source, as the model saw them in training) and decoded by its combine mode: ``1best`` the first variant,
        ``mixture`` all in one beam (log Σ w p), ``max`` each alone, the best-scoring kept."""
        c = self.cfg
        if c.io.input_format == "bpe":
            raise ValueError("--dp-generator needs raw or tok input (the generator reads words, not BPE)")
        sub = [lines[i] for i in nonempty]
        tok: list[str | None] = [None] * len(lines)
        for i, t in zip(nonempty, sub if c.io.input_format == "tok" else self.src_proc.tokenize(sub)):
            tok[i] = t
        per_line = transform(tok)
        variants = [per_line[i] for i in nonempty]
        protect = transform.protect if self._engine.protect_dp else frozenset()   # BPE as in training
        bpe = iter(self.src_proc.apply_bpe([x for vs in variants for x, _ in vs], protect=protect))
        src = [[self.src_vocab.encode(next(bpe)) for _ in vs] for vs in variants]
        weights = [[w for _, w in vs] for vs in variants]
        return self._engine.decode_variants(src, weights, transform.combine, c.search, progress)


def _log_spans(stats: SpanStats, name: str) -> None:
    """The spans transform's counts of one translation, at INFO (a line each, when any)."""
    if stats.passed:
        scripts = {"other": "no Han", "ja": "kana: Japanese", "ko": "Hangul: Korean"}
        log.info("%s: %d line(s) without Chinese passed through untranslated (%s; --translate-all translates "
                 "them)", name, sum(stats.passed.values()),
                 ", ".join(f"{n} {scripts[k]}" for k, n in sorted(stats.passed.items())))
    if stats.glossary_kept or stats.glossary_again:
        log.info("%s: %d line(s) with glossary terms: %d translated with every target, %d translated again with "
                 "the terms as placeholders", name, stats.glossary_kept + stats.glossary_again, stats.glossary_kept,
                 stats.glossary_again)
    if stats.spans:
        log.info("%s: %d span(s) kept through translation (%s)%s", name, sum(stats.spans.values()),
                 ", ".join(f"{n} {k}" for k, n in sorted(stats.spans.items())),
                 f"; {stats.lost} placeholder(s) the model dropped: their spans put at their positions"
                 if stats.lost else "")
    if stats.unprotected:
        log.info("%s: %d span(s) translated unprotected (more in a line than placeholders)", name,
                 stats.unprotected)


def _counts(owner: list[int], lines: list[int]) -> dict[int, int]:
    """Line index (``lines[k]`` for owner k) → its number of pieces, for lines of more than one."""
    return {lines[k]: n for k, n in Counter(owner).items() if n > 1}


InputsOf = Callable[[TranslateConfig], InputSetup]
"""Builds a config's ``InputSetup`` (e.g. ``doctrans.dp.apply.dp_inputs``); picklable when
given to ``translate.translate_input`` for ``--workers``."""


def build_translator(cfg: TranslateConfig, inputs_of: InputsOf | None = None) -> Translator:
    """``Translator(cfg, inputs_of(cfg))`` (no inputs without ``inputs_of``): a picklable
    factory for collection workers (``partial(build_translator, cfg, inputs_of)``)."""
    return Translator(cfg, inputs_of(cfg) if inputs_of is not None else None)
