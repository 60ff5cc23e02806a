"""Lexical shortlists: decode over the target words a batch's source can translate to.

A beam search step spends most of its arithmetic in the output layer (H × V multiply-adds per
hypothesis over the whole target vocabulary; ``benchmarks/RESULTS.md``, "decode" profiles). A
*lexical shortlist* restricts it, per batch, to the union of the likely translations of the
batch's source tokens plus the most frequent target tokens — Marian's ``--shortlist`` (lexical
table of fast_align, the ``K`` most frequent and ``k`` best translations per source word) and
CTranslate2's vocabulary mapping (``use_vmap``). The search then normalises the scores over the
candidates (log-softmax over the shortlist, as both of them do), so the result can differ from
the full search where the full search would choose a word outside the shortlist; the BLEU cost is
measured in ``benchmarks/RESULTS.md`` ("decode: lexical shortlist").

**The file** is CTranslate2's vocabulary-mapping format, one rule per line::

    <TAB>tgt_1 tgt_2 …          (empty source: target tokens always candidates)
    src<TAB>tgt_1 tgt_2 …       (the candidates of source token ``src``)

in the model's BPE units, so the same file serves ``--engine ctranslate2``
(``ctranslate2.Translator.translate_batch(use_vmap=True)`` once the export carries it). doctrans
reads one-token source keys only (it writes no others).

**Building it** (``doctrans shortlist``, :func:`build_vmap`): from word-aligned training pairs
(eflomal on the prepared BPE corpus, symmetrised) the lexical translation probability
p(t | s) = c(s, t) / Σ_t' c(s, t') (Moses' lexical table, ``lex.f2e``); each source token keeps
its ``top_k`` targets by p (ties: more frequent first, then the vocabulary order), and the
``frequent`` most frequent target tokens are always candidates. ``</s>`` and ``<unk>`` are always
candidates; ``<pad>``/``<s>`` never are (the search never emits them). So even a shortlist of
every other token scores slightly differently from the full search, whose normaliser includes
the (tiny) probability of ``<pad>``/``<s>``.
"""
from __future__ import annotations

import logging
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Sequence

import torch
from torch import Tensor

from doctrans.data.vocab import Vocab
from doctrans.utils.io import atomic_write_lines

log = logging.getLogger(__name__)


@dataclass
class VocabularyMap:
    """A shortlist in token strings: ``always`` the target tokens every batch may emit,
    ``rules`` source token → its candidate target tokens (best first)."""

    always: list[str] = field(default_factory=list)
    rules: dict[str, list[str]] = field(default_factory=dict)


def lexical_counts(src_lines: Sequence[str], tgt_lines: Sequence[str],
                   align_lines: Sequence[str]) -> dict[str, Counter]:
    """c(s, t): how often source token s is aligned to target token t. Lines: whitespace-split
    tokens and Pharaoh ``i-j`` links (i source, j target position, 0-based). Raises ValueError if
    the line counts differ, or naming the line (1-based) with a link outside its sentence."""
    if not len(src_lines) == len(tgt_lines) == len(align_lines):
        raise ValueError(f"{len(src_lines)} source, {len(tgt_lines)} target and {len(align_lines)} alignment "
                         f"lines: they must be line-parallel")
    counts: dict[str, Counter] = defaultdict(Counter)
    for n, (s, t, a) in enumerate(zip(src_lines, tgt_lines, align_lines), 1):
        src, tgt = s.split(), t.split()
        for link in a.split():
            i, _, j = link.partition("-")
            try:
                si, tj = src[int(i)], tgt[int(j)]
            except (ValueError, IndexError):
                raise ValueError(f"alignment line {n}: link {link!r} outside a {len(src)}-token source / "
                                 f"{len(tgt)}-token target") from None
            counts[si][tj] += 1
    return counts


def build_vmap(counts: dict[str, Counter], tgt_freq: Counter, top_k: int = 50, frequent: int = 100,
               src_vocab: Vocab | None = None, tgt_vocab: Vocab | None = None) -> VocabularyMap:
    """The shortlist of ``lexical_counts`` (see the module doc): per source token its ``top_k``
    targets by p(t | s), ties broken by the target's corpus frequency ``tgt_freq`` then the
    token; the ``frequent`` most frequent targets always. With the model's vocabularies, tokens
    outside them are left out (they are ``<unk>`` to the model; ``<unk>`` is always a candidate).
    Raises ValueError for negative sizes."""
    if top_k < 0 or frequent < 0:
        raise ValueError(f"top_k and frequent must be >= 0, got {top_k}, {frequent}")
    known_tgt = (lambda t: True) if tgt_vocab is None else (lambda t: t in tgt_vocab.index)
    ranked = sorted(((t, c) for t, c in tgt_freq.items() if known_tgt(t)), key=lambda kv: (-kv[1], kv[0]))
    always = [t for t, _ in ranked[:frequent]]
    rules = {}
    for s in sorted(counts):
        if src_vocab is not None and s not in src_vocab.index:
            continue
        c = counts[s]
        best = sorted(((t, n) for t, n in c.items() if known_tgt(t)),
                      key=lambda kv: (-kv[1], -tgt_freq.get(kv[0], 0), kv[0]))[:top_k]
        rules[s] = [t for t, _ in best]
    return VocabularyMap(always, rules)


def write_vmap(vmap: VocabularyMap, path: str | Path) -> None:
    """Write ``vmap`` in the vocabulary-mapping format (module doc), atomically."""
    atomic_write_lines(path, ["\t" + " ".join(vmap.always)] + [f"{s}\t{' '.join(ts)}" for s, ts in vmap.rules.items()])


def read_vmap(path: str | Path) -> VocabularyMap:
    """Read a vocabulary-mapping file. Raises FileNotFoundError, or ValueError naming the file
    and line of a line without a tab, a multi-token source key (n-gram rules are not read), or
    a source key given twice."""
    vmap = VocabularyMap()
    with open(path, encoding="utf-8") as f:
        for lineno, line in enumerate(f, 1):
            line = line.rstrip("\n")
            if not line.strip():
                continue
            key, tab, values = line.partition("\t")
            if not tab:
                raise ValueError(f"{path}:{lineno}: expected 'source<TAB>targets', found no tab")
            key = key.strip()
            if len(key.split()) > 1:
                raise ValueError(f"{path}:{lineno}: source key {key!r} has several tokens; doctrans reads "
                                 f"one-token keys only")
            if not key:
                vmap.always += values.split()
            elif key in vmap.rules:
                raise ValueError(f"{path}:{lineno}: source token {key!r} given twice")
            else:
                vmap.rules[key] = values.split()
    return vmap


class Shortlist:
    """A vocabulary map in a model's ids, for ``beam_search(shortlist=…)``.

    ``candidates(src)`` → the sorted target ids (C,) a batch may emit: ``</s>``, ``<unk>``, the
    always-candidates and every candidate of every source id in ``src`` (B, S) (padding and ids
    without a rule add nothing).

    Tokens the model's vocabularies lack (a model trained with ``data.min_freq`` > 1 maps them to
    ``<unk>``) are left out, with a warning; if more than half of the map's source keys or target
    tokens are unknown the file was built for another model or dataset: ValueError naming it."""

    def __init__(self, vmap: VocabularyMap, src_vocab: Vocab, tgt_vocab: Vocab, path: str = "shortlist"):
        targets = [t for ts in vmap.rules.values() for t in ts] + vmap.always
        bad_src = sum(s not in src_vocab.index for s in vmap.rules)
        bad_tgt = sum(t not in tgt_vocab.index for t in targets)
        for bad, total, side in ((bad_src, len(vmap.rules), "source keys"), (bad_tgt, len(targets), "target tokens")):
            if total and bad > total / 2:
                raise ValueError(f"{path}: {bad} of its {total} {side} are not in the model's vocabulary: a shortlist "
                                 f"built for another model or dataset (build one with `doctrans shortlist -p PREPARED`)")
        if bad_src or bad_tgt:
            log.warning("%s: %d source key(s) and %d target token(s) not in the model's vocabularies: left out",
                        path, bad_src, bad_tgt)

        def tgt_ids(tokens: list[str]) -> Tensor:
            return torch.as_tensor([tgt_vocab.index[t] for t in tokens if t in tgt_vocab.index], dtype=torch.long)

        self.always = torch.unique(torch.cat([tgt_ids(vmap.always), torch.tensor([tgt_vocab.eos_id, tgt_vocab.unk_id])]))
        self.rules: list[Tensor | None] = [None] * len(src_vocab)
        for s, ts in vmap.rules.items():
            if s in src_vocab.index:
                self.rules[src_vocab.index[s]] = tgt_ids(ts)

    @classmethod
    def load(cls, path: str | Path, src_vocab: Vocab, tgt_vocab: Vocab) -> "Shortlist":
        """``read_vmap(path)`` in the ids of ``src_vocab`` / ``tgt_vocab``; raises like both."""
        return cls(read_vmap(path), src_vocab, tgt_vocab, str(path))

    def candidates(self, src: Tensor) -> Tensor:
        """src: (B, S) source ids → sorted unique target ids (C,) int64 on ``src``'s device."""
        parts = [self.always]
        for i in torch.unique(src).tolist():
            rule = self.rules[i] if 0 <= i < len(self.rules) else None
            if rule is not None:
                parts.append(rule)
        return torch.unique(torch.cat(parts)).to(src.device)


def run_build(prepared: str | Path, output: str | Path = "", top_k: int = 20, frequent: int = 100,
              align_path: str | Path = "", aligner: Callable[[Path, Path], list[str]] | None = None) -> Path:
    """``doctrans shortlist``: the shortlist of ``prepared``'s training pairs (``train.bpe.{src,tgt}``,
    languages from its ``meta.json``) written to ``output`` (default ``prepared/shortlist.vmap``).
    Alignments: ``align_path`` (symmetrised Pharaoh lines, one per pair), else ``aligner(src_path,
    tgt_path)`` (``stages.shortlist`` gives eflomal + grow-diag-final-and, from ``dp.align``).
    Raises FileNotFoundError for a missing file, ValueError without either alignment source and
    like ``lexical_counts``."""
    import json

    from doctrans.utils.io import read_lines

    prep = Path(prepared)
    meta_path = prep / "meta.json"
    if not meta_path.is_file():
        raise FileNotFoundError(f"{meta_path} not found: {prep} is not a prepared dataset (doctrans preprocess)")
    meta = json.loads(meta_path.read_text(encoding="utf-8"))
    src_lang, tgt_lang = meta["src"], meta["tgt"]
    src_path, tgt_path = prep / f"train.bpe.{src_lang}", prep / f"train.bpe.{tgt_lang}"
    out = Path(output) if output else prep / "shortlist.vmap"
    src, tgt = read_lines(src_path), read_lines(tgt_path)
    if align_path:
        links = read_lines(align_path)
    elif aligner is not None:
        links = aligner(src_path, tgt_path)
    else:
        raise ValueError("run_build needs align_path or an aligner")
    counts = lexical_counts(src, tgt, links)
    freq = Counter(w for line in tgt for w in line.split())
    src_vocab = Vocab.from_counts_file(prep / f"vocab.{src_lang}.txt")
    tgt_vocab = Vocab.from_counts_file(prep / f"vocab.{tgt_lang}.txt")
    vmap = build_vmap(counts, freq, top_k, frequent, src_vocab, tgt_vocab)
    write_vmap(vmap, out)
    log.info("shortlist: %d source tokens, top %d each, %d always; wrote %s", len(vmap.rules), top_k,
             len(vmap.always), out)
    return out
