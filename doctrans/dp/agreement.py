"""Agreement of dropped-pronoun (DP) annotations with an oracle (thesis Tables 4.8, 4.9, 6.6).

Used by ``doctrans score dp``: a system file with DPs inserted into the segmented source is
compared with a hand-annotated oracle (TVsub ``*.oracle-dp.seg.zh``). The two sides may be
segmented differently (the system's base is jieba on the raw text, the oracle's base is the
corpus' ``*.seg.zh``), so a DP is identified by **where it sits in the characters of its base
sentence**, not by token index:

1. Each line is normalised: HTML/Moses entities unescaped (``&quot;`` → ``"``), NFKC (so the
   full-width ``？`` of raw text equals the oracle's half-width ``?``), whitespace removed.
2. ``extract_dps`` aligns the DP-inserted line with its own base sentence character by
   character: base characters are matched in order and the rest of the line must be inserted
   Chinese pronouns (Table 4.3). The result per DP is ``(offset, pronoun)``: the number of base
   characters before the DP, and the pronoun. A DP next to an identical overt pronoun (base
   ``我 爱``, line ``我 我 爱``) is ambiguous; it is always reported at the leftmost equivalent
   offset (here 0), so the same sentence gives the same DPs on both sides.
3. If the system's and the oracle's base sentences still differ after normalisation (e.g. ``“``
   in raw text vs ``"`` in ``seg.zh``), system offsets are projected onto the oracle base through
   a character alignment (``difflib``), and the line is counted in ``base_mismatch_lines``.

Metrics (micro-averaged over all DPs of the corpus, as the thesis' F-scores, Powers 2011):
``position`` — a system DP is correct if the oracle has a DP at the same offset of the same
line (detection, Table 4.8 "Detection" / 4.9 "DPP Detection"); ``pronoun`` — same offset and
same pronoun string ("Prediction" / "DPS Prediction"). Matching is one-to-one (multiset
intersection), so two DPs at one offset need two oracle DPs there.

``tag_accuracy`` is the thesis' per-word view (§4.3.2: "label each word if there is a pronoun
dropped before this word"): every word of the oracle's base sentence plus a final ``</s>`` gets a
tag — DP or not (``detection``), the dropped pronoun(s) or none (``prediction``) — and the
accuracy is the share of positions where system and oracle tags agree. Most positions have no
DP on either side, so accuracies are much higher than the P/R/F above; Table 4.8's 0.94/0.95 is
most likely this kind of per-word agreement (the thesis does not say), which is why we report
both.
"""
from __future__ import annotations

import difflib
import functools
import html
import logging
import math
import unicodedata
from collections import Counter
from collections.abc import Iterable, Sequence
from pathlib import Path

import numpy as np

from doctrans.dp.pronouns import CHINESE_PRONOUNS
from doctrans.utils.io import read_lines

logger = logging.getLogger(__name__)

DP = tuple[int, str]                 # (character offset in the base sentence, pronoun)

# Alignment costs of ``_align`` (only their order matters): a whole inserted pronoun token is
# cheapest, a pronoun glued to other characters costs more, any other edit much more.
_COST_DP_TOKEN = 1.0
_COST_DP_GLUED = 1.5
_COST_OTHER_EDIT = 3.0


def normalize_dp_line(line: str) -> str:
    """Unescape entities (``&quot;`` → ``"``) and NFKC-normalise (``？`` → ``?``); spaces kept."""
    return unicodedata.normalize("NFKC", html.unescape(line))


def base_chars(line: str) -> str:
    """The characters a DP offset counts: ``normalize_dp_line`` with all whitespace removed."""
    return "".join(normalize_dp_line(line).split())


def _backward_costs(base: str, dp: str, starts: set[int], ends: set[int], forms: set[str],
                    max_len: int) -> list[list[float]]:
    """cost[i][j]: cheapest alignment of ``dp[i:]`` to ``base[j:]`` (see ``_align``)."""
    n, m = len(dp), len(base)
    cost = [[math.inf] * (m + 1) for _ in range(n + 1)]
    for i in range(n, -1, -1):
        for j in range(m, -1, -1):
            if i == n:
                cost[i][j] = _COST_OTHER_EDIT * (m - j)           # delete the rest of the base
                continue
            best = _COST_OTHER_EDIT + min(cost[i + 1][j], cost[i][j + 1] if j < m else math.inf)
            if j < m and dp[i] == base[j]:
                best = min(best, cost[i + 1][j + 1])
            for k in range(1, min(max_len, n - i) + 1):
                if dp[i:i + k] in forms:
                    w = _COST_DP_TOKEN if i in starts and i + k in ends else _COST_DP_GLUED
                    best = min(best, w + cost[i + k][j])
            cost[i][j] = best
    return cost


def _align(base: str, tokens: Sequence[str], forms: set[str]) -> tuple[list[DP], int]:
    """Weighted character alignment of a DP-inserted line (``tokens``) to its ``base``.

    Moves: match a character (cost 0); insert a pronoun of ``forms`` (1 as a whole token, 1.5
    glued to other characters); insert any other character or skip a base character (3 each).
    Among equally cheap alignments the earliest pronoun insertion is taken, which puts a DP next
    to an identical overt pronoun at the leftmost offset. Returns the DPs and the number of
    other edits (0 when the line is exactly the base plus inserted pronoun tokens).
    """
    dp = "".join(tokens)
    starts, ends, pos = set(), set(), 0
    for tok in tokens:
        starts.add(pos)
        pos += len(tok)
        ends.add(pos)
    max_len = max(map(len, forms))
    cost = _backward_costs(base, dp, starts, ends, forms, max_len)
    dps: list[DP] = []
    other, i, j = 0, 0, 0
    while i < len(dp) or j < len(base):                       # follow one cheapest path forward
        here = cost[i][j]
        step = _pronoun_step(dp, i, j, here, cost, starts, ends, forms, max_len)
        if step:
            dps.append((j, dp[i:i + step]))
            i += step
        elif i < len(dp) and j < len(base) and dp[i] == base[j] and cost[i + 1][j + 1] == here:
            i, j = i + 1, j + 1
        elif i < len(dp) and cost[i + 1][j] + _COST_OTHER_EDIT == here:
            i, other = i + 1, other + 1
        else:
            j, other = j + 1, other + 1
    return dps, other


def _pronoun_step(dp: str, i: int, j: int, here: float, cost: list[list[float]], starts: set[int],
                  ends: set[int], forms: set[str], max_len: int) -> int:
    """Length of a pronoun insertion at ``dp[i]`` that lies on a cheapest path, longest first;
    0 if none does."""
    for k in range(min(max_len, len(dp) - i), 0, -1):
        if dp[i:i + k] in forms:
            w = _COST_DP_TOKEN if i in starts and i + k in ends else _COST_DP_GLUED
            if w + cost[i + k][j] == here:
                return k
    return 0


def extract_dps_with_edits(base_line: str, dp_line: str,
                           pronouns: Iterable[str] = CHINESE_PRONOUNS) -> tuple[list[DP], int]:
    """``extract_dps`` plus the number of non-DP edits needed (0 for a clean DP line)."""
    dps, other = _extract_cached(base_line, dp_line, frozenset(pronouns))
    return list(dps), other


@functools.lru_cache(maxsize=1 << 16)
def _extract_cached(base_line: str, dp_line: str, forms: frozenset[str]) -> tuple[tuple[DP, ...], int]:
    """The alignment behind ``extract_dps_with_edits``, memoised: a τ sweep scores the same
    oracle lines (and mostly the same system lines) once per threshold."""
    dps, other = _align(base_chars(base_line), normalize_dp_line(dp_line).split(), set(forms))
    if other:
        logger.debug("%d non-DP edit(s) between base %r and DP line %r", other, base_line, dp_line)
    return tuple(dps), other


def extract_dps(base_line: str, dp_line: str, pronouns: Iterable[str] = CHINESE_PRONOUNS) -> list[DP]:
    """The DPs inserted in ``dp_line`` relative to ``base_line``, as ``(offset, pronoun)``.

    Both lines are segmented text (any segmentation; tokens separated by spaces). ``offset`` is
    the number of characters of the normalised base (``base_chars``) before the DP; DPs come in
    sentence order. ``pronouns``: the forms that count as DPs (default: the 30 of Table 4.3).
    Characters of ``dp_line`` that are neither in the base nor a pronoun are ignored (logged at
    DEBUG; ``extract_dps_with_edits`` counts them).
    """
    return extract_dps_with_edits(base_line, dp_line, pronouns)[0]


def project_offsets(src_base: str, dst_base: str) -> list[int]:
    """Map every offset 0..len(src_base) of ``src_base`` to an offset of ``dst_base``.

    Offset ``o`` means "before character ``o``". Identity when the strings are equal; otherwise
    through ``difflib`` opcodes: a matched character keeps its "before" position (``好吧`` →
    ``好了吧``: 1 → 2), an offset inside a changed region maps to that region's start.
    """
    if src_base == dst_base:
        return list(range(len(src_base) + 1))
    out = []
    ops = difflib.SequenceMatcher(None, src_base, dst_base, autojunk=False).get_opcodes()
    for tag, i1, i2, j1, _ in ops:
        out.extend(j1 + (o - i1) if tag == "equal" else j1 for o in range(i1, i2))
    out.append(len(dst_base))
    return out


def prf(matched: int, n_sys: int, n_ref: int) -> dict:
    """Precision/recall/F1 (0.0 when a denominator is 0) with the counts behind them."""
    p = matched / n_sys if n_sys else 0.0
    r = matched / n_ref if n_ref else 0.0
    f = 2 * p * r / (p + r) if p + r else 0.0
    return {"matched": matched, "precision": p, "recall": r, "f1": f}


def dp_agreement(base_lines: Sequence[str], sys_lines: Sequence[str],
                 base_lines_oracle: Sequence[str], oracle_lines: Sequence[str],
                 per_line: list | None = None) -> dict:
    """Position and pronoun P/R/F of system DPs against oracle DPs (micro-averaged).

    ``base_lines``/``sys_lines``: the system's source without / with DPs; ``base_lines_oracle``/
    ``oracle_lines``: the oracle's. All four line-aligned (``ValueError`` otherwise). Returns
    ``{"lines", "sys_dps", "oracle_dps", "position": {"matched", "precision", "recall", "f1"},
    "pronoun": {…}, "base_mismatch_lines", "sys_edit_lines", "oracle_edit_lines"}``; the last
    two count lines whose DP version also changed non-pronoun characters. ``per_line``: a list
    that receives one ``(system DPs, oracle DPs, position matches, pronoun matches)`` tuple per
    line (what ``dp_bootstrap`` resamples).
    """
    n = len(base_lines)
    if not n == len(sys_lines) == len(base_lines_oracle) == len(oracle_lines):
        raise ValueError(f"line counts differ: base {n}, system {len(sys_lines)}, "
                         f"oracle base {len(base_lines_oracle)}, oracle {len(oracle_lines)}")
    n_sys = n_ora = pos_ok = pron_ok = mismatch = sys_edit = ora_edit = 0
    n_tags = det_ok = pred_ok = 0
    for base, sys_line, obase, oline in zip(base_lines, sys_lines, base_lines_oracle, oracle_lines):
        sys_dps, e_sys = extract_dps_with_edits(base, sys_line)
        ora_dps, e_ora = extract_dps_with_edits(obase, oline)
        sb, ob = base_chars(base), base_chars(obase)
        if sb != ob:
            mismatch += 1
            proj = project_offsets(sb, ob)
            sys_dps = [(proj[o], p) for o, p in sys_dps]
        line_pos = sum((Counter(o for o, _ in sys_dps) & Counter(o for o, _ in ora_dps)).values())
        line_pron = sum((Counter(sys_dps) & Counter(ora_dps)).values())
        if per_line is not None:
            per_line.append((len(sys_dps), len(ora_dps), line_pos, line_pron))
        n_sys, n_ora = n_sys + len(sys_dps), n_ora + len(ora_dps)
        pos_ok, pron_ok = pos_ok + line_pos, pron_ok + line_pron
        sys_edit, ora_edit = sys_edit + bool(e_sys), ora_edit + bool(e_ora)
        t_pos, t_det, t_pred = _word_tags(obase, sys_dps, ora_dps)
        n_tags, det_ok, pred_ok = n_tags + t_pos, det_ok + t_det, pred_ok + t_pred
    if mismatch:
        logger.info("%d of %d base sentences differ between system and oracle; offsets projected", mismatch, n)
    return {"lines": n, "sys_dps": n_sys, "oracle_dps": n_ora,
            "position": prf(pos_ok, n_sys, n_ora), "pronoun": prf(pron_ok, n_sys, n_ora),
            "base_mismatch_lines": mismatch, "sys_edit_lines": sys_edit, "oracle_edit_lines": ora_edit,
            "tag_accuracy": {"positions": n_tags, "detection": det_ok / n_tags if n_tags else 0.0,
                             "prediction": pred_ok / n_tags if n_tags else 0.0}}


def _f1_rows(counts: np.ndarray) -> np.ndarray:
    """counts (..., 4) summed (system, oracle, position, pronoun) → (..., 2) position/pronoun F1."""
    n_sys, n_ora = counts[..., 0:1], counts[..., 1:2]
    matched = counts[..., 2:4]
    with np.errstate(divide="ignore", invalid="ignore"):
        f = 2 * matched / (n_sys + n_ora)          # = 2PR / (P + R) with P = m/sys, R = m/ora
    return np.nan_to_num(f)


def dp_bootstrap(system: Sequence[tuple[int, int, int, int]],
                 baseline: Sequence[tuple[int, int, int, int]] | None = None,
                 n_samples: int = 1000, seed: int = 12345) -> dict:
    """Bootstrap resampling of lines (Koehn 2004) for the DP-level F-scores.

    ``system`` / ``baseline``: ``per_line`` counts of ``dp_agreement`` over the same lines
    (``ValueError`` if their lengths differ). Returns, for ``position`` and ``pronoun`` F1, the
    95% percentile interval of the system's F (``ci``) and, with a baseline, the baseline's
    interval and the paired one-sided p-value: the share of resamples in which the system's F is
    not above the baseline's (the ``p`` of sacrebleu's paired bootstrap for BLEU).
    """
    sys_c = np.asarray(system, dtype=np.int64).reshape(-1, 4)
    n = len(sys_c)
    if baseline is not None and len(baseline) != n:
        raise ValueError(f"bootstrap: system has {n} lines, baseline {len(baseline)}")
    idx = np.random.default_rng(seed).integers(0, max(n, 1), size=(n_samples, n))   # (samples, n) line ids
    f_sys = _f1_rows(sys_c[idx].sum(1))                                              # (samples, 2)

    def ci(f: np.ndarray, k: int) -> list[float]:
        return [float(np.percentile(f[:, k], 2.5)), float(np.percentile(f[:, k], 97.5))]

    out: dict = {"samples": n_samples}
    if baseline is not None:
        f_base = _f1_rows(np.asarray(baseline, dtype=np.int64).reshape(-1, 4)[idx].sum(1))
    for k, key in enumerate(("position", "pronoun")):
        out[key] = {"ci": ci(f_sys, k)}
        if baseline is not None:
            out[key]["baseline_ci"] = ci(f_base, k)
            out[key]["p_value"] = float(np.mean(f_sys[:, k] <= f_base[:, k]))
    return out


def _word_tags(oracle_base: str, sys_dps: Sequence[DP], ora_dps: Sequence[DP]) -> tuple[int, int, int]:
    """Per-word tags of one line (see ``tag_accuracy`` in the module doc): returns (positions,
    detection agreements, prediction agreements). A DP at a character offset inside an oracle
    word is tagged on the next word."""
    starts, pos = [], 0
    for tok in normalize_dp_line(oracle_base).split():
        starts.append(pos)
        pos += len(tok)
    starts.append(pos)                                   # </s>

    def tags(dps: Sequence[DP]) -> list[Counter]:
        out = [Counter() for _ in starts]
        for off, pron in dps:
            k = next(k for k, st in enumerate(starts) if st >= off)
            out[k][pron] += 1
        return out

    ts, to = tags(sys_dps), tags(ora_dps)
    det = sum(bool(a) == bool(b) for a, b in zip(ts, to))
    pred = sum(a == b for a, b in zip(ts, to))
    return len(starts), det, pred


def dp_agreement_files(base: str | Path, system: str | Path, oracle_base: str | Path,
                       oracle: str | Path, per_line: list | None = None) -> dict:
    """``dp_agreement`` on four line-aligned files (paths as in its arguments). Raises
    ``ValueError`` naming each file and its line count when they differ (e.g. a DP-completed
    source of another input, or a ``translate --dp-out`` of a different file)."""
    texts = {"system": (system, read_lines(system)), "base": (base, read_lines(base)),
             "oracle base": (oracle_base, read_lines(oracle_base)), "oracle": (oracle, read_lines(oracle))}
    if len({len(lines) for _, lines in texts.values()}) > 1:
        raise ValueError("DP scoring needs line-aligned files; line counts differ: " + ", ".join(
            f"{name} {path} {len(lines):,}" for name, (path, lines) in texts.items()))
    return dp_agreement(texts["base"][1], texts["system"][1], texts["oracle base"][1], texts["oracle"][1], per_line)


def dp_agreement_with_bootstrap(base: str | Path, system: str | Path, oracle_base: str | Path,
                                oracle: str | Path, baseline: str | Path | None = None,
                                baseline_base: str | Path | None = None, n_samples: int = 1000) -> dict:
    """``dp_agreement_files`` plus ``"bootstrap"`` (``dp_bootstrap``: 95% intervals, and with a
    ``baseline`` DP file — made from ``baseline_base``, default ``base`` — the paired p-values)
    and, with a baseline, ``"baseline"`` (its own ``dp_agreement``)."""
    rows: list = []
    result = dp_agreement_files(base, system, oracle_base, oracle, rows)
    base_rows = None
    if baseline is not None:
        base_rows = []
        result["baseline"] = dp_agreement_files(baseline_base or base, baseline, oracle_base, oracle, base_rows)
        result["baseline"]["file"] = str(baseline)
    if n_samples > 0:
        result["bootstrap"] = dp_bootstrap(rows, base_rows, n_samples)
    return result


def render_agreement(result: dict) -> str:
    """A small plain-text table of a ``dp_agreement`` result."""
    rows = [f"DP agreement: {result['lines']} lines, system {result['sys_dps']} DPs, "
            f"oracle {result['oracle_dps']} DPs",
            f"{'':10}{'P':>8}{'R':>8}{'F1':>8}{'matched':>9}"]
    for key in ("position", "pronoun"):
        m = result[key]
        rows.append(f"{key:10}{m['precision']:8.4f}{m['recall']:8.4f}{m['f1']:8.4f}{m['matched']:9d}")
    t = result["tag_accuracy"]
    rows.append(f"per-word tag accuracy over {t['positions']} positions: detection {t['detection']:.4f}, "
                f"prediction {t['prediction']:.4f}")
    rows.append(f"base mismatches {result['base_mismatch_lines']}, lines with non-DP edits: "
                f"system {result['sys_edit_lines']}, oracle {result['oracle_edit_lines']}")
    bs = result.get("bootstrap")
    if bs:
        rows.append(f"bootstrap over lines ({bs['samples']} samples), 95% interval of F1:")
        for key in ("position", "pronoun"):
            b = bs[key]
            line = f"  {key:9} system [{b['ci'][0]:.4f}, {b['ci'][1]:.4f}]"
            if "p_value" in b:
                line += (f"  baseline {result['baseline'][key]['f1']:.4f} "
                         f"[{b['baseline_ci'][0]:.4f}, {b['baseline_ci'][1]:.4f}]  p(system <= baseline) = {b['p_value']:.3f}")
            rows.append(line)
    return "\n".join(rows) + "\n"
