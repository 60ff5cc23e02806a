"""Pictures of the DP search (``doctrans annotate-dp corpus --explain``), the thesis' Figure 4.4.

One PNG per sentence pair: the alignment matrix with English tokens as rows and the original
Chinese tokens as columns. Black squares are links; the row of each unaligned English pronoun
is shaded; the anchor links the bidirectional search found are outlined in blue; every
candidate gap is a dashed vertical line labelled with the best LM score (log10) over the
pronoun candidates at that gap; the chosen insertion is a solid red line with the inserted
Chinese pronoun above it. Chinese labels need a CJK font (WenQuanYi Micro Hei, Noto CJK, …:
``make sysdeps`` installs ``fonts-wqy-microhei``); without one, tokens are shown as indices.
"""
from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from pathlib import Path

from doctrans.dp.annotate import AnnotationResult, Link

logger = logging.getLogger(__name__)

CJK_FONTS = ("WenQuanYi Micro Hei", "Noto Sans CJK SC", "Noto Sans CJK JP", "Noto Sans SC",
             "Source Han Sans SC", "SimHei", "Microsoft YaHei", "AR PL UMing CN")


def cjk_font() -> str | None:
    """The first installed font family of ``CJK_FONTS``, or None."""
    from matplotlib import font_manager

    names = {f.name for f in font_manager.fontManager.ttflist}
    return next((f for f in CJK_FONTS if f in names), None)


def original_boundaries(result: AnnotationResult) -> list[tuple[list[int], int]]:
    """For each insertion (annotation order): (candidate gaps, chosen gap) as boundaries of the
    *original* source (boundary b = before original token b; S = the end)."""
    origin_is_dp: list[bool] = []   # per token of the search sentence: is it an earlier DP?
    out = []
    for ins in result.insertions:
        if not origin_is_dp:
            origin_is_dp = [False] * len(ins.sentence)

        def to_orig(g: int) -> int:
            return sum(1 for d in origin_is_dp[:g] if not d)

        out.append(([to_orig(c.gap) for c in ins.scores], to_orig(ins.gap)))
        origin_is_dp.insert(ins.gap, True)
    return out


def plot_annotation(result: AnnotationResult, src_tokens: Sequence[str], tgt_tokens: Sequence[str],
                    links: Iterable[Link], path: str | Path, title: str = "") -> Path:
    """Draw the search of one ``find_dps`` result (see module doc) to ``path`` (PNG)."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.patches import Rectangle

    links = set(links)
    font = cjk_font()
    if font is None:
        logger.warning("no CJK font found (install fonts-wqy-microhei): Chinese tokens shown as indices")
    S, T = len(src_tokens), len(tgt_tokens)
    fig, ax = plt.subplots(figsize=(max(4.0, 0.55 * S + 2.5), max(3.0, 0.4 * T + 2.0)))
    props = {"family": font} if font else {}
    for ins in result.insertions:
        ax.add_patch(Rectangle((-0.5, ins.tgt_index - 0.5), S, 1, color="#ffd8a8", zorder=0))
    for i, j in links:
        ax.add_patch(Rectangle((i - 0.4, j - 0.4), 0.8, 0.8, color="black", zorder=2))
    bounds = original_boundaries(result)
    for k, (ins, (cands, chosen)) in enumerate(zip(result.insertions, bounds)):
        for jj in ins.tgt_anchors:
            if jj is None:
                continue
            for i, j in links:
                if j == jj:
                    ax.add_patch(Rectangle((i - 0.48, j - 0.48), 0.96, 0.96, fill=False,
                                           edgecolor="#1c7ed6", linewidth=2, zorder=3))
        best_at: dict[int, float] = {}
        for c, b in zip(ins.scores, cands):
            best_at[b] = max(best_at.get(b, float("-inf")), c.score)
        for b, score in best_at.items():
            if b == chosen:
                continue
            ax.axvline(b - 0.5, color="#868e96", linestyle="--", linewidth=1, zorder=1)
            ax.text(b - 0.5, T - 0.3 + 0.45 * k, f"{score:.2f}", ha="center", va="top", fontsize=7,
                    color="#495057")
        ax.axvline(chosen - 0.5, color="#e03131", linewidth=2, zorder=4)
        ax.text(chosen - 0.5, -0.7 - 0.55 * k, f"+{ins.pronoun} ({ins.english}) {best_at[chosen]:.2f}",
                ha="center", va="bottom", color="#e03131", fontsize=9, **props)
    ax.set_xlim(-0.7, S - 0.3)
    ax.set_ylim(T - 0.5 + 0.5 * len(result.insertions) + 0.4, -1.4 - 0.55 * len(result.insertions))
    ax.set_xticks(range(S))
    ax.set_xticklabels(list(src_tokens) if font else [str(i) for i in range(S)], rotation=0, **props)
    ax.set_yticks(range(T))
    ax.set_yticklabels(list(tgt_tokens))
    ax.tick_params(length=0)
    ax.set_xlabel("Chinese source. Red: chosen DP;\ndashed: other candidate gaps (best LM log10)", fontsize=8)
    if title:
        ax.set_title(title + "   DP: " + " ".join(result.dp_tokens), fontsize=9, **props)
    fig.tight_layout()
    path = Path(path)
    tmp = path.with_name(f".{path.name}.tmp.png")
    fig.savefig(tmp, dpi=110)
    plt.close(fig)
    tmp.replace(path)
    return path
