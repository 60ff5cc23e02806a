"""The models one ``doctrans serve`` holds (``ModelRegistry``), and the languages it speaks.

A server has a default model (the one ``-c`` names, or the CLI's default) and may hold more:
``--extra-model NAME`` (a shipped model's name or a checkpoint), each loaded the first time a
request asks for it. Without ``--extra-model``, a server of a shipped model also offers the
default shipped model of the other kind (document ↔ sentence), so that a client — the page —
can choose. A request names its model by ``model`` (LibreTranslate endpoints, the page) or
``id`` (OpenNMT-py): the model's name, its kind (``document`` / ``sentence``: the first model of
that kind) or its ``model_id`` (100 for the default, then 101, …, as OpenNMT-py's conf.json
numbers models); none names the default. ``GET /translator/models`` lists them (``describe``).

N-best (``ServedModel.nbest``): a sentence-level model's ``n`` best translations of each line
with their scores (the search's normalised score, log p / length^lenpen: higher is better),
``Translator.with_config`` of the same loaded model with ``nbest`` = n (n ≤ the beam). A context
model translates each line with the 1-best of its context, so it has no n-best and no scores.

Languages (``Languages``): the model's source and target codes (LibreTranslate's: ``zh``,
``en``). A Chinese source also takes ``zh-Hans`` / ``zh-CN`` / ``zh-SG`` (Simplified, as is),
``zh-Hant`` / ``zt`` / ``zh-TW`` / ``zh-HK`` / ``zh-MO`` (Traditional: converted to Simplified
with OpenCC t2s before translation, ``data.encoding.to_simplified``), and ``zh`` / ``auto``
(converted when the text is Traditional, as ``doctrans translate`` does). ``detect`` tells the
source language from the share of Han characters among the letters (the only question this
server can answer: is the text Chinese), as LibreTranslate's ``/detect`` shape.
"""
from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

log = logging.getLogger(__name__)

FIRST_MODEL_ID = 100          # OpenNMT-py's examples send "id": 100

NAMES = {"zh": "Chinese", "en": "English", "zh-Hans": "Chinese (Simplified)", "zh-Hant": "Chinese (Traditional)",
         "de": "German", "fr": "French", "es": "Spanish", "ja": "Japanese", "ko": "Korean", "ru": "Russian"}
SIMPLIFIED = ("zh-hans", "zh-cn", "zh-sg", "zh-hans-cn")
TRADITIONAL = ("zh-hant", "zt", "zh-tw", "zh-hk", "zh-mo", "zh-hant-tw")


@dataclass
class ServedModel:
    """One model of the server: ``name`` (shown, and what requests name it by), ``model_id``
    (OpenNMT-py's), ``checkpoint``; ``kind`` document | sentence once known (before a lazy
    model is loaded: the shipped index's, else ""); ``load`` builds its translator (None once
    loaded)."""

    name: str
    model_id: int
    checkpoint: str
    kind: str = ""
    load: Callable[[], object] | None = None
    translator: object = None
    _nbest: dict[int, object] = field(default_factory=dict)
    _languages: dict[str, str] = field(default_factory=dict)

    @property
    def loaded(self) -> bool:
        return self.translator is not None

    @property
    def scores(self) -> bool:
        """Whether it gives n-best lists and scores (a sentence-level model)."""
        return self.kind == "sentence"

    def translate(self, lines: list[str], doc_ids: list[str]) -> list[str]:
        return self.translator.translate(lines, doc_ids=doc_ids)

    @property
    def target_language(self) -> str:
        """The model's target language as its checkpoint says (``inference.options.model_languages``;
        "" when it cannot be read): what the CLI names in a subtitle header."""
        if "target" not in self._languages:
            from doctrans.inference.options import model_languages

            langs = model_languages(str(self.checkpoint))
            self._languages["target"] = langs[1] if langs else ""
        return self._languages["target"]

    def nbest(self, lines: list[str], doc_ids: list[str], n: int) -> list[list[tuple[str, float | None]]]:
        """Per line its ``n`` best (text, score), best first ([] for an empty line; a line the
        translator gives no list for — passed through, or split for length — its output with score
        None). Raises ValueError for a context model or ``n`` over the beam."""
        if not self.scores:
            raise ValueError(f"model {self.name} reads documents: it has no n-best lists or scores "
                             "(each line is translated with the 1-best of its context)")
        tr = self._nbest.get(n)
        if tr is None:
            tr = self._nbest[n] = self.translator.with_config(self.translator.cfg.replace(nbest=n))
        res = tr.translate_detailed(lines, doc_ids=doc_ids)
        # a line without an n-best list (passed through untranslated, or split for length): its output, no score
        return [res.nbest.get(i) or ([(res.lines[i], None)] if res.lines[i] else []) for i in range(len(lines))]

    def describe(self, default: bool) -> dict:
        d = {"model_id": self.model_id, "name": self.name, "kind": self.kind or None, "loaded": self.loaded,
             "default": default, "scores": self.scores, "checkpoint": Path(self.checkpoint).name}
        if self.loaded:
            d["beam"] = self.translator.cfg.search.beam
            d["engine"] = self.translator.cfg.model.engine
        return d


class UnknownModel(KeyError):
    """A request named a model this server does not hold; the message lists those it holds."""

    def __str__(self) -> str:
        return self.args[0]


class ModelRegistry:
    """The server's models, the first the default (module doc). Thread-safe: a lazy model is
    loaded once, by the first request that needs it (the others wait for it)."""

    def __init__(self, models: list[ServedModel]):
        if not models:
            raise ValueError("a server needs at least one model")
        self.models = models
        self._lock = threading.Lock()

    @classmethod
    def of(cls, translator, name: str = "") -> "ModelRegistry":
        """One loaded model (``translator``) called ``name``."""
        kind = "document" if translator.reads_documents else "sentence"
        return cls([ServedModel(name or "model", FIRST_MODEL_ID, str(translator.cfg.model.checkpoint), kind,
                                translator=translator)])

    @property
    def default(self) -> ServedModel:
        return self.models[0]

    def find(self, ref) -> ServedModel:
        """The model ``ref`` names (module doc); raises UnknownModel."""
        if ref is None or ref == "":
            return self.default
        for m in self.models:
            if ref in (m.model_id, m.name, str(m.model_id)):
                return m
        for m in self.models:
            if ref == m.kind:
                return m
        listed = ", ".join(f"{m.model_id} ({m.name}, {m.kind or 'not loaded'})" for m in self.models)
        raise UnknownModel(f"no model {ref!r} on this server: it serves {listed} (GET /translator/models)")

    def get(self, ref) -> ServedModel:
        """The model ``ref`` names, loaded. Raises UnknownModel, or what loading raised."""
        m = self.find(ref)
        if m.translator is None:
            with self._lock:
                if m.translator is None:
                    log.info("loading model %s (%s) for its first request", m.name, m.checkpoint)
                    tr = m.load()
                    m.kind = "document" if tr.reads_documents else "sentence"
                    m.translator, m.load = tr, None
        return m

    def describe(self) -> list[dict]:
        return [m.describe(k == 0) for k, m in enumerate(self.models)]


def shipped_of(checkpoint: str):
    """The shipped model whose file ``checkpoint`` is, or None."""
    from doctrans.runtime.shipped import shipped_models

    try:
        path = Path(checkpoint).resolve()
        return next((m for m in shipped_models() if m.path.resolve() == path), None)
    except (OSError, ValueError):
        return None


def served_models(translator, extra: tuple[str, ...] = (), build: Callable | None = None) -> ModelRegistry:
    """The registry of a server of ``translator`` (loaded; its config's checkpoint is the
    default model) and the ``extra`` models (shipped names or checkpoints, loaded lazily by
    ``build(cfg)`` with the default model's search settings; ``("none",)``: no extra model;
    ``()``: the default shipped model of the other kind when ``translator`` is a shipped model)."""
    from doctrans.runtime.shipped import KINDS, default_model, resolve

    cfg = translator.cfg
    own = shipped_of(cfg.model.checkpoint)
    first = ServedModel(own.name if own else Path(cfg.model.checkpoint).name, FIRST_MODEL_ID, str(cfg.model.checkpoint),
                        "document" if translator.reads_documents else "sentence", translator=translator)
    models = [first]
    if extra == ():
        if own is None:
            return ModelRegistry(models)
        try:
            other = default_model(next(k for k in KINDS if k != first.kind))
        except ValueError:
            return ModelRegistry(models)
        extra = (other.name,)
    if extra == ("none",):
        return ModelRegistry(models)
    for k, spec in enumerate(extra, 1):
        path = resolve(spec)
        if not Path(path).exists():
            raise ValueError(f"--extra-model {spec}: no such checkpoint file, nor a shipped model's name")
        shipped = shipped_of(path)
        sub = cfg.replace(checkpoint=path, ensemble=(), ensemble_weights=(), context_options=(),
                          engine="native", compute_type="default")
        models.append(ServedModel(shipped.name if shipped else Path(path).name, FIRST_MODEL_ID + k, path,
                                  shipped.kind if shipped else "", load=lambda c=sub: build(c)))
    names = [m.name for m in models]
    if len(set(names)) != len(names):
        raise ValueError(f"the served models have the same name twice: {', '.join(names)}")
    return ModelRegistry(models)


@dataclass(frozen=True)
class Languages:
    """The model's ``source`` and ``target`` language codes (module doc)."""

    source: str = "zh"
    target: str = "en"

    def script(self, code: str) -> str | None:
        """How a request's ``source`` code is read: the ``to_simplified`` script (auto |
        simplified | traditional), or None for a code this server does not translate from."""
        c = (code or "").lower()
        if c in ("auto", self.source.lower()):
            return "auto"
        if self.source == "zh" and c in SIMPLIFIED:
            return "simplified"
        if self.source == "zh" and c in TRADITIONAL:
            return "traditional"
        return None

    def takes_target(self, code: str) -> bool:
        """Whether ``code`` is the model's target (a region subtag allowed: en-US is en)."""
        return (code or "").split("-")[0].lower() == self.target.lower()

    def listing(self) -> list[dict]:
        """``GET /languages``: LibreTranslate's [{"code", "name", "targets"}]."""
        codes = [self.source] + (["zh-Hans", "zh-Hant"] if self.source == "zh" else [])
        out = [{"code": c, "name": NAMES.get(c, c), "targets": [self.target]} for c in codes]
        return out + [{"code": self.target, "name": NAMES.get(self.target, self.target), "targets": []}]

    def detect(self, text: str) -> list[dict]:
        """LibreTranslate's ``/detect`` answer for ``text``: [{"confidence" (0–100), "language"}],
        most confident first — the source language with the share of Han characters among the
        letters, the target (when it is written in Latin letters) with the share of Latin
        letters; [{"confidence": 0.0, "language": source}] for a text without letters."""
        letters = [c for c in text if c.isalpha()]
        if not letters:
            return [{"confidence": 0.0, "language": self.source}]
        han = sum(1 for c in letters if _is_han(c))
        latin = sum(1 for c in letters if c.isascii())
        shares = {self.source: han} if self.source == "zh" else {}
        if self.target in ("en", "de", "fr", "es"):
            shares[self.target] = shares.get(self.target, 0) + latin
        out = [{"confidence": round(100.0 * n / len(letters), 1), "language": code}
               for code, n in shares.items() if n]
        out.sort(key=lambda d: -d["confidence"])
        return out or [{"confidence": 0.0, "language": self.source}]


def _is_han(c: str) -> bool:
    o = ord(c)
    return 0x3400 <= o <= 0x4DBF or 0x4E00 <= o <= 0x9FFF or 0xF900 <= o <= 0xFAFF or 0x20000 <= o <= 0x2FA1F
