"""Reading text in the encodings and scripts Chinese subtitles come in: legacy encodings
(GBK / GB18030 / Big5 / UTF-16 / UTF-8 with a BOM) detected or given, and Traditional script
converted to Simplified for a model trained on Simplified text.

Encoding (``decode_text``): a given ``encoding`` is used as is (undecodable bytes are an error
naming the file and line); a text that then looks implausible (``implausible_share``) is
decoded all the same, with a warning naming the share and an encoding that reads better.
``auto``: a byte-order mark decides (UTF-8-sig, UTF-16, UTF-32); else bytes that are valid UTF-8
are UTF-8; else the *whole file* decides (``decode_legacy``): the ``LEGACY`` encodings that
decode it strictly (GB18030 ⊃ GBK ⊃ GB2312, Big5), the one whose text is plausible when several
do (charset-normalizer breaks a near tie); a short line that happens to be valid UTF-8 (十一 in
GBK is the bytes of "ʮһ") does not make a GB18030 file "mixed". Else charset-normalizer
(``from_bytes``, a well-kept detector) chooses among ``CANDIDATES`` (UTF-16 without a BOM too).
The choice is logged. Refused with ``EncodingError`` (a ValueError naming the file): a binary
file (NUL bytes that are not UTF-16, or control characters), a file mixing UTF-8 and another
encoding (a line that reads as UTF-8 — valid UTF-8 with fewer rare characters read as UTF-8
than read in the file's encoding — and a line that is not valid UTF-8: both are named), and a
file no candidate decodes (undecidable: where each encoding first fails is named).

Plausibility (``implausible_share``): the share of a text's non-ASCII characters that are not
common: common are the 3,755 level-1 characters of GB2312 (the most used Simplified characters)
and the 5,401 "frequently used" characters of Big5 (A440–C67E), both taken from Python's own
codecs (6,722 together), and punctuation and symbols (Latin-1, general punctuation, CJK symbols,
full-width forms, arrows, geometric and miscellaneous symbols). [I: on 100 TVsub episodes the
right decoding has 0–0.6 % such characters, the episodes in Big5 read as GB18030 73–77 %, and
12-line GBK excerpts that Big5 decodes, read as Big5, 27–62 %.]
``IMPLAUSIBLE`` (20 %) of at least ``MIN_JUDGED`` (10) non-ASCII characters is implausible.

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
LEGACY = ("gb18030", "big5")          # tried by strict decodes of the whole file, before any detector
IMPLAUSIBLE = 0.2                     # a larger share of rare / private-use characters is implausible
MIN_JUDGED = 10                       # non-ASCII characters needed before a text is judged implausible
_NEAR_TIE = 0.05                      # plausibility shares closer than this: charset-normalizer decides
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


@functools.lru_cache(maxsize=1)
def _common_chars() -> str:
    """The common non-ASCII characters (module doc), as one string."""
    chars = set()
    for codec, rows, ok in (("gb2312", range(0xB0, 0xD8), lambda code: True),
                            ("big5", range(0xA4, 0xC7), lambda code: code <= 0xC67E)):
        for hi in rows:
            for lo in (*range(0x40, 0x7F), *range(0xA1, 0xFF)):
                if ok(hi << 8 | lo):
                    try:
                        chars.add(bytes((hi, lo)).decode(codec))
                    except UnicodeDecodeError:
                        pass
    for lo, hi in ((0xA0, 0xFF), (0x2000, 0x206F), (0x2190, 0x21FF), (0x25A0, 0x26FF), (0x3000, 0x303F),
                   (0xFE30, 0xFE4F), (0xFF00, 0xFFEF)):
        chars.update(map(chr, range(lo, hi + 1)))
    return "".join(sorted(chars))


@functools.lru_cache(maxsize=1)
def _common_run() -> re.Pattern:
    return re.compile(f"[\\x00-\\x7f{re.escape(_common_chars())}]+")


@functools.lru_cache(maxsize=1)
def common_count() -> int:
    """How many Han characters count as common (GB2312 level 1 ∪ Big5 frequently used)."""
    return len(_HAN.findall(_common_chars()))


def _uncommon(text: str) -> int:
    return len(_common_run().sub("", text))


def implausible_share(text: str) -> tuple[int, int]:
    """(rare or private-use characters, non-ASCII characters) of ``text``: see the module doc
    for what is common."""
    return _uncommon(text), len(text) - len(text.encode("ascii", "ignore"))


def _reads_as_utf8(line: bytes, text: str, encodings) -> bool:
    """Whether a non-ASCII line that is valid UTF-8 (``text``) reads as UTF-8: fewer uncommon
    characters so than in each of ``encodings`` that decodes it."""
    rare = _uncommon(text)
    for enc in encodings:
        try:
            if _uncommon(line.decode(enc)) <= rare:
                return False
        except UnicodeDecodeError:
            pass
    return True


def _mixed(data: bytes, encodings=LEGACY) -> tuple[int, int] | None:
    """(a line that reads as UTF-8 rather than as any of ``encodings``, a line that is not valid
    UTF-8), 1-based, when the file has both; else None."""
    good = bad = 0
    for k, line in enumerate(data.split(b"\n"), 1):
        if line.isascii():
            continue
        try:
            text = line.decode("utf-8")
        except UnicodeDecodeError:
            bad = bad or k
        else:
            if not good and _reads_as_utf8(line, text, encodings):
                good = k
        if good and bad:
            return good, bad
    return None


def _mixed_error(name: str, mixed: tuple[int, int]) -> EncodingError:
    return EncodingError(f"{name}: mixed encodings: line {mixed[0]} is UTF-8, line {mixed[1]} is not; "
                         f"convert the file to one encoding (e.g. with iconv) before translating it")


def _pct(share: float) -> str:
    return f"{100 * share:.0f}%" if share >= 0.01 or share == 0 else f"{100 * share:.1f}%"


def _warn_implausible(text: str, data: bytes, name: str, enc: str, how: str,
                      share: tuple[int, int] | None = None) -> None:
    """Log a warning when ``text`` (``data`` decoded as ``enc``, ``how``: given / detected ...;
    ``share``: its ``implausible_share`` when known) is implausible, naming the share and another
    encoding that reads plausibly, if one does."""
    rare, total = share or implausible_share(text)
    if total < MIN_JUDGED or rare <= IMPLAUSIBLE * total:
        return
    better = []
    for alt in ("utf-8", *LEGACY):
        if codecs.lookup(alt).name == codecs.lookup(enc).name:
            continue
        try:
            alt_text = data.decode(alt).lstrip("\ufeff")
        except UnicodeDecodeError:
            continue
        a_rare, a_total = implausible_share(alt_text)
        if alt_text != text and a_total and a_rare <= IMPLAUSIBLE * a_total:
            better.append((a_rare / a_total, alt))
    if better:
        share, alt = min(better)
        hint = f"it reads as {alt} with {_pct(share)}; pass --encoding {alt} if that is its encoding"
    else:
        hint = "no other encoding reads it better; check the file's encoding"
    from charset_normalizer import from_bytes

    guess = from_bytes(data, cp_isolation=["utf_8", *CANDIDATES]).best()
    log.warning("%s: the text decoded as %s (%s) looks implausible: %s of its %d non-ASCII characters are rare or "
                "private-use (not among the %d common Chinese characters or punctuation); %s (charset-normalizer "
                "guesses %s)", name, enc, how, _pct(rare / total), total, common_count(), hint,
                guess.encoding if guess is not None else "nothing")


def decode_legacy(data: bytes, name: str) -> tuple[str, str] | None:
    """Bytes that are not valid UTF-8 (a file's; ``name`` labels messages) → (text, encoding)
    when the whole of them decodes strictly as one of ``LEGACY``: the only one that does, else
    the most plausible (``implausible_share``; charset-normalizer when the shares are within
    ``_NEAR_TIE``); logged. None when none of them decodes the whole file. Raises EncodingError
    naming the lines for a UTF-8 / other mixture, naming the file for a binary file."""
    readings = {}
    for enc in LEGACY:
        try:
            readings[enc] = data.decode(enc)
        except UnicodeDecodeError:
            pass
    if not readings:
        return None
    counts = {enc: implausible_share(text) for enc, text in readings.items()}
    shares = {enc: rare / total if total else 0.0 for enc, (rare, total) in counts.items()}
    ranked = sorted(readings, key=shares.__getitem__)
    enc = ranked[0]
    if len(ranked) == 1:
        how = f"the whole file decodes as {enc} only"
    elif shares[ranked[1]] - shares[enc] >= _NEAR_TIE:
        how = "; ".join(f"{e} reads with {_pct(shares[e])} rare characters" for e in ranked)
    else:
        from charset_normalizer import from_bytes

        best = from_bytes(data, cp_isolation=ranked).best()
        enc = best.encoding if best is not None and best.encoding in readings else enc
        how = f"{' and '.join(ranked)} decode it; charset-normalizer chose {enc}"
    mixed = _mixed(data, (enc,))
    if mixed is not None:
        raise _mixed_error(name, mixed)
    text = readings[enc].lstrip("\ufeff")
    if _binary(text):
        raise EncodingError(f"{name}: looks like a binary file (control characters), not text")
    log.info("%s: encoding %s (not UTF-8; %s; --encoding to override)", name, enc, how)
    _warn_implausible(text, data, name, enc, "detected", counts[enc])
    return text, enc


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
        _warn_implausible(text, data, name, encoding, "given")
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
        _warn_implausible(text, data, name, "utf-8", "valid UTF-8")
        return text, "utf-8"
    legacy = decode_legacy(data, name)
    if legacy is not None:
        return legacy
    mixed = _mixed(data)
    if mixed is not None:
        raise _mixed_error(name, mixed)
    return _detect(data, name)


def _detect(data: bytes, name: str) -> tuple[str, str]:
    from charset_normalizer import from_bytes

    best = from_bytes(data, cp_isolation=list(CANDIDATES)).best()
    if best is None:
        if b"\x00" in data or _binary(data[:4096].decode("latin-1")):
            raise EncodingError(f"{name}: a binary file: not UTF-8 and none of {', '.join(CANDIDATES)} decodes it; "
                                f"if it is text, give its encoding with --encoding")
        raise EncodingError(f"{name}: undecidable: not UTF-8 and none of {', '.join(CANDIDATES)} decodes it "
                            f"({_first_errors(data)}); if it is text, give its encoding with --encoding")
    text = str(best)
    if _binary(text):
        raise EncodingError(f"{name}: looks like a binary file (control characters), not text")
    enc = best.encoding
    log.info("%s: encoding %s (detected by charset-normalizer; --encoding to override)", name, enc)
    _warn_implausible(text, data, name, enc, "detected by charset-normalizer")
    return text.lstrip("\ufeff"), enc


def _first_errors(data: bytes) -> str:
    """Where UTF-8 and each ``LEGACY`` encoding first fail on ``data``: 'utf-8 fails on line 3, ...'."""
    where = []
    for enc in ("utf-8", *LEGACY):
        try:
            data.decode(enc)
        except UnicodeDecodeError as e:
            where.append(f"{enc} fails on line {_line_of(data, e.start)}")
    return ", ".join(where)


def read_text(path, encoding: str = ENCODINGS_AUTO) -> tuple[str, str]:
    """``decode_text`` of a file's bytes, named by its path. Raises OSError, EncodingError."""
    with open(path, "rb") as f:
        return decode_text(f.read(), str(path), encoding)


def text_lines(data: bytes, name: str, errors: str = "strict", encoding: str = "") -> list[str]:
    """The lines of a text file's bytes (``name`` labels messages), as ``utils.io.decode_lines``
    splits them. ``encoding`` "" (the text default): UTF-8, or, for bytes that are not valid UTF-8
    but decode wholly as GB18030 or Big5 (``decode_legacy``), that encoding (logged); otherwise
    ``errors`` (strict | replace) says what undecodable UTF-8 does. ``auto`` or a codec:
    ``decode_text``. Raises TextDecodeError / EncodingError (ValueErrors) naming the file and line."""
    from doctrans.utils.io import decode_lines

    if encoding:
        return decode_lines(decode_text(data, name, encoding)[0].encode("utf-8"), name, errors)
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        try:
            legacy = decode_legacy(data, name)
        except EncodingError:
            if errors == "strict":
                raise
            legacy = None                   # replace: a UTF-8 file with some bad bytes, as asked
        if legacy is not None:
            data = legacy[0].encode("utf-8")
    return decode_lines(data, name, errors)


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
