"""Reconstructors and DP heads (models/reconstructor.py, data/reconstruction.py; docs/models.md
§2.9–2.10): the equations on hand-sized tensors, the thesis' parameter counts, teacher forcing =
step by step, the contract's defaults, the DP labels (the ``</s>`` slot), a tiny model that
learns, and a synthetic task that only a model carrying DP information solves."""
from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from doctrans.config import load_experiment
from doctrans.data.batching import Batch
from doctrans.data.reconstruction import dp_label_ids
from doctrans.models.build import build_model
from doctrans.models.interface import EncoderOutput, SearchBatch
from doctrans.models.reconstructor import TABLE_4_3, Reconstructor
from doctrans.training.loss import forward_loss

from conftest import REPO

TINY = {b: REPO / "pipelines" / b / "tiny.yaml" for b in ("transformer", "rnnsearch")}


def tiny_model(backbone: str = "transformer", seed: int = 0, vocab: int = 24, **rec):
    torch.manual_seed(seed)
    opts = ["model.dropout=0.0"] + [f"model.reconstructor.{k}={v}" for k, v in rec.items()]
    if "mode" not in rec:
        opts.append("model.reconstructor.mode=both")
    cfg = load_experiment(TINY[backbone], opts)
    return build_model(cfg.model, vocab, vocab, 0)


def toy_batch(b: int = 3, s: int = 6, t: int = 7, r: int = 8, vocab: int = 24, seed: int = 1) -> Batch:
    g = torch.Generator().manual_seed(seed)
    src = torch.randint(4, vocab, (b, s), generator=g)
    tgt = torch.randint(4, vocab, (b, t), generator=g)
    rec = torch.randint(4, vocab, (b, r), generator=g)
    src[:, -1] = tgt[:, -1] = rec[:, -1] = 2
    src[0, -2:] = torch.tensor([2, 0])                 # row 0 shorter: padding everywhere
    tgt[0, -2:] = torch.tensor([2, 0])
    rec[0, -3:] = torch.tensor([2, 0, 0])
    tin = torch.cat([torch.ones(b, 1, dtype=torch.long), tgt[:, :-1]], 1).masked_fill(tgt.eq(0), 0)
    return Batch(src, tin, tgt, np.arange(b), int(tgt.ne(0).sum()), rec, torch.zeros_like(rec))


def test_equations_5_1_to_5_3_on_hand_sized_tensors():
    """One memory, H = 3, E = 2, V = 5: the module equals eq. 5.1–5.3 written out with its weights."""
    torch.manual_seed(0)
    rec = Reconstructor((4,), emb_size=2, hidden=3, attn=3, vocab=5)
    emb = torch.nn.Embedding(5, 2)
    v = torch.randn(1, 3, 4)
    pad = torch.tensor([[False, False, True]])            # the third state is padding
    x_hat = torch.tensor([[4, 3, 2]])                      # x̂ = w4 w3 </s>
    lp, states = rec(emb, [(v, pad)], x_hat, pad_id=0)

    def gru(cell, x, h):
        gi, gh = cell.weight_ih @ x + cell.bias_ih, cell.weight_hh @ h + cell.bias_hh
        r_, z = torch.sigmoid(gi[:3] + gh[:3]), torch.sigmoid(gi[3:6] + gh[3:6])
        n = torch.tanh(gi[6:] + r_ * gh[6:])
        return (1 - z) * n + z * h

    a = rec.attn[0]
    mem = v[0, :2]                                         # real states only
    r = torch.tanh(rec.init.weight @ mem.mean(0) + rec.init.bias)
    prev = torch.zeros(2)
    total = 0.0
    for j in range(3):
        r_t = gru(rec.gru1, prev, r)                                                   # eq. 5.1 r̃_j
        score = torch.stack([a.v.weight[0] @ torch.tanh(a.query.weight @ r_t + a.query.bias + a.key.weight @ m)
                             for m in mem])
        c = torch.softmax(score, 0) @ mem                                              # ĉ_j
        r = gru(rec.gru2, c, r_t)                                                      # r_j
        o = torch.tanh(rec.readout.weight @ torch.cat([r, c, prev]) + rec.readout.bias)
        logp = torch.log_softmax(rec.out.weight @ o + rec.out.bias, 0)                 # eq. 5.3
        assert torch.allclose(lp[0, j], logp[x_hat[0, j]], atol=1e-5)
        assert torch.allclose(states[0, j], r, atol=1e-5)
        total += float(logp[x_hat[0, j]].detach())
        prev = emb.weight[x_hat[0, j]]
    assert abs(float(lp.sum().detach()) - total) < 1e-4


@pytest.mark.parametrize("memory, expected", [(2000, 39.7), (1000, 34.1)])
def test_parameter_counts_at_the_thesis_rnn_size(memory, expected):
    """S2 Table 5.4 / docs/models.md §2.9: E 620, H 1000, 30K source vocabulary; enc-rec reads the
    2H = 2000 annotations (+39.7M), dec-rec the H = 1000 decoder states (+34.1M). E_src is shared."""
    with torch.device("meta"):
        rec = Reconstructor((memory,), emb_size=620, hidden=1000, attn=1000, vocab=30000)
    n = sum(p.numel() for p in rec.parameters())
    assert abs(n / 1e6 - expected) < 0.06, n       # PyTorch GRUs carry 3H extra biases per cell [I]


@pytest.mark.parametrize("backbone, mode, attention", [("transformer", "dec", "independent"),
                                                       ("transformer", "shared", "enc2dec"),
                                                       ("transformer", "shared", "dec2enc"),
                                                       ("rnnsearch", "both", "independent"),
                                                       ("rnnsearch", "shared", "independent")])
def test_teacher_forced_score_equals_step_by_step(backbone, mode, attention):
    """``reconstruction_score`` (one teacher-forced pass over every row) = decoder states taken
    step by step with ``decode_step_hidden`` and the reconstructor's ``step`` log-probs summed."""
    m = tiny_model(backbone, mode=mode, attention=attention).eval()
    b = toy_batch()
    with torch.no_grad():
        enc = m.encode(b)
        score = m.reconstruction_score(enc, b.tgt_in, b.rec_tgt)
        state, hs = m.init_state(enc), []
        for t in range(b.tgt_in.size(1)):
            h, state = m.decode_step_hidden(state, b.tgt_in[:, t])
            hs.append(h)
        dec = (torch.stack(hs, 1), b.tgt_in.eq(0))
        rec = m.rec_dec if mode != "shared" else m.rec_shared
        mems = [dec] if mode != "shared" else [(enc.states, enc.src_pad_mask), dec]
        emb = m.backbone.source_embedding
        st = rec.init_state(mems)
        total = torch.zeros(b.src.size(0))
        for j in range(b.rec_tgt.size(1)):
            lp, _, st = rec.step(emb, st, b.rec_tgt[:, j - 1] if j else b.rec_tgt[:, 0])
            gold = b.rec_tgt[:, j]
            total += lp.gather(1, gold[:, None]).squeeze(1) * gold.ne(0)
    assert score.dtype == torch.float32 and score.shape == (3,)
    assert torch.allclose(score, total, atol=1e-4)


def test_score_varies_with_the_candidate_and_enc_rec_does_not_rerank():
    m = tiny_model(mode="both").eval()
    b = toy_batch()
    with torch.no_grad():
        enc = m.encode(b)
        a = m.reconstruction_score(enc, b.tgt_in, b.rec_tgt)
        other = b.tgt_in.clone()
        other[:, 1] = 5
        assert not torch.allclose(a, m.reconstruction_score(enc, other, b.rec_tgt))
    assert m.reconstruction.reranks and not tiny_model(mode="enc").reconstruction.reranks


def test_contract_defaults_and_errors():
    cfg = load_experiment(TINY["transformer"])
    plain = build_model(cfg.model, 24, 24, 0)
    b = toy_batch()
    enc = plain.encode(b)
    with pytest.raises(ValueError, match="has no reconstructor; --rerank reconstructor needs a model trained"):
        plain.reconstruction_score(enc, b.tgt_in, b.rec_tgt)
    with pytest.raises(ValueError, match="predicts no DPs; --dp-out needs a joint DP predictor/labeler"):
        plain.predict_dps(enc, b.tgt_in, b.rec_tgt)
    assert plain.dp_labels == [] and plain.reconstruction.target == ""
    m = tiny_model(mode="both")
    with pytest.raises(ValueError, match="predicts no DPs"):
        m.predict_dps(m.encode(b), b.tgt_in, b.rec_tgt)
    with pytest.raises(ValueError, match="needs target: original"):
        tiny_model(mode="shared", dp_head="labeler", target="dp")
    with pytest.raises(ValueError, match="attention must be one of"):
        tiny_model(mode="shared", attention="sideways")


def test_dp_vocabulary_is_table_4_3():
    from doctrans.dp.pronouns import CHINESE_PRONOUNS
    assert TABLE_4_3 == CHINESE_PRONOUNS
    m = tiny_model(mode="shared", dp_head="labeler", target="original")
    assert m.dp_labels == ["NONE", *CHINESE_PRONOUNS] and m.reconstruction.predicts_dps


def test_dp_labels_on_bpe_and_the_end_of_sentence_slot():
    """回来 进入 正题 + a dropped 它 at the end (the </s> slot), 正题 split by BPE."""
    labels = {"它": 5, "我": 1}
    ids, unknown = dp_label_ids("回来 进入 正@@ 题", "N N N 它", labels, "original")
    assert ids.tolist() == [0, 0, 0, 0, 5] and unknown == 0        # 4 BPE tokens + </s>
    ids, _ = dp_label_ids("回来 进入 正@@ 题 #DP#", "N N N 它", labels, "dpp")
    assert ids.tolist() == [0, 0, 0, 0, 5, 0]
    ids, _ = dp_label_ids("#DP# 庭@@ 审 结束", "我 N N", labels, "original")
    assert ids.tolist() == [0, 1, 0, 0, 0]                          # the placeholder is not a word
    ids, _ = dp_label_ids("#DP# #DP# 走", "我 N", labels, "dpp")   # two before one word: keep the first
    assert ids.tolist() == [1, 0, 0, 0]
    ids, unknown = dp_label_ids("走", "您 N", labels, "original")
    assert ids.tolist() == [0, 0] and unknown == 1
    with pytest.raises(ValueError, match="x.dplabel:3: 2 labels for 2 words"):
        dp_label_ids("走 吧", "N N", labels, "original", "x.dplabel:3")
    with pytest.raises(ValueError, match="cannot be placed on reconstruction target 'dp'"):
        dp_label_ids("走", "N N", labels, "dp")                    # x̂ with DP words carries no label slots


def test_loss_terms_and_a_tiny_model_learns():
    """Separate recs on the Transformer: xent, rec_enc, rec_dec reported apart; 40 Adam updates on
    one batch lower each term (the decoder states come from the cross-entropy's own pass)."""
    m = tiny_model(mode="both").train()
    b = toy_batch()
    opt = torch.optim.Adam(m.parameters(), lr=3e-3)
    first = None
    for _ in range(40):
        out = forward_loss(m, b, 0, 0.0)
        opt.zero_grad()
        (out.total / out.n_tokens).backward()
        opt.step()
        first = first or dict(out.terms)
    assert set(out.terms) == {"nll_nats", "rec_enc", "rec_dec"}
    for k in out.terms:
        assert out.terms[k] < 0.7 * first[k], (k, first[k], out.terms[k])


def test_decoder_states_are_computed_once_in_training(monkeypatch):
    m = tiny_model(mode="dec").train()
    calls = []
    real = m.backbone.decode_hidden
    monkeypatch.setattr(m.backbone, "decode_hidden", lambda *a: calls.append(1) or real(*a))
    forward_loss(m, toy_batch(), 0, 0.0)
    assert len(calls) == 1


def test_joint_labeler_predicts_dps_of_a_hand_set_head():
    """predict_dps: argmax of the head at every real position (labeler), 0 at padding; a predictor
    labels #DP# positions only."""
    m = tiny_model(mode="shared", dp_head="labeler", target="original").eval()
    b = toy_batch()
    with torch.no_grad():
        m.dp_head.out.weight.zero_()
        m.dp_head.out.bias.zero_()
        m.dp_head.out.bias[7] = 1.0
        pred = m.predict_dps(m.encode(b), b.tgt_in, b.rec_tgt)
    assert pred.tolist() == torch.where(b.rec_tgt.ne(0), 7, 0).tolist()
    p = tiny_model(mode="shared", dp_head="predictor", target="dpp").eval()
    p.placeholder_id.fill_(5)
    rec = b.rec_tgt.masked_fill(b.rec_tgt.eq(5), 6)
    rec[1, 2] = 5
    with torch.no_grad():
        p.dp_head.out.weight.zero_()
        p.dp_head.out.bias.zero_()
        p.dp_head.out.bias[3] = 1.0
        pred = p.predict_dps(p.encode(b), b.tgt_in, rec)
    assert pred.nonzero().tolist() == [[1, 2]] and int(pred[1, 2]) == 3


def test_batch_softmax_normalises_over_the_batch_words_in_training_only():
    """softmax: batch — in training log R(x̂_j) is normalised over the distinct x̂ words of the batch
    (Jean et al. 2015); in evaluation (and so in scoring) over the whole vocabulary."""
    torch.manual_seed(0)
    rec = Reconstructor((4,), emb_size=2, hidden=3, attn=3, vocab=9, softmax="batch")
    emb = torch.nn.Embedding(9, 2)
    mem = (torch.randn(2, 3, 4), torch.zeros(2, 3, dtype=torch.bool))
    x_hat = torch.tensor([[5, 7, 2], [7, 2, 0]])
    rec.train()
    lp, _ = rec(emb, [mem], x_hat, 0)
    rec.eval()
    full, _ = rec(emb, [mem], x_hat, 0)
    words = torch.tensor([2, 5, 7])           # the batch softmax over {2, 5, 7} = the full one renormalised
    full_all = []
    st = rec.init_state([mem])
    for j in range(3):
        step_lp, _, st = rec.step(emb, st, x_hat[:, j - 1] if j else x_hat[:, 0])
        full_all.append(step_lp)
    full_all = torch.stack(full_all, 1)                                  # (2, 3, V)
    renorm = full_all.gather(2, x_hat.unsqueeze(2)).squeeze(2) - torch.logsumexp(full_all[..., words], -1)
    keep = x_hat.ne(0)
    assert torch.allclose(lp[keep], renorm[keep], atol=1e-5)
    assert torch.allclose(full[keep], full_all.gather(2, x_hat.unsqueeze(2)).squeeze(2)[keep], atol=1e-5)
    assert (lp[keep] > full[keep]).all()                                 # fewer competitors


def test_full_softmax_in_chunks_equals_one_pass(monkeypatch):
    from doctrans.models import reconstructor
    torch.manual_seed(0)
    rec = Reconstructor((4,), emb_size=2, hidden=3, attn=3, vocab=9).eval()
    emb = torch.nn.Embedding(9, 2)
    mem = (torch.randn(5, 3, 4), torch.zeros(5, 3, dtype=torch.bool))
    x_hat = torch.randint(3, 9, (5, 7))
    x_hat[:, -1] = 2
    x_hat[0, 3:] = torch.tensor([2, 0, 0, 0])
    whole, _ = rec(emb, [mem], x_hat, 0)
    monkeypatch.setattr(reconstructor, "SOFTMAX_CHUNK", 4)
    chunked, _ = rec(emb, [mem], x_hat, 0)
    assert torch.allclose(whole, chunked) and whole[0, 4:].abs().sum() == 0


def test_dp_threshold_inserts_the_best_pronoun_where_none_is_unlikely_enough():
    b = toy_batch()
    preds = {}
    for tau in (0.0, 0.6):
        m = tiny_model(mode="shared", dp_head="labeler", target="original", dp_threshold=tau).eval()
        with torch.no_grad():
            m.dp_head.out.weight.zero_()
            m.dp_head.out.bias.zero_()
            m.dp_head.out.bias[0] = 4.0          # P(NONE) = e⁴ / (e⁴ + e^0.5 + 29) ≈ 0.64
            m.dp_head.out.bias[9] = 0.5
            preds[tau] = m.predict_dps(m.encode(b), b.tgt_in, b.rec_tgt)
    assert preds[0.0].abs().sum() == 0                                    # arg-max: NONE everywhere
    assert preds[0.6].abs().sum() == 0                                    # P(NONE) ≈ 0.64 ≥ 0.6
    m = tiny_model(mode="shared", dp_head="labeler", target="original", dp_threshold=0.7).eval()
    with torch.no_grad():
        m.dp_head.out.weight.zero_()
        m.dp_head.out.bias.zero_()
        m.dp_head.out.bias[0] = 4.0
        m.dp_head.out.bias[9] = 0.5
        pred = m.predict_dps(m.encode(b), b.tgt_in, b.rec_tgt)
    assert pred.tolist() == torch.where(b.rec_tgt.ne(0), 9, 0).tolist()  # P(NONE) < 0.7: the best pronoun


def test_dp_none_weight_scales_only_the_none_positions_of_the_labelling_term():
    """The dp term with ``dp_none_weight`` w equals −(w Σ_NONE log P + Σ_DP log P) / target tokens,
    computed by hand from the head's logits; w = 1 is eq. 6.12's plain sum."""
    b = toy_batch()
    b.dp_tgt[1, 2] = 5                          # two DP labels (pronoun ids), the rest NONE
    b.dp_tgt[2, 0] = 9
    terms = {}
    for w in (1.0, 0.25):
        m = tiny_model(mode="shared", dp_head="labeler", target="original", dp_none_weight=w).eval()
        enc = m.encode(b)
        with torch.no_grad():
            terms[w] = m.auxiliary_losses(enc, b)["dp"]
            runs = m._run(enc, m.backbone.decode_hidden(enc, b.tgt_in), b.tgt_in, b.rec_tgt)
            lp = torch.log_softmax(m._dp_logits(enc, m._labelling_states(runs)).float(), -1)
        lp = lp.gather(2, b.dp_tgt.unsqueeze(2)).squeeze(2)
        real, dp = b.rec_tgt.ne(0), b.dp_tgt.ne(0)
        hand = -(w * lp[real & ~dp].sum() + lp[real & dp].sum()) / b.n_targets
        assert torch.allclose(terms[w], hand, atol=1e-6)
    assert terms[0.25] < terms[1.0]


@pytest.mark.parametrize("option", ["dp_none_weight=0", "dp_none_weight=-1", "dp_weight=-1", "dp_threshold=1.5"])
def test_bad_dp_weights_are_refused(option):
    key, value = option.split("=")
    with pytest.raises(ValueError, match="dp_none_weight"):
        tiny_model(mode="shared", dp_head="labeler", target="original", **{key: value})


def test_predict_dps_threshold_argument_overrides_the_configured_one():
    """predict_dps(…, threshold=τ) decides with τ whatever model.reconstructor.dp_threshold says
    (None keeps the configured one); τ outside [0, 1] is refused."""
    b = toy_batch()
    m = tiny_model(mode="shared", dp_head="labeler", target="original", dp_threshold=0.7).eval()
    with torch.no_grad():
        m.dp_head.out.weight.zero_()
        m.dp_head.out.bias.zero_()
        m.dp_head.out.bias[0] = 4.0                                     # P(NONE) ≈ 0.64
        m.dp_head.out.bias[9] = 0.5
        enc = m.encode(b)
        pronoun = torch.where(b.rec_tgt.ne(0), 9, 0).tolist()
        assert m.predict_dps(enc, b.tgt_in, b.rec_tgt).tolist() == pronoun          # configured τ 0.7
        assert m.predict_dps(enc, b.tgt_in, b.rec_tgt, None).tolist() == pronoun
        assert m.predict_dps(enc, b.tgt_in, b.rec_tgt, 0.0).abs().sum() == 0       # arg-max: NONE
        assert m.predict_dps(enc, b.tgt_in, b.rec_tgt, 0.6).abs().sum() == 0       # 0.64 ≥ 0.6
        assert m.predict_dps(enc, b.tgt_in, b.rec_tgt, 1.0).tolist() == pronoun
        with pytest.raises(ValueError, match=r"\[0, 1\]"):
            m.predict_dps(enc, b.tgt_in, b.rec_tgt, 1.5)


@pytest.mark.parametrize("mode", ["dec", "shared"])
def test_score_from_given_states_and_over_the_top_words(mode):
    """Issue 28's reranking speed: ``reconstruction_score(hidden=…)`` with the step-by-step decoder
    states equals the teacher-forced pass; ``top_words`` K normalises each token's log-probability
    over the ids below K and the token itself — the full distribution of ``Reconstructor.step``
    renormalised over that set —, K ≥ V is the full softmax; states of the wrong shape are refused."""
    m = tiny_model(mode=mode).eval()
    b = toy_batch()
    k = 9
    with torch.no_grad():
        enc = m.encode(b)
        state, hs = m.init_state(enc), []
        for t in range(b.tgt_in.size(1)):
            h, state = m.decode_step_hidden(state, b.tgt_in[:, t])
            hs.append(h)
        hidden = torch.stack(hs, 1)
        full = m.reconstruction_score(enc, b.tgt_in, b.rec_tgt)
        assert torch.allclose(m.reconstruction_score(enc, b.tgt_in, b.rec_tgt, hidden=hidden), full, atol=1e-5)
        assert torch.allclose(m.reconstruction_score(enc, b.tgt_in, b.rec_tgt, top_words=24), full, atol=1e-6)
        top = m.reconstruction_score(enc, b.tgt_in, b.rec_tgt, hidden=hidden, top_words=k)
        dec = (hidden, b.tgt_in.eq(0))
        rec = m.rec_dec if mode != "shared" else m.rec_shared
        mems = [dec] if mode != "shared" else [(enc.states, enc.src_pad_mask), dec]
        st = rec.init_state(mems)
        want = torch.zeros(b.src.size(0))
        for j in range(b.rec_tgt.size(1)):
            lp, _, st = rec.step(m.backbone.source_embedding, st, b.rec_tgt[:, j - 1] if j else b.rec_tgt[:, 0])
            for r in range(b.src.size(0)):
                gold = int(b.rec_tgt[r, j])
                if gold:
                    allowed = sorted(set(range(k)) | {gold})
                    want[r] += lp[r, gold] - torch.logsumexp(lp[r, allowed], 0)
        with pytest.raises(ValueError, match="do not match tgt_in"):
            m.reconstruction_score(enc, b.tgt_in, b.rec_tgt, hidden=hidden[:, :-1])
    assert torch.allclose(top, want, atol=1e-4)
    assert bool((top > full + 1e-3).all())            # a smaller normaliser: every row's log R rises
    assert int(b.rec_tgt.ge(k).sum()) > 0 and int((b.rec_tgt.lt(k) & b.rec_tgt.gt(0)).sum()) > 0   # both cases


def test_packed_recurrence_equals_each_row_alone():
    """The recurrence runs at step j only over the rows whose x̂ is longer than j (longest first):
    rows of different lengths, in no particular order, give each row's own log-probs and states
    — computed alone at its own width — and zeros at padding."""
    torch.manual_seed(2)
    rec = Reconstructor((4,), emb_size=3, hidden=5, attn=4, vocab=9).eval()
    emb = torch.nn.Embedding(9, 3)
    lens, mem_lens = [3, 6, 1, 6, 4], [2, 5, 3, 1, 4]
    target = torch.zeros(5, 6, dtype=torch.long)
    for b, n in enumerate(lens):
        target[b, :n] = torch.randint(3, 9, (n,))
        target[b, n - 1] = 2
    v = torch.randn(5, 5, 4)
    pad = torch.arange(5)[None, :] >= torch.tensor(mem_lens)[:, None]
    extra = torch.randn(5, 5)
    with torch.no_grad():
        lp, states = rec(emb, [(v, pad)], target, 0, r0_extra=extra)
        for b, (n, m) in enumerate(zip(lens, mem_lens)):
            lp_b, st_b = rec(emb, [(v[b:b + 1, :m], pad[b:b + 1, :m])], target[b:b + 1, :n], 0, r0_extra=extra[b:b + 1])
            assert torch.allclose(lp[b, :n], lp_b[0], atol=1e-6)
            assert torch.allclose(states[b, :n], st_b[0], atol=1e-6)
            assert not lp[b, n:].any() and not states[b, n:].any()


@pytest.mark.parametrize("backbone", ["transformer", "rnnsearch"])
def test_training_encodes_a_document_batch_in_length_buckets_with_the_same_states(backbone):
    """§2.12's document batches hold sentences of mixed lengths: with gradients on, the model
    encodes them as the context models do (``models.rows.split_encode``: target rows in length
    buckets at their own widths, context-only rows apart) — the states of every real position
    are the one-call encoding's; a sentence batch (no ``is_target``) and evaluation: one call."""
    m = tiny_model(backbone, mode="shared").train()
    g = torch.Generator().manual_seed(3)
    lens = [2, 12, 3, 12, 1, 5, 2, 9, 4, 11, 3, 7, 6, 2, 10, 8, 5, 3] * 3
    src = torch.zeros(len(lens), 12, dtype=torch.long)
    for b, n in enumerate(lens):
        src[b, :n] = torch.randint(4, 24, (n,), generator=g)
        src[b, n - 1] = 2
    is_target = torch.ones(len(lens), dtype=torch.bool)
    is_target[[0, 9]] = False                                    # two context-only rows
    batch = SimpleNamespace(src=src, is_target=is_target)
    calls = []
    real = m.backbone.encode
    m.backbone.encode = lambda bt, *a: calls.append(tuple(bt.src.shape)) or real(bt, *a)
    enc = m.encode(batch)
    assert len(calls) > 2 and max(w for _, w in calls) == 12 and min(w for _, w in calls) < 5
    ref = real(SearchBatch(src))
    keep = src.ne(0)
    assert torch.equal(enc.src_pad_mask, ref.src_pad_mask)
    assert torch.allclose(enc.states[keep], ref.states[keep], atol=1e-5)
    calls.clear()
    m.encode(SearchBatch(src))
    assert calls == [tuple(src.shape)]                           # a sentence batch: one call
    with torch.no_grad():
        calls.clear()
        m.encode(batch)
        assert calls == [tuple(src.shape)]                       # not in evaluation: one call
