"""Joint DP labelling (models/reconstructor.py, docs/models.md §2.10) on a synthetic task that
only a model carrying DP information across sentences solves: each document is a cue sentence
("老王 来" / "小丽 来": a man or a woman) and a sentence with a dropped pronoun whose identity (他 / 她)
only the cue fixes and whose position the verb fixes — before the verb (subject) or at the end
(object: the ``</s>`` slot). The English side never contains the pronoun, so the decoder states
carry no hint. The labeler with cross-sentence context learns identity and position; the same
labeler without context gets the position but the identity only at chance; the baseline predicts
no DPs at all; the training data path reads real ``.dplabel`` files."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from doctrans.config import load_experiment
from doctrans.data.batching import ParallelData
from doctrans.data.documents import DocBatch
from doctrans.data.vocab import Vocab
from doctrans.models.build import build_model
from doctrans.training.loss import forward_loss
from doctrans.training.train import attach_reconstruction

from conftest import REPO

WORDS = ["老王", "小丽", "来", "吃", "喝", "看见", "打", "饭", "茶", "eat", "drink", "see", "hit", "rice", "tea",
         "comes", "#DP#"]
VOCAB = Vocab(["<pad>", "<s>", "</s>", "<unk>"] + WORDS)
SUBJECT_VERBS, OBJECT_VERBS = ["吃", "喝"], ["看见", "打"]
EN = {"吃": "eat", "喝": "drink", "看见": "see", "打": "hit", "饭": "rice", "茶": "tea"}


def ids(words: list[str]) -> list[int]:
    return [VOCAB.index[w] for w in words] + [VOCAB.eos_id]


def documents(n: int, rng: np.random.Generator):
    """n documents: (cue source, target source, English, labels of the target source + </s>)."""
    out = []
    for _ in range(n):
        male = bool(rng.integers(2))
        verb = str(rng.choice(SUBJECT_VERBS + OBJECT_VERBS))
        pron = "他" if male else "她"
        if verb in SUBJECT_VERBS:
            obj = str(rng.choice(["饭", "茶"]))
            src, labels = [verb, obj], [pron, "N", "N"]
            en = [EN[verb], EN[obj]]
        else:
            src, labels = [verb], ["N", pron]
            en = [EN[verb]]
        out.append(([("老王" if male else "小丽"), "来"], src, en, labels))
    return out


def doc_batch(docs, labels: list[str], n_ctx: int) -> DocBatch:
    """Rows 2k (cue, context only) and 2k + 1 (target, ctx → row 2k)."""
    index = {s: k for k, s in enumerate(labels)}
    src, tgt, rec, dp, ctx = [], [], [], [], []
    for k, (cue, x, en, lab) in enumerate(docs):
        for row, (s, is_t) in enumerate(((cue, False), (x, True))):
            src.append(ids(s))
            tgt.append(ids(en if is_t else ["comes"]))
            rec.append(ids(s))
            dp.append([index.get(w, 0) for w in lab] if is_t else [0] * (len(s) + 1))
            ctx.append([-1] * (n_ctx - 1) + [2 * k] if is_t and n_ctx else [-1] * n_ctx)

    def pad(seqs, prefix=None):
        width = max(len(x) for x in seqs) + (prefix is not None)
        out = torch.zeros(len(seqs), width, dtype=torch.long)
        for r, x in enumerate(seqs):
            row = ([prefix] if prefix is not None else []) + list(x)
            out[r, :len(row)] = torch.tensor(row)
        return out

    tgt_out = pad(tgt)
    tgt_in = pad([t[:-1] for t in tgt], prefix=VOCAB.bos_id)
    is_target = torch.tensor([r % 2 == 1 for r in range(len(src))])
    return DocBatch(pad(src), tgt_in, tgt_out, np.arange(len(src)), int(tgt_out[is_target].ne(0).sum()), is_target,
                    torch.tensor(ctx, dtype=torch.long).view(len(src), n_ctx), None, pad(rec), pad(dp))


def labeler(context_sents: int, seed: int = 0):
    torch.manual_seed(seed)
    opts = ["model.dropout=0.0", "model.reconstructor.mode=shared", "model.reconstructor.target=original",
            "model.reconstructor.dp_head=labeler", f"model.reconstructor.context_sents={context_sents}"]
    cfg = load_experiment(REPO / "pipelines" / "transformer" / "tiny.yaml", opts)
    return build_model(cfg.model, len(VOCAB), len(VOCAB), 0)


def train_and_score(context_sents: int, steps: int = 120) -> tuple[float, float, float]:
    """(DP position accuracy, identity accuracy at the gold DP, false DPs per sentence) on fresh documents."""
    m = labeler(context_sents)
    rng = np.random.default_rng(0)
    opt = torch.optim.Adam(m.parameters(), lr=5e-3)
    m.train()
    for _ in range(steps):
        b = doc_batch(documents(32, rng), m.dp_labels, max(context_sents, 1))
        out = forward_loss(m, b, 0, 0.0)
        opt.zero_grad()
        (out.total / out.n_tokens).backward()
        opt.step()
    m.eval()
    b = doc_batch(documents(200, np.random.default_rng(1)), m.dp_labels, max(context_sents, 1))
    rows = b.is_target.nonzero().squeeze(1)
    with torch.no_grad():
        enc = m.encode(b).select(rows)
        pred = m.predict_dps(enc, b.tgt_in[rows], b.rec_tgt[rows])
    gold = b.dp_tgt[rows]
    at = gold.ne(0)
    position = float((pred.ne(0) == at).all(1).float().mean())
    identity = float((pred[at] == gold[at]).float().mean())
    false = float((pred.ne(0) & ~at).sum()) / len(rows)
    return position, identity, false


def test_only_the_model_with_cross_sentence_dp_context_solves_the_task():
    pos_c, ident_c, false_c = train_and_score(context_sents=1)
    pos_s, ident_s, _ = train_and_score(context_sents=0)
    assert pos_c > 0.95 and ident_c > 0.95 and false_c < 0.05, (pos_c, ident_c, false_c)
    assert pos_s > 0.9, pos_s                      # the position is in the sentence (incl. the </s> slot) …
    assert 0.3 < ident_s < 0.7, ident_s            # … the pronoun only in the previous one: chance
    cfg = load_experiment(REPO / "pipelines" / "transformer" / "tiny.yaml")
    baseline = build_model(cfg.model, len(VOCAB), len(VOCAB), 0)
    b = doc_batch(documents(2, np.random.default_rng(2)), [], 1)
    with pytest.raises(ValueError, match="predicts no DPs"):
        baseline.predict_dps(baseline.encode(b), b.tgt_in, b.rec_tgt)


def test_context_is_the_previous_sentences_mean_through_a_gru_and_zero_without_history():
    m = labeler(context_sents=2).eval()
    b = doc_batch(documents(3, np.random.default_rng(3)), m.dp_labels, 2)
    with torch.no_grad():
        enc = m.encode(b)
        c = enc.extra["dp_context"]
        assert c.shape == (6, m.ctx_gru.hidden_size)
        assert c[0::2].abs().max() == 0                                    # cue rows: no history → C = 0
        states = m.backbone.encode(b)
        mean = states.states[0, :3].mean(0)                                # row 0: 老王/小丽 来 </s>
        expect = m.ctx_gru(mean[None], torch.zeros(1, m.ctx_gru.hidden_size))
        assert torch.allclose(c[1], expect[0], atol=1e-5)                  # one previous sentence, −1 skipped
        assert m.document.context_sents == 2 and m.document.reads_documents


def test_fuse_into_decoder_changes_the_reconstructor_memory_not_the_translation():
    torch.manual_seed(0)
    cfg = load_experiment(REPO / "pipelines" / "transformer" / "tiny.yaml",
                          ["model.dropout=0.0", "model.reconstructor.mode=shared", "model.reconstructor.target=original",
                           "model.reconstructor.dp_head=labeler", "model.reconstructor.context_sents=1",
                           "model.reconstructor.fuse_into=decoder"])
    m = build_model(cfg.model, len(VOCAB), len(VOCAB), 0).eval()
    assert m.dp_head.context is None and m.ctx_dec is not None
    b = doc_batch(documents(2, np.random.default_rng(4)), m.dp_labels, 1)
    with torch.no_grad():
        enc = m.encode(b)
        s1 = m.reconstruction_score(enc, b.tgt_in, b.rec_tgt)
        enc.extra["dp_context"] = torch.zeros_like(enc.extra["dp_context"])
        s0 = m.reconstruction_score(enc, b.tgt_in, b.rec_tgt)
        logits = m.decode_train(enc, b.tgt_in)
        assert torch.equal(logits, m.backbone.decode_train(m.backbone.encode(b), b.tgt_in))
    assert not torch.allclose(s0[1::2], s1[1::2]) and torch.allclose(s0[0::2], s1[0::2])


def test_training_data_path_reads_targets_and_labels(tmp_path: Path):
    """attach_reconstruction: x̂ and DP labels from PREPARED/dp, aligned through the kept lines;
    encoder_input annotated makes the source x̂; a misaligned .dplabel is an error naming file and line."""
    prep = tmp_path / "prep"
    (prep / "dp").mkdir(parents=True)
    (prep / "train.bpe.zh").write_text("吃 饭\n看@@ 见\n喝 茶\n", encoding="utf-8")
    (prep / "dp" / "train.dp.bpe.zh").write_text("他 吃 饭\n看@@ 见 她\n喝 茶\n", encoding="utf-8")
    (prep / "dp" / "train.dpp.bpe.zh").write_text("#DP# 吃 饭\n看@@ 见 #DP#\n喝 茶\n", encoding="utf-8")
    (prep / "dp" / "train.dplabel").write_text("他 N N\nN 她\nN N N\n", encoding="utf-8")
    vocab = Vocab(VOCAB.tokens + ["看@@", "见", "他", "她"])

    def model_and_data(*opts):
        cfg = load_experiment(REPO / "pipelines" / "transformer" / "tiny.yaml",
                              [f"data.prepared={prep}", "model.reconstructor.mode=shared", *opts])
        m = build_model(cfg.model, len(vocab), len(vocab), 0)
        m.bind_vocab(vocab, vocab)
        data = ParallelData([vocab.encode(s) for s in ("吃 饭", "喝 茶")], [np.array([2])] * 2, np.array([0, 2]))
        return cfg, m, data

    cfg, m, data = model_and_data("model.reconstructor.target=original", "model.reconstructor.dp_head=labeler")
    attach_reconstruction(cfg, m, "train", data, vocab)
    he = m.dp_labels.index("他")
    assert [x.tolist() for x in data.dp] == [[he, 0, 0], [0, 0, 0]]
    assert [vocab.decode(x) for x in data.rec] == ["吃 饭", "喝 茶"]
    cfg, m, data = model_and_data("model.reconstructor.target=dpp", "model.reconstructor.dp_head=predictor")
    attach_reconstruction(cfg, m, "train", data, vocab)
    assert int(m.placeholder_id) == vocab.index["#DP#"] and data.dp[0].tolist() == [he, 0, 0, 0]
    cfg, m, data = model_and_data("model.reconstructor.target=dp", "model.reconstructor.encoder_input=annotated")
    attach_reconstruction(cfg, m, "train", data, vocab)
    assert [vocab.decode(x) for x in data.src] == ["他 吃 饭", "喝 茶"] and data.dp is None
    (prep / "dp" / "train.dplabel").write_text("他 N N\nN 她\nN N\n", encoding="utf-8")
    cfg, m, data = model_and_data("model.reconstructor.target=original", "model.reconstructor.dp_head=labeler")
    with pytest.raises(ValueError, match=r"train.dplabel:3: 2 labels for 2 words"):
        attach_reconstruction(cfg, m, "train", data, vocab)


def test_document_batch_reuses_the_bucketed_decoder_states(monkeypatch):
    """The loss decodes a document batch's target rows in length buckets; the reconstructor reads
    those states (no second decoder pass) and gets the same terms as from one padded pass."""
    m = labeler(context_sents=1).train()
    docs = documents(40, np.random.default_rng(5))
    b = doc_batch(docs, m.dp_labels, 1)
    calls = []
    real = m.backbone.decode_hidden
    monkeypatch.setattr(m.backbone, "decode_hidden", lambda *a: calls.append(a[1].shape) or real(*a))
    out = forward_loss(m, b, 0, 0.0)
    assert len(calls) >= 2                                   # several buckets (subject / object verbs differ in length)
    assert all(shape[0] < len(docs) for shape in calls)     # only the buckets: no pass over all 40 target rows
    n_bucket_calls = len(calls)
    enc = m.encode(b)
    fresh = m.auxiliary_losses(enc, b)                       # nothing kept: one padded pass over the target rows
    assert len(calls) == n_bucket_calls + 1
    for k, v in fresh.items():
        assert abs(float(v.detach()) * out.n_tokens - out.terms[k]) < 1e-3 * max(1.0, abs(out.terms[k])), k
