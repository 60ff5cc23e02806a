"""Dropped-pronoun (DP) annotation from word alignment (Wang 2019 thesis, §4.3.1, Algorithm 1).

For a Chinese source f and its English translation e with word links A, every English pronoun
(Table 4.2) that has no Chinese counterpart is taken to be a pronoun dropped in the source. Its
position is found by the **bidirectional search** of Algorithm 1: the nearest target words left
and right of the pronoun that have exactly one link are projected onto the source ("anchors"),
every gap between the anchors is a candidate position, every Chinese form of the pronoun
(Table 4.3) a candidate surface, and a language model picks the best (gap, surface). See
docs/models.md §3.2 for the restatement followed here and §5 (A22) for the choices marked [I].

This module is only the algorithm. It imports no aligner and no LM library: the alignment is
given as links (``parse_alignment`` reads Pharaoh ``i-j`` text, e.g. from fast_align/eflomal
intersected) and the LM is **injected** as a callable ``lm_score(tokens) -> float`` where higher
is better, e.g. ``lambda toks: kenlm_model.score(" ".join(toks), bos=True, eos=True)`` (log10
probability of the whole sentence). The thesis selects the candidate with the lowest perplexity;
all candidates of one pronoun have the same length, so that is the highest log probability.

Per sentence pair, ``find_dps`` returns an ``AnnotationResult``: the DP version x̂_DP (pronouns
inserted), the DPP version x̂_DPP (``#DP#`` at each insertion), labels for the DP labeler (for
each original token plus ``</s>``: the pronoun dropped right before it, else ``N``) and one
``DPInsertion`` record per DP with the search trace (``explain_text`` prints it).
"""
from __future__ import annotations

import dataclasses
import logging
import math
import re
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

from doctrans.data.vocab import DP_PLACEHOLDER
from doctrans.dp.pronouns import (
    TRIGGERS, chinese_roots, is_chinese_pronoun, pronoun_type, roots_compatible, zh_candidates)

logger = logging.getLogger(__name__)

MODES: tuple[str, ...] = ("strict_unaligned", "misaligned")
DPP_TOKEN = DP_PLACEHOLDER  # the reserved DP-position token of x̂_DPP (thesis writes #DP# / <DP>)
NO_DP_LABEL = "N"            # label of a token with no pronoun dropped before it
EOS = "</s>"                 # the extra final position of the label sequence
DPP_TAGS = ("NA", "DP")      # detector tags (§4.3.2): no DP / a DP before the token

LMScore = Callable[[list[str]], float]   # tokens -> score, higher is better (e.g. log10 P)
Link = tuple[int, int]                   # (source index, target index), 0-based

_PHARAOH = re.compile(r"(\d+)-(\d+)")


@dataclass(frozen=True)
class CandidateScore:
    """One scored candidate: ``pronoun`` inserted before token ``gap`` of the search sentence."""

    gap: int          # insertion index in ``DPInsertion.sentence`` (len = at the end)
    pronoun: str
    score: float      # lm_score of the whole candidate sentence


@dataclass(frozen=True)
class DPInsertion:
    """One annotated DP and how it was found (the trace behind ``explain_text``)."""

    tgt_index: int                      # English pronoun position (0-based)
    english: str                        # English pronoun, lower-cased
    pronoun_type: str                   # pronouns.pronoun_type(english), e.g. "possessive"
    pronoun: str                        # Chinese form inserted
    position: int                       # index of the DP in the final dp_tokens
    orig_position: int                  # index of the original source token it precedes (S: </s>)
    tgt_anchors: tuple[int | None, int | None]  # nearest one-link target positions (None: edge)
    src_anchors: tuple[int, int]        # their source indices in `sentence` (-1: start, len: end); left > right: crossed
    sentence: tuple[str, ...]           # source as it was during the search (earlier DPs included)
    gap: int                            # chosen insertion index in `sentence`
    scores: tuple[CandidateScore, ...]  # every (gap × candidate), gaps ascending


@dataclass(frozen=True)
class SkippedPronoun:
    """An English pronoun that was not annotated, and why (``overt`` or ``aligned``)."""

    tgt_index: int
    english: str
    reason: str     # "overt": linked to a Chinese pronoun; "aligned": has links (strict mode);
                    # "overt_unaligned": a matching Chinese pronoun is in the source (overt_match)


@dataclass(frozen=True)
class AnnotationResult:
    """The annotation of one sentence pair (S source tokens, K inserted DPs)."""

    dp_tokens: tuple[str, ...]            # x̂_DP, length S + K
    dpp_tokens: tuple[str, ...]           # x̂_DPP (#DP# for each DP), length S + K
    labels: tuple[str, ...]               # length S + 1: DP before each original token / </s>, or N
    insertions: tuple[DPInsertion, ...]   # in annotation order (target left to right)
    skipped: tuple[SkippedPronoun, ...]
    label_conflicts: int                  # DPs dropped from `labels` (a 2nd DP before the same token)
    links: frozenset[Link]                # links over dp_tokens (shifted; DP links added)

    @property
    def dpp_tags(self) -> tuple[str, ...]:
        """Detector tags (thesis §4.3.2), length S + 1: ``DP`` where a DP precedes, else ``NA``."""
        return tuple(DPP_TAGS[lab != NO_DP_LABEL] for lab in self.labels)


def parse_alignment(text: str) -> set[Link]:
    """Read one line of Pharaoh alignment ``"0-0 1-2 …"`` (source-target, 0-based) into links.

    An empty line gives no links. Raises ``ValueError`` naming the offending item if any
    whitespace-separated item is not ``<int>-<int>``.
    """
    links: set[Link] = set()
    for item in text.split():
        m = _PHARAOH.fullmatch(item)
        if m is None:
            raise ValueError(f"bad alignment item {item!r} in {text!r}: expected 'i-j' (0-based ints)")
        links.add((int(m.group(1)), int(m.group(2))))
    return links


def _check_inputs(src: Sequence[str], tgt: Sequence[str], links: Iterable[Link], mode: str) -> set[Link]:
    """Validate ``mode`` and that every link is inside the S × T grid; return the links as a set."""
    if mode not in MODES:
        raise ValueError(f"unknown mode {mode!r}; expected one of {MODES}")
    out = set(links)
    bad = sorted((i, j) for i, j in out if not (0 <= i < len(src) and 0 <= j < len(tgt)))
    if bad:
        raise ValueError(f"links {bad} outside source length {len(src)} × target length {len(tgt)}")
    return out


def _search_anchors(links: set[Link], j: int,
                    n_src: int) -> tuple[tuple[int | None, int | None], tuple[int, int]]:
    """Bidirectional search of Algorithm 1 around target position ``j``.

    Returns the nearest target positions left/right of ``j`` that have exactly one link
    (``None`` if there is none) and the source indices they link to, with sentence start = -1
    and end = ``n_src`` (not swapped: left > right means the links cross).
    """
    per_col = Counter(jj for _, jj in links)
    src_of = {jj: i for i, jj in links if per_col[jj] == 1}
    jl = max((jj for jj in src_of if jj < j), default=None)
    jr = min((jj for jj in src_of if jj > j), default=None)
    a = -1 if jl is None else src_of[jl]
    b = n_src if jr is None else src_of[jr]
    return (jl, jr), (a, b)


def candidate_gaps(a: int, b: int) -> list[int]:
    """Insertion indices between source anchors ``a`` ≤ ``b`` (-1 = start, S = end).

    Gap ``g`` means "insert before token g" (g = S: at the end). All gaps strictly after ``a``
    and up to ``b``; if both anchors are the same token, the gaps on both sides of it [I].
    """
    return list(range(a + 1, b + 1)) if a < b else [a, a + 1]


def _score_candidates(
    sentence: list[str], gaps: list[int], pronouns: Sequence[str], lm_score: LMScore
) -> tuple[list[CandidateScore], CandidateScore]:
    """Score every (gap × pronoun) insertion; best = highest score, ties → earliest gap, then
    candidate order. Raises ``ValueError`` if the LM returns NaN."""
    scores, best = [], None
    for gap in gaps:
        for pronoun in pronouns:
            score = float(lm_score(sentence[:gap] + [pronoun] + sentence[gap:]))
            if math.isnan(score):
                raise ValueError(f"lm_score returned NaN for {pronoun!r} at gap {gap} of {sentence}")
            cand = CandidateScore(gap, pronoun, score)
            scores.append(cand)
            if best is None or score > best.score:
                best = cand
    return scores, best


def _insert(sentence: list[str], origin: list[int], links: set[Link], gap: int, pronoun: str,
            j: int, link_inserted: bool, dp_id: int) -> set[Link]:
    """Insert ``pronoun`` before ``gap`` in place, shift source indices of the links and, with
    ``link_inserted``, replace the links of target ``j`` by one link to the DP [I]."""
    sentence.insert(gap, pronoun)
    origin.insert(gap, -(dp_id + 1))          # DPs are -1, -2, …; original tokens keep their index
    shifted = {(i + (i >= gap), jj) for i, jj in links}
    if link_inserted:
        shifted = {(i, jj) for i, jj in shifted if jj != j} | {(gap, j)}
    return shifted


def _skip_reason(src: list[str], links: set[Link], j: int, mode: str) -> str | None:
    """Why target ``j`` is not a DP (``overt``/``aligned``), or None if it should be annotated."""
    linked = [i for i, jj in links if jj == j]
    if any(is_chinese_pronoun(src[i], extended=True) for i in linked):
        return "overt"
    if linked and mode == "strict_unaligned":
        return "aligned"
    return None


def find_dps(
    src_tokens: Sequence[str],
    tgt_tokens: Sequence[str],
    links: Iterable[Link],
    lm_score: LMScore,
    mode: str = "strict_unaligned",
    link_inserted: bool = True,
    overt_match: bool = True,
) -> AnnotationResult:
    """Annotate the DPs of one sentence pair (Wang 2019 thesis §4.3.1, Algorithm 1; docs/models.md §3.2).

    For each English trigger pronoun, left to right: skip it if it is linked to a Chinese pronoun;
    in ``strict_unaligned`` mode (default) also if it has any link, in ``misaligned`` mode
    annotate pronouns linked only to non-pronouns too. Otherwise search the anchors
    (``_search_anchors``), score every gap × Table 4.3 candidate with ``lm_score`` (the full
    candidate sentence, higher = better; ties → earliest gap, then candidate order), insert the
    best, shift the links, and with ``link_inserted`` link the English pronoun to its DP so it can
    anchor later pronouns [I].

    ``overt_match`` [I] (not in the thesis; off = Algorithm 1 as written): an English pronoun
    the alignment left unlinked is *not* a DP if the source still has an unclaimed overt Chinese
    pronoun of the same Table 4.2 row (``pronouns.roots_compatible``), also inside a longer
    jieba token (我要, 我爱你). Pronouns linked to a token holding a compatible root claim it
    first; the rest claim roots left to right. Sparse intersection alignments often leave
    ``you``/``你`` unlinked, and Algorithm 1 would then insert a second 你.

    ``links``: (source, target) index pairs, 0-based. Raises ``ValueError`` for a link outside
    the sentences, an unknown ``mode`` or a NaN LM score.
    """
    cur_links = _check_inputs(src_tokens, tgt_tokens, links, mode)
    sentence, origin = list(src_tokens), list(range(len(src_tokens)))
    found: list[DPInsertion] = []
    skipped: list[SkippedPronoun] = []
    free_roots = _unclaimed_roots(src_tokens, tgt_tokens, cur_links) if overt_match else []
    for j, word in enumerate(tgt_tokens):
        english = word.lower()
        if english not in TRIGGERS:
            continue
        reason = _skip_reason(sentence, cur_links, j, mode)
        if reason is None and overt_match:
            k = next((k for k, r in enumerate(free_roots) if roots_compatible(english, r)), None)
            if k is not None:
                free_roots.pop(k)
                reason = "overt_unaligned"
        if reason is not None:
            skipped.append(SkippedPronoun(j, english, reason))
            continue
        tgt_anchors, (a, b) = _search_anchors(cur_links, j, len(sentence))
        gaps = candidate_gaps(min(a, b), max(a, b))          # swap crossed anchors [I]
        scores, best = _score_candidates(sentence, gaps, zh_candidates(english), lm_score)
        found.append(DPInsertion(
            tgt_index=j, english=english, pronoun_type=pronoun_type(english), pronoun=best.pronoun,
            position=-1, orig_position=-1,                   # final values set by _finalize
            tgt_anchors=tgt_anchors, src_anchors=(a, b), sentence=tuple(sentence), gap=best.gap,
            scores=tuple(scores)))
        cur_links = _insert(sentence, origin, cur_links, best.gap, best.pronoun, j, link_inserted,
                            dp_id=len(found) - 1)
    return _finalize(sentence, origin, found, skipped, cur_links, len(src_tokens))


def _unclaimed_roots(src: Sequence[str], tgt: Sequence[str], links: set[Link]) -> list[str]:
    """Chinese pronoun roots of the source (left to right) not claimed by an English pronoun
    linked to the token that holds them (see ``find_dps``' ``overt_match``)."""
    roots = [[r for r in chinese_roots(tok)] for tok in src]
    for i, j in sorted(links, key=lambda l: (l[1], l[0])):
        english = tgt[j].lower()
        if english in TRIGGERS:
            k = next((k for k, r in enumerate(roots[i]) if roots_compatible(english, r)), None)
            if k is not None:
                roots[i].pop(k)
    return [r for rs in roots for r in rs]


def _finalize(sentence: list[str], origin: list[int], found: list[DPInsertion],
              skipped: list[SkippedPronoun], links: set[Link], n_src: int) -> AnnotationResult:
    """Fill in final positions, build x̂_DPP and the labels (first DP before a token wins)."""
    labels = [NO_DP_LABEL] * (n_src + 1)
    conflicts = 0
    insertions = list(found)
    for pos, o in enumerate(origin):
        if o >= 0:
            continue
        k = -o - 1
        orig = next((x for x in origin[pos:] if x >= 0), n_src)
        insertions[k] = dataclasses.replace(found[k], position=pos, orig_position=orig)
        if labels[orig] == NO_DP_LABEL:
            labels[orig] = found[k].pronoun
        else:
            conflicts += 1
            logger.debug("two DPs before source token %d: kept %s, dropped %s",
                         orig, labels[orig], found[k].pronoun)
    dpp = tuple(DPP_TOKEN if o < 0 else t for t, o in zip(sentence, origin))
    return AnnotationResult(tuple(sentence), dpp, tuple(labels), tuple(insertions), tuple(skipped),
                            conflicts, frozenset(links))


@dataclass
class DPStats:
    """Counts behind ``stats.json`` (cf. thesis Table 4.5): accumulate per sentence, merge."""

    sentences: int = 0
    sentences_with_dp: int = 0
    label_conflicts: int = 0
    pronouns: Counter = field(default_factory=Counter)   # English trigger tokens, by form
    dropped: Counter = field(default_factory=Counter)    # annotated DPs, by English form
    inserted: Counter = field(default_factory=Counter)   # annotated DPs, by Chinese form
    skipped: Counter = field(default_factory=Counter)    # not annotated, by reason

    def add(self, result: AnnotationResult, tgt_tokens: Sequence[str]) -> None:
        self.sentences += 1
        self.sentences_with_dp += bool(result.insertions)
        self.label_conflicts += result.label_conflicts
        self.pronouns.update(t.lower() for t in tgt_tokens if t.lower() in TRIGGERS)
        self.dropped.update(ins.english for ins in result.insertions)
        self.inserted.update(ins.pronoun for ins in result.insertions)
        self.skipped.update(s.reason for s in result.skipped)

    def merge(self, other: DPStats) -> None:
        self.sentences += other.sentences
        self.sentences_with_dp += other.sentences_with_dp
        self.label_conflicts += other.label_conflicts
        for name in ("pronouns", "dropped", "inserted", "skipped"):
            getattr(self, name).update(getattr(other, name))

    def to_dict(self) -> dict:
        """The ``stats.json`` entry of one split: totals, ``by_pronoun``, ``by_type``,
        ``by_chinese`` (inserted forms) and ``skipped`` (overt / aligned)."""
        forms = sorted(self.pronouns.keys() | self.dropped.keys())
        type_total: Counter = Counter()
        type_dropped: Counter = Counter()
        for f in forms:
            type_total[pronoun_type(f)] += self.pronouns[f]
            type_dropped[pronoun_type(f)] += self.dropped[f]
        return {
            "sentences": self.sentences,
            "sentences_with_dp": self.sentences_with_dp,
            **_rate(sum(self.pronouns.values()), sum(self.dropped.values())),
            "label_conflicts": self.label_conflicts,
            "by_pronoun": {f: _rate(self.pronouns[f], self.dropped[f]) for f in forms},
            "by_type": {t: _rate(type_total[t], type_dropped[t]) for t in sorted(type_total)},
            "by_chinese": dict(self.inserted.most_common()),
            "skipped": dict(self.skipped),
        }


def corpus_statistics(results: Sequence[AnnotationResult],
                      tgt_sentences: Sequence[Sequence[str] | str]) -> dict:
    """How many English pronouns are dropped in the source (cf. thesis Table 4.5, Figure 4.2).

    ``tgt_sentences``: the English side, token lists or space-separated strings, line-aligned
    with ``results``. Returns ``DPStats.to_dict()``: ``{"sentences", "pronouns", "dropped",
    "dropped_pct", "label_conflicts", "by_pronoun": {form: {"pronouns", "dropped",
    "dropped_pct"}}, "by_type": {type: {…}}, …}`` where ``pronouns`` counts trigger tokens
    (Table 4.2, any case), ``dropped`` annotated DPs and ``by_type`` uses ``pronoun_type``
    (e.g. ``subject/object``). Raises ``ValueError`` if the two sequences differ in length.
    """
    if len(results) != len(tgt_sentences):
        raise ValueError(f"{len(results)} results but {len(tgt_sentences)} target sentences")
    stats = DPStats()
    for res, sent in zip(results, tgt_sentences):
        stats.add(res, sent.split() if isinstance(sent, str) else sent)
    return stats.to_dict()


def _rate(n_pronouns: int, n_dropped: int) -> dict:
    """``{"pronouns", "dropped", "dropped_pct"}`` (percent of pronouns; 0.0 when there are none)."""
    pct = 100.0 * n_dropped / n_pronouns if n_pronouns else 0.0
    return {"pronouns": n_pronouns, "dropped": n_dropped, "dropped_pct": pct}


def explain_text(result: AnnotationResult, src_tokens: Sequence[str], tgt_tokens: Sequence[str],
                 links: Iterable[Link]) -> str:
    """A plain-text trace of one ``find_dps`` call: input, skipped pronouns, and for each DP its
    anchors, every gap × candidate with its LM score, and the choice (for ``--explain``)."""
    lines = [
        "src:   " + " ".join(f"{t}/{i}" for i, t in enumerate(src_tokens)),
        "tgt:   " + " ".join(f"{t}/{j}" for j, t in enumerate(tgt_tokens)),
        "links: " + " ".join(f"{i}-{j}" for i, j in sorted(links)),
    ]
    for s in result.skipped:
        why = {"overt": "linked to a Chinese pronoun", "aligned": "has alignment links",
               "overt_unaligned": "an unlinked matching Chinese pronoun is in the source"}[s.reason]
        lines.append(f"skip  tgt[{s.tgt_index}] {s.english!r}: {why}")
    for n, ins in enumerate(result.insertions, 1):
        lines.extend(_explain_insertion(n, ins, tgt_tokens))
    lines.append("DP:    " + " ".join(result.dp_tokens))
    lines.append("DPP:   " + " ".join(result.dpp_tokens))
    lines.append("label: " + " ".join(f"{t}:{lab}" for t, lab in zip([*src_tokens, EOS], result.labels)))
    if result.label_conflicts:
        lines.append(f"label conflicts: {result.label_conflicts} (a second DP before the same token)")
    return "\n".join(lines) + "\n"


def _explain_insertion(n: int, ins: DPInsertion, tgt_tokens: Sequence[str]) -> list[str]:
    """The ``explain_text`` lines of one DP."""
    sent = ins.sentence

    def anchor(jj: int | None, i: int) -> str:
        if jj is None:
            return "none → sentence " + ("start" if i < 0 else "end")
        return f"tgt[{jj}] {tgt_tokens[jj]!r} → src {sent[i]!r}/{i}"

    def gap_text(g: int) -> str:
        left = sent[g - 1] if g > 0 else "<s>"
        right = sent[g] if g < len(sent) else EOS
        return f"{left} _ {right}"

    jl, jr = ins.tgt_anchors
    a, b = ins.src_anchors
    crossed = "  (crossed: swapped)" if a > b else ""
    out = [f"DP {n}: tgt[{ins.tgt_index}] {ins.english!r} ({ins.pronoun_type})",
           f"  anchors: left {anchor(jl, a)}; right {anchor(jr, b)}{crossed}"]
    for c in ins.scores:
        mark = "  <- chosen" if (c.gap, c.pronoun) == (ins.gap, ins.pronoun) else ""
        out.append(f"  gap {c.gap} ({gap_text(c.gap)}) {c.pronoun}: {c.score:.4f}{mark}")
    out.append(f"  inserted {ins.pronoun!r} at {ins.position} (before original token {ins.orig_position})")
    return out
