"""Lexical cohesion and coherence of translated documents (the HAN paper §4.3 measures both).

**Lexical cohesion** (Wong & Kit 2012, "Extending Machine Translation Evaluation Metrics with
Lexical Cohesion to Document Level", EMNLP, §3): LC = cohesive content words / all content
words of a document. Wong & Kit count repetition, synonyms, near-synonyms, superordinates and
collocations through WordNet; no WordNet installs offline from the package registry with its
data, so here a content word is cohesive when its **lemma repeats** elsewhere in the document
(simplemma's English lemmatizer; repetition is the largest device class in their counts) —
``lexical_cohesion`` says so in its result (``devices: lemma repetition (simplemma)``).
Content words: alphabetic tokens not in scikit-learn's English stop-word list.

**Coherence** (Foltz, Kintsch & Landauer 1998, "The Measurement of Textual Coherence with
Latent Semantic Analysis", §2): the mean cosine of adjacent sentences of a document in an LSA
space fitted on the English side of the training corpus (TF-IDF → truncated SVD, scikit-learn;
a sentence is the LSA projection of its TF-IDF vector). The ISG paper (Table 5) instead
averages word vectors: ``variant="average"`` takes the unweighted mean of the words' LSA
vectors (term loadings scaled by the singular values) [I: the ISG paper's word vectors are not
specified; the LSA space keeps one model for both variants]. A pair with an empty vector (no
known word) is skipped. Corpus figure = the mean over documents of the per-document mean.

Input lines are tokenized, lower-cased English (as ``doctrans score`` prepares them); a
document is a list of lines.
"""
from __future__ import annotations

import logging
import pickle
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

import numpy as np

log = logging.getLogger(__name__)

COHESION_DEVICES = "lemma repetition (simplemma)"


def _stop_words() -> frozenset[str]:
    from sklearn.feature_extraction.text import ENGLISH_STOP_WORDS
    return frozenset(ENGLISH_STOP_WORDS)


def content_lemmas(line: str, stop: frozenset[str] | None = None) -> list[str]:
    """Lemmas of the content words of a tokenized line (alphabetic, not a stop word)."""
    from simplemma import lemmatize

    stop = _stop_words() if stop is None else stop
    return [lemmatize(t, lang="en").lower() for t in line.lower().split() if t.isalpha() and t not in stop]


def lexical_cohesion(docs: Sequence[Sequence[str]], window: int = 0) -> dict:
    """Lexical cohesion of each document and their mean → {lc (mean over documents with
    content words), per_document, content_words, cohesive, devices}. A document without
    content words has LC NaN and is left out of the mean. With ``window`` W > 0 each document
    is cut into consecutive windows of W lines first, each scored as a document [I: Wong & Kit
    score news documents of ~20–30 sentences; a 300–800-line subtitle episode repeats nearly
    every content word somewhere, so whole-episode LC saturates]."""
    stop = _stop_words()
    if window > 0:
        docs = [doc[k:k + window] for doc in docs for k in range(0, len(doc), window)]
    per_doc, n_all, n_coh = [], 0, 0
    for doc in docs:
        lemmas = [x for line in doc for x in content_lemmas(line, stop)]
        counts: dict[str, int] = {}
        for x in lemmas:
            counts[x] = counts.get(x, 0) + 1
        coh = sum(1 for x in lemmas if counts[x] > 1)
        per_doc.append(coh / len(lemmas) if lemmas else float("nan"))
        n_all, n_coh = n_all + len(lemmas), n_coh + coh
    valid = [x for x in per_doc if x == x]
    return {"lc": float(np.mean(valid)) if valid else float("nan"), "per_document": per_doc,
            "content_words": n_all, "cohesive": n_coh, "devices": COHESION_DEVICES}


@dataclass
class LSAModel:
    """A fitted TF-IDF vectorizer and truncated SVD (``fit_lsa``)."""

    vectorizer: object
    svd: object

    def sentence_vectors(self, lines: Sequence[str]) -> np.ndarray:
        """(n, k) LSA projections of tokenized lines (Foltz et al.)."""
        return self.svd.transform(self.vectorizer.transform(lines))

    def word_average_vectors(self, lines: Sequence[str]) -> np.ndarray:
        """(n, k) unweighted means of the LSA vectors of each line's known words (zeros if none)."""
        vocab = self.vectorizer.vocabulary_
        words = (self.svd.components_.T * self.svd.singular_values_)           # (V, k)
        out = np.zeros((len(lines), words.shape[1]))
        for i, line in enumerate(lines):
            ids = [vocab[t] for t in line.lower().split() if t in vocab]
            if ids:
                out[i] = words[ids].mean(0)
        return out

    def save(self, path: Path) -> None:
        from doctrans.utils.io import atomic_write_bytes
        atomic_write_bytes(path, pickle.dumps({"vectorizer": self.vectorizer, "svd": self.svd}))

    @classmethod
    def load(cls, path: Path) -> "LSAModel":
        with open(path, "rb") as f:
            d = pickle.load(f)
        return cls(d["vectorizer"], d["svd"])


def fit_lsa(lines: Sequence[str], dims: int = 100, max_lines: int = 200000, seed: int = 1) -> LSAModel:
    """TF-IDF (tokens = whitespace-separated, words seen in ≥ 2 lines) → truncated SVD with
    ``dims`` dimensions, on at most ``max_lines`` lines (evenly spaced). Raises ValueError if
    the corpus is too small for ``dims``."""
    from sklearn.decomposition import TruncatedSVD
    from sklearn.feature_extraction.text import TfidfVectorizer

    if len(lines) > max_lines:
        lines = [lines[i] for i in np.linspace(0, len(lines) - 1, max_lines).astype(int)]
    vec = TfidfVectorizer(tokenizer=str.split, token_pattern=None, lowercase=True, min_df=2)
    x = vec.fit_transform(lines)
    if x.shape[1] <= dims:
        raise ValueError(f"LSA: {x.shape[1]} words seen in ≥ 2 lines, need more than {dims} dimensions")
    svd = TruncatedSVD(n_components=dims, random_state=seed).fit(x)
    log.info("LSA: %d lines, %d words, %d dimensions", x.shape[0], x.shape[1], dims)
    return LSAModel(vec, svd)


def _cosines(v: np.ndarray) -> list[float]:
    out = []
    for a, b in zip(v[:-1], v[1:]):
        na, nb = np.linalg.norm(a), np.linalg.norm(b)
        if na > 0 and nb > 0:
            out.append(float(a @ b / (na * nb)))
    return out


def coherence(docs: Sequence[Sequence[str]], lsa: LSAModel, variant: str = "lsa") -> dict:
    """Mean cosine of adjacent sentences per document (``variant`` "lsa": Foltz et al.;
    "average": averaged word vectors, the ISG paper) → {coherence (mean over documents),
    per_document, pairs, variant}. Raises ValueError on another variant."""
    if variant not in ("lsa", "average"):
        raise ValueError(f"coherence variant must be 'lsa' or 'average', got {variant!r}")
    per_doc, pairs = [], 0
    for doc in docs:
        v = lsa.sentence_vectors(doc) if variant == "lsa" else lsa.word_average_vectors(doc)
        c = _cosines(v)
        pairs += len(c)
        per_doc.append(float(np.mean(c)) if c else float("nan"))
    valid = [x for x in per_doc if x == x]
    return {"coherence": float(np.mean(valid)) if valid else float("nan"), "per_document": per_doc,
            "pairs": pairs, "variant": variant}


def split_documents(lines: Sequence[str], doc_ids: Sequence[str]) -> list[list[str]]:
    """Lines → documents (consecutive runs of one id)."""
    docs: list[list[str]] = []
    last = object()
    for line, d in zip(lines, doc_ids):
        if d != last:
            docs.append([])
            last = d
        docs[-1].append(line)
    return docs


def lsa_model(path: str | Path, dims: int = 100) -> LSAModel:
    """An LSA model from ``path``: a saved model (``.pkl``), or a tokenized English corpus
    (e.g. ``PREP/train.tok.en``) fitted once and cached beside it as ``{path}.lsa{dims}.pkl``.
    Raises FileNotFoundError naming the path."""
    from doctrans.utils.io import read_lines

    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"LSA model or corpus {path} not found")
    if path.suffix == ".pkl":
        return LSAModel.load(path)
    cache = path.with_name(f"{path.name}.lsa{dims}.pkl")
    if cache.is_file() and cache.stat().st_mtime >= path.stat().st_mtime:
        return LSAModel.load(cache)
    model = fit_lsa(read_lines(path), dims)
    model.save(cache)
    return model
