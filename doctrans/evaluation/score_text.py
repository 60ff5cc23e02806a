"""The texts ``doctrans score`` reads, and the forms it brings them to: reading a hypothesis and
reference streams (plain text or SGML, a byte order mark never text), detecting whether a side is
Moses-tokenized and lowercase (``detect_form``, ``resolve_forms``), Moses tokenization and
detokenization with sacremoses, and the script check of a reference (``script_notes``). The
metrics (``evaluation/metrics/``) score what this module prepares; ``evaluation/score.py`` runs
them. The rules are in the docstring of ``evaluation/score.py``.
"""
from __future__ import annotations

import logging
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import sacremoses

from doctrans.data.sgml import is_sgml_file, looks_like_sgml, parse_sgml, read_sgml
from doctrans.utils.io import decode_lines
from doctrans.utils.io import read_lines as io_read_lines

logger = logging.getLogger("doctrans.evaluation.score")     # the log speaks as `doctrans score`

SGML_SUFFIXES = (".sgm", ".sgml")
LANG = "en"
_AFTER_PERIOD = re.compile(r"(?<=\.)(\s+)([^\W\d_])")   # first letter of the word after ". "

# Moses tokenization evidence, per line. Tokenized: an XML escape, a clitic split off a word
# ("it 's", "didn 't", "it &apos;s"), punctuation split off a word ("fine ,", "okay ?", "care of .").
# Detokenized: punctuation or a clitic attached to a word ("fine,", "okay?", "of." at the end, "it's").
_TOKENIZED = re.compile(r"&(?:apos|quot|amp|lt|gt|#91|#93|#124);|\w (?:'|’)(?:s|re|ve|ll|d|m|t)\b| n't\b"
                        r"|\w [,?!;:](?=\s|$)|\w \.$")
_DETOKENIZED = re.compile(r"[^\W\d_][,?!;:](?=\s|$)|[^\W\d_]\.$|[^\W\d_](?:'|’)(?:s|re|ve|ll|d|m|t)\b")
LOWERCASE_MAX_CAPITALS = 0.002      # share of capitals among cased letters below which text is "lowercase"


@dataclass(frozen=True)
class TextForm:
    """What a text looks like: Moses-tokenized or not (None: no evidence either way), lowercase or not."""

    tokenized: bool | None
    tokenized_lines: int           # lines with tokenization evidence only
    detokenized_lines: int         # lines with detokenization evidence only
    lowercase: bool
    capitals: float                # share of capitals among cased letters

    def describe(self) -> str:
        tok = {True: "Moses-tokenized", False: "detokenized", None: "tokenization unknown"}[self.tokenized]
        return (f"{tok} ({self.tokenized_lines} lines look tokenized, {self.detokenized_lines} detokenized), "
                f"{'lowercase' if self.lowercase else 'mixed case'} ({100 * self.capitals:.1f}% capitals)")

    def to_dict(self) -> dict:
        return {"tokenized": self.tokenized, "tokenized_lines": self.tokenized_lines,
                "detokenized_lines": self.detokenized_lines, "lowercase": self.lowercase,
                "capitals": round(self.capitals, 4)}


def detect_form(lines: Sequence[str]) -> TextForm:
    """Whether ``lines`` are Moses-tokenized and whether they are lowercase (see the module doc).

    Tokenized when at least 80% of the lines with evidence of one kind only show tokenization
    (detokenized when at most 20%); None when no line has evidence or it is mixed. Lowercase when
    fewer than ``LOWERCASE_MAX_CAPITALS`` of the cased letters are capitals (or there are none).
    """
    n_tok = n_detok = upper = cased = 0
    for line in lines:
        t, d = bool(_TOKENIZED.search(line)), bool(_DETOKENIZED.search(line))
        n_tok += t and not d
        n_detok += d and not t
        upper += sum(c.isupper() for c in line)
        cased += sum(c.isupper() or c.islower() for c in line)
    decided = n_tok + n_detok
    tokenized = None
    if decided and n_tok >= 0.8 * decided:
        tokenized = True
    elif decided and n_tok <= 0.2 * decided:
        tokenized = False
    capitals = upper / cased if cased else 0.0
    return TextForm(tokenized, n_tok, n_detok, capitals < LOWERCASE_MAX_CAPITALS, capitals)



# ----------------------------------------------------------------------------------- reading


def read_lines(path: str | Path) -> list[str]:
    """Lines of a UTF-8 text file, stripped of surrounding whitespace.

    Only ``\\n`` ends a line (a stray ``\\r`` or U+2028 inside a segment does not change the
    count); a missing final newline is fine; empty lines are kept (empty hypotheses are legal).
    Raises FileNotFoundError.
    """
    return [line.strip() for line in io_read_lines(path)]


def is_sgml(path: str | Path) -> bool:
    """An SGML file: named .sgm/.sgml, or starting with an SGML set or ``<DOC>`` tag whatever its
    name (``data.sgml.is_sgml_file``)."""
    return Path(path).suffix.lower() in SGML_SUFFIXES or is_sgml_file(path)


def read_hypothesis(path: str | Path) -> list[str]:
    """A hypothesis: plain text (``read_lines``; ``-`` reads stdin), or the first system's
    segments of an SGML file — e.g. ``doctrans translate --output-format sgml`` output —, known
    by its content (``data.sgml.looks_like_sgml``), one line per segment. A byte order mark is
    dropped. Raises FileNotFoundError, SGMLError (a ValueError) naming the file and line."""
    if str(path) == "-":
        import sys

        lines = decode_lines(sys.stdin.buffer.read(), "<stdin>")
        if looks_like_sgml("\n".join(lines[:50])):
            return [seg.strip() for seg in parse_sgml((x + "\n" for x in lines), "<stdin>")[0].segments]
        return [line.strip() for line in lines]
    if is_sgml(path):
        return [seg.strip() for seg in read_sgml(path)[0].segments]
    return read_lines(path)


def load_references(
    paths: Sequence[str | Path], tokenized: bool | None = None
) -> tuple[list[list[str]], bool]:
    """Load reference streams: a plain text file is one reference, an ``.sgm`` file one per sysid.

    Returns (streams, tokenized): ``streams[k][i]`` is line i of reference k. ``tokenized``
    defaults to what the files look like (``detect_form``, per file); where no file shows
    evidence, True when all files are SGML (TVsub refs are lowercased + Moses-tokenized) and
    False when all are plain text.
    Raises ValueError when the references differ in line count (naming files and counts), when
    files look differently tokenized, or a mixed SGML/plain set shows no evidence, without
    ``tokenized``; FileNotFoundError; SGMLError (a ValueError).
    """
    streams, tokenized, _ = load_references_how(paths, tokenized)
    return streams, tokenized


def load_references_how(
    paths: Sequence[str | Path], tokenized: bool | None = None
) -> tuple[list[list[str]], bool, str]:
    """``load_references`` and how ``tokenized`` was decided (given / detected / by file type)."""
    if not paths:
        raise ValueError("no reference files given")
    streams: list[list[str]] = []
    names: list[str] = []
    n_sgml = 0
    looks: dict[str, bool] = {}
    for p in paths:
        first = len(streams)
        if is_sgml(p):
            n_sgml += 1
            for s in read_sgml(p):
                streams.append([seg.strip() for seg in s.segments])
                names.append(f"{p} (sysid {s.sysid})")
        else:
            streams.append(read_lines(p))
            names.append(str(p))
        form = detect_form([x for st in streams[first:] for x in st])
        if form.tokenized is not None:
            looks[str(p)] = form.tokenized
    how = "given"
    if tokenized is None and looks:
        if len(set(looks.values())) > 1:
            raise ValueError(
                "references differ: " + ", ".join(f"{p} looks {'tokenized' if t else 'detokenized'}"
                                                  for p, t in looks.items())
                + "; score against one kind, or say which they are (--refs-tokenized / --refs-detok)")
        tokenized, how = next(iter(looks.values())), "detected"
    if tokenized is None:
        how = "no evidence either way: assumed from the file type (.sgm tokenized, plain text not)"
        if 0 < n_sgml < len(paths):
            raise ValueError(
                f"references {[str(p) for p in paths]} mix SGML and plain text; "
                "say whether they are tokenized (refs_tokenized / --refs-tokenized)"
            )
        tokenized = n_sgml == len(paths)
    for name, stream in zip(names[1:], streams[1:]):
        if len(stream) != len(streams[0]):
            raise ValueError(
                f"reference {name} has {len(stream)} lines but {names[0]} has {len(streams[0])}"
            )
    logger.info("loaded %d reference(s) x %d lines from %s (tokenized=%s, %s)",
                len(streams), len(streams[0]), [str(p) for p in paths], tokenized, how)
    return streams, tokenized, how


# ---------------------------------------------------------------------- Moses (sacremoses)


def moses_tokenize(
    lines: Sequence[str], split_hyphens: bool = True, lowercase: bool = False
) -> list[str]:
    """Moses-tokenize detokenized English (sacremoses, ``escape=False``: ``'`` stays ``'``).

    ``lowercase=True`` is for case-insensitive scoring: the word after ``. `` is capitalized
    before tokenizing and the output is lowercased. Moses splits a word-final period only when
    the next word is not lowercase; TVsub text is lowercased at sentence starts, but its
    references were tokenized before lowercasing (``no problems . it 's``), so without this
    ``no problems. it's`` would stay ``problems.`` (about 9% of test lines).
    """
    tok = sacremoses.MosesTokenizer(lang=LANG)
    out = []
    for line in lines:
        if lowercase:
            line = _AFTER_PERIOD.sub(lambda m: m.group(1) + m.group(2).upper(), line)
        line = tok.tokenize(line, escape=False, return_str=True, aggressive_dash_splits=split_hyphens)
        out.append(line.lower() if lowercase else line)
    return out


def normalize_tokenized(lines: Sequence[str], split_hyphens: bool = True) -> list[str]:
    """Bring already Moses-tokenized text to the form ``moses_tokenize`` produces.

    Undoes Moses XML escapes (``&apos;`` → ``'``) and, with ``split_hyphens``, applies Moses'
    aggressive hyphen split (idempotent on text that has it already).
    """
    detok = sacremoses.MosesDetokenizer(lang=LANG)
    pattern, sub = sacremoses.MosesTokenizer.AGGRESSIVE_HYPHEN_SPLIT
    out = []
    for line in lines:
        line = " ".join(detok.unescape_xml(line).split())
        out.append(pattern.sub(sub, line) if split_hyphens else line)
    return out


def moses_detokenize(lines: Sequence[str]) -> list[str]:
    """Moses-detokenize tokenized English (undoes XML escapes and ``@-@`` as well)."""
    detok = sacremoses.MosesDetokenizer(lang=LANG)
    return [detok.detokenize(line.split()) for line in lines]


# ------------------------------------------------------------------------ forms and scripts


_CJK = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff]")
_LATIN = re.compile(r"[A-Za-z\u00c0-\u024f]")
SCRIPT_GAP = 0.5          # CJK shares further apart than this: the two sides are not in one language


def cjk_share(lines: Sequence[str]) -> float:
    """Share of CJK characters (Han, kana, hangul) among the CJK and Latin letters of ``lines``
    (0.0 when there are none)."""
    cjk = sum(len(_CJK.findall(x)) for x in lines)
    latin = sum(len(_LATIN.findall(x)) for x in lines)
    return cjk / (cjk + latin) if cjk + latin else 0.0


def script_notes(hyps: Sequence[str], refs: Sequence[Sequence[str]]) -> list[str]:
    """A note for each reference whose script differs from the hypothesis' (CJK shares more
    than ``SCRIPT_GAP`` apart, e.g. the Chinese source given as the reference): such a
    reference scores near 0 without any error."""
    h = cjk_share(hyps)
    notes = []
    for k, ref in enumerate(refs, 1):
        r = cjk_share(ref)
        if abs(h - r) > SCRIPT_GAP:
            notes.append(f"the hypothesis is {100 * h:.0f}% CJK script and reference {k} of {len(refs)} is "
                         f"{100 * r:.0f}%: they are not in one language (the source given as a reference?); the "
                         f"scores against it mean nothing")
    return notes


def tok_word(tokenized: bool) -> str:
    """"Moses-tokenized" or "detokenized"."""
    return "Moses-tokenized" if tokenized else "detokenized"


def resolve_forms(hyps: list[str], refs: list[list[str]], hyp_tokenized: bool | None,
                  refs_tokenized: bool | None, lowercase_detok: bool | None, how: dict, detok: bool = True):
    """Decide tokenization (given wins, else detected, else not tokenized) and the case of the
    detokenized metrics (noted only when ``detok``: sacrebleu/chrF are computed); → (hyp_tokenized,
    refs_tokenized, lowercase, form, notes)."""
    forms = {"hyp": detect_form(hyps), "refs": detect_form([x for r in refs for x in r])}
    given = {"hyp": hyp_tokenized, "refs": refs_tokenized}
    flags = {"hyp": "--hyp-tokenized / --hyp-detok", "refs": "--refs-tokenized / --refs-detok"}
    names = {"hyp": "the hypothesis", "refs": "the references"}
    notes: list[str] = []
    form: dict = {}
    for side, f in forms.items():
        tok = given[side]
        if tok is None:
            tok = bool(f.tokenized)
            way = "detected" if f.tokenized is not None else "no evidence either way: taken as detokenized"
        else:
            way = how.get(side, "given")
        if f.tokenized is not None and f.tokenized != tok:
            notes.append(f"{names[side]} {'are' if side == 'refs' else 'is'} scored as {tok_word(tok)} ({way}) but "
                         f"look{'' if side == 'refs' else 's'} {tok_word(f.tokenized)} ({f.tokenized_lines} lines "
                         f"look tokenized, {f.detokenized_lines} detokenized): check {flags[side]}")
        given[side] = tok
        form[side] = {**f.to_dict(), "scored_as_tokenized": tok, "how": way}
    if given["hyp"] != given["refs"]:
        notes.append(f"the hypothesis is {tok_word(given['hyp'])} and the references are "
                     f"{tok_word(given['refs'])}: each metric brings both to one form (Moses-tokenized for "
                     f"bleu_tok_lc, detokenized for sacrebleu/chrf)")
    hyp_lc, refs_lc = forms["hyp"].lowercase, forms["refs"].lowercase
    lc = lowercase_detok
    if lc is None:
        lc = refs_lc or hyp_lc
        case = ("case-insensitive (auto: " + ("the references are lowercase" if refs_lc else
                                              "the hypothesis is lowercase") + ")") if lc else "mixed case"
        if hyp_lc and not refs_lc and detok:
            notes.append("the hypothesis is lowercase and the references are mixed case: sacrebleu/chrf are "
                         "case-insensitive (case:lc; case-sensitive: --detok-case mixed)")
    else:
        case = "case-insensitive" if lc else "mixed case"
        if not lc and hyp_lc != refs_lc and detok:
            notes.append(f"case-sensitive sacrebleu/chrf of a {'lowercase' if hyp_lc else 'mixed-case'} hypothesis "
                         f"against {'lowercase' if refs_lc else 'mixed-case'} references: every capital the "
                         f"other side lacks counts as an error")
    form["case"] = case
    return given["hyp"], given["refs"], lc, form, notes


def tok_lc_prep(split_hyphens: bool):
    """The bleu_tok_lc preparation of one side: ``tok(lines, tokenized) -> lines``."""
    def tok(lines: list[str], tokenized: bool) -> list[str]:
        if tokenized:
            return [x.lower() for x in normalize_tokenized(lines, split_hyphens)]
        return moses_tokenize(lines, split_hyphens, lowercase=True)
    return tok


def tok_lc_signature(split_hyphens: bool = True) -> str:
    """The ``tok:`` value of the bleu_tok_lc signature: the Moses tokenization both sides get
    before sacrebleu (``tokenize="none"``) — sacremoses and its version, ``-dash`` with Moses'
    aggressive hyphen splitting — so that the signature reproduces the figure."""
    return f"moses-sacremoses-{sacremoses.__version__}" + ("-dash" if split_hyphens else "")

