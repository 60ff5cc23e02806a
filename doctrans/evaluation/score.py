"""Score a translation against one or more references with sacrebleu (``doctrans score``).

Three metrics, all computed by sacrebleu (BLEU and chrF are never reimplemented here); every
score is returned, printed and stored next to its sacrebleu signature:

``bleu_tok_lc``
    The comparison setting of the thesis (Wang 2019, Tables 5.4 and 6.2) and of the HAN paper's
    ``multi-bleu`` numbers: case-insensitive 4-gram BLEU on Moses-tokenized text against all
    references. sacrebleu ``BLEU(tokenize="none", lowercase=True)``. Text that is not tokenized
    yet is tokenized with sacremoses (``escape=False``); already tokenized text has its Moses
    XML escapes (``&apos;`` …) undone so both sides agree. With ``split_hyphens`` (default) both
    sides also get Moses' aggressive hyphen splitting (``mix-up`` → ``mix @-@ up``), because the
    TVsub SGML references are tokenized that way while ``test.en`` and the training data are not.
    Its signature says so: sacrebleu's ``tok:none`` becomes ``tok:moses-sacremoses-VERSION[-dash]``
    (``tok_lc_signature``), the tokenization that reproduces the figure.
``sacrebleu``
    Standard detokenized sacreBLEU (``tokenize="13a"``). Tokenized text is Moses-detokenized
    first. The TVsub references are lowercased, so by default (``lowercase_detok=None``) this
    metric and chrF are case-insensitive whenever every reference is all-lowercase; this is
    sacrebleu's own ``lowercase`` option and shows as ``case:lc`` in the signature.
``chrf``
    sacrebleu chrF2 on the same detokenized text and with the same case rule.

Tokenization and case of the hypothesis and of the references are **detected** unless given
(``detect_form``): Moses-tokenized text has punctuation split off words (``fine , ross .``),
clitics split (``it 's``, ``didn &apos;t``) and Moses' XML escapes; detokenized text has them
attached. A side is lowercase when under 0.2% of its cased letters are capitals. What was
detected (or given) is part of the result and of the table; where hypothesis and references
differ, or a flag contradicts what the text looks like, a note says so (and a warning is
logged): each metric brings both sides to its own form (tokenized for ``bleu_tok_lc``,
detokenized for sacreBLEU/chrF), and an all-lowercase hypothesis against mixed-case references
makes sacreBLEU/chrF case-insensitive (``case:lc``) unless ``lowercase_detok`` says otherwise.
A reference whose script differs from the hypothesis' (``script_notes``: the Chinese source given
as ``-r``) gets a note too. A hypothesis or reference in SGML is known by its content as well as
by its name (``read_hypothesis``, ``is_sgml``: ``translate --output-format sgml`` output scores as
its segments); a UTF-8 byte order mark is never text.

Sources: Papineni et al. 2002 (BLEU), Popović 2015 (chrF), Post 2018 (sacreBLEU signatures).
"""
from __future__ import annotations

import json
import logging
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import sacrebleu
import sacremoses
from sacrebleu.metrics import BLEU, CHRF

from doctrans.data.sgml import is_sgml_file, looks_like_sgml, parse_sgml, read_sgml
from doctrans.utils.io import atomic_write_text, decode_lines
from doctrans.utils.io import read_lines as io_read_lines

logger = logging.getLogger(__name__)

METRICS: tuple[str, ...] = ("bleu_tok_lc", "sacrebleu", "chrf")
SGML_SUFFIXES = (".sgm", ".sgml")
_LANG = "en"
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


@dataclass(frozen=True)
class ScoreConfig:
    """What ``doctrans score`` reads, computes and writes."""

    hyp: str                              # hypothesis file, one segment per line
    refs: tuple[str, ...]                 # plain text files (one ref each) or .sgm sets (one ref per sysid)
    hyp_tokenized: bool | None = None     # hypothesis is Moses-tokenized; None: detected (no evidence: not)
    refs_tokenized: bool | None = None    # None: detected (no evidence: True for .sgm, False for plain text)
    metrics: tuple[str, ...] = METRICS    # subset of METRICS, in output order
    lowercase_detok: bool | None = None   # case-insensitive sacrebleu/chrF; None: iff all refs are lowercase
    split_hyphens: bool = True            # aggressive Moses hyphen splitting in bleu_tok_lc (TVsub refs use it)
    fmt: str = "table"                    # "table" | "json" (what `render` and the --out file hold)
    baseline: str | None = None           # compare with this baseline hypothesis: bootstrap + sign test
    bootstrap: int = 1000                 # paired-bootstrap samples (with baseline)
    baseline_tokenized: bool | None = None  # default: detected (no evidence: as the hypothesis)
    dp_base: str | None = None            # segmented source without DPs (e.g. test.seg.zh) …
    dp_oracle: str | None = None          # … and with the hand-inserted DPs: adds DP translation recall
    cohesion: bool = False                # lexical cohesion of HYP and the first reference, per document
    cohesion_window: int = 0              # … over windows of this many lines (0 = whole documents)
    lsa: str | None = None                # LSA model (.pkl) or tokenized English corpus: adds coherence
    docs: str | None = None               # doc_id<TAB>position per line [default: the first .sgm reference's]
    apt_src: str | None = None            # segmented source: adds APT pronoun/noun accuracy (eflomal)
    apt_corpus: str | None = None         # PREFIX of tokenized PREFIX.zh / PREFIX.en pairs to help the aligner
    apt_corpus_lines: int = 50000         # at most this many of them
    out: str | None = None                # write the rendered result here atomically

    def __post_init__(self) -> None:
        if not self.refs:
            raise ValueError("ScoreConfig.refs: at least one reference is needed")
        _check_metrics(self.metrics)
        if self.fmt not in ("table", "json"):
            raise ValueError(f"ScoreConfig.fmt must be 'table' or 'json', got {self.fmt!r}")


def _check_metrics(metrics: Sequence[str]) -> None:
    unknown = [m for m in metrics if m not in METRICS]
    if unknown or not metrics:
        raise ValueError(f"unknown or empty metrics {list(metrics)}; choose from {list(METRICS)}")


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
    streams, tokenized, _ = _load_references(paths, tokenized)
    return streams, tokenized


def _load_references(
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
    tok = sacremoses.MosesTokenizer(lang=_LANG)
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
    detok = sacremoses.MosesDetokenizer(lang=_LANG)
    pattern, sub = sacremoses.MosesTokenizer.AGGRESSIVE_HYPHEN_SPLIT
    out = []
    for line in lines:
        line = " ".join(detok.unescape_xml(line).split())
        out.append(pattern.sub(sub, line) if split_hyphens else line)
    return out


def moses_detokenize(lines: Sequence[str]) -> list[str]:
    """Moses-detokenize tokenized English (undoes XML escapes and ``@-@`` as well)."""
    detok = sacremoses.MosesDetokenizer(lang=_LANG)
    return [detok.detokenize(line.split()) for line in lines]


# ---------------------------------------------------------------------------------- scoring


def _check_shapes(hyps: Sequence[str], refs: Sequence[Sequence[str]]) -> None:
    if isinstance(hyps, str) or not refs or any(isinstance(r, str) for r in refs):
        raise TypeError(
            "expected hyps: list[str] and refs: list of reference streams (list[list[str]]); "
            "for a single reference pass [ref_lines]"
        )
    for k, ref in enumerate(refs, 1):
        if len(ref) != len(hyps):
            raise ValueError(
                f"hypothesis has {len(hyps)} lines but reference {k} of {len(refs)} has {len(ref)}"
            )


def _bleu_entry(metric: BLEU, hyps: list[str], refs: list[list[str]], prep: str) -> dict:
    s = metric.corpus_score(hyps, refs)
    sig = str(metric.get_signature())
    return {
        "score": s.score, "signature": sig, "verbose": s.format(signature=sig),
        "precisions": list(s.precisions), "bp": s.bp,
        "sys_len": s.sys_len, "ref_len": s.ref_len, "preprocessing": prep,
    }


def bleu_tok_lc(
    hyps: Sequence[str],
    refs: Sequence[Sequence[str]],
    *,
    hyp_tokenized: bool = True,
    refs_tokenized: bool = True,
    split_hyphens: bool = True,
) -> float:
    """Case-insensitive BLEU-4 (0-100) on Moses-tokenized text: the thesis setting.

    Defaults suit dev BLEU during training (both sides tokenized). refs: list of reference
    streams, ``refs[k][i]`` = line i of reference k. Raises ValueError on line-count mismatch.
    """
    return score_corpus(hyps, refs, hyp_tokenized, refs_tokenized,
                        metrics=("bleu_tok_lc",), split_hyphens=split_hyphens)["bleu_tok_lc"]["score"]


def score_corpus(
    hyps: Sequence[str],
    refs: Sequence[Sequence[str]],
    hyp_tokenized: bool | None,
    refs_tokenized: bool | None,
    metrics: Sequence[str] = METRICS,
    lowercase_detok: bool | None = None,
    split_hyphens: bool = True,
    how: dict | None = None,
) -> dict:
    """Score hypotheses against reference streams (see the module docstring for the metrics).

    ``hyp_tokenized`` / ``refs_tokenized`` None: detected (``detect_form``; no evidence: not
    tokenized). ``lowercase_detok`` None: sacrebleu/chrF are case-insensitive when the
    references or the hypothesis are lowercase. ``how``: {"hyp"/"refs": how a given value was
    decided}, for the report. Returns ``{metric: {"score", "signature", "verbose",
    "preprocessing", ...}, "n_refs", "n_lines", "hyp_tokenized", "refs_tokenized", "form"
    (what each side looks like and how it was scored), "notes" (mismatches, also logged as
    warnings)}``; scores are 0-100. Raises ValueError when a reference's line count differs from
    the hypothesis', TypeError when refs is a flat list.
    """
    _check_metrics(metrics)
    _check_shapes(hyps, refs)
    hyps, refs = list(hyps), [list(r) for r in refs]
    detok_metrics = [m for m in metrics if m in ("sacrebleu", "chrf")]
    hyp_tokenized, refs_tokenized, lc, form, notes = _resolve_forms(
        hyps, refs, hyp_tokenized, refs_tokenized, lowercase_detok, how or {}, bool(detok_metrics))
    result: dict = {}
    if "bleu_tok_lc" in metrics:
        result["bleu_tok_lc"] = _score_tok_lc(hyps, refs, hyp_tokenized, refs_tokenized, split_hyphens)
    if detok_metrics:
        result.update(_score_detok(hyps, refs, hyp_tokenized, refs_tokenized, lc, form["case"],
                                   detok_metrics))
    notes += script_notes(hyps, refs)
    result = {m: result[m] for m in metrics}     # keep the requested order
    result.update(n_refs=len(refs), n_lines=len(hyps),
                  hyp_tokenized=hyp_tokenized, refs_tokenized=refs_tokenized, form=form, notes=notes)
    for note in notes:
        logger.warning("%s", note)
    return result


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


def _tok_word(tokenized: bool) -> str:
    return "Moses-tokenized" if tokenized else "detokenized"


def _resolve_forms(hyps: list[str], refs: list[list[str]], hyp_tokenized: bool | None,
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
            notes.append(f"{names[side]} {'are' if side == 'refs' else 'is'} scored as {_tok_word(tok)} ({way}) but "
                         f"look{'' if side == 'refs' else 's'} {_tok_word(f.tokenized)} ({f.tokenized_lines} lines "
                         f"look tokenized, {f.detokenized_lines} detokenized): check {flags[side]}")
        given[side] = tok
        form[side] = {**f.to_dict(), "scored_as_tokenized": tok, "how": way}
    if given["hyp"] != given["refs"]:
        notes.append(f"the hypothesis is {_tok_word(given['hyp'])} and the references are "
                     f"{_tok_word(given['refs'])}: each metric brings both to one form (Moses-tokenized for "
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


def _tok_lc_prep(split_hyphens: bool):
    """The bleu_tok_lc preparation of one side: ``tok(lines, tokenized) -> lines``."""
    def tok(lines: list[str], tokenized: bool) -> list[str]:
        if tokenized:
            return [x.lower() for x in normalize_tokenized(lines, split_hyphens)]
        return moses_tokenize(lines, split_hyphens, lowercase=True)
    return tok


def _score_tok_lc(hyps, refs, hyp_tokenized, refs_tokenized, split_hyphens) -> dict:
    tok = _tok_lc_prep(split_hyphens)

    prep = (f"sacremoses {sacremoses.__version__} lang={_LANG} escape=False "
            f"aggressive_dash_splits={split_hyphens}; hyp {'given tokenized' if hyp_tokenized else 'tokenized here'}, "
            f"refs {'given tokenized' if refs_tokenized else 'tokenized here'}")
    metric = BLEU(tokenize="none", lowercase=True, force=True)   # tokenized on purpose: no warning
    entry = _bleu_entry(metric, tok(hyps, hyp_tokenized), [tok(r, refs_tokenized) for r in refs], prep)
    # sacrebleu's tok:none says it did not tokenize; the figure depends on the Moses tokenization done here
    done = tok_lc_signature(split_hyphens)
    entry["signature"] = entry["signature"].replace("tok:none", f"tok:{done}")
    entry["verbose"] = entry["verbose"].replace("tok:none", f"tok:{done}")
    return entry


def tok_lc_signature(split_hyphens: bool = True) -> str:
    """The ``tok:`` value of the bleu_tok_lc signature: the Moses tokenization both sides get
    before sacrebleu (``tokenize="none"``) — sacremoses and its version, ``-dash`` with Moses'
    aggressive hyphen splitting — so that the signature reproduces the figure."""
    return f"moses-sacremoses-{sacremoses.__version__}" + ("-dash" if split_hyphens else "")


def _score_detok(hyps, refs, hyp_tokenized, refs_tokenized, lc, case, metrics) -> dict:
    d_hyps = moses_detokenize(hyps) if hyp_tokenized else hyps
    d_refs = [moses_detokenize(r) for r in refs] if refs_tokenized else refs
    prep = (f"hyp {'Moses-detokenized' if hyp_tokenized else 'as given'}, "
            f"refs {'Moses-detokenized' if refs_tokenized else 'as given'}; {case}")
    out: dict = {}
    if "sacrebleu" in metrics:
        out["sacrebleu"] = _bleu_entry(BLEU(tokenize="13a", lowercase=lc), d_hyps, d_refs, prep)
    if "chrf" in metrics:
        metric = CHRF(lowercase=lc)
        s = metric.corpus_score(d_hyps, d_refs)
        sig = str(metric.get_signature())
        out["chrf"] = {"score": s.score, "signature": sig, "verbose": s.format(signature=sig),
                       "preprocessing": prep}
    return out


# ----------------------------------------------------------------------------------- output


def format_table(result: dict) -> str:
    """A readable table: metric, score, sacrebleu signature, #refs, #lines; then the notes."""
    rows = [(m, f"{result[m]['score']:.2f}", result[m]["signature"]) for m in METRICS if m in result]
    w_m = max(len("metric"), *(len(r[0]) for r in rows))
    head = f"{'metric':<{w_m}}  {'score':>6}  {'#refs':>5}  {'#lines':>6}  signature"
    lines = [head, "-" * len(head)]
    for m, score, sig in rows:
        lines.append(f"{m:<{w_m}}  {score:>6}  {result['n_refs']:>5}  {result['n_lines']:>6}  {sig}")
    lines.append("")
    for m, _, _ in rows:
        lines.append(f"{m}: {result[m]['preprocessing']}")
    for side, name in (("hyp", "hypothesis"), ("refs", "references")):
        f = result.get("form", {}).get(side)
        if f:
            form = TextForm(f["tokenized"], f["tokenized_lines"], f["detokenized_lines"], f["lowercase"], f["capitals"])
            lines.append(f"{name}: looks {form.describe()}; scored as {_tok_word(f['scored_as_tokenized'])} "
                         f"({f['how']})")
    for note in result.get("notes", []):
        lines.append(f"NOTE: {note}")
    if "bleu_tok_lc" in result:
        lines.append("bleu_tok_lc = the thesis setting (case-insensitive BLEU-4 on Moses-tokenized text, all refs)")
    if any(m in result for m in ("sacrebleu", "chrf")):
        lines.append("sacrebleu/chrf = standard detokenized sacrebleu; case:lc = sacrebleu lowercased hyp "
                     "and refs (default when the refs (as TVsub's) or the hypothesis are lowercase)")
    if "pronouns" in result:
        pr = result["pronouns"]
        lines.append(f"English pronouns (Table 4.2 forms): hyp {pr['hyp']}, refs {pr['refs']}"
                     + (f", baseline {pr['baseline']}" if "baseline" in pr else ""))
    if "dp_recall" in result:
        d = result["dp_recall"]
        lines.append(f"DP translation recall: {100 * d['recall']:.1f}% ({d['realised']} of the {d['in_reference']} "
                     f"dropped pronouns the first reference realises; {d['dps']} hand-annotated DPs)"
                     + (f", baseline {100 * d['baseline']:.1f}%" if "baseline" in d else "")
                     + (f" (difference {100 * d['bootstrap']['delta']:+.1f} points, 95% interval "
                        f"[{100 * d['bootstrap']['ci95'][0]:+.1f}, {100 * d['bootstrap']['ci95'][1]:+.1f}], paired "
                        f"bootstrap p = {d['bootstrap']['p_value']:.4f})" if "bootstrap" in d else "") + "; by class: "
                     + ", ".join(f"{c} {100 * v['recall']:.0f}% of {v['in_reference']}" for c, v in d["by_class"].items()))
    if "apt" in result:
        a = result["apt"]
        lines.append(f"APT (aligned-word accuracy vs the first reference, eflomal): pronouns "
                     f"{100 * a['pronoun']['apt']:.1f}% of {a['pronoun']['counted']}, nouns "
                     f"{100 * a['noun']['apt']:.1f}% of {a['noun']['counted']}")
    if "cohesion" in result:
        c = result["cohesion"]
        lines.append(f"lexical cohesion ({c['devices']}): hyp {c['hyp']:.4f}, first reference {c['ref']:.4f}")
    if "coherence" in result:
        c = result["coherence"]
        lines.append(f"coherence (mean adjacent-sentence cosine): LSA hyp {c['lsa']['hyp']:.4f}, first reference "
                     f"{c['lsa']['ref']:.4f}; averaged word vectors hyp {c['average']['hyp']:.4f}, "
                     f"first reference {c['average']['ref']:.4f}")
    if "significance" in result:
        sig = result["significance"]
        bs, st = sig["paired_bootstrap"], sig["sign_test"]
        lines.append(f"vs baseline {sig['baseline']}: BLEU {bs['system']:.2f} vs {bs['baseline']:.2f} "
                     f"({bs['system'] - bs['baseline']:+.2f}); paired bootstrap p = {bs['p_value']:.4f} "
                     f"({bs['n_samples']} samples); sign test {st['wins']} better / {st['losses']} worse / "
                     f"{st['ties']} tied, p = {st['p_value']:.4f}")
    return "\n".join(lines) + "\n"


def render(result: dict, fmt: str = "table") -> str:
    """``format_table(result)`` or indented JSON (``fmt="json"``), newline-terminated."""
    if fmt == "json":
        return json.dumps(result, indent=2, ensure_ascii=False) + "\n"
    return format_table(result)


def write_atomic(path: str | Path, text: str) -> Path:
    """Write text to path atomically (``doctrans.utils.io.atomic_write_text``); returns path."""
    atomic_write_text(path, text)
    return Path(path)


def score_files(cfg: ScoreConfig) -> dict:
    """Read the files named in ``cfg`` and score them; adds ``hyp`` and ``refs`` (paths).

    Raises ValueError naming the hypothesis and reference files and both line counts when they
    differ; FileNotFoundError.
    """
    refs, refs_tok, refs_how = _load_references(cfg.refs, cfg.refs_tokenized)
    hyps = read_hypothesis(cfg.hyp)
    if len(hyps) != len(refs[0]):
        raise ValueError(
            f"hypothesis {cfg.hyp} has {len(hyps)} lines but reference(s) "
            f"{', '.join(cfg.refs)} have {len(refs[0])} lines"
        )
    result = score_corpus(hyps, refs, cfg.hyp_tokenized, refs_tok, cfg.metrics,
                          cfg.lowercase_detok, cfg.split_hyphens, how={"refs": refs_how})
    result.update(hyp=str(cfg.hyp), refs=[str(r) for r in cfg.refs],
                  sacrebleu_version=sacrebleu.__version__)
    tok = _tok_lc_prep(cfg.split_hyphens)
    hyp_tok = result["hyp_tokenized"]
    hyp_prep = tok(hyps, hyp_tok)
    refs_prep = [tok(r, refs_tok) for r in refs]
    from doctrans.evaluation.significance import count_pronouns, paired_bootstrap, sign_test
    result["pronouns"] = {"hyp": count_pronouns(hyp_prep), "refs": [count_pronouns(r) for r in refs_prep]}
    if cfg.baseline:
        base = read_hypothesis(cfg.baseline)
        if len(base) != len(hyps):
            raise ValueError(f"baseline {cfg.baseline} has {len(base)} lines, {cfg.hyp} has {len(hyps)}")
        b_tok = cfg.baseline_tokenized
        if b_tok is None:
            b_tok = detect_form(base).tokenized
            b_tok = hyp_tok if b_tok is None else b_tok
        base_prep = tok(base, b_tok)
        result["significance"] = {"baseline": str(cfg.baseline),
                                  "paired_bootstrap": paired_bootstrap(base_prep, hyp_prep, refs_prep, cfg.bootstrap),
                                  "sign_test": sign_test(base_prep, hyp_prep, refs_prep)}
        result["pronouns"]["baseline"] = count_pronouns(base_prep)
    if cfg.dp_base or cfg.dp_oracle:
        if not (cfg.dp_base and cfg.dp_oracle):
            raise ValueError("DP recall needs both the source without DPs and the oracle with them")
        from doctrans.evaluation.dp_recall import dp_recall
        dp_src, dp_oracle = read_lines(cfg.dp_base), read_lines(cfg.dp_oracle)
        result["dp_recall"] = {"base": str(cfg.dp_base), "oracle": str(cfg.dp_oracle),
                               **dp_recall(hyp_prep, refs_prep[0], dp_src, dp_oracle)}
        if cfg.baseline:
            from doctrans.evaluation.dp_recall import dp_recall_bootstrap
            result["dp_recall"]["baseline"] = dp_recall(base_prep, refs_prep[0], dp_src, dp_oracle)["recall"]
            result["dp_recall"]["bootstrap"] = dp_recall_bootstrap(hyp_prep, base_prep, refs_prep[0], dp_src,
                                                                   dp_oracle, max(cfg.bootstrap, 1))
    if cfg.cohesion or cfg.lsa:
        result.update(_text_discourse(cfg, hyp_prep, refs_prep[0], len(hyps)))
    if cfg.apt_src:
        result["apt"] = _apt(cfg, hyp_prep, refs_prep[0])
    for m in cfg.metrics:                   # (the caller prints the result; logged once more at -v only)
        logger.debug("%s = %.2f  %s", m, result[m]["score"], result[m]["signature"])
    return result


def discourse_columns(res: dict) -> dict:
    """The APT, cohesion and coherence figures of a ``run`` result as flat table columns
    (apt_pronoun, apt_noun, cohesion, ref_cohesion, coherence, ref_coherence: LSA variant), those
    computed only."""
    row = {}
    if "apt" in res:
        row["apt_pronoun"], row["apt_noun"] = res["apt"]["pronoun"]["apt"], res["apt"]["noun"]["apt"]
    if "cohesion" in res:
        row["cohesion"], row["ref_cohesion"] = res["cohesion"]["hyp"], res["cohesion"]["ref"]
    if "coherence" in res:
        row["coherence"], row["ref_coherence"] = res["coherence"]["lsa"]["hyp"], res["coherence"]["lsa"]["ref"]
    return row


def _apt(cfg: ScoreConfig, hyp: list[str], ref: list[str]) -> dict:
    """APT pronoun / noun accuracy (``evaluation.apt``) of HYP against the first reference."""
    from doctrans.evaluation.apt import apt

    src = read_lines(cfg.apt_src)
    if len(src) != len(hyp):
        raise ValueError(f"APT source {cfg.apt_src} has {len(src)} lines, the hypothesis {len(hyp)}")
    extra: list[tuple[str, str]] = []
    if cfg.apt_corpus:
        zh, en = (read_lines(f"{cfg.apt_corpus}.{lang}")[:cfg.apt_corpus_lines] for lang in ("zh", "en"))
        if len(zh) != len(en):
            raise ValueError(f"{cfg.apt_corpus}.zh and .en have {len(zh)} and {len(en)} lines")
        extra = list(zip(zh, en))
    return apt(src, ref, hyp, extra)


def _text_discourse(cfg: ScoreConfig, hyp: list[str], ref: list[str], n: int) -> dict:
    """Lexical cohesion and coherence (``evaluation.cohesion``) of HYP and the first reference."""
    from doctrans.data.documents import read_doc_positions
    from doctrans.data.sgml import read_doc_ids
    from doctrans.evaluation import cohesion as coh

    if cfg.docs:
        names, doc, _ = read_doc_positions(Path(cfg.docs), n)
        doc_ids = [names[d] for d in doc]
    else:
        sgm = [r for r in cfg.refs if Path(r).suffix.lower() == ".xml" or is_sgml(r)]
        if not sgm:
            raise ValueError("cohesion/coherence need documents: give --docs or an .sgm reference")
        doc_ids = read_doc_ids(sgm[0])
    if len(doc_ids) != n:
        raise ValueError(f"{cfg.docs or sgm[0]}: {len(doc_ids)} document lines for {n} hypothesis lines")
    docs = {"hyp": coh.split_documents(hyp, doc_ids), "ref": coh.split_documents(ref, doc_ids)}
    out: dict = {}
    if cfg.cohesion:
        out["cohesion"] = {k: coh.lexical_cohesion(v, cfg.cohesion_window)["lc"] for k, v in docs.items()}
        out["cohesion"]["devices"] = coh.COHESION_DEVICES
        out["cohesion"]["window"] = cfg.cohesion_window
    if cfg.lsa:
        lsa = coh.lsa_model(cfg.lsa)
        out["coherence"] = {v: {k: coh.coherence(d, lsa, v)["coherence"] for k, d in docs.items()}
                            for v in ("lsa", "average")}
    return out


def run(cfg: ScoreConfig) -> Path | dict:
    """Score ``cfg.hyp`` against ``cfg.refs``.

    Returns the written file (rendered as ``cfg.fmt``) when ``cfg.out`` is set, else the result
    dict of ``score_files``.
    """
    result = score_files(cfg)
    if cfg.out is None:
        return result
    path = write_atomic(cfg.out, render(result, cfg.fmt))
    logger.info("wrote %s", path)
    return path
