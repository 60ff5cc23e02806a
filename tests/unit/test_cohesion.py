"""Lexical cohesion and coherence (evaluation/cohesion.py, issue 17) on hand-made documents."""
from __future__ import annotations

import math

import numpy as np
import pytest

from doctrans.evaluation.cohesion import coherence, fit_lsa, lexical_cohesion, lsa_model, split_documents


def test_a_document_repeating_one_content_word_has_cohesion_one():
    exact = lexical_cohesion([["the cat .", "cats !", "and a cat"]])
    assert exact["lc"] == 1.0 and exact["content_words"] == 3         # "cats" lemmatised to "cat"


def test_cohesion_counts_repeated_lemmas_over_content_words():
    r = lexical_cohesion([["the dog ran home .", "the dog slept ."], ["of the ."]])
    # content words: dog run home dog sleep → the two "dog" are cohesive: 2/5; doc 2 has none
    assert r["per_document"][0] == pytest.approx(2 / 5) and math.isnan(r["per_document"][1])
    assert r["lc"] == pytest.approx(2 / 5) and "simplemma" in r["devices"]


CORPUS = [" ".join(np.random.default_rng(i).choice([f"w{k}" for k in range(60)], 6)) for i in range(400)]


def test_identical_adjacent_sentences_have_coherence_one(tmp_path):
    lsa = fit_lsa(CORPUS, dims=10)
    docs = [["w1 w2 w3", "w1 w2 w3", "w1 w2 w3"], ["w4 w5", "w4 w5"]]
    for variant in ("lsa", "average"):
        r = coherence(docs, lsa, variant)
        assert r["coherence"] == pytest.approx(1.0) and r["pairs"] == 3
    different = coherence([["w1 w2 w3", "w40 w41 w42"]], lsa)["coherence"]
    assert different < 0.9
    with pytest.raises(ValueError, match="variant"):
        coherence(docs, lsa, "bert")


def test_lsa_is_fitted_once_and_cached(tmp_path):
    corpus = tmp_path / "train.tok.en"
    corpus.write_text("".join(f"{x}\n" for x in CORPUS), encoding="utf-8")
    a = lsa_model(corpus, dims=8)
    cache = tmp_path / "train.tok.en.lsa8.pkl"
    assert cache.is_file()
    b = lsa_model(cache)
    assert np.allclose(a.sentence_vectors(["w1 w2"]), b.sentence_vectors(["w1 w2"]))
    with pytest.raises(FileNotFoundError, match="nope"):
        lsa_model(tmp_path / "nope")


def test_split_documents_keeps_runs():
    assert split_documents(["a", "b", "c"], ["x", "x", "y"]) == [["a", "b"], ["c"]]


def test_cohesion_windows_cut_documents_into_line_windows():
    from doctrans.evaluation.cohesion import lexical_cohesion

    doc = ["the cat sat", "a dog ran", "cats sleep", "dogs bark"]
    assert lexical_cohesion([doc])["lc"] == 0.5                   # cat ×2, dog ×2 of 8 content lemmas
    windowed = lexical_cohesion([doc], window=2)                   # [cat sit, dog run] [cat sleep, dog bark]
    assert windowed["per_document"] == [0.0, 0.0] and windowed["lc"] == 0.0
    assert lexical_cohesion([doc], window=3)["per_document"] == [2 / 6, 0.0]
