"""The Python API as CTranslate2 and fairseq users expect it (issue 50 item 14): ``translate_batch``
with n-best hypotheses and scores, ``from_pretrained`` of a run directory, clear errors for
search settings out of range, the CLI's option names, ``threads=``; a byte order mark dropped
(item 10); ``--engine ctranslate2 --nbest`` (item 15)."""
from __future__ import annotations

import json
import shutil

import pytest
import torch
from click.testing import CliRunner

import doctrans
from conftest import reversal_pairs, train_tiny
from doctrans.cli import cli
from doctrans.inference.translate import TranslateConfig, Translator as EngineTranslator

SRC = reversal_pairs(6, seed=7)[0]
BPE = {"input_format": "bpe", "tokenized": True}


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    return train_tiny(tmp_path_factory.mktemp("batch"), 30, "train.max_steps=30")


def test_translate_batch_gives_nbest_hypotheses_with_scores(model):
    tr = doctrans.Translator.load(model, beam_size=3, **BPE)
    res = tr.translate_batch(SRC[:3] + [""], num_hypotheses=2, return_scores=True)
    assert len(res) == 4 and all(isinstance(r, doctrans.api.TranslationResult) for r in res)
    for r in res[:3]:
        assert len(r.hypotheses) == 2 and len(r.scores) == 2 and r.scores[0] >= r.scores[1]
        assert all(isinstance(h, str) for h in r.hypotheses)
    assert res[3].hypotheses == [""] and res[3].scores == [0.0]           # blank: the model is not run
    assert [r.hypotheses[0] for r in res[:3]] == tr.translate_sentences(SRC[:3])   # best = the 1-best
    # the same hypotheses and scores as the CLI's n-best list
    engine = EngineTranslator(TranslateConfig(checkpoint=str(model), beam=3, nbest=2, **BPE))
    nb = engine.translate_detailed(SRC[:3]).nbest
    assert [[(h, round(s, 5)) for h, s in nb[i]] for i in range(3)] == \
        [[(h, round(s, 5)) for h, s in zip(r.hypotheses, r.scores)] for r in res[:3]]
    # token lists in → token lists out (the translator reads BPE units here)
    toks = tr.translate_batch([s.split() for s in SRC[:2]], beam_size=2)
    assert toks[0].hypotheses == [tr.translate_sentences(SRC[:1], beam_size=2)[0].split()] and toks[0].scores == []
    assert tr.config.search.beam == 3 and tr.config.search.nbest == 0                  # per-call options leave the defaults


def test_search_settings_out_of_range_are_clear_errors(model):
    with pytest.raises(ValueError, match=r"beam_size must be an integer ≥ 1 \(1 = greedy search\), got 0"):
        doctrans.Translator.load(model, beam_size=0, **BPE)
    tr = doctrans.Translator.load(model, beam_size=2, **BPE)
    with pytest.raises(ValueError, match="beam_size must be an integer ≥ 1"):
        tr.translate_sentences(SRC[:1], beam_size=0)
    with pytest.raises(ValueError, match="beam_size must be an integer ≥ 1"):
        tr.translate_batch(SRC[:1], beam_size=0)
    with pytest.raises(ValueError, match="num_hypotheses 3 exceeds beam_size 2"):
        tr.translate_batch(SRC[:1], num_hypotheses=3)
    with pytest.raises(ValueError, match="max_batch_size must be"):
        tr.translate_sentences(SRC[:1], max_batch_size=0)
    with pytest.raises(ValueError, match="beam size and batch size must be ≥ 1"):     # the engine itself
        EngineTranslator(TranslateConfig(checkpoint=str(model), beam=0, **BPE))


def test_load_takes_the_cli_names_and_from_pretrained_a_run_dir(model, tmp_path):
    tr = doctrans.Translator.load(model, beam=4, lenpen=0.5, batch_sentences=8, **BPE)
    assert (tr.config.search.beam, tr.config.search.lenpen, tr.config.search.batch_sentences) == (4, 0.5, 8)
    with pytest.raises(TypeError, match="beam=4 and beam_size=3 given"):
        doctrans.Translator.load(model, beam=4, beam_size=3, **BPE)
    run = doctrans.Translator.from_pretrained(model.parent, beam_size=2, **BPE)    # a run dir: its best.pt
    assert run.config.model.checkpoint == str(model.parent / "best.pt")
    only_last = tmp_path / "only_last"
    only_last.mkdir()
    shutil.copy(model, only_last / "last.pt")
    run = doctrans.Translator.from_pretrained(only_last, beam_size=2, **BPE)       # no best.pt: last.pt
    assert run.config.model.checkpoint == str(only_last / "last.pt")
    assert run.translate_sentences(SRC[:2]) == doctrans.Translator.load(model, beam_size=2, **BPE).translate_sentences(
        SRC[:2])
    assert doctrans.Translator.from_pretrained(model, **BPE).config.model.checkpoint == str(model)
    with pytest.raises(FileNotFoundError, match="holds neither best.pt nor last.pt"):
        doctrans.Translator.from_pretrained(tmp_path, **BPE)


def test_threads_sets_torch_threads(model):
    before = torch.get_num_threads()
    try:
        doctrans.Translator.load(model, threads=3, **BPE)
        assert torch.get_num_threads() == 3
        doctrans.Translator.load(model, threads=1, **BPE)
        assert torch.get_num_threads() == 1
    finally:
        torch.set_num_threads(before)


def test_byte_order_mark_is_dropped(model):
    tr = doctrans.Translator.load(model, beam_size=2, **BPE)
    words = ["w3", "w7", "w12", "w20"]               # one word each: with a BOM kept, each is one unknown token
    plain = tr.translate_sentences(words)
    assert len(set(plain)) > 1                        # (so the same output for all would show)
    assert tr.translate_sentences(["\ufeff" + w for w in words]) == plain
    assert tr.translate("\ufeff" + words[0]) == plain[0]
    assert tr.translate_documents([["\ufeff" + w for w in words]]) == tr.translate_documents([words])
    assert tr.translate_batch([["\ufeff" + words[1]]])[0].hypotheses == [plain[1].split()]


def test_ctranslate2_nbest_lists_with_scores(model, tmp_path):
    pytest.importorskip("ctranslate2")
    out = tmp_path / "ct2"
    r = CliRunner().invoke(cli, ["export", "-c", str(model), "-o", str(out)])
    assert r.exit_code == 0, r.output
    inp = tmp_path / "in.bpe"
    inp.write_text("".join(f"{x}\n" for x in SRC[:3] + ["", SRC[3]]), encoding="utf-8")
    lists = {}
    for engine, ckpt in (("ctranslate2", out), ("native", model)):
        nb = tmp_path / f"{engine}.nbest"
        r = CliRunner().invoke(cli, ["translate", "-c", str(ckpt), "--engine", engine, "--input-format", "bpe",
                                     "--tokenized", "--beam", "3", "--nbest", "2", "--nbest-out", str(nb), "-i",
                                     str(inp), "-o", str(tmp_path / f"{engine}.txt")])
        assert r.exit_code == 0, r.output
        lists[engine] = [json.loads(x) for x in nb.read_text(encoding="utf-8").splitlines()]
    ct2, native = lists["ctranslate2"], lists["native"]
    assert [x["line"] for x in ct2] == [1, 2, 3, 4, 5] and ct2[3]["hypotheses"] == []
    for c, n in zip(ct2, native):
        assert [h["rank"] for h in c["hypotheses"]] == [h["rank"] for h in n["hypotheses"]]
        if c["hypotheses"]:
            assert len(c["hypotheses"]) == 2 and c["hypotheses"][0]["score"] >= c["hypotheses"][1]["score"]
            assert c["hypotheses"][0]["text"] == n["hypotheses"][0]["text"]           # the same best
            assert c["hypotheses"][0]["score"] == pytest.approx(n["hypotheses"][0]["score"], abs=0.05)
    tr = doctrans.Translator.load(out, beam_size=3, **BPE)                          # the API on CTranslate2
    res = tr.translate_batch(SRC[:2], num_hypotheses=2, return_scores=True)
    assert [r.hypotheses for r in res] == [[h["text"] for h in c["hypotheses"]] for c in ct2[:2]]
