"""Teacher-forced scoring with and without context, and what it measures: CXMI and P-CXMI.

CXMI (conditional cross-mutual information, Fernandes et al. 2021, "Measuring and Increasing
Context Usage in Context-Aware Machine Translation", ACL, §3 eq. 3) estimates how much the
context C tells a model about the reference Y beyond the source X::

    CXMI(C → Y | X) ≈ −1/N · Σ_i log [ q(y_i | x_i, ∅) / q(y_i | x_i, C_i) ]

over the N sentences of a test set, with one model scored twice: with its real context C_i
and with an empty one (the model's own empty-context convention, docs/models.md §1.1). P-CXMI
(Fernandes et al. 2023, "When Does Translation Require Context?", §3) is the same log-ratio
per target token: ``log q(y_t | y_<t, x, C) − log q(y_t | y_<t, x, ∅)``.

Both conditions score *the same batches*: the empty condition only sets every ``ctx`` entry
to −1 (no context), so any difference is the model reading its context — a sentence-level
model, which ignores ``ctx``, gets exactly 0. As an option (contextual-mt's check), the
context is the N sentences before a random position of *another* document: a model that
gains from any fluent context rather than from the right one shows CXMI > 0 there too.

Context rows carry the reference target (teacher forcing, as in training), so decoder-side
models see reference context, the setting of Fernandes et al.

Scores are natural logarithms (nats). Tokens are the model's target BPE units; word-level
P-CXMI (``by_class``) sums a word's units. Classes: English central pronouns (Table 4.2 forms,
``dp.pronouns.TRIGGERS``), punctuation, other words; ``</s>`` is counted in the totals only.
Nouns are not a class: that needs a POS tagger, none of which installs offline with its model.
"""
from __future__ import annotations

import logging
import string
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from doctrans.dp.pronouns import TRIGGERS
from doctrans.data.documents import document_numbers
from doctrans.evaluation.forced import Item, model_context, model_random_context, score_items

log = logging.getLogger(__name__)

CONDITIONS = ("empty", "random")
POSITIVE = 1e-6     # nats: a word's P-CXMI counts as positive above this (float noise of batching is ~1e-7)


def _word_class(word: str) -> str:
    if word.lower() in TRIGGERS:
        return "pronoun"
    if all(ch in string.punctuation for ch in word):
        return "punctuation"
    return "other"


def word_pcxmi(units: Sequence[str], pcxmi: np.ndarray) -> list[tuple[str, float]]:
    """BPE units of a target (without ``</s>``; ``@@`` ends a unit continued by the next) and
    their P-CXMI (len(units) + 1,) incl. ``</s>`` → [(word, summed P-CXMI)]."""
    words, cur, val = [], "", 0.0
    for u, v in zip(units, pcxmi):
        val += float(v)
        if u.endswith("@@"):
            cur += u[:-2]
            continue
        words.append((cur + u, val))
        cur, val = "", 0.0
    if cur:
        words.append((cur, val))
    return words


def cxmi_report(real: list[np.ndarray], other: list[np.ndarray], targets: Sequence[str],
                condition: str = "empty") -> dict:
    """CXMI from per-token log-probabilities with the real context (``real``) and with the other
    condition's (``other``, same shapes), targets as BPE strings (for word classes) → a dict:
    ``cxmi`` (nats per sentence, eq. 3), ``cxmi_per_token`` (nats per target unit),
    ``sentences``, ``tokens``, ``xent_real`` / ``xent_other`` (nats per unit), ``by_class``
    {class: {words, mean P-CXMI per word (nats), share of words with P-CXMI > ``POSITIVE``}}, and
    ``per_sentence`` (CXMI of each sentence, nats)."""
    if len(real) != len(other) or len(real) != len(targets):
        raise ValueError(f"{len(real)} real, {len(other)} {condition} scores and {len(targets)} targets")
    per_sent = np.array([float(r.sum() - o.sum()) for r, o in zip(real, other)])
    tokens = sum(len(r) for r in real)
    classes: dict[str, list[float]] = {}
    for r, o, t in zip(real, other, targets):
        for word, v in word_pcxmi(t.split(), r - o):
            classes.setdefault(_word_class(word), []).append(v)
    return {
        "condition": condition, "sentences": len(real), "tokens": tokens,
        "cxmi": float(per_sent.mean()) if len(per_sent) else 0.0,
        "cxmi_per_token": float(per_sent.sum() / max(tokens, 1)),
        "xent_real": float(-sum(r.sum() for r in real) / max(tokens, 1)),
        "xent_other": float(-sum(o.sum() for o in other) / max(tokens, 1)),
        "by_class": {k: {"words": len(v), "mean_pcxmi": float(np.mean(v)), "share_positive": float(np.mean(
            np.array(v) > POSITIVE))} for k, v in sorted(classes.items())},
        "per_sentence": per_sent.tolist(),
    }


def compute_cxmi(model, src: Sequence[np.ndarray], tgt: Sequence[np.ndarray], doc: np.ndarray,
                 targets: Sequence[str], conditions: Sequence[str] = ("empty",), seed: int = 1,
                 max_tokens: int = 3000, progress: bool = False) -> dict:
    """CXMI of ``model`` on a document set: src / tgt id arrays per line (documents contiguous,
    ``doc`` (L,) the document number of each line), ``targets`` the reference BPE strings
    (word classes). ``conditions``: "empty" (empty context) and/or "random" (context from a
    random other document, seeded). The context is the one the model reads
    (``forced.model_context``: N = ``context_sents`` previous lines, 1 for a sentence model, which
    then ignores them; or the sub-document of a ``context_block`` model). Returns {condition: cxmi_report(...)}. Raises ValueError on
    an unknown condition or line-count mismatch."""
    if len(src) != len(tgt) or len(src) != len(doc) or len(src) != len(targets):
        raise ValueError(f"{len(src)} source, {len(tgt)} target, {len(doc)} document and {len(targets)} "
                         "reference lines")
    bad = [c for c in conditions if c not in CONDITIONS]
    if bad:
        raise ValueError(f"unknown CXMI condition(s) {bad}; choose from {CONDITIONS}")
    real_items = [Item(i, tgt[i], model_context(model, doc, i)) for i in range(len(src))]
    result = {}
    real = None
    if "empty" in conditions:
        real, empty = score_items(model, real_items, src, tgt, max_tokens=max_tokens, blank=(False, True),
                                  progress=progress)
        result["empty"] = cxmi_report(real, empty, targets, "empty")
    if "random" in conditions:
        if real is None:
            real, = score_items(model, real_items, src, tgt, max_tokens=max_tokens, progress=progress)
        rng = np.random.default_rng(seed)
        rand_items = [Item(i, tgt[i], model_random_context(model, doc, i, rng)) for i in range(len(src))]
        rand, = score_items(model, rand_items, src, tgt, max_tokens=max_tokens, progress=progress)
        result["random"] = cxmi_report(real, rand, targets, "random")
    return result


def render_cxmi(result: dict) -> str:
    """A plain-text summary of ``compute_cxmi``'s result."""
    lines = []
    for cond, r in result.items():
        lines.append(f"CXMI (real vs {cond} context): {r['cxmi']:.4f} nats/sentence, "
                     f"{r['cxmi_per_token']:.5f} nats/token over {r['sentences']} sentences, {r['tokens']} tokens "
                     f"(cross-entropy {r['xent_real']:.4f} vs {r['xent_other']:.4f} nats/token)")
        for k, v in r["by_class"].items():
            lines.append(f"  P-CXMI {k:<12} {v['words']:6d} words  mean {v['mean_pcxmi']:+.4f} nats/word  "
                         f"> 0 for {100 * v['share_positive']:.1f}%")
    return "\n".join(lines) + "\n"


@dataclass
class ScoringSet:
    """A loaded checkpoint and a document set in its vocabularies.

    model: the ``Seq2SeqModel`` (eval mode); src / tgt: id arrays per line; doc: (L,) document
    number per line; targets: the reference BPE strings; tgt_vocab: the target ``Vocab``;
    tgt_proc: the target ``TextProcessor`` (BPE for variants of the reference)."""

    model: object
    src: list[np.ndarray]
    tgt: list[np.ndarray]
    doc: np.ndarray
    targets: list[str]
    tgt_vocab: object
    tgt_proc: object


def load_scoring_set(checkpoint: str, src_lines: Sequence[str], ref_lines: Sequence[str],
                     doc_ids: Sequence[str] | None, tokenized: bool = False, prepared: str = "",
                     device: str = "auto", ref_tokenized: bool | None = None,
                     ensemble: dict | None = None) -> ScoringSet:
    """Load ``checkpoint`` and encode a document set with its text processing: ``src_lines`` /
    ``ref_lines`` raw (segmented / Moses-tokenized here, as ``doctrans translate`` does) or,
    with ``tokenized``, already tokenized (BPE only; the reference lowercased if the model's
    target side is); ``ref_tokenized`` overrides it for the reference (TVsub's ``.sgm``
    references are tokenized, its sources raw). ``doc_ids`` per line (None: one document).
    ``ensemble``: ``ModelOptions``' ensemble settings (``ensemble``, ``ensemble_weights``,
    ``ensemble_mode``): the checkpoint and those models scored as one (``models/ensemble.py``).
    Raises ValueError on line-count mismatches."""
    from doctrans.inference.config import ModelOptions
    from doctrans.inference.translate import LoadedModel

    if len(src_lines) != len(ref_lines):
        raise ValueError(f"{len(src_lines)} source lines but {len(ref_lines)} reference lines")
    if doc_ids is not None and len(doc_ids) != len(src_lines):
        raise ValueError(f"{len(doc_ids)} document ids for {len(src_lines)} lines")
    tr = LoadedModel.load(ModelOptions(checkpoint=checkpoint, prepared=prepared, device=device, **(ensemble or {})))
    src_bpe = tr.src_proc.apply_bpe(src_lines) if tokenized else tr.src_proc.encode(src_lines)
    if tokenized if ref_tokenized is None else ref_tokenized:
        refs = [r.lower() for r in ref_lines] if tr.tgt_proc.lowercase else list(ref_lines)
        tgt_bpe = tr.tgt_proc.apply_bpe(refs)
    else:
        tgt_bpe = tr.tgt_proc.encode(ref_lines)
    doc = document_numbers(list(doc_ids) if doc_ids is not None else ["doc"] * len(src_lines))
    return ScoringSet(tr.model, [tr.src_vocab.encode(s) for s in src_bpe], [tr.tgt_vocab.encode(t) for t in tgt_bpe],
                      doc, tgt_bpe, tr.tgt_vocab, tr.tgt_proc)
