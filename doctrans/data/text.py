"""Text processing shared by ``doctrans preprocess`` and the translator.

One pipeline per language, applied line by line (an empty line in gives an empty line out, and
one line in never gives more than one line out, so files stay line-aligned):

* Chinese: ``normalize_zh`` (NFKC: full-width → half-width punctuation/ASCII; whitespace runs →
  one space) → ``segment_zh`` (jieba, each space-separated part on its own) → lowercase Latin
  letters when the dataset is lowercased.
* English: ``tokenize_en`` (Moses, ``escape=False`` so ``'`` stays ``'`` and not ``&apos;``;
  ``aggressive_dash_splits=True`` so ``woo-hoo`` → ``woo @-@ hoo`` as in the TVsub references)
  → lowercase *after* tokenizing (Moses splits a sentence-internal ``.`` only before an
  upper-case word, so lowercasing first would lose those splits).
* Both: BPE with subword-nmt (``@@ `` separator); ``merge_bpe`` and ``detokenize_en`` undo it.

A line that contains Moses escapes (``&apos;``, ``&quot;``, ``&amp;``…) is taken to be Moses
tokenized already (TVsub's dev/test ``.en`` files are): it is unescaped and only the dash split
is applied, because re-tokenizing would turn ``don 't`` into ``don ' t``. The check is per line,
so the result does not depend on how lines are batched or chunked across processes.
"""
from __future__ import annotations

import functools
import html
import io
import json
import logging
import os
import re
import unicodedata
from collections.abc import Iterable, Sequence
from pathlib import Path

from doctrans.data.casing import Recaser

logger = logging.getLogger(__name__)

LANGUAGES = ("zh", "en")
BPE_SEPARATOR = "@@"

_MOSES_ESCAPE_RE = re.compile(r"&(?:apos|quot|amp|lt|gt|#\d+);")
_DASH_RE = re.compile(r"(?<=[^\W_])-(?=[^\W_])")  # Moses aggressive dash split, between alnums
_BPE_JOIN_RE = re.compile(re.escape(BPE_SEPARATOR) + r"(?: |$)")


def normalize_zh(line: str) -> str:
    """NFKC-normalise one Chinese line and collapse every whitespace run to one space.

    ``？`` → ``?``, ``，`` → ``,``, full-width ASCII → ASCII, ideographic space → space. The
    single spaces left mark the utterance parts of TVsub lines (raw files use two spaces).
    """
    return " ".join(unicodedata.normalize("NFKC", line).split())


@functools.lru_cache(maxsize=1)
def _jieba_tokenizer():
    """jieba's default dictionary, loaded once per process, with its logging at WARNING."""
    import jieba

    jieba.setLogLevel(logging.WARNING)
    tok = jieba.Tokenizer()  # own instance: no user dictionaries added elsewhere leak in
    tok.initialize()
    return tok


def segment_zh(lines: Iterable[str]) -> list[str]:
    """Word-segment Chinese lines with jieba; tokens joined by single spaces.

    Each whitespace-separated part of a line is segmented on its own (precise mode, HMM for
    unknown words), so segmentation never crosses an utterance boundary. The output depends
    only on the line and the jieba version (no parallel mode, no user dictionary). Lines are
    expected normalised (``normalize_zh``); whitespace-only tokens are dropped.
    """
    tok = _jieba_tokenizer()
    out = []
    for line in lines:
        words = [w for part in line.split() for w in tok.cut(part, HMM=True) if not w.isspace()]
        out.append(" ".join(words))
    return out


@functools.lru_cache(maxsize=1)
def _moses_en():
    from sacremoses import MosesDetokenizer, MosesTokenizer

    return MosesTokenizer(lang="en"), MosesDetokenizer(lang="en")


def _is_moses_tokenized(line: str) -> bool:
    return _MOSES_ESCAPE_RE.search(line) is not None


def tokenize_en(lines: Iterable[str], lowercase: bool = True) -> list[str]:
    """Moses-tokenize English lines (no XML escaping, aggressive dash splits).

    Lines that already carry Moses escapes are unescaped (``html.unescape``) and only get the
    ``@-@`` dash split (see module docstring). Lowercasing, if asked, happens after
    tokenization. Output tokens are separated by single spaces.
    """
    mtok, _ = _moses_en()
    out = []
    for line in lines:
        if _is_moses_tokenized(line):
            tok = _DASH_RE.sub(" @-@ ", html.unescape(line))
        else:
            tok = mtok.tokenize(line, aggressive_dash_splits=True, return_str=True, escape=False)
        tok = " ".join(tok.split())
        out.append(tok.lower() if lowercase else tok)
    return out


def detokenize_en(lines: Iterable[str]) -> list[str]:
    """Moses-detokenize English lines (``don 't`` → ``don't``, ``woo @-@ hoo`` → ``woo-hoo``)."""
    _, mdetok = _moses_en()
    return [mdetok.detokenize(line.split(), return_str=True, unescape=False) for line in lines]


def merge_bpe(line: str) -> str:
    """Undo BPE: ``"un@@ believ@@ able ."`` → ``"unbelievable ."``."""
    return _BPE_JOIN_RE.sub("", line)


def _load_bpe(codes_path: str):
    """subword-nmt BPE for a codes file, or None when it holds no merges (tokens stay whole).

    Cached per process; a rewritten file (new mtime or size) is loaded again. Raises
    ValueError for a malformed codes file (subword-nmt itself would ``sys.exit``).
    """
    st = os.stat(codes_path)
    return _load_bpe_cached(codes_path, st.st_mtime_ns, st.st_size)


@functools.lru_cache(maxsize=4)
def _load_bpe_cached(codes_path: str, mtime_ns: int, size: int):
    with open(codes_path, encoding="utf-8") as f:
        return _bpe_from_text(f.read(), codes_path)


@functools.lru_cache(maxsize=4)
def _bpe_from_text(text: str, label: str = "<checkpoint>"):
    """subword-nmt BPE for the text of a codes file (None when it holds no merges). Cached per
    process by text. Raises ValueError naming ``label`` for malformed codes."""
    from subword_nmt.apply_bpe import BPE

    if not [line for line in text.splitlines() if line.strip() and not line.startswith("#version")]:
        return None
    try:
        return BPE(io.StringIO(text), separator=BPE_SEPARATOR)
    except SystemExit:
        raise ValueError(f"malformed BPE codes file {label}") from None


def codes_path(prepared_dir: str | Path, lang: str, joint: bool) -> Path:
    """Where a prepared dataset keeps the BPE codes used for ``lang``."""
    return Path(prepared_dir) / ("bpe.codes.joint" if joint else f"bpe.codes.{lang}")


def recaser_path(prepared_dir: str | Path, lang: str) -> Path:
    """Where a prepared dataset keeps the recaser of ``lang`` (``data/casing.py``), if it has one."""
    return Path(prepared_dir) / f"recaser.{lang}.json"


class TextProcessor:
    """Raw text of one language ↔ the BPE token strings the model reads and writes.

    ``tokenize`` (normalise, segment/tokenize, lowercase) then ``apply_bpe`` give ``encode``;
    ``merge_bpe`` then ``detokenize`` go back; ``recase`` restores the case of lowercased output
    when the processor has a ``recaser`` (``data/casing.py``). Built with ``from_prepared`` for the exact
    settings a prepared dataset was made with, or with ``from_settings`` for those a checkpoint
    carries (``settings()``). Without codes only ``tokenize`` and the
    reverse steps work (preprocess tokenizes before it has learnt BPE).
    """

    SETTINGS_VERSION = 1

    def __init__(self, lang: str, lowercase: bool = True, bpe_codes: str | Path | None = None,
                 bpe_codes_text: str | None = None, recaser: Recaser | None = None):
        if lang not in LANGUAGES:
            raise ValueError(f"unsupported language {lang!r}; supported: {', '.join(LANGUAGES)}")
        self.lang = lang
        self.lowercase = lowercase
        self.bpe_codes = str(bpe_codes) if bpe_codes is not None else None
        self.bpe_codes_text = bpe_codes_text      # the codes themselves (from a checkpoint)
        self.recaser = recaser

    def settings(self) -> dict:
        """Everything ``from_settings`` needs, as primitive types (checkpoints store it, so a model
        translates without its prepared dataset): language, lowercasing, the BPE codes' text, and
        the recaser's table when there is one (``recaser``; absent otherwise, as in checkpoints
        of doctrans before it). Raises RuntimeError when built without codes."""
        if self.bpe_codes_text is None and self.bpe_codes is None:
            raise RuntimeError("TextProcessor has no BPE codes (build it with from_prepared)")
        text = self.bpe_codes_text
        if text is None:
            text = Path(self.bpe_codes).read_text(encoding="utf-8")
        out = {"version": self.SETTINGS_VERSION, "lang": self.lang, "lowercase": bool(self.lowercase),
               "bpe_codes": text}
        if self.recaser is not None:
            out["recaser"] = self.recaser.to_dict()
        return out

    @classmethod
    def from_settings(cls, settings: dict) -> TextProcessor:
        """The processor ``settings()`` describes. Raises ValueError for settings of a newer
        doctrans or with keys missing."""
        if settings.get("version", 0) > cls.SETTINGS_VERSION:
            raise ValueError(f"text settings version {settings.get('version')} is newer than this doctrans "
                             f"reads ({cls.SETTINGS_VERSION}): upgrade doctrans")
        missing = [k for k in ("lang", "lowercase", "bpe_codes") if k not in settings]
        if missing:
            raise ValueError(f"text settings lack {', '.join(missing)}")
        recaser = Recaser.from_dict(settings["recaser"], "text settings") if settings.get("recaser") else None
        return cls(settings["lang"], lowercase=settings["lowercase"], bpe_codes_text=settings["bpe_codes"],
                   recaser=recaser)

    @classmethod
    def from_prepared(cls, prepared_dir: str | Path, lang: str) -> TextProcessor:
        """Processor for side ``lang`` of a prepared dataset (reads ``meta.json``).

        Raises FileNotFoundError when ``meta.json`` or the codes file is missing (an
        unfinished preprocess run), ValueError when ``lang`` is neither side of the dataset.
        """
        prepared_dir = Path(prepared_dir)
        meta_path = prepared_dir / "meta.json"
        if not meta_path.is_file():
            raise FileNotFoundError(f"{meta_path} not found: not a finished prepared dataset")
        meta = json.loads(meta_path.read_text(encoding="utf-8"))
        if lang not in (meta["src"], meta["tgt"]):
            raise ValueError(f"{prepared_dir} is {meta['src']}-{meta['tgt']}; no side {lang!r}")
        codes = codes_path(prepared_dir, lang, meta["bpe"]["joint"])
        if not codes.is_file():
            raise FileNotFoundError(f"BPE codes {codes} missing")
        recaser = recaser_path(prepared_dir, lang)
        return cls(lang, lowercase=meta["lowercase"], bpe_codes=codes,
                   recaser=Recaser.load(recaser) if recaser.is_file() else None)

    def tokenize(self, lines: Iterable[str]) -> list[str]:
        """Normalise and segment (zh) or Moses-tokenize (en); lowercase if configured."""
        if self.lang == "zh":
            segmented = segment_zh(normalize_zh(line) for line in lines)
            return [s.lower() for s in segmented] if self.lowercase else segmented
        return tokenize_en(lines, lowercase=self.lowercase)

    def apply_bpe(self, tok_lines: Iterable[str], protect: frozenset[str] = frozenset()) -> list[str]:
        """Split tokenized lines into BPE units (``@@ `` marks a unit continued by the next).

        Tokens in ``protect`` stay whole (e.g. inserted DP pronouns and ``#DP#``, which
        segmentation must never split). Raises RuntimeError when built without codes.
        """
        if self.bpe_codes_text is not None:
            bpe = _bpe_from_text(self.bpe_codes_text)
        elif self.bpe_codes is not None:
            bpe = _load_bpe(self.bpe_codes)
        else:
            raise RuntimeError("TextProcessor has no BPE codes (build it with from_prepared)")
        if bpe is None:
            return [" ".join(line.split()) for line in tok_lines]
        if not protect:
            return [bpe.process_line(line) for line in tok_lines]
        out = []
        for line in tok_lines:
            units: list[str] = []
            for tok in line.split():
                units.extend([tok] if tok in protect else bpe.segment_tokens([tok]))
            out.append(" ".join(units))
        return out

    def encode(self, lines: Iterable[str]) -> list[str]:
        """Raw lines → BPE lines: ``apply_bpe(tokenize(lines))``."""
        return self.apply_bpe(self.tokenize(lines))

    merge_bpe = staticmethod(merge_bpe)

    def detokenize(self, lines: Sequence[str]) -> list[str]:
        """Tokenized (BPE-merged) lines → plain text. Moses for English only.

        Raises ValueError for Chinese, which has no detokenizer here (join tokens instead).
        """
        if self.lang != "en":
            raise ValueError(f"detokenize is only defined for 'en', not {self.lang!r}")
        return detokenize_en(lines)

    def recase(self, tok_lines: Sequence[str]) -> list[str]:
        """Tokenized (BPE-merged) lowercase lines → the same tokens in their usual case
        (``Recaser.recase``). Raises RuntimeError when the processor has no recaser."""
        if self.recaser is None:
            raise RuntimeError(f"TextProcessor({self.lang!r}) has no recaser")
        return self.recaser.recase(tok_lines)

    def __repr__(self) -> str:
        codes = self.bpe_codes if self.bpe_codes_text is None else f"<{len(self.bpe_codes_text)} chars>"
        return f"TextProcessor(lang={self.lang!r}, lowercase={self.lowercase}, bpe_codes={codes!r})"
