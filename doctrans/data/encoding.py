"""Reading text in the encodings and scripts Chinese subtitles come in: legacy encodings
(GBK / GB18030 / Big5 / UTF-16 / UTF-8 with a BOM) detected or given, and Traditional script
converted to Simplified for a model trained on Simplified text.

Encoding (``decode_text``): a given ``encoding`` is used as is (undecodable bytes are an error
naming the file and line). ``auto``: a byte-order mark decides (UTF-8-sig, UTF-16, UTF-32);
else bytes that are valid UTF-8 are UTF-8; else charset-normalizer (``from_bytes``, a
well-kept detector) chooses among ``CANDIDATES``, the encodings Chinese text is written in
(GB18030 ⊃ GBK ⊃ GB2312, Big5, UTF-16 without a BOM); the choice is logged. Refused with
``EncodingError`` (a ValueError naming the file): a binary file (NUL bytes that are not UTF-16,
or control characters), a file with lines of valid UTF-8 *and* lines that are not (mixed
encodings: the lines are named), and a file no candidate decodes (undecidable).

Script (``to_simplified``): Traditional characters are recognised with OpenCC's
Traditional→Simplified table (``opencc-python-reimplemented``, pure Python): a text is
Traditional when converting it changes at least max(2, 5 %) of its Han characters [I: Simplified
text keeps nearly every character under t2s, Traditional text changes about a quarter]. It is
then converted with OpenCC ``t2s`` (phrase-aware: 頭髮 → 头发, 發生 → 发生); ``script`` forces
the choice (``simplified``: never converted, ``traditional``: always).
"""
from __future__ import annotations

import codecs
import functools
import logging
import re

log = logging.getLogger(__name__)

ENCODINGS_AUTO = "auto"
SCRIPTS = ("auto", "simplified", "traditional")
CANDIDATES = ("gb18030", "big5", "utf_16_le", "utf_16_be")     # what charset-normalizer may choose
_BOMS = ((codecs.BOM_UTF32_LE, "utf-32"), (codecs.BOM_UTF32_BE, "utf-32"), (codecs.BOM_UTF8, "utf-8-sig"),
         (codecs.BOM_UTF16_LE, "utf-16"), (codecs.BOM_UTF16_BE, "utf-16"))
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0e-\x1a\x1c-\x1f]")      # not \t \n \f \r, not ESC (\x1b)
_HAN = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]")


class EncodingError(ValueError):
    """A file that is binary, mixes encodings, or whose encoding cannot be decided; the message
    names the file (and the lines where it helps)."""


def _binary(text: str) -> bool:
    """Control characters (other than tab, newlines, form feed, ESC) in more than 1 % of the
    first 4,096 characters, or any NUL."""
    head = text[:4096]
    bad = len(_CONTROL.findall(head))
    return "\x00" in head or bad > max(1, len(head) // 100)


def _line_of(data: bytes, offset: int) -> int:
    return data.count(b"\n", 0, offset) + 1


def _mixed(data: bytes) -> tuple[int, int] | None:
    """(a line that is non-ASCII valid UTF-8, a line that is not valid UTF-8), 1-based, when the
    file has both; else None."""
    good = bad = 0
    for k, line in enumerate(data.split(b"\n"), 1):
        if line.isascii():
            continue
        try:
            line.decode("utf-8")
            good = good or k
        except UnicodeDecodeError:
            bad = bad or k
        if good and bad:
            return good, bad
    return None


def decode_text(data: bytes, name: str, encoding: str = ENCODINGS_AUTO) -> tuple[str, str]:
    """``data`` (a file's bytes; ``name`` labels messages) → (text, the encoding used); see the
    module doc for ``auto``. A leading BOM is removed. Raises EncodingError naming ``name`` for a
    binary, mixed-encoding or undecidable file, or (given ``encoding``) for bytes it cannot
    decode (with the line); LookupError-style ValueError for an unknown encoding name."""
    if encoding != ENCODINGS_AUTO:
        try:
            codecs.lookup(encoding)
        except LookupError:
            raise ValueError(f"unknown encoding {encoding!r} (e.g. utf-8, gb18030, big5, utf-16)") from None
        try:
            text = data.decode(encoding)
        except UnicodeDecodeError as e:
            raise EncodingError(f"{name}:{_line_of(data, e.start)}: not valid {encoding} (byte 0x{data[e.start]:02x} "
                                f"at offset {e.start}); give the file's encoding with --encoding, or "
                                f"--encoding auto to detect it") from None
        text = text.lstrip("\ufeff")
        if _binary(text):
            raise EncodingError(f"{name}: looks like a binary file (control characters), not text")
        log.info("%s: read as %s (given)", name, encoding)
        return text, encoding
    for bom, enc in _BOMS:
        if data.startswith(bom):
            try:
                text = data.decode(enc)
            except UnicodeDecodeError as e:
                raise EncodingError(f"{name}: starts with a {enc} byte-order mark but is not valid {enc} "
                                    f"(line {_line_of(data, e.start)})") from None
            log.info("%s: encoding %s (byte-order mark)", name, enc)
            return text.lstrip("\ufeff"), enc
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        text = None
    if text is not None:
        if _binary(text):
            if b"\x00" in data:
                return _detect(data, name)           # UTF-16 without a BOM decodes as (NUL-laden) UTF-8
            raise EncodingError(f"{name}: looks like a binary file (control characters), not text")
        log.info("%s: encoding utf-8", name)
        return text, "utf-8"
    mixed = _mixed(data)
    if mixed is not None:
        raise EncodingError(f"{name}: mixed encodings: line {mixed[0]} is UTF-8, line {mixed[1]} is not; "
                            f"convert the file to one encoding (e.g. with iconv) before translating it")
    return _detect(data, name)


def _detect(data: bytes, name: str) -> tuple[str, str]:
    from charset_normalizer import from_bytes

    best = from_bytes(data, cp_isolation=list(CANDIDATES)).best()
    if best is None:
        kind = "a binary file" if b"\x00" in data or _binary(data[:4096].decode("latin-1")) else "undecidable"
        raise EncodingError(f"{name}: {kind}: not UTF-8 and none of {', '.join(CANDIDATES)} decodes it; if it is "
                            f"text, give its encoding with --encoding")
    text = str(best)
    if _binary(text):
        raise EncodingError(f"{name}: looks like a binary file (control characters), not text")
    enc = best.encoding
    log.info("%s: encoding %s (detected by charset-normalizer; --encoding to override)", name, enc)
    return text.lstrip("\ufeff"), enc


def read_text(path, encoding: str = ENCODINGS_AUTO) -> tuple[str, str]:
    """``decode_text`` of a file's bytes, named by its path. Raises OSError, EncodingError."""
    with open(path, "rb") as f:
        return decode_text(f.read(), str(path), encoding)


@functools.lru_cache(maxsize=4)
def opencc(config: str):
    """An OpenCC converter (``t2s``: Traditional → Simplified)."""
    from opencc import OpenCC

    return OpenCC(config)


def traditional_share(text: str) -> tuple[int, int]:
    """(Han characters OpenCC t2s changes, Han characters) of ``text``."""
    han = "".join(_HAN.findall(text))
    if not han:
        return 0, 0
    conv = opencc("t2s").convert(han)
    if len(conv) != len(han):                   # phrase tables keep lengths; count per character otherwise
        conv = "".join(opencc("t2s").convert(c) for c in han)
    return sum(a != b for a, b in zip(han, conv)), len(han)


def is_traditional(text: str) -> bool:
    """Whether ``text`` is in Traditional script (module doc: ≥ max(2, 5 %) of its Han characters
    change under OpenCC t2s)."""
    changed, total = traditional_share(text)
    return total > 0 and changed >= max(2, 0.05 * total)


def to_simplified(lines: list[str], name: str, script: str = "auto") -> tuple[list[str], bool]:
    """``lines`` in Simplified script for the model, and whether they were converted: ``auto``
    converts when ``is_traditional`` of all lines together (logged), ``traditional`` always,
    ``simplified`` never. Line count and empty lines are kept. Raises ValueError for another
    ``script``."""
    if script not in SCRIPTS:
        raise ValueError(f"script must be one of {', '.join(SCRIPTS)}, got {script!r}")
    if script == "simplified":
        return lines, False
    if script == "auto":
        changed, total = traditional_share("".join(lines))
        if not (total > 0 and changed >= max(2, 0.05 * total)):
            return lines, False
        log.info("%s: Traditional script detected (%d of %d Han characters differ in Simplified): converted to "
                 "Simplified with OpenCC t2s (--script simplified to keep it as is)", name, changed, total)
    else:
        log.info("%s: converted from Traditional to Simplified script with OpenCC t2s (--script traditional)", name)
    cc = opencc("t2s")
    return [cc.convert(x) if x else x for x in lines], True
