"""What a metric of ``doctrans score`` is: a ``Metric`` (one module of this package defining
``METRIC``, one row of ``METRIC_TABLE`` in ``metrics/__init__.py``), the ``Option``s it adds to
``ScoreConfig`` and to ``doctrans score``, and what it reads (``CorpusTexts``, ``ScoreInputs``).

Kinds of metric (``Metric.kind``):

``corpus``
    A corpus score with a sacrebleu signature (BLEU, chrF), chosen with ``--metrics``
    (``ScoreConfig.metrics``) and printed as a row of the score table:
    ``compute(texts: CorpusTexts) -> {"score" (0-100), "signature", "verbose", "preprocessing", …}``.
    ``form`` says which form both sides are brought to ("tokenized" or "detokenized").
``analysis``
    A figure of the hypothesis (against the references, the source, the documents …), on when one
    of its ``when`` options is given (always when ``when`` is empty; the others of ``when`` are then
    required too), printed as lines under the table (``report``):
    ``compute(inputs: ScoreInputs) -> dict``.
``comparison``
    An analysis against the baseline hypothesis (``--baseline``), printed last.
``model``
    A figure of a row's checkpoint rather than of its translation (contrastive pronoun accuracy,
    CXMI), computed by the experiment tables (``doctrans table``), never by ``doctrans score``:
    ``compute(inputs: ModelInputs) -> {column: value}`` (the row's columns themselves), and
    optionally ``compare(row, first, table) -> {column: value}``: the columns of a row against the
    first row of ``table context`` (McNemar's test).

``views`` says where the experiment tables' markdown shows a metric's columns: view → ``Column``s
(``VIEWS`` names the views; the order of the metrics within a view is
``experiments/base.py: VIEW_ORDER``, a metric not named there last). A table computes the model
metrics shown in one of its views.

``needs`` names what a metric reads (``NEEDS``); ``options`` are its inputs and switches — each
one a ``ScoreConfig`` keyword and, with a ``flag``, a ``doctrans score`` option (in table order;
an option two metrics read, such as ``--docs``, is one ``Option`` object listed by both);
``columns(entry)`` gives the flat columns the experiment tables (``doctrans table``) put in a row.

The command line reads the table when it starts (its options come from it), so a metric module
imports at its top only what this module does (the standard library); what computes (sacrebleu,
torch through ``doctrans.utils.io``, eflomal …) is imported inside ``compute``.
"""
from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

KINDS = ("corpus", "analysis", "comparison", "model")

NEEDS = {
    "hypothesis": "the translation scored (HYP)",
    "references": "the reference translations (-r), the first one for the analyses",
    "baseline": "a second translation of the same source (--baseline)",
    "dp_annotation": "the segmented source without and with hand-annotated dropped pronouns (--base, --oracle)",
    "documents": "the document of every line (--docs, or the first .sgm reference's)",
    "source": "the segmented source of the hypothesis (--apt)",
    "lsa": "an LSA model or a tokenized English corpus to fit one on (--lsa)",
    "model": "a table row's checkpoint and the test set it reads (doctrans table: ModelInputs)",
}

# The markdown tables of the experiment tables that show metric columns (``Metric.views``).
VIEWS = {
    "context_usage": "table context: the context-usage table (--usage, --discourse, --lone)",
    "context_discourse": "table context: the discourse table (with DP recall or --discourse), a reference row last",
    "dp_discourse": "table dp --discourse: the discourse table, a reference row last",
    "rec": "table rec: the main table, after the pronoun count (a NaN shown as —)",
    "full": "table full: the whole-corpus table (issue 74), after the pronoun count",
}

OPTION_TYPES = ("file", "flag", "positive", "non_negative", "text")


class ScoreOptionError(ValueError):
    """A metric's options given in part (``--base`` without ``--oracle``): ``doctrans score`` shows
    it as a usage error."""


@dataclass(frozen=True)
class Option:
    """One input or switch of a metric: a ``ScoreConfig`` keyword ``name`` with its ``default`` and,
    when ``flag`` is set, the ``doctrans score`` option of that spelling (``type``: an existing
    ``file``, a ``flag``, a ``positive`` or ``non_negative`` integer, or ``text``)."""

    name: str
    default: object = None
    flag: str | None = None
    type: str = "file"
    help: str = ""
    metavar: str | None = None
    show_default: bool = False

    def __post_init__(self) -> None:
        if self.type not in OPTION_TYPES:
            raise ValueError(f"option {self.name}: type {self.type!r} is not one of {OPTION_TYPES}")


@dataclass(frozen=True)
class Column:
    """A markdown column of an experiment table: ``header``, the row ``key`` it shows (``"a / b"``:
    two cells joined by " / "), the format spec ``fmt`` (a missing value: —), and ``reference``:
    the first reference's figure under it in a view's "reference 1" row (first row → text);
    ``against_first``: text after each row's cell that compares it with the first row ((row, first
    row) → text, e.g. DP recall's `` (+6.2, p 0.004)``)."""

    header: str
    key: str
    fmt: str
    reference: Callable[[dict], str] | None = None
    against_first: Callable[[dict, dict], str] | None = None

    @property
    def keys(self) -> tuple[str, ...]:
        """The row keys of its cells."""
        return tuple(self.key.split(" / "))


def reference_cell(key: str, fmt: str) -> Callable[[dict], str]:
    """A ``Column.reference``: the first row's ``key`` formatted, — without it."""
    return lambda first: "—" if first.get(key) is None else format(first[key], fmt)


@dataclass(frozen=True)
class Metric:
    """A row of the metric table (module doc): its result key ``name``, ``title`` (in words, for
    messages), ``kind``, ``needs``, ``compute``, ``options``, ``when``, ``form`` and ``legend``
    (corpus: one line under the table, printed once however many metrics share it), ``report``
    (analysis: ``entry -> lines``), ``columns`` (``entry -> {column: value}``), ``views`` (view →
    the ``Column``s the experiment tables' markdown shows there) and ``compare`` (model: a row's
    columns against the first row's)."""

    name: str
    title: str
    kind: str
    needs: frozenset[str]
    compute: Callable
    options: tuple[Option, ...] = ()
    when: tuple[str, ...] = ()
    form: str = ""
    legend: str = ""
    report: Callable[[dict], list[str]] | None = None
    columns: Callable[[dict], dict] | None = None
    views: Mapping[str, tuple[Column, ...]] = field(default_factory=dict)
    compare: Callable[[dict, dict, object], dict] | None = None

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"metric {self.name}: kind {self.kind!r} is not one of {KINDS}")
        if set(self.views) - set(VIEWS):
            raise ValueError(f"metric {self.name}: unknown views {sorted(set(self.views) - set(VIEWS))} (known: "
                             f"{', '.join(VIEWS)})")
        if (self.kind == "model") != ("model" in self.needs):
            raise ValueError(f"metric {self.name}: a metric needs 'model' exactly when its kind is 'model'")
        if self.kind == "model" and (self.options or self.columns is not None):
            raise ValueError(f"metric {self.name}: a model metric has no doctrans score options and returns its "
                             f"columns from compute")
        if self.compare is not None and self.kind != "model":
            raise ValueError(f"metric {self.name}: only a model metric compares rows (compare)")
        if not self.needs <= set(NEEDS):
            raise ValueError(f"metric {self.name}: unknown needs {sorted(self.needs - set(NEEDS))} (known: "
                             f"{', '.join(NEEDS)})")
        if not set(self.when) <= {o.name for o in self.options}:
            raise ValueError(f"metric {self.name}: 'when' names {list(self.when)} that are not among its options")
        if self.kind == "corpus" and (self.when or self.form not in ("tokenized", "detokenized")):
            raise ValueError(f"metric {self.name}: a corpus metric is chosen by --metrics (no 'when') and says "
                             f"its form ('tokenized' or 'detokenized')")

    def enabled(self, metrics: Sequence[str], options: Mapping[str, object]) -> bool:
        """Whether this metric runs: a corpus metric when named in ``metrics``, another when one of
        its ``when`` options is set (always without any)."""
        if self.kind == "corpus":
            return self.name in metrics
        return not self.when or any(options[w] for w in self.when)

    def check(self, options: Mapping[str, object]) -> None:
        """Raise ``ScoreOptionError`` when only some of the ``when`` options are given."""
        given = [w for w in self.when if options[w]]
        if given and len(given) < len(self.when):
            flags = {o.name: o.flag or o.name for o in self.options}
            names = [flags[w] for w in self.when]
            raise ScoreOptionError(f"{self.title} needs {'both ' if len(names) == 2 else ''}"
                                   f"{' and '.join(names)}")


# The inputs two metrics share (one Option object each, so that `doctrans score` has one option).
BASELINE = Option("baseline", help="A baseline hypothesis (same format as HYP): adds paired bootstrap resampling "
                  "(sacrebleu, Koehn 2004) and the sign test of HYP vs it, in the bleu_tok_lc setting.",
                  flag="--baseline")
BASELINE_TOKENIZED = Option("baseline_tokenized", type="flag")   # default: detected (no evidence: as HYP)
BOOTSTRAP = Option("bootstrap", 1000, flag="--bootstrap", type="positive", show_default=True,
                   help="Bootstrap samples (resampled test sets) of --baseline and --confidence.")
DOCS = Option("docs", flag="--docs",
              help="--cohesion, --lsa: doc_id<TAB>position per line (as PREP/test.docs) [default: from an .sgm -r].")


def bleu_entry(metric, hyps: list[str], refs: list[list[str]], prep: str) -> dict:
    """A sacrebleu BLEU result as a corpus metric's entry (score, signature, verbose, precisions,
    bp, sys_len, ref_len, preprocessing)."""
    s = metric.corpus_score(hyps, refs)          # metric: a sacrebleu.metrics.BLEU
    sig = str(metric.get_signature())
    return {
        "score": s.score, "signature": sig, "verbose": s.format(signature=sig),
        "precisions": list(s.precisions), "bp": s.bp,
        "sys_len": s.sys_len, "ref_len": s.ref_len, "preprocessing": prep,
    }


@dataclass
class CorpusTexts:
    """What a corpus metric reads: hypotheses (N lines), reference streams (``refs[k][i]``), how
    each side is tokenized (decided by ``score_text.resolve_forms``), the case of the detokenized
    metrics (``lowercase``, and ``case`` in words) and Moses' aggressive hyphen splitting; the two
    forms metrics score are made once, when first asked."""

    hyps: list[str]
    refs: list[list[str]]
    hyp_tokenized: bool
    refs_tokenized: bool
    lowercase: bool = False
    case: str = ""
    split_hyphens: bool = True

    @cached_property
    def tokenized(self) -> tuple[list[str], list[list[str]]]:
        """Both sides Moses-tokenized (sacremoses; already tokenized text normalised) and lowercased:
        the bleu_tok_lc form, also what the analyses read."""
        from doctrans.evaluation.score_text import tok_lc_prep

        tok = tok_lc_prep(self.split_hyphens)
        return tok(self.hyps, self.hyp_tokenized), [tok(r, self.refs_tokenized) for r in self.refs]

    @cached_property
    def detokenized(self) -> tuple[list[str], list[list[str]], str]:
        """Both sides detokenized (Moses-detokenized where tokenized), and the preprocessing line."""
        from doctrans.evaluation.score_text import moses_detokenize

        hyps = moses_detokenize(self.hyps) if self.hyp_tokenized else self.hyps
        refs = [moses_detokenize(r) for r in self.refs] if self.refs_tokenized else self.refs
        prep = (f"hyp {'Moses-detokenized' if self.hyp_tokenized else 'as given'}, "
                f"refs {'Moses-detokenized' if self.refs_tokenized else 'as given'}; {self.case}")
        return hyps, refs, prep


@dataclass
class ScoreInputs:
    """What an analysis reads: the ``ScoreConfig`` (file names and every metric option, e.g.
    ``cfg.bootstrap``), the ``CorpusTexts``, and the inputs several metrics share, each read once:
    ``hyp`` / ``refs`` (the tokenized, lowercased form), ``baseline`` (same form, or None) and
    ``doc_ids``. ``wanting``: need → the enabled metrics that need it (for messages)."""

    cfg: object
    texts: CorpusTexts
    wanting: dict[str, list[str]] = field(default_factory=dict)

    @property
    def hyp(self) -> list[str]:
        return self.texts.tokenized[0]

    @property
    def refs(self) -> list[list[str]]:
        return self.texts.tokenized[1]

    @cached_property
    def baseline(self) -> list[str] | None:
        """The baseline hypothesis (``cfg.baseline``) in the tokenized, lowercased form; its
        tokenization ``cfg.baseline_tokenized``, else detected, else as the hypothesis'. Raises
        ValueError when its line count differs from the hypothesis'."""
        from doctrans.evaluation.score_text import detect_form, read_hypothesis, tok_lc_prep

        cfg = self.cfg
        if not cfg.baseline:
            return None
        base = read_hypothesis(cfg.baseline)
        if len(base) != len(self.texts.hyps):
            raise ValueError(f"baseline {cfg.baseline} has {len(base)} lines, {cfg.hyp} has {len(self.texts.hyps)}")
        tokenized = cfg.baseline_tokenized
        if tokenized is None:
            tokenized = detect_form(base).tokenized
            tokenized = self.texts.hyp_tokenized if tokenized is None else tokenized
        return tok_lc_prep(self.texts.split_hyphens)(base, tokenized)

    @cached_property
    def doc_ids(self) -> list[str]:
        """The document id of every line: ``cfg.docs`` (doc_id<TAB>position), else the first SGML
        reference's. Raises ValueError without either, or when the count differs from the lines'."""
        from doctrans.data.documents import read_doc_positions
        from doctrans.data.sgml import read_doc_ids
        from doctrans.evaluation.score_text import is_sgml

        n = len(self.texts.hyps)
        cfg = self.cfg
        if cfg.docs:
            names, doc, _ = read_doc_positions(Path(cfg.docs), n)
            doc_ids = [names[d] for d in doc]
        else:
            sgm = [r for r in cfg.refs if Path(r).suffix.lower() == ".xml" or is_sgml(r)]
            if not sgm:
                who = self.wanting.get("documents") or ["this metric"]
                raise ValueError(f"{'/'.join(who)} need{'s' if len(who) == 1 else ''} documents: give --docs or "
                                 f"an .sgm reference")
            doc_ids = read_doc_ids(sgm[0])
        if len(doc_ids) != n:
            raise ValueError(f"{cfg.docs or sgm[0]}: {len(doc_ids)} document lines for {n} hypothesis lines")
        return doc_ids


@dataclass
class ModelInputs:
    """What a model metric reads: a table row's ``checkpoint``, the table's settings ``table``
    (``experiments.base.TableConfig``: ``prepared``, ``data``, ``work``, ``contrastive`` …), and
    ``source``: the source lines the row's model reads when they are not the test source (a +DPs
    row's DP-completed input; None: the test source, or ``source_of`` of it); ``test_source``
    (PREP/test.tok.zh) and ``doc_ids`` (PREP/test.docs) as the builder has them, else read from
    PREP; ``source_of``: (segmented lines, document ids) → the lines the row's model reads (a +DPs
    row's DP completion, for a set other than the test set too; None: the lines as they are). Read once, when
    first asked: ``references`` (PREP/test.tok.en, the tokenized first reference) and
    ``scoring_set`` (the checkpoint loaded with the source it reads and the references,
    ``evaluation.cxmi.load_scoring_set``)."""

    checkpoint: Path
    table: object
    source: list[str] | None = None
    test_source: list[str] | None = None    # as the builder has them (None: read from PREP)
    doc_ids: list[str] | None = None
    source_of: Callable[[list[str], list[str]], list[str]] | None = None

    def __post_init__(self) -> None:
        if self.test_source is None:
            self.test_source = self._prepared("test.tok.zh")
        if self.doc_ids is None:
            self.doc_ids = [x.split("\t")[0] for x in self._prepared("test.docs")]
        if self.source is None and self.source_of is not None:
            self.source = self.source_of(self.test_source, self.doc_ids)

    def _prepared(self, name: str) -> list[str]:
        from doctrans.utils.io import read_lines

        return read_lines(Path(self.table.prepared) / name)

    @cached_property
    def references(self) -> list[str]:
        return self._prepared("test.tok.en")

    @cached_property
    def scoring_set(self):
        """``evaluation.cxmi.ScoringSet`` of the checkpoint on (the source it reads, the references)."""
        from doctrans.evaluation.cxmi import load_scoring_set

        src = self.test_source if self.source is None else self.source
        return load_scoring_set(str(self.checkpoint), src, self.references, self.doc_ids, tokenized=True)
