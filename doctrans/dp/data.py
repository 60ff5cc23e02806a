"""Data for the DP generators: labelled sentences with their documents, vocabularies, batches,
and the Table 4.6 feature slots of the thesis' surface predictor (Wang 2019 thesis §4.3.2; docs/models.md §3.3).

A labelled corpus is the ``annotate-dp`` output: ``PREPARED/{split}.tok.zh`` (tokens),
``DP_DIR/{split}.dplabel`` (S + 1 labels: the pronoun dropped before each token / ``</s>``, or
``N``) and ``{split}.docs`` (document id, position). Unlabelled input for ``annotate-dp
--generator`` is tokens + documents only.

The training split of a prepared dataset has context-only lines (``0`` in ``train.target``:
filtered by ``doctrans preprocess``, not annotated, all-``N`` labels). ``load_sentences(…,
target_path=…)`` leaves them out, so the generators train on exactly the sentences they did
before ``train.target`` existed, with the same (document-)neighbours in ``context_of``.
"""
from __future__ import annotations

import random
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from doctrans.dp.annotate import NO_DP_LABEL
from doctrans.dp.pronouns import CHINESE_PRONOUNS, chinese_roots, is_chinese_pronoun
from doctrans.data.vocab import BOS, EOS, SPECIALS, Vocab
from doctrans.utils.io import read_lines


@dataclass
class DPSentence:
    """One sentence: ``tokens`` (S), ``labels`` (S + 1, or None when unlabelled), its document."""

    tokens: list[str]
    labels: list[str] | None
    doc: str
    index: int          # line number in the file, 0-based


def read_docs(path: Path | None, n: int) -> list[str]:
    """Document id per line from a ``.docs`` file (``doc<TAB>position``); one document if None."""
    if path is None or not Path(path).is_file():
        return ["doc"] * n
    docs = [line.split("\t")[0] for line in read_lines(path)]
    if len(docs) != n:
        raise ValueError(f"{path} has {len(docs)} lines, the text has {n}")
    return docs


def fold_of_docs(doc_ids: Sequence[str], k: int) -> dict[str, int]:
    """Fold (0 … k − 1) of each document id: the i-th distinct id in order of first appearance
    goes to fold i mod k. Raises ``ValueError`` when there are fewer than ``k`` documents."""
    order: dict[str, int] = {}
    for d in doc_ids:
        if d not in order:
            order[d] = len(order) % k
    if len(order) < k:
        raise ValueError(f"{len(order)} document(s) for {k} folds: the jackknife needs at least one document "
                         "per fold (a training split without .docs is one document)")
    return order


def load_sentences(tok_path: Path, label_path: Path | None = None, docs_path: Path | None = None,
                   target_path: Path | None = None) -> list[DPSentence]:
    """Read tokens (+ labels) (+ documents); with ``target_path`` (``PREPARED/train.target``,
    used where it exists) only its ``1`` lines, ``index`` keeping their line numbers. Raises
    ``ValueError`` naming file and line when a label line does not have one label per token
    plus one for ``</s>``, or the target file is not line-aligned."""
    toks = [line.split() for line in read_lines(tok_path)]
    labels = None
    if label_path is not None:
        labels = [line.split() for line in read_lines(label_path)]
        if len(labels) != len(toks):
            raise ValueError(f"{label_path} has {len(labels)} lines, {tok_path} has {len(toks)}")
        for k, (t, lab) in enumerate(zip(toks, labels)):
            if len(lab) != len(t) + 1:
                raise ValueError(f"{label_path}:{k + 1}: {len(lab)} labels for {len(t)} tokens (+ </s>)")
    docs = read_docs(docs_path, len(toks))
    keep = range(len(toks))
    if target_path is not None and Path(target_path).is_file():
        flags = read_lines(target_path)
        if len(flags) != len(toks):
            raise ValueError(f"{target_path} has {len(flags)} lines, {tok_path} has {len(toks)}")
        keep = [k for k, f in enumerate(flags) if f == "1"]
    return [DPSentence(toks[k], labels[k] if labels else None, docs[k], k) for k in keep]


def context_of(sents: Sequence[DPSentence], k: int, n_prev: int, max_tokens: int,
               n_next: int = 0) -> list[str]:
    """Tokens of up to ``n_prev`` previous sentences of the same document, oldest first, each
    followed by ``</s>``; at most ``max_tokens`` (the most recent kept). With ``n_next`` > 0,
    then ``<s>`` (standing for the current sentence) and up to ``n_next`` following sentences
    of the document, each followed by ``</s>`` (at most ``max_tokens``, the nearest kept)."""
    out: list[str] = []
    j = k - 1
    while j >= 0 and k - j <= n_prev and sents[j].doc == sents[k].doc:
        out = sents[j].tokens + [EOS] + out
        j -= 1
    if max_tokens:
        out = out[-max_tokens:]
    if n_next > 0:
        nxt: list[str] = []
        j = k + 1
        while j < len(sents) and j - k <= n_next and sents[j].doc == sents[k].doc:
            nxt += sents[j].tokens + [EOS]
            j += 1
        out = out + [BOS] + (nxt[:max_tokens] if max_tokens else nxt)
    return out


def build_vocab(sents: Sequence[DPSentence], min_freq: int = 2, max_size: int = 50_000) -> Vocab:
    counts = Counter(t for s in sents for t in s.tokens)
    words = [w for w, c in counts.most_common(max_size) if c >= min_freq and w not in SPECIALS]
    return Vocab(list(SPECIALS) + words)


def label_inventory() -> list[str]:
    """``N`` then the 30 Chinese forms of Table 4.3 (the DP vocabulary)."""
    return [NO_DP_LABEL, *CHINESE_PRONOUNS]


def pseudo_dp(tokens: Sequence[str], labels: Sequence[str], rng: random.Random
              ) -> tuple[list[str], list[str], int] | None:
    """Pseudo-DP instance from an overt pronoun: delete one overt Chinese pronoun (one of the 30
    DP forms, chosen by ``rng.choice``) whose two neighbouring positions carry no DP, and label
    the merged position with it. → (tokens (S - 1), labels (S), position) or None if the
    sentence has no such pronoun. ``labels`` (S + 1) are ``annotate-dp`` labels.

    Our addition, not in the thesis: overt pronouns are far more frequent than annotated DPs
    and their surface is known without alignment noise, so they add supervision for *which*
    pronoun fits a context (the trainer uses them for the pronoun choice only, see
    ``LabelerConfig.pseudo_dp``)."""
    cands = [i for i, t in enumerate(tokens)
             if is_chinese_pronoun(t) and labels[i] == NO_DP_LABEL and labels[i + 1] == NO_DP_LABEL]
    if not cands:
        return None
    i = rng.choice(cands)
    return list(tokens[:i]) + list(tokens[i + 1:]), list(labels[:i]) + [tokens[i]] + list(labels[i + 2:]), i



def encode(vocab: Vocab, tokens: Sequence[str]) -> list[int]:
    """Token ids + ``</s>``."""
    return [vocab.index.get(t, vocab.unk_id) for t in tokens] + [vocab.eos_id]


def pad(rows: Sequence[Sequence[int]], value: int = 0, min_len: int = 0) -> torch.Tensor:
    width = max([min_len, *map(len, rows)])
    out = np.full((len(rows), width), value, dtype=np.int64)
    for i, r in enumerate(rows):
        out[i, :len(r)] = r
    return torch.from_numpy(out)


# --- Table 4.6 features of the surface predictor -------------------------------------------


_POS_TABLE: dict | None = None


def pos_tag(token: str) -> str:
    """POS of an already segmented token: jieba's dictionary tag (its POS tagger's lexicon),
    else ``eng`` (Latin letters), ``m`` (digits) or ``x``."""
    global _POS_TABLE
    if _POS_TABLE is None:
        import jieba.posseg
        jieba.posseg.dt.initialize()
        _POS_TABLE = jieba.posseg.dt.word_tag_tab
    tag = _POS_TABLE.get(token)
    if tag:
        return tag
    if token.isascii() and any(c.isalpha() for c in token):
        return "eng"
    if any(c.isdigit() for c in token):
        return "m"
    return "x"


def _pronouns_in(tokens: Sequence[str]) -> list[str]:
    return [r for t in tokens for r in chinese_roots(t)]


def _nouns_in(tokens: Sequence[str]) -> list[str]:
    return [t for t in tokens if pos_tag(t).startswith("n")]


def _slots(name: str, values: Sequence[str], n: int) -> list[str]:
    vals = list(values)[:n]
    return [f"{name}{i}={v}" for i, v in enumerate(vals)] + [f"{name}{i}=∅" for i in range(len(vals), n)]


def surface_features(sents: Sequence[DPSentence], k: int, pos: int, word_window: int = 2,
                     sent_window: int = 2) -> list[str]:
    """The feature strings (one per slot) of a DP before token ``pos`` of sentence ``k``
    (``pos`` = S: before ``</s>``). Table 4.6 rows 1–8 [thesis §4.3.2; docs/models.md §3.3]:

    1–2. words and POS tags ``w_{pos-M}…w_{pos+M-1}`` (M = ``word_window``; ``<s>``/``</s>``
         beyond the edges): 2M + 2M slots;
    3–4. overt pronouns before / after the position in the sentence, nearest first: 3 + 3;
    5–6. pronouns in the ``sent_window`` preceding / following sentences of the document,
         nearest sentence first: 5 + 5;
    7–8. nouns in those sentences: 5 + 5.
    Rows 9–10 (parse-tree paths) are left out: no Chinese parser installs offline here.
    An empty slot is ``name=∅``; every string carries its slot name, so one embedding table
    serves all slots.
    """
    toks = sents[k].tokens
    ext = ["<s>"] * word_window + toks + ["</s>"] * word_window
    window = ext[pos: pos + 2 * word_window]                       # w_{pos-M} … w_{pos+M-1}
    feats = [f"w{i - word_window}={w}" for i, w in enumerate(window)]
    feats += [f"p{i - word_window}={w if w in ('<s>', '</s>') else pos_tag(w)}" for i, w in enumerate(window)]
    feats += _slots("prb", list(reversed(_pronouns_in(toks[:pos]))), 3)
    feats += _slots("pra", _pronouns_in(toks[pos:]), 3)
    doc = sents[k].doc
    before = [sents[j] for j in range(k - 1, max(-1, k - 1 - sent_window), -1) if sents[j].doc == doc]
    after = [sents[j] for j in range(k + 1, min(len(sents), k + 1 + sent_window)) if sents[j].doc == doc]
    feats += _slots("psb", [p for s in before for p in _pronouns_in(s.tokens)], 5)
    feats += _slots("psa", [p for s in after for p in _pronouns_in(s.tokens)], 5)
    feats += _slots("nsb", [w for s in before for w in _nouns_in(s.tokens)], 5)
    feats += _slots("nsa", [w for s in after for w in _nouns_in(s.tokens)], 5)
    return feats


def n_feature_slots(word_window: int = 2) -> int:
    return 4 * word_window + 3 + 3 + 5 + 5 + 5 + 5
