"""Score a translation against one or more references with sacrebleu (``doctrans score``).

The metrics are the rows of the metric table (``evaluation/metrics/``: one module and one row
each); this module runs them. Three corpus metrics, all computed by sacrebleu (BLEU and chrF are
never reimplemented here); every score is returned, printed and stored next to its sacrebleu
signature:

``bleu_tok_lc`` (``metrics/bleu_tok_lc.py``)
    The comparison setting of the thesis (Wang 2019, Tables 5.4 and 6.2) and of the HAN paper's
    ``multi-bleu`` numbers: case-insensitive 4-gram BLEU on Moses-tokenized text against all
    references. sacrebleu ``BLEU(tokenize="none", lowercase=True)``. Text that is not tokenized
    yet is tokenized with sacremoses (``escape=False``); already tokenized text has its Moses
    XML escapes (``&apos;`` …) undone so both sides agree. With ``split_hyphens`` (default) both
    sides also get Moses' aggressive hyphen splitting (``mix-up`` → ``mix @-@ up``), because the
    TVsub SGML references are tokenized that way while ``test.en`` and the training data are not.
    Its signature says so: sacrebleu's ``tok:none`` becomes ``tok:moses-sacremoses-VERSION[-dash]``
    (``tok_lc_signature``), the tokenization that reproduces the figure.
``sacrebleu`` (``metrics/sacrebleu_13a.py``)
    Standard detokenized sacreBLEU (``tokenize="13a"``). Tokenized text is Moses-detokenized
    first. The TVsub references are lowercased, so by default (``lowercase_detok=None``) this
    metric and chrF are case-insensitive whenever every reference is all-lowercase; this is
    sacrebleu's own ``lowercase`` option and shows as ``case:lc`` in the signature.
``chrf`` (``metrics/chrf.py``)
    sacrebleu chrF2 on the same detokenized text and with the same case rule.

The analyses are on when their option is given (``ScoreConfig`` keywords, ``doctrans score``
options): English pronoun counts (always), significance against ``baseline``, DP translation
recall (``dp_base`` + ``dp_oracle``), lexical cohesion (``cohesion``), coherence (``lsa``), APT
(``apt_src``) — each its module in ``evaluation/metrics/``. Reading the files and the Moses
forms are ``evaluation/score_text.py``; the printed table is ``evaluation/score_report.py``.

Tokenization and case of the hypothesis and of the references are **detected** unless given
(``score_text.detect_form``): Moses-tokenized text has punctuation split off words (``fine , ross .``),
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

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import sacrebleu

from doctrans.evaluation.metrics import METRIC_TABLE, corpus_metrics, metric_options
from doctrans.evaluation.metrics.base import CorpusTexts, ScoreInputs, ScoreOptionError
from doctrans.evaluation.score_report import format_table, render, write_atomic
from doctrans.evaluation.score_text import (LOWERCASE_MAX_CAPITALS, SGML_SUFFIXES, TextForm, cjk_share, detect_form,
                                            is_sgml, load_references, load_references_how, moses_detokenize,
                                            moses_tokenize, normalize_tokenized, read_hypothesis, read_lines,
                                            resolve_forms, script_notes, tok_lc_signature)

# What other modules and tests import from here (the reading and the report live beside it).
__all__ = ["METRICS", "ScoreConfig", "ScoreOptionError", "bleu_tok_lc", "score_corpus", "score_files", "run",
           "format_table", "render", "write_atomic", "TextForm", "detect_form", "LOWERCASE_MAX_CAPITALS",
           "SGML_SUFFIXES", "read_lines", "is_sgml", "read_hypothesis", "load_references", "moses_tokenize",
           "normalize_tokenized", "moses_detokenize", "cjk_share", "script_notes", "tok_lc_signature"]

logger = logging.getLogger(__name__)

METRICS: tuple[str, ...] = corpus_metrics()     # the table's corpus metrics at import: --metrics' choices, default


@dataclass(frozen=True, init=False)
class ScoreConfig:
    """What ``doctrans score`` reads, computes and writes.

    ``ScoreConfig(hyp, refs, …, **metric options)``: besides the fields below, every option of the
    metric table (``metrics.metric_options()``: baseline, bootstrap, dp_base, dp_oracle, cohesion,
    cohesion_window, docs, lsa, apt_src, apt_corpus, …) is a keyword, read as an attribute
    (``cfg.baseline``) and kept in ``options``, with its default where not given. Raises ValueError
    for no reference, an unknown or empty metric list, an unknown format; TypeError for an unknown
    keyword; ``ScoreOptionError`` (a ValueError) for a metric's options given in part.
    """

    hyp: str                              # hypothesis file, one segment per line
    refs: tuple[str, ...]                 # plain text files (one ref each) or .sgm sets (one ref per sysid)
    hyp_tokenized: bool | None            # hypothesis is Moses-tokenized; None: detected (no evidence: not)
    refs_tokenized: bool | None           # None: detected (no evidence: True for .sgm, False for plain text)
    metrics: tuple[str, ...]              # corpus metrics of the table, in output order [default: all]
    lowercase_detok: bool | None          # case-insensitive sacrebleu/chrF; None: iff all refs are lowercase
    split_hyphens: bool                   # aggressive Moses hyphen splitting in bleu_tok_lc (TVsub refs use it)
    fmt: str                              # "table" | "json" (what `render` and the --out file hold)
    out: str | None                       # write the rendered result here atomically
    options: Mapping[str, object]         # every metric option of the table, given or default

    def __init__(self, hyp: str, refs: Sequence[str], hyp_tokenized: bool | None = None,
                 refs_tokenized: bool | None = None, metrics: Sequence[str] | None = None,
                 lowercase_detok: bool | None = None, split_hyphens: bool = True, fmt: str = "table",
                 out: str | None = None, options: Mapping[str, object] | None = None, **metric_opts: object) -> None:
        known = metric_options()
        given = {**(options or {}), **metric_opts}
        unknown = sorted(set(given) - set(known))
        if unknown:
            raise TypeError(f"ScoreConfig: unknown option(s) {unknown}; the metric table's are {sorted(known)}")
        values = dict(hyp=hyp, refs=tuple(refs), hyp_tokenized=hyp_tokenized, refs_tokenized=refs_tokenized,
                      metrics=tuple(corpus_metrics() if metrics is None else metrics), lowercase_detok=lowercase_detok,
                      split_hyphens=split_hyphens, fmt=fmt, out=out,
                      options={name: given.get(name, o.default) for name, o in known.items()})
        for name, value in values.items():
            object.__setattr__(self, name, value)
        if not self.refs:
            raise ValueError("ScoreConfig.refs: at least one reference is needed")
        _check_metrics(self.metrics)
        if self.fmt not in ("table", "json"):
            raise ValueError(f"ScoreConfig.fmt must be 'table' or 'json', got {self.fmt!r}")
        for m in METRIC_TABLE.values():
            m.check(self.options)

    def __getattr__(self, name: str) -> object:
        options = self.__dict__.get("options", {})
        if name in options:
            return options[name]
        raise AttributeError(f"ScoreConfig has no field or metric option {name!r}")


def _check_metrics(metrics: Sequence[str]) -> None:
    names = corpus_metrics()
    unknown = [m for m in metrics if m not in names]
    if unknown or not metrics:
        raise ValueError(f"unknown or empty metrics {list(metrics)}; choose from {list(names)}")


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
    metrics: Sequence[str] | None = None,
    lowercase_detok: bool | None = None,
    split_hyphens: bool = True,
    how: dict | None = None,
    texts: list | None = None,
) -> dict:
    """Score hypotheses against reference streams with the corpus metrics ``metrics`` (default:
    all of the table's; see the module docstring).

    ``hyp_tokenized`` / ``refs_tokenized`` None: detected (``detect_form``; no evidence: not
    tokenized). ``lowercase_detok`` None: sacrebleu/chrF are case-insensitive when the
    references or the hypothesis are lowercase. ``how``: {"hyp"/"refs": how a given value was
    decided}, for the report. ``texts``: a list that receives the ``CorpusTexts`` scored (the
    analyses of ``score_files`` read them). Returns ``{metric: {"score", "signature", "verbose",
    "preprocessing", ...}, "n_refs", "n_lines", "hyp_tokenized", "refs_tokenized", "form"
    (what each side looks like and how it was scored), "notes" (mismatches, also logged as
    warnings)}``; scores are 0-100. Raises ValueError when a reference's line count differs from
    the hypothesis', TypeError when refs is a flat list.
    """
    metrics = corpus_metrics() if metrics is None else tuple(metrics)
    _check_metrics(metrics)
    _check_shapes(hyps, refs)
    hyps, refs = list(hyps), [list(r) for r in refs]
    detok = any(METRIC_TABLE[m].form == "detokenized" for m in metrics)
    hyp_tokenized, refs_tokenized, lc, form, notes = resolve_forms(
        hyps, refs, hyp_tokenized, refs_tokenized, lowercase_detok, how or {}, detok)
    corpus = CorpusTexts(hyps, refs, hyp_tokenized, refs_tokenized, lc, form["case"], split_hyphens)
    result: dict = {m: METRIC_TABLE[m].compute(corpus) for m in metrics}     # in the requested order
    notes += script_notes(hyps, refs)
    result.update(n_refs=len(refs), n_lines=len(hyps),
                  hyp_tokenized=hyp_tokenized, refs_tokenized=refs_tokenized, form=form, notes=notes)
    for note in notes:
        logger.warning("%s", note)
    if texts is not None:
        texts.append(corpus)
    return result


def score_files(cfg: ScoreConfig) -> dict:
    """Read the files named in ``cfg`` and score them: the corpus metrics ``cfg.metrics``, then
    every analysis of the metric table that its options turn on (``Metric.enabled``), each under
    its name; adds ``hyp``, ``refs`` (paths) and ``sacrebleu_version``.

    Raises ValueError naming the hypothesis and reference files and both line counts when they
    differ; FileNotFoundError.
    """
    refs, refs_tok, refs_how = load_references_how(cfg.refs, cfg.refs_tokenized)
    hyps = read_hypothesis(cfg.hyp)
    if len(hyps) != len(refs[0]):
        raise ValueError(
            f"hypothesis {cfg.hyp} has {len(hyps)} lines but reference(s) "
            f"{', '.join(cfg.refs)} have {len(refs[0])} lines"
        )
    texts: list[CorpusTexts] = []
    result = score_corpus(hyps, refs, cfg.hyp_tokenized, refs_tok, cfg.metrics,
                          cfg.lowercase_detok, cfg.split_hyphens, how={"refs": refs_how}, texts=texts)
    result.update(hyp=str(cfg.hyp), refs=[str(r) for r in cfg.refs],
                  sacrebleu_version=sacrebleu.__version__)
    analyses = [m for m in METRIC_TABLE.values()
                if m.kind in ("analysis", "comparison") and m.enabled(cfg.metrics, cfg.options)]
    wanting: dict[str, list[str]] = {}
    for m in analyses:
        for need in m.needs:
            wanting.setdefault(need, []).append(m.name)
    inputs = ScoreInputs(cfg, texts[0], wanting)
    for m in analyses:
        result[m.name] = m.compute(inputs)
    for m in cfg.metrics:                   # (the caller prints the result; logged once more at -v only)
        logger.debug("%s = %.2f  %s", m, result[m]["score"], result[m]["signature"])
    return result


def score_translation(cfg: ScoreConfig) -> Path | dict:
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
