"""doctrans as a library: load a model once, translate sentences or documents, get strings back.

    import doctrans
    tr = doctrans.Translator.load("runs/quickstart/best.pt")            # a checkpoint: native engine
    tr = doctrans.Translator.load("runs/qs_ct2", compute_type="int8")   # a `doctrans export` dir: CTranslate2
    tr.translate_sentences(["他来了。", "", "他很累。"])                  # e.g. ["he's here.", "", "he's tired."]
    tr.translate_documents([["他来了。", "他很累。"], ["谢谢。"]])        # [[…, …], […]]
    session = tr.document(); session.translate("他来了。")             # a line at a time, rolling context
    for out in tr.stream(sys.stdin): print(out, flush=True)              # a blank line ends a document

    tr = doctrans.Translator.from_pretrained("runs/quickstart")           # a run dir: its best.pt
    res = tr.translate_batch([["他", "来", "了", "。"]], beam_size=4, num_hypotheses=2, return_scores=True)
    res[0].hypotheses, res[0].scores                                       # [[…tokens…], […]], [-0.41, -0.87]

Names and shapes follow CTranslate2's ``Translator`` (``translate_batch`` → results with
``hypotheses`` and ``scores``, ``beam_size``, ``num_hypotheses``, ``max_batch_size``) and fairseq's
hub interface (``from_pretrained`` → ``translate``), with plain strings in and out: raw source
text in (normalised, segmented and BPE-encoded with the model's own codes), detokenized text out.
Each call returns exactly one string per input sentence, ``""`` for an empty (or blank) one, and
the documents of ``translate_documents`` keep their boundaries and sizes; a context model
translates each document in order with its context (a sentence-level model treats the sentences
alone). Progress bars are off unless asked for.

This is the ``Translator`` the CLI uses (``doctrans translate`` builds the same
``inference.translate.Translator`` through ``inference.translate.build_translator`` with the DP
input transform, ``stages.translate``); this class only adapts lists of sentences and
documents to it.
"""
from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from doctrans.dp.apply import dp_inputs
from doctrans.inference.config import FIELD_GROUP, GROUPS, field_names
from doctrans.inference.ct2 import is_exported
from doctrans.inference.translate import TranslateConfig
from doctrans.inference.translate import Translator as _Engine
from doctrans.utils.settings import default_of

_SEARCH = {"beam_size": "beam", "length_penalty": "lenpen", "max_batch_size": "batch_sentences"}
_ALIASES = {v: k for k, v in _SEARCH.items()}      # the CLI's names (beam=4) for load's keywords


def _default(name: str):
    """The default of the ``TranslateConfig`` setting ``name`` (declared once, ``inference/config.py``)."""
    return default_of(GROUPS[FIELD_GROUP[name]], name)


@dataclass(frozen=True)
class TranslationResult:
    """One source's result of ``Translator.translate_batch`` (CTranslate2's ``TranslationResult``):
    ``hypotheses``, best first — strings for a string source, token lists for a token-list source —,
    and ``scores`` (with ``return_scores``): each hypothesis' log-probability / length^length_penalty,
    as the beam ranks it (None for a line translated in pieces, ``long_lines``; 0.0 for a blank
    source, for which the model is not run); [] without ``return_scores``."""

    hypotheses: list
    scores: list


def check_search(beam_size=None, length_penalty=None, max_batch_size=None, num_hypotheses=None) -> None:
    """ValueError naming the option for a search setting out of range: beam_size,
    max_batch_size and num_hypotheses ≥ 1 (num_hypotheses ≤ beam_size), length_penalty ≥ 0
    (None: not given)."""
    for name, v in (("beam_size", beam_size), ("max_batch_size", max_batch_size), ("num_hypotheses", num_hypotheses)):
        if v is not None and (isinstance(v, bool) or not isinstance(v, int) or v < 1):
            raise ValueError(f"{name} must be an integer ≥ 1{' (1 = greedy search)' if name == 'beam_size' else ''}, "
                             f"got {v!r}")
    if length_penalty is not None and not length_penalty >= 0:
        raise ValueError(f"length_penalty must be ≥ 0 (0 = none), got {length_penalty!r}")
    if num_hypotheses is not None and beam_size is not None and num_hypotheses > beam_size:
        raise ValueError(f"num_hypotheses {num_hypotheses} exceeds beam_size {beam_size}: the search keeps "
                         f"{beam_size} hypotheses")


class Translator:
    """A loaded model and its text processing; thread-compatible, not thread-safe (one call at
    a time). Build it with ``Translator.load``."""

    def __init__(self, engine: _Engine):
        self._engine = engine

    @classmethod
    def load(cls, path: str | Path, *, engine: str = "auto", device: str = _default("device"),
             compute_type: str = _default("compute_type"), quantize: str = _default("quantize"),
             beam_size: int = _default("beam"), length_penalty: float = _default("lenpen"),
             max_batch_size: int = _default("batch_sentences"), threads: int = _default("threads"),
             **options) -> "Translator":
        """Load a checkpoint (``doctrans train``'s ``best.pt``), an exported CTranslate2 directory
        (``doctrans export --format ctranslate2``) or a shipped model by its name (``doctrans
        models``: ``Translator.load("tvsub-transformer-3x3")``, as ``translate -c NAME``) once.

        engine: ``auto`` (ctranslate2 for an exported directory, else native), ``native`` or
        ``ctranslate2``; device: ``auto`` | ``cpu`` | ``cuda``; compute_type: CTranslate2's
        (``float32``, ``int8``, ``int8_float32``…; ``default``: as exported); quantize: ``int8``
        for native int8 dynamic quantization (CPU); beam_size (1 = greedy), length_penalty
        (score = log p / length^penalty), max_batch_size (sentences per search batch): the
        defaults of every call; threads: CTranslate2's threads (0: torch's count; native
        decoding uses torch's, ``torch.set_num_threads``). ``options``: any other field of
        ``inference.translate.TranslateConfig`` (e.g. ``max_len_ratio``, ``input_format="bpe"``,
        ``tokenized=True``, ``dp_generator``, ``context_options``). Raises TypeError for an
        unknown option, FileNotFoundError / ValueError like ``doctrans translate`` (a missing
        or bad checkpoint, a checkpoint given to ctranslate2 — naming the export command —,
        an option the engine does not support), MissingCTranslate2 without the ``ct2`` extra.
        The CLI's names of the search options are accepted too (``beam=4``, ``lenpen``,
        ``batch_sentences``); ValueError for a search setting out of range (``check_search``:
        ``beam_size=0``). ``threads`` > 0 sets torch's threads of this process
        (``torch.set_num_threads``; CTranslate2 gets as many)."""
        from doctrans.runtime.shipped import resolve

        path = resolve(str(path)) if str(path) else str(path)    # a shipped name → its file; else as given
        search = {"beam_size": beam_size, "length_penalty": length_penalty, "max_batch_size": max_batch_size}
        for alias, name in _ALIASES.items():
            if alias in options:
                value = options.pop(alias)
                if search[name] != _default(alias) and search[name] != value:
                    raise TypeError(f"{alias}={value!r} and {name}={search[name]!r} given: use one")
                search[name] = value
        beam_size, length_penalty = search["beam_size"], search["length_penalty"]
        max_batch_size = search["max_batch_size"]
        check_search(beam_size, length_penalty, max_batch_size)
        if engine == "auto":
            engine = "ctranslate2" if is_exported(path) else "native"
        known = set(field_names()) - {"checkpoint", "input", "output", *_ALIASES}
        unknown = sorted(set(options) - known)
        if unknown:
            raise TypeError(f"unknown option(s) {', '.join(unknown)}; options are {', '.join(sorted(known))}")
        if not Path(path).exists():
            raise FileNotFoundError(f"model not found: {path}")
        if threads < 0:
            raise ValueError(f"threads must be ≥ 0 (0 = torch's count), got {threads}")
        if threads:
            import torch

            torch.set_num_threads(threads)
        cfg = TranslateConfig(checkpoint=path, engine=engine, device=device, compute_type=compute_type,
                              quantize=quantize, beam=beam_size, lenpen=length_penalty,
                              batch_sentences=max_batch_size, threads=threads, **options)
        return cls(_Engine(cfg, dp_inputs(cfg)))

    @classmethod
    def from_pretrained(cls, model_name_or_path: str | Path, checkpoint_file: str = "best.pt",
                        **kwargs) -> "Translator":
        """fairseq's ``from_pretrained``: ``load`` of a run directory (``doctrans train``'s
        ``run_dir``: its ``checkpoint_file``, ``last.pt`` when that is missing), a checkpoint
        file, an exported CTranslate2 directory, or the name of a shipped model
        (``runtime.shipped``). ``kwargs``: ``load``'s. Raises FileNotFoundError naming what is
        missing, and like ``load``."""
        from doctrans.runtime import shipped

        path = Path(shipped.resolve(str(model_name_or_path))) if not Path(model_name_or_path).exists() else \
            Path(model_name_or_path)
        if path.is_dir() and not is_exported(path):
            found = [path / checkpoint_file, path / "last.pt"]
            path = next((p for p in found if p.is_file()), None)
            if path is None:
                raise FileNotFoundError(f"{model_name_or_path} holds neither {checkpoint_file} nor last.pt: give a "
                                        "run directory of `doctrans train`, a checkpoint or an exported directory")
        return cls.load(path, **kwargs)

    @property
    def config(self) -> TranslateConfig:
        """The settings of this translator (engine, search defaults, input/output format)."""
        return self._engine.cfg

    @property
    def reads_documents(self) -> bool:
        """Whether the model uses document context (then ``translate_documents`` gives it)."""
        return self._engine.reads_documents

    def _with(self, search: dict, **fields_) -> _Engine:
        check_search(search.get("beam_size"), search.get("length_penalty"), search.get("max_batch_size"))
        given = {_SEARCH[k]: v for k, v in search.items() if v is not None}
        cfg = self._engine.cfg
        given.update({k: v for k, v in fields_.items() if getattr(getattr(cfg, FIELD_GROUP[k]), k) != v})
        if not given:
            return self._engine
        return self._engine.with_config(self._engine.cfg.replace(**given), self._engine.inputs)

    def translate_batch(self, source: list[list[str]] | list[str], *, beam_size: int | None = None,
                        num_hypotheses: int = 1, return_scores: bool = False, length_penalty: float | None = None,
                        max_batch_size: int | None = None, progress: bool = False) -> list[TranslationResult]:
        """CTranslate2's ``translate_batch``: one ``TranslationResult`` per source, with its
        ``num_hypotheses`` best hypotheses (best first) and, with ``return_scores``, their scores.

        ``source``: strings (read as ``load``'s ``input_format``, raw text by default; the
        hypotheses are strings as ``translate_sentences`` gives) or token lists (segmented words,
        BPE-encoded here — BPE units when the translator was loaded with ``input_format="bpe"`` —;
        the hypotheses are token lists: Moses tokens, BPE merged). A context model translates
        each source alone and gives 1 hypothesis without scores. Raises TypeError for a source
        that is neither, ValueError for ``num_hypotheses`` > ``beam_size``, a setting out of
        range (``check_search``), or n-best lists / scores of a context model."""
        items = _seq(source, "source")
        tokens = bool(items) and all(not isinstance(x, (str, bytes)) and isinstance(x, Iterable) for x in items)
        if tokens:
            rows = [list(x) for x in items]
            bad = [(k, i) for k, r in enumerate(rows) for i, t in enumerate(r) if not isinstance(t, str)]
            if bad:
                raise TypeError(f"source[{bad[0][0]}][{bad[0][1]}] is not a str token")
            lines = [" ".join(t.lstrip("\ufeff") for t in r) for r in rows]
            fmt = "bpe" if self.config.io.input_format == "bpe" else "tok"
        else:
            lines, fmt = _lines(items, "source"), self.config.io.input_format
        beam = beam_size if beam_size is not None else self.config.search.beam
        check_search(beam, length_penalty, max_batch_size, num_hypotheses)
        nbest = num_hypotheses if (num_hypotheses > 1 or return_scores) else 0
        if nbest and self.reads_documents:
            raise ValueError("num_hypotheses > 1 and return_scores are for sentence-level models; this is a context "
                             "model (translate_documents gives it its context)")
        eng = self._with({"beam_size": beam_size, "length_penalty": length_penalty, "max_batch_size": max_batch_size},
                         nbest=nbest, input_format=fmt, tokenized=tokens or self.config.io.tokenized)
        res = eng.translate_detailed(lines, progress=progress, name="<batch>",
                                     doc_ids=[str(i) for i in range(len(lines))])
        out = []
        for i, line in enumerate(lines):
            if nbest:
                hyps = res.nbest.get(i) or [("", 0.0)]
            else:
                hyps = [(res.lines[i], None)]
            texts = [t.split() if tokens else t for t, _ in hyps]
            out.append(TranslationResult(texts, [sc for _, sc in hyps] if return_scores else []))
        return out

    def translate_sentences(self, sentences: list[str], *, beam_size: int | None = None,
                            length_penalty: float | None = None, max_batch_size: int | None = None,
                            progress: bool = False) -> list[str]:
        """Translate independent sentences: one output string per input, ``""`` for a blank
        one (the model is not run for it). A context model sees each sentence without context.
        ``beam_size`` etc. override the defaults of ``load`` for this call. Raises TypeError
        for a str instead of a list of str."""
        lines = _lines(sentences, "sentences")
        eng = self._with({"beam_size": beam_size, "length_penalty": length_penalty, "max_batch_size": max_batch_size})
        return eng.translate(lines, progress=progress, name="<sentences>", doc_ids=[str(i) for i in range(len(lines))])

    def translate(self, text: str | list[str], **search) -> str | list[str]:
        """fairseq hub style: one sentence (str) → its translation (str); a list → a list
        (``translate_sentences``, same keyword options)."""
        if isinstance(text, str):
            return self.translate_sentences([text], **search)[0]
        return self.translate_sentences(text, **search)

    def translate_documents(self, documents: list[list[str]], *, beam_size: int | None = None,
                            length_penalty: float | None = None, max_batch_size: int | None = None,
                            progress: bool = False) -> list[list[str]]:
        """Translate documents (each a list of sentences, in order): the same shape back, one
        string per sentence, ``""`` for a blank one. A context model reads each sentence with
        the previous sentences of its own document; all documents are batched together.
        Raises TypeError for documents that are not lists of str."""
        docs = [_lines(d, f"documents[{k}]") for k, d in enumerate(_seq(documents, "documents"))]
        lines = [s for d in docs for s in d]
        ids = [str(k) for k, d in enumerate(docs) for _ in d]
        eng = self._with({"beam_size": beam_size, "length_penalty": length_penalty, "max_batch_size": max_batch_size})
        out = iter(eng.translate(lines, progress=progress, name="<documents>", doc_ids=ids,
                                 where=[f"documents[{k}][{i}]" for k, d in enumerate(docs) for i in range(len(d))]))
        return [[next(out) for _ in d] for d in docs]

    def document(self, on_translated=None):
        """A ``DocumentSession`` (``inference/stream.py``): one document translated a line at a
        time with a rolling context — ``session = tr.document(); session.translate(line)`` gives
        each line's translation at once; a context model reads the session's previous lines (and
        a target-side one its own previous translations, ``session.history``; ``on_translated``
        is called with each recorded ``stream.Entry``)."""
        from doctrans.inference.stream import DocumentSession

        return DocumentSession(self._engine, on_translated)

    def stream(self, lines):
        """A generator of translations, one per line of the iterable ``lines``, each yielded as
        soon as it is translated; a blank line gives ``""`` and ends the current document (the
        protocol of ``doctrans translate --stream``, ``stream.stream_lines``)."""
        from doctrans.inference.stream import stream_lines

        return stream_lines(self._engine, lines)


def _seq(x, name: str) -> list:
    if isinstance(x, (str, bytes)) or not isinstance(x, Iterable):
        raise TypeError(f"{name} must be a list, got {type(x).__name__}")
    return list(x)


def _lines(x, name: str) -> list[str]:
    """A list of one-line strings (a line break inside a sentence becomes a space, so the
    output keeps one line per sentence; a leading byte order mark U+FEFF is dropped)."""
    items = _seq(x, name)
    bad = [i for i, s in enumerate(items) if not isinstance(s, str)]
    if bad:
        raise TypeError(f"{name}[{bad[0]}] is a {type(items[bad[0]]).__name__}, not a str")
    items = [s[1:] if s.startswith("\ufeff") else s for s in items]        # a byte order mark is not text
    return [" ".join(s.splitlines()) if ("\n" in s or "\r" in s) else s for s in items]
