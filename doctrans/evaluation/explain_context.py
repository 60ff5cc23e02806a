"""Pictures of a context model's attention over its context (the HAN paper's Table 5 figure;
``doctrans translate --explain-context N``).

For N sampled sentences that have context, the model is teacher-forced on its own 1-best
translation with the same context it translated with (the previous N source sentences and, for
a target-side block, its own previous 1-best translations), so the decoder states — and the
weights — are those of each generated word. Every context block of the model
(``ContextModel.explain_blocks``, e.g. HAN encoder and HAN decoder) records its attention
(``HANBlock.recorder``); per block one PNG:

* left: the sentence-level weights (HAN eq. 5) of each query word over the context sentences
  m−N … m−1, averaged over heads;
* right: the word-level weights (eq. 3) of each query word over the words of each context
  sentence, averaged over heads and multiplied by that sentence's weight, so each row shows
  where the context vector of the query word comes from (rows sum to 1 over real words).

Queries are the source words for a source-side block (HAN encoder) and the generated words for
a target-side block (HAN decoder). A JSON beside the pictures holds the weights. Chinese labels
need a CJK font (``dp.explain.cjk_font``); without one the Chinese tokens are shown as indices.
"""
from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Sequence

import numpy as np

from doctrans.data.documents import document_numbers
from doctrans.evaluation.forced import Item, previous_lines, score_items
from doctrans.utils.io import atomic_write_text

log = logging.getLogger(__name__)


def context_weights(model, src: Sequence[np.ndarray], hyp: Sequence[np.ndarray], doc: np.ndarray,
                    line: int) -> list[dict]:
    """Attention of each context block for ``line``: [{block, side, context (N line indices, −1
    none), sentence (T, N), word (N, T, L)}] (numpy, averaged over heads), with ``hyp`` the
    target ids per line (the 1-best, ending in ``</s>``). [] if the model has no context blocks."""
    blocks = model.explain_blocks()
    if not blocks:
        return []
    n = model.context_sents
    ctx = previous_lines(doc, line, n)
    for _, block, _ in blocks:
        block.recorder = []
    try:
        score_items(model, [Item(line, hyp[line], ctx)], src, hyp)
        out = []
        for name, block, side in blocks:
            word = [w for kind, w in block.recorder if kind == "word"]
            sent = [s for kind, s in block.recorder if kind == "sentence"]
            if not word or not sent:                        # no context reached this block
                continue
            out.append({"block": name, "side": side, "context": list(ctx),
                        "sentence": sent[-1][0].mean(1).cpu().numpy(),          # (T, N)
                        "word": word[-1][0].mean(1).cpu().numpy()})             # (N, T, L)
        return out
    finally:
        for _, block, _ in blocks:
            block.recorder = None


def _labels(ids: np.ndarray, vocab, shift: bool) -> list[str]:
    """Token strings of ``ids``; ``shift``: as decoder input (<s> then all but the last)."""
    toks = [vocab.tokens[int(i)] for i in ids]
    return ["<s>"] + toks[:-1] if shift else toks


def plot_weights(entry: dict, query: list[str], context: list[list[str]], path: Path, title: str = "") -> Path:
    """One picture (see the module docstring) of ``context_weights``' entry; ``query`` (T labels),
    ``context`` (N label lists, [] for a missing sentence). Returns ``path``."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from doctrans.dp.explain import cjk_font

    sent, word = entry["sentence"], entry["word"]                     # (T, N), (N, T, L)
    t_len, n = sent.shape
    cols, ticks, bounds = [], [], []
    for j in range(n):
        labels = context[j]
        if labels:
            m = min(len(labels), word.shape[2])
            cols.append(sent[:, j:j + 1] * word[j, :, :m])
            ticks += labels[:m]
        bounds.append(len(ticks))
    comb = np.concatenate(cols, 1) if cols else np.zeros((t_len, 1))
    font = cjk_font()
    props = {"family": font} if font else {}

    def show(tok: str, k: int) -> str:
        return tok if font or tok.isascii() else f"#{k}"
    q = [show(t, k) for k, t in enumerate(query[:t_len])]
    width = max(6.0, 0.28 * comb.shape[1] + 2.5)
    fig, (ax0, ax1) = plt.subplots(1, 2, figsize=(width, max(3.0, 0.28 * t_len + 1.5)),
                                   gridspec_kw={"width_ratios": [max(n, 1), max(comb.shape[1], 1)]})
    ax0.imshow(sent, aspect="auto", cmap="Blues", vmin=0, vmax=1)
    ax0.set_xticks(range(n))
    ax0.set_xticklabels([f"m−{n - j}" for j in range(n)], fontsize=7)
    ax0.set_yticks(range(t_len))
    ax0.set_yticklabels(q, fontsize=7, **props)
    ax0.set_title("sentence", fontsize=8)
    ax1.imshow(comb, aspect="auto", cmap="Reds", vmin=0)
    ax1.set_xticks(range(len(ticks)))
    ax1.set_xticklabels([show(t, k) for k, t in enumerate(ticks)], rotation=90, fontsize=6, **props)
    ax1.set_yticks([])
    for b in bounds[:-1]:
        ax1.axvline(b - 0.5, color="#555", lw=0.6)
    ax1.set_title("word × sentence weight (context sentences m−N … m−1, left to right)", fontsize=8)
    fig.suptitle(title, fontsize=9, **props)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def explain_lines(model, src: Sequence[np.ndarray], hyp: Sequence[np.ndarray], doc: np.ndarray, src_vocab,
                  tgt_vocab, count: int, out_dir: Path, seed: int = 1) -> list[Path]:
    """Pictures for ``count`` lines sampled (seeded) among those with context (position ≥ 1 in
    their document) into ``out_dir`` (``line{K}.{block}.png`` + ``weights.json``); returns the
    picture paths. Nothing for a model without context blocks (a warning)."""
    if not model.explain_blocks():
        log.warning("--explain-context: the model has no context attention to show")
        return []
    lines = [i for i in range(len(src)) if i > 0 and doc[i - 1] == doc[i]]
    rng = np.random.default_rng(seed)
    chosen = sorted(rng.choice(lines, size=min(count, len(lines)), replace=False).tolist()) if lines else []
    paths, dump = [], []
    for line in chosen:
        for e in context_weights(model, src, hyp, doc, line):
            source_side = e["side"] == "source"
            vocab = src_vocab if source_side else tgt_vocab
            query = _labels(src[line], src_vocab, False) if source_side else _labels(hyp[line], tgt_vocab, False)
            context = [_labels(src[c] if source_side else hyp[c], vocab, not source_side) if c >= 0 else []
                       for c in e["context"]]
            name = e["block"].lower().replace(" ", "_")
            title = f"line {line + 1}, {e['block']}: " + " ".join(_labels(hyp[line], tgt_vocab, False))
            paths.append(plot_weights(e, query, context, out_dir / f"line{line + 1}.{name}.png", title))
            dump.append({"line": line + 1, "block": e["block"], "query": query, "context_lines": [
                c + 1 if c >= 0 else None for c in e["context"]], "context": context,
                "sentence": e["sentence"].round(4).tolist(), "word": e["word"].round(4).tolist()})
    atomic_write_text(out_dir / "weights.json", json.dumps(dump, ensure_ascii=False) + "\n")
    return paths


def explain_translation(translator, res, doc_ids: list[str] | None) -> list[Path]:
    """``doctrans translate --explain-context N`` (``translate.translate_input``'s ``after`` hook): pictures
    of the context attention of N sampled translated lines of ``res`` (``inference.translate.
    Translation``) into ``cfg.io.explain_dir`` (default ``OUTPUT.explain``, or ``explain/`` for
    stdout), ``cfg`` = ``translator.cfg``. Lines translated in pieces — their sentences
    (``--segment``) or chunks of an over-long line — are left out (the model never read them
    whole)."""
    cfg = translator.cfg
    bpe, hyps = res.bpe, res.hyps
    keep = [i for i in sorted(hyps) if i not in res.pieces]
    doc = document_numbers([doc_ids[i] for i in keep] if doc_ids is not None else ["doc"] * len(keep))
    src = [translator.src_vocab.encode(bpe[i]) for i in keep]
    hyp = [translator.tgt_vocab.encode(hyps[i]) for i in keep]
    out = Path(cfg.io.explain_dir or (f"{cfg.io.output}.explain" if cfg.io.output != "-" else "explain"))
    paths = explain_lines(translator.model, src, hyp, doc, translator.src_vocab, translator.tgt_vocab,
                          cfg.io.explain_context, out)
    log.info("--explain-context: %d pictures in %s", len(paths), out)
    return paths
