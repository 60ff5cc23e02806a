"""``translate --rerank reconstructor`` and ``--dp-out`` against the reconstruction contract
(rec_contract.md, models/interface.py): a fake model with hand-set reconstruction scores and DP
labels; the real search and translate around it (inference/reconstruction.py, dp_output.py)."""
from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from click.testing import CliRunner

from conftest import REPO, train_tiny
from doctrans.config import load_experiment
from doctrans.models.build import build_model
from doctrans.cli import cli
from doctrans.inference.dp_output import completed_words
from doctrans.inference.reconstruction import Specials, predict_batch, rerank_batch
from doctrans.inference.translate import LoadedModel, TranslateConfig, Translator
from doctrans.models.interface import EncoderOutput
from doctrans.models.reconstruction_spec import ReconstructionSpec
from doctrans.inference.config import SearchOptions

DP_LABELS = ["NONE", "我", "你"]


class FakeReconstructor(torch.nn.Module):
    """encode: one state per source row holding its first id; reconstruction_score: log R from
    the hand-set table ``log_r`` keyed by (first source id, candidate ids) (default -50);
    records each call's row count."""

    def __init__(self, log_r: dict, weight: float = 1.0):
        super().__init__()
        self.p = torch.nn.Parameter(torch.zeros(1))
        self.log_r, self.calls = log_r, []
        self.reconstruction = ReconstructionSpec("original", "original", True, weight, True)
        self.dp_labels = DP_LABELS

    def encode(self, batch):
        src = batch.src
        return EncoderOutput(src[:, :1, None].float(), src[:, :1].eq(0))

    def reconstruction_score(self, enc, tgt_in, rec_target, hidden=None, top_words=0):
        self.calls.append(tgt_in.size(0))
        keys = [(int(enc.states[b, 0, 0]), tuple(t for t in tgt_in[b, 1:].tolist() if t)) for b in range(tgt_in.size(0))]
        return torch.tensor([self.log_r.get(k, -50.0) for k in keys])

    def predict_dps(self, enc, tgt_in, rec_target, threshold=None):
        lab = torch.zeros_like(rec_target)
        lab[:, 0] = 1                                               # 我 before the first unit
        lab[torch.arange(rec_target.size(0)), rec_target.ne(0).sum(1) - 1] = 2   # 你 at the </s> slot
        return lab


def _scored(cands, beam):
    """rerank_batch's n-best lists: per sentence [(beam score, candidate ids)]."""
    return [list(zip(b, c)) for c, b in zip(cands, beam)]


def test_rerank_scores_do_not_depend_on_the_length_sorted_chunks():
    # a real tiny enc+dec reconstructor (random weights, eval): candidates of different lengths
    # scored in one pass, in chunks of 2 and one by one, give the same combined scores and choice
    cfg = load_experiment(REPO / "pipelines" / "transformer" / "tiny.yaml",
                          ["model.dropout=0.0", "model.reconstructor.mode=both"])
    torch.manual_seed(3)
    model = build_model(cfg.model, 24, 24, 0).eval()
    g = np.random.default_rng(0)
    src = [np.append(g.integers(4, 24, n), 2) for n in (3, 9, 5)]
    tgt = [np.append(g.integers(4, 24, n), 2) for n in (4, 11, 6)]
    cands = [[g.integers(4, 24, n).tolist() for n in lens] for lens in ((2, 7, 4), (12, 1), (5, 5, 9, 3))]
    beam = [[-0.1 * j for j in range(len(c))] for c in cands]
    one = rerank_batch(model, src, _scored(cands, beam), tgt, 1.0, Specials(0, 1), rows_per_pass=64)
    for rows in (2, 1):
        chosen, combined = rerank_batch(model, src, _scored(cands, beam), tgt, 1.0, Specials(0, 1), rows_per_pass=rows)
        assert chosen == one[0]
        for a, b in zip(combined, one[1]):
            assert a == pytest.approx(b, abs=1e-4)
    assert len({round(x, 3) for sc in one[1] for x in sc}) > 5        # the candidates' scores differ
    with pytest.raises(ValueError, match="rows_per_pass"):
        rerank_batch(model, src, _scored(cands, beam), tgt, 1.0, Specials(0, 1), rows_per_pass=0)


def test_rerank_with_the_search_states_equals_the_teacher_forced_pass():
    """Issue 28 (reranked decoding ≤ 1.5× plain): the n-best's decoder states kept by the beam
    search give the scores and choices of the teacher-forced decoder pass, and the decoder does
    not run again; a states list that does not match the candidates is refused."""
    from doctrans.data.vocab import Vocab
    from doctrans.inference.beam_search import beam_search

    cfg = load_experiment(REPO / "pipelines" / "transformer" / "tiny.yaml",
                          ["model.dropout=0.0", "model.reconstructor.mode=both"])
    torch.manual_seed(5)
    model = build_model(cfg.model, 24, 24, 0).eval()
    vocab = Vocab(["<pad>", "<s>", "</s>", "<unk>"] + [f"w{i}" for i in range(20)])
    assert len(vocab) == 24
    g = np.random.default_rng(1)
    src = [np.append(g.integers(4, 24, n), 2) for n in (3, 9, 5, 6)]
    tgt = [np.append(g.integers(4, 24, n), 2) for n in (4, 10, 6, 7)]
    batch = torch.zeros(4, 10, dtype=torch.long)
    for b, x in enumerate(src):
        batch[b, :len(x)] = torch.from_numpy(x)
    with torch.no_grad():
        res = beam_search(model, batch, vocab, SearchOptions(beam=4, nbest=4), keep_states=True)
    cands = [[ids for _, ids in lst] for lst in res.nbest]
    beam = [[sc for sc, _ in lst] for lst in res.nbest]
    assert len({len(c) for cs in cands for c in cs}) > 1
    plain = rerank_batch(model, src, _scored(cands, beam), tgt, 1.0, Specials(0, 1), rows_per_pass=5)
    calls = []
    real = model.backbone.decode_hidden
    model.backbone.decode_hidden = lambda *a: calls.append(1) or real(*a)
    kept = rerank_batch(model, src, _scored(cands, beam), tgt, 1.0, Specials(0, 1), rows_per_pass=5, states=res.nbest_states)
    assert not calls                                                  # no second decoder pass
    assert kept[0] == plain[0]
    for a, b in zip(kept[1], plain[1]):
        assert a == pytest.approx(b, abs=1e-4)
    with pytest.raises(ValueError, match="one decoder-state tensor per candidate"):
        rerank_batch(model, src, _scored(cands, beam), tgt, 1.0, Specials(0, 1), states=[s[:1] for s in res.nbest_states])


def test_rerank_chooses_the_best_combined_score_in_one_call():
    src = [np.array([7, 2]), np.array([8, 9, 2])]
    cands = [[[4], [5, 6], [6]], [[4, 4], [5]]]
    beam = [[-1.0, -1.5, -3.0], [-0.5, -0.6]]
    tgt = [np.array([7, 2]), np.array([8, 9, 2])]            # |x̂| = 2 and 3
    model = FakeReconstructor({(7, (5, 6)): -1.0, (7, (4,)): -4.0, (7, (6,)): -0.0, (8, (4, 4)): -3.0, (8, (5,)): -3.0})
    chosen, combined = rerank_batch(model, src, _scored(cands, beam), tgt, 1.0, Specials(0, 1))
    # sentence 0: -1 - 4/2 = -3, -1.5 - 1/2 = -2, -3 - 0 = -3 → candidate 1; sentence 1: -1.5 vs -1.6 → 0
    assert combined[0] == pytest.approx([-3.0, -2.0, -3.0]) and combined[1] == pytest.approx([-1.5, -1.6])
    assert chosen == [1, 0]
    assert model.calls == [5]                                    # every candidate of the batch in one pass
    chosen0, _ = rerank_batch(model, src, _scored(cands, beam), tgt, 0.0, Specials(0, 1))
    assert chosen0 == [0, 0]                                     # λ = 0: the beam's 1-best
    assert rerank_batch(model, src, _scored(cands, beam), tgt, 100.0, Specials(0, 1))[0] == [2, 0]   # ties: the beam's order
    with pytest.raises(ValueError, match="at least one candidate"):
        rerank_batch(model, src, _scored([[[4]], []], beam), tgt, 1.0, Specials(0, 1))
    labels = predict_batch(model, src, [[4], [5]], tgt, 0, 1)
    assert labels == [[1, 2], [1, 0, 2]]


def test_completed_words_original_and_dpp_targets():
    assert completed_words(["去", "学@@", "校"], [1, 0, 2, 0], DP_LABELS, "original") == ["我", "去", "你", "学校"]
    assert completed_words(["去", "学@@", "校"], [0, 0, 0, 2, 0, 0], DP_LABELS, "original") == ["去", "学校", "你"]
    assert completed_words(["#DP#", "去", "#DP#", "学@@", "校"], [2, 1, 0, 0, 0, 1], DP_LABELS, "dpp") == \
        ["你", "去", "学校"]                                      # labels off the placeholders are ignored
    with pytest.raises(ValueError, match="units"):
        completed_words(["去"], [0], DP_LABELS, "original")
    with pytest.raises(ValueError, match="outside"):
        completed_words(["去"], [0, 5], DP_LABELS, "original")


# ---------------------------------------------------------------- translate, with a trained tiny model

@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    return train_tiny(tmp_path_factory.mktemp("rerank"), 40, "train.max_steps=30", "train.eval_every=0")


def _fake_contract(monkeypatch, model_cls, spec, per_token: float):
    """Give the backbone class the contract members: log R = per_token × candidate length (a hand-set
    preference for short or long translations); DP labels as FakeReconstructor's."""
    calls = []

    def score(self, enc, tgt_in, rec_target, hidden=None, top_words=0):
        calls.append((tgt_in.size(0), rec_target.clone()))
        return per_token * tgt_in[:, 1:].ne(0).sum(1).float()

    monkeypatch.setattr(model_cls, "reconstruction", spec)
    monkeypatch.setattr(model_cls, "dp_labels", DP_LABELS)
    monkeypatch.setattr(model_cls, "reconstruction_score", score)
    monkeypatch.setattr(model_cls, "predict_dps", FakeReconstructor.predict_dps)
    return calls


def _inputs(tmp_path):
    lines = ["w1 w2 w3", "", "w4 w5 w6 w7", "w8 w9"]
    (tmp_path / "in.tok").write_text("".join(f"{x}\n" for x in lines), encoding="utf-8")
    return lines


def test_rerank_picks_the_candidate_with_the_best_combined_score(trained, tmp_path, monkeypatch):
    lines = _inputs(tmp_path)
    base = dict(checkpoint=str(trained), input=str(tmp_path / "in.tok"), input_format="tok", tokenized=True, beam=4)
    loaded = LoadedModel.load(TranslateConfig(**base).model)
    nbest = Translator(TranslateConfig(**base, nbest=4, nbest_out="-"), loaded=loaded).translate_detailed(lines).nbest
    assert any(len(h[0][0].split()) > min(len(x.split()) for x, _ in h) for h in nbest.values()), \
        "the fixture's n-best lists must let a preference for short translations change a 1-best"
    for per_token, weight in ((-30.0, 1.0), (30.0, 1.0), (30.0, 0.0)):
        calls = _fake_contract(monkeypatch, type(loaded.model), ReconstructionSpec("original", "original", True, weight),
                               per_token)
        out = Translator(TranslateConfig(**base, rerank="reconstructor"), loaded=loaded).translate(lines)
        for i, line in enumerate(lines):
            if not line:
                assert out[i] == ""
                continue
            n_rec = len(line.split()) + 1                         # x̂ = the source with </s>
            want = max(nbest[i], key=lambda h: h[1] + weight * per_token * (len(h[0].split()) + 0) / n_rec)
            assert out[i] == want[0], (per_token, weight, nbest[i])
        assert len(calls) == 1 and calls[0][0] == sum(len(nbest[i]) for i in nbest)   # one pass, all candidates
        changed = any(out[i] != nbest[i][0][0] for i in nbest)
        # a preference for short translations must move the choice (the 1-best is never the shortest
        # of all lists here), λ = 0 must not; a preference for long ones may keep a longest 1-best
        if per_token < 0 or not weight:
            assert changed == bool(weight), "the hand-set scores must move the choice (and λ = 0 must not)"
        x_hat = [r[:4] for r in calls[0][1].tolist()]              # rows in (|x̂|, |y|) order
        assert loaded.src_vocab.encode("w1 w2 w3").tolist() in x_hat
    short = Translator(TranslateConfig(**base, rerank="reconstructor", rerank_k=1), loaded=loaded).translate(lines)
    assert short == [h[0][0] if h else "" for h in (nbest.get(i) for i in range(len(lines)))]


def test_dp_out_round_trips_through_score_dp(trained, tmp_path, monkeypatch):
    lines = _inputs(tmp_path)
    loaded = LoadedModel.load(TranslateConfig(checkpoint=str(trained)).model)
    _fake_contract(monkeypatch, type(loaded.model), ReconstructionSpec("original", "original", False, 1.0, True), 0.0)
    r = CliRunner().invoke(cli, ["translate", "-c", str(trained), "-i", str(tmp_path / "in.tok"), "--input-format",
                                 "tok", "-o", str(tmp_path / "out.en"), "--dp-out", str(tmp_path / "dp.zh")])
    assert r.exit_code == 0, r.output + repr(r.exception)
    dp = (tmp_path / "dp.zh").read_text(encoding="utf-8").splitlines()
    assert dp == ["我 w1 w2 w3 你", "", "我 w4 w5 w6 w7 你", "我 w8 w9 你"]
    assert len((tmp_path / "out.en").read_text(encoding="utf-8").splitlines()) == len(lines)
    oracle = ["我 w1 w2 w3", "", "w4 w5 我 w6 w7 你", "我 w8 w9 你"]
    (tmp_path / "oracle.zh").write_text("".join(f"{x}\n" for x in oracle), encoding="utf-8")
    r = CliRunner().invoke(cli, ["score", "dp", str(tmp_path / "dp.zh"), "--base", str(tmp_path / "in.tok"),
                                 "--oracle", str(tmp_path / "oracle.zh"), "--bootstrap", "0", "--json"])
    assert r.exit_code == 0, r.output
    res = json.loads(r.output)
    assert res["sys_dps"] == 6 and res["oracle_dps"] == 5
    assert res["pronoun"]["matched"] == 4                       # 我@0 ×2, 你@end ×2 of line 3/4; 我@2 missed
    (tmp_path / "short.zh").write_text("我 w1\n", encoding="utf-8")
    r = CliRunner().invoke(cli, ["score", "dp", str(tmp_path / "short.zh"), "--base", str(tmp_path / "in.tok"),
                                 "--oracle", str(tmp_path / "oracle.zh")])
    assert r.exit_code != 0 and "line counts differ" in str(r.exception) and "short.zh 1" in str(r.exception)


def test_clear_errors_for_models_and_options_that_cannot(trained, tmp_path, monkeypatch):
    _inputs(tmp_path)
    args = ["translate", "-c", str(trained), "-i", str(tmp_path / "in.tok"), "--input-format", "tok"]
    r = CliRunner().invoke(cli, [*args, "--rerank", "reconstructor"])
    assert r.exit_code != 0 and "has no reconstructor" in str(r.exception) and "rec_" in str(r.exception)
    r = CliRunner().invoke(cli, [*args, "--dp-out", str(tmp_path / "dp.zh")])
    assert r.exit_code != 0 and "predicts no DPs" in str(r.exception)
    assert not (tmp_path / "dp.zh").exists()
    loaded = LoadedModel.load(TranslateConfig(checkpoint=str(trained)).model)
    _fake_contract(monkeypatch, type(loaded.model), ReconstructionSpec("original", "dp", False, 1.0), 0.0)
    r = CliRunner().invoke(cli, [*args, "--rerank", "reconstructor"])
    assert r.exit_code != 0 and "reads only the encoder states" in str(r.exception)
    _fake_contract(monkeypatch, type(loaded.model), ReconstructionSpec("original", "dpp", True, 1.0), 0.0)
    r = CliRunner().invoke(cli, [*args, "--rerank", "reconstructor"])
    assert r.exit_code != 0 and "give --dp-generator" in str(r.exception)
    r = CliRunner().invoke(cli, [*args, "--rerank", "reconstructor", "--beam", "2", "--rerank-k", "3"])
    assert r.exit_code != 0 and "exceeds --beam" in str(r.exception)
    r = CliRunner().invoke(cli, [*args, "--rerank-vocab", "100"])
    assert r.exit_code != 0 and "--rerank-vocab needs --rerank reconstructor" in str(r.exception)
    _fake_contract(monkeypatch, type(loaded.model), ReconstructionSpec("original", "original", True, 1.0), 0.0)
    with pytest.raises(ValueError, match="--rerank-vocab must be ≥ 0"):
        Translator(TranslateConfig(checkpoint=str(trained), input_format="tok", rerank="reconstructor",
                                   rerank_vocab=-1), loaded=loaded)


def test_dp_threshold_reaches_the_models_dp_decision(trained, tmp_path, monkeypatch):
    """--dp-threshold TAU is passed to every predict_dps call of --dp-out (None without it: the
    model's own τ); it needs --dp-out and a value in [0, 1]."""
    _inputs(tmp_path)
    loaded = LoadedModel.load(TranslateConfig(checkpoint=str(trained)).model)
    cls = type(loaded.model)
    _fake_contract(monkeypatch, cls, ReconstructionSpec("original", "original", False, 1.0, True), 0.0)
    seen = []

    def predict_dps(self, enc, tgt_in, rec_target, threshold=None):   # 我 before the first unit iff τ > 0.5
        seen.append(threshold)
        lab = torch.zeros_like(rec_target)
        lab[:, 0] = int(threshold is not None and threshold > 0.5)
        return lab

    monkeypatch.setattr(cls, "predict_dps", predict_dps)
    args = ["translate", "-c", str(trained), "-i", str(tmp_path / "in.tok"), "--input-format", "tok",
            "-o", str(tmp_path / "out.en"), "--dp-out", str(tmp_path / "dp.zh")]
    for tau, want in ((None, "w1 w2 w3"), ("0.9", "我 w1 w2 w3"), ("0.2", "w1 w2 w3")):
        seen.clear()
        r = CliRunner().invoke(cli, args + ([] if tau is None else ["--dp-threshold", tau]))
        assert r.exit_code == 0, r.output + repr(r.exception)
        assert seen and set(seen) == {None if tau is None else float(tau)}
        assert (tmp_path / "dp.zh").read_text(encoding="utf-8").splitlines()[0] == want
    r = CliRunner().invoke(cli, args + ["--dp-threshold", "1.5"])
    assert r.exit_code == 2 and "--dp-threshold" in r.output and "0<=x<=1" in r.output
    with pytest.raises(ValueError, match=r"must be in \[0, 1\]"):
        Translator(TranslateConfig(checkpoint=str(trained), input=str(tmp_path / "in.tok"), input_format="tok",
                                   dp_out=str(tmp_path / "dp.zh"), dp_threshold=-0.1), loaded=loaded)
    r = CliRunner().invoke(cli, args[:-2] + ["--dp-threshold", "0.5"])
    assert r.exit_code != 0 and "give --dp-out" in str(r.exception)


class _Completion:
    """An input transform (inference/transform.py) inserting 我的 before each line."""
    combine, protect = "1best", frozenset({"我的"})

    def __call__(self, tok):
        return [[(f"我的 {t}", 1.0)] if t is not None else [] for t in tok]


def test_dp_input_is_bpe_encoded_as_in_training(trained, tmp_path, monkeypatch):
    """Bug: generator-completed input was always BPE-encoded with the DP pronouns kept whole, also
    for a model trained without data.bpe_protect_dp (the +DPs rows continued from stage 1 read
    .dp.srcbpe.zh), whose vocabulary then lacks them (<unk>)."""
    from doctrans.inference.transform import InputSetup

    lines = _inputs(tmp_path)
    cfg = TranslateConfig(checkpoint=str(trained), input_format="tok", tokenized=True, beam=2, dp_generator="fake")
    tr = Translator(cfg, InputSetup(_Completion(), _Completion.protect))
    assert not tr.engine.protect_dp
    seen = []
    real = tr.src_proc.apply_bpe
    monkeypatch.setattr(tr.src_proc, "apply_bpe", lambda xs, protect=frozenset(): seen.append(protect) or real(xs, protect))
    out = tr.translate(lines)
    assert len(out) == len(lines) and out[1] == ""
    assert seen and all(p == frozenset() for p in seen), seen


def test_a_reconstructor_reading_x_translates_x_with_a_dp_generator(trained, tmp_path, monkeypatch):
    """encoder_input "original": --dp-generator makes x̂ (for reranking), never the encoder's input."""
    from doctrans.inference.transform import InputSetup

    lines = _inputs(tmp_path)
    base = dict(checkpoint=str(trained), input_format="tok", tokenized=True, beam=2)
    loaded = LoadedModel.load(TranslateConfig(**base).model)
    plain = Translator(TranslateConfig(**base), loaded=loaded).translate(lines)
    completed = Translator(TranslateConfig(**base, dp_generator="fake"), InputSetup(_Completion(), _Completion.protect),
                           loaded=loaded).translate(lines)
    assert completed != plain                                    # a +DPs model reads the completion
    _fake_contract(monkeypatch, type(loaded.model), ReconstructionSpec("original", "dp", True, 0.0), 0.0)
    rec = Translator(TranslateConfig(**base, dp_generator="fake"), InputSetup(_Completion(), _Completion.protect),
                     loaded=loaded)
    assert rec.translate(lines) == plain


class FakeDocumentLabeler(FakeReconstructor):
    """predict_dps labels position 0 with 1 + the number of context sentences the row reads (so
    the label says which context it got) and 你 at the </s> slot; encode keeps ``batch.ctx``."""

    def encode(self, batch):
        enc = super().encode(batch)
        enc.extra = {"ctx": batch.ctx}
        return enc

    def predict_dps(self, enc, tgt_in, rec_target, threshold=None):
        lab = torch.zeros_like(rec_target)
        ctx = enc.extra["ctx"]
        firsts = enc.states[:, 0, 0].long()
        for b in range(rec_target.size(0)):                        # 1 + Σ first ids of the context rows
            lab[b, 0] = 1 + sum(int(firsts[r]) for r in ctx[b].tolist() if r >= 0)
        lab[torch.arange(rec_target.size(0)), rec_target.ne(0).sum(1) - 1] = 2
        return lab


def test_predict_documents_gives_each_sentence_its_own_previous_sentences_in_any_window():
    from doctrans.inference.reconstruction import predict_documents

    src = [np.array([k, 2]) for k in (3, 4, 5, 6, 7, 8)]          # first ids 3…8
    docs = [[0, 1, 2, 3], [4, 5]]                                  # two documents
    ys, tgt = [[4]] * 6, src
    want = [1, 1 + 3, 1 + 3 + 4, 1 + 4 + 5, 1, 1 + 7]             # N = 2 previous sentences of the same document
    for window in (1, 2, 3, 10):
        labels = predict_documents(FakeDocumentLabeler({}), docs, src, ys, tgt, 2, 0, 1, window)
        assert [lab[0] for lab in labels] == want, window
        assert all(lab[-1] == 2 and len(lab) == 2 for lab in labels)


def test_dp_out_of_a_document_model_labels_with_each_documents_context(trained, tmp_path, monkeypatch):
    """A document reconstructor (§2.12) through `translate --docs … --dp-out`: translated as
    documents, each line labelled with its own document's previous line as context (a
    document's first line reads none, even after another document), line count and empty lines
    kept; --rerank reconstructor hands each line's x̂ to the document translation (which reranks:
    tests/unit/test_rec_over_context.py)."""
    from doctrans.models.interface import DocumentSpec

    lines = ["w1 w2", "w3", "", "w4 w5", "w6"]
    (tmp_path / "in.tok").write_text("".join(f"{x}\n" for x in lines), encoding="utf-8")
    (tmp_path / "in.docs").write_text("a\t0\na\t1\na\t2\nb\t0\nb\t1\n", encoding="utf-8")
    loaded = LoadedModel.load(TranslateConfig(checkpoint=str(trained)).model)
    cls = type(loaded.model)
    _fake_contract(monkeypatch, cls, ReconstructionSpec("original", "original", False, 1.0, True), 0.0)
    real_encode = cls.encode

    def encode(self, batch):                                       # the real encoding + the ctx it was given
        enc = real_encode(self, batch)
        enc.extra = {**(enc.extra or {}), "ctx": batch.ctx}
        return enc

    def predict_dps(self, enc, tgt_in, rec_target, threshold=None):  # 你 first with a context row, else 我
        lab = torch.zeros_like(rec_target)
        ctx = enc.extra["ctx"]
        lab[:, 0] = torch.where(ctx.ge(0).any(1), 2, 1)
        return lab

    monkeypatch.setattr(cls, "encode", encode)
    monkeypatch.setattr(cls, "predict_dps", predict_dps)
    monkeypatch.setattr(cls, "document", DocumentSpec(1))          # reads the previous sentence
    calls = []
    monkeypatch.setattr("doctrans.inference.translate.Translator._translate_documents",
                        lambda self, bpe, nonempty, doc_ids, *a, rec=None: calls.append((doc_ids, rec))
                        or {i: "x" for i in nonempty})
    args = ["translate", "-c", str(trained), "-i", str(tmp_path / "in.tok"), "--input-format", "tok",
            "--docs", str(tmp_path / "in.docs"), "-o", str(tmp_path / "out.en")]
    for window in ("1", "64"):
        r = CliRunner().invoke(cli, [*args, "--batch-sentences", window, "--dp-out", str(tmp_path / "dp.zh")])
        assert r.exit_code == 0, r.output + repr(r.exception)
        assert calls[-1] == (["a", "a", "a", "b", "b"], None)      # translated as documents
        assert (tmp_path / "dp.zh").read_text(encoding="utf-8").splitlines() == ["我 w1 w2", "你 w3", "", "我 w4 w5", "你 w6"]
        assert (tmp_path / "out.en").read_text(encoding="utf-8").splitlines() == ["x", "x", "", "x", "x"]
    monkeypatch.setattr(cls, "reconstruction", ReconstructionSpec("original", "original", True, 1.0, True))
    r = CliRunner().invoke(cli, [*args, "--rerank", "reconstructor"])      # a decoder-side reconstructor
    assert r.exit_code == 0, r.output + repr(r.exception)
    doc_ids, rec = calls[-1]
    assert doc_ids == ["a", "a", "a", "b", "b"] and sorted(rec) == [0, 1, 3, 4]   # x̂ of every non-empty line
    assert [len(rec[i]) for i in (0, 1, 3, 4)] == [3, 2, 3, 2]                    # the source itself + </s>
