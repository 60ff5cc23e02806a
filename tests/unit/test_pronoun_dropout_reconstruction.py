"""Pronoun dropout on a reconstructor's batches (data/context_usage.py, ``ReconstructionDrop``): a
deleted source pronoun is a dropped pronoun, so x̂ and the DP labels become what annotate-dp would
have written for the pro-drop sentence — target dp: x̂ keeps it; dpp: it becomes a labelled #DP#;
original (the end-to-end labeler): x̂ loses it and the next slot carries its label."""
from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
import torch

from doctrans.config import TrainConfig
from doctrans.data.batching import Batch
from doctrans.data.context_usage import ReconstructionDrop, apply_context_usage, reconstruction_targets, usage_generator
from doctrans.data.documents import DocBatch
from doctrans.data.vocab import Vocab
from doctrans.models.reconstruction_spec import ReconstructionSpec
from doctrans.training.train import NMTTask

PH = 9                                            # #DP#
LABELS = np.zeros(20, dtype=np.int64)
LABELS[10], LABELS[11] = 3, 5                     # source id → DP label id (10, 11: the pronouns)
PRONOUNS = torch.tensor([10, 11])


def _t(rows):
    return torch.tensor(rows, dtype=torch.long)


def _mask(rows):
    return torch.tensor(rows, dtype=torch.bool)


def test_original_target_loses_the_pronoun_and_the_next_slot_carries_its_label():
    spec = ReconstructionDrop("original", LABELS)
    src = _t([[4, 10, 6, 11, 12, 2], [4, 10, 2, 0, 0, 0]])
    dp = _t([[0, 0, 7, 0, 0, 0], [0, 0, 0, 0, 0, 0]])         # a real DP (label 7) before token 6
    drop = _mask([[0, 1, 0, 1, 0, 0], [0, 1, 0, 0, 0, 0]])
    rec, lab, kept = reconstruction_targets(src, src.clone(), dp, drop, spec)
    assert rec.tolist() == [[4, 6, 12, 2, 0, 0], [4, 2, 0, 0, 0, 0]]
    # 10 is dropped before the real DP before 6: keep the first; 11's label on 12; the </s> slot
    assert lab.tolist() == [[0, 3, 5, 0, 0, 0], [0, 3, 0, 0, 0, 0]]
    assert torch.equal(kept, drop)


def test_original_target_two_pronouns_in_a_row_keep_the_first_label():
    spec = ReconstructionDrop("original", LABELS)
    src = _t([[11, 10, 6, 2]])
    rec, lab, _ = reconstruction_targets(src, src.clone(), torch.zeros_like(src), _mask([[1, 1, 0, 0]]), spec)
    assert rec.tolist() == [[6, 2, 0, 0]] and lab.tolist() == [[5, 0, 0, 0]]


def test_dpp_target_turns_the_pronoun_into_a_labelled_placeholder():
    spec = ReconstructionDrop("dpp", LABELS, PH)
    src = _t([[4, 10, 6, 2, 0], [10, 6, 2, 0, 0], [4, 10, 2, 0, 0]])
    rec = _t([[4, PH, 10, 6, 2], [10, 6, 2, 0, 0], [4, 8, 10, 2, 0]])    # row 2: x̂ is not the source
    dp = _t([[0, 7, 0, 0, 0], [0, 0, 0, 0, 0], [0, 0, 0, 0, 0]])
    drop = _mask([[0, 1, 0, 0, 0], [1, 0, 0, 0, 0], [0, 1, 0, 0, 0]])
    new, lab, kept = reconstruction_targets(src, rec, dp, drop, spec)
    assert new.tolist() == [[4, PH, PH, 6, 2], [PH, 6, 2, 0, 0], [4, 8, 10, 2, 0]]
    assert lab.tolist() == [[0, 7, 0, 0, 0], [3, 0, 0, 0, 0], [0, 0, 0, 0, 0]]   # second #DP# before 6: 0
    assert kept.tolist() == [[False, True, False, False, False], [True, False, False, False, False],
                             [False] * 5]                                      # row 2 keeps its pronoun
    unlabelled, none, _ = reconstruction_targets(src, rec, None, drop, spec)  # a reconstructor without DP head
    assert torch.equal(unlabelled, new) and none is None


def test_dp_target_keeps_the_pronoun_in_x_hat():
    src = _t([[4, 10, 2]])
    rec = _t([[11, 4, 10, 2]])
    new, lab, kept = reconstruction_targets(src, rec, None, _mask([[0, 1, 0]]), ReconstructionDrop("dp"))
    assert new is rec and lab is None and kept.tolist() == [[False, True, False]]
    with pytest.raises(ValueError, match="unknown reconstruction target"):
        reconstruction_targets(src, rec, None, _mask([[0, 1, 0]]), ReconstructionDrop("x"))
    with pytest.raises(ValueError, match="label ids"):
        reconstruction_targets(src, src, torch.zeros_like(src), _mask([[0, 1, 0]]), ReconstructionDrop("original"))


def _sentences(rows: int = 30, seed: int = 0) -> Batch:
    g = torch.Generator().manual_seed(seed)
    src = torch.zeros(rows, 14, dtype=torch.long)
    for r in range(rows):
        n = int(torch.randint(5, 13, (1,), generator=g))
        src[r, :n] = torch.randint(4, 13, (n,), generator=g)
        src[r, n] = 2
    tgt = torch.randint(4, 20, (rows, 5), generator=g)
    return Batch(src, tgt, tgt, np.arange(rows), 5 * rows, rec_tgt=src.clone(), dp_tgt=torch.zeros_like(src))


def test_labeler_batch_after_pronoun_dropout_labels_every_run_of_deleted_pronouns():
    b = _sentences()
    out = apply_context_usage(b, generator=usage_generator(0, 0, 0), pronoun_dropout=0.5, pronoun_ids=PRONOUNS,
                              reconstruction=ReconstructionDrop("original", LABELS))
    assert torch.equal(out.rec_tgt, out.src)                    # x̂ = the (pro-drop) source
    runs = 0
    for r in range(b.src.size(0)):
        before, after = b.src[r][b.src[r].ne(0)].tolist(), out.src[r][out.src[r].ne(0)].tolist()
        gone, j = [], 0
        for i, tok in enumerate(before):
            if j < len(after) and after[j] == tok:
                j += 1
            else:
                gone.append(i)
        assert all(before[i] in (10, 11) for i in gone)
        runs += sum(1 for k, i in enumerate(gone) if not k or gone[k - 1] != i - 1)
    assert runs > 10
    assert int(out.dp_tgt.ne(0).sum()) == runs                  # one label per run of deleted pronouns
    assert b.rec_tgt is not out.rec_tgt and torch.equal(b.rec_tgt, b.src)   # the input batch is untouched


def _doc_batch(rows: int = 30) -> DocBatch:
    b = _sentences(rows)
    is_target = torch.ones(rows, dtype=torch.bool)
    is_target[0] = False
    return DocBatch(b.src, b.tgt_in, b.tgt_out, np.arange(rows), 5 * (rows - 1), is_target,
                    (torch.arange(rows) - 1)[:, None], rec_tgt=b.rec_tgt, dp_tgt=b.dp_tgt)


@pytest.mark.parametrize("options", [{"coword_dropout": 0.3}, {"context_dropout": 0.5},
                                     {"pronoun_dropout": 0.5, "coword_dropout": 0.2}])
def test_copied_rows_carry_their_reconstruction_targets(options):
    """The copy rule appends rows: x̂ and the labels must follow (a reconstructor with cross-sentence
    context, rec_joint_context, reads them by row)."""
    b = _doc_batch()
    out = apply_context_usage(b, generator=usage_generator(3, 0, 0), pronoun_ids=PRONOUNS,
                              reconstruction=ReconstructionDrop("original", LABELS), **options)
    assert (out.src.size(0) > b.src.size(0)) == ("context_dropout" not in options)   # CoWord/PD copy rows
    assert out.rec_tgt.size(0) == out.dp_tgt.size(0) == out.src.size(0)
    for r in range(b.src.size(0), out.src.size(0)):             # a copy: its original's x̂ (pronouns dropped)
        orig = int(out.index[r])
        if options.get("pronoun_dropout"):                      # x̂ = the copy's source but for CoWord's <unk>s
            x, xr = out.src[r], out.rec_tgt[r]
            assert torch.equal(x.ne(0), xr.ne(0)) and torch.equal(x[x.ne(3)], xr[x.ne(3)])
            assert xr.ne(0).sum() <= b.rec_tgt[orig].ne(0).sum()
        else:
            assert torch.equal(out.rec_tgt[r], b.rec_tgt[orig]) and torch.equal(out.dp_tgt[r], b.dp_tgt[orig])
    for r in torch.nonzero(~out.is_target[:b.src.size(0)]).squeeze(1).tolist():   # context-only rows keep theirs
        assert torch.equal(out.rec_tgt[r], b.rec_tgt[r]) and torch.equal(out.src[r], b.src[r])


def test_task_maps_the_dropped_words_to_the_model_dp_labels():
    vocab = Vocab(["<pad>", "<s>", "</s>", "<unk>", "好", "他", "我", "#DP#"])
    t = TrainConfig(pronoun_dropout=0.3)
    labeler = SimpleNamespace(reconstruction=ReconstructionSpec("original", "original", True, 1.0, True),
                              dp_labels=["NONE", "我", "你", "他"])
    spec = NMTTask._reconstruction_drop(t, labeler, vocab)
    assert spec.target == "original" and spec.placeholder_id == 7
    assert spec.labels.tolist() == [0, 0, 0, 0, 0, 3, 1, 0]
    enc_rec = SimpleNamespace(reconstruction=ReconstructionSpec("original", "dp", False, 1.0, False), dp_labels=[])
    assert NMTTask._reconstruction_drop(t, enc_rec, vocab).labels is None
    plain = SimpleNamespace(reconstruction=ReconstructionSpec(), dp_labels=[])
    assert NMTTask._reconstruction_drop(t, plain, vocab) is None
    assert NMTTask._reconstruction_drop(TrainConfig(), labeler, vocab) is None
    with pytest.raises(ValueError, match="not DP labels"):
        NMTTask._reconstruction_drop(t, SimpleNamespace(reconstruction=labeler.reconstruction,
                                                        dp_labels=["NONE", "我"]), vocab)


# --- a synthetic task: DPs the training data never drops --------------------------------------------
# Every training source states its pronoun (他 吃 饭 / 她 喝 茶 …, the English "he eat rice"), so the
# corpus has no DP label at all; the test sources drop it (吃 饭). Only pronoun dropout makes the
# deleted 他/她 a labelled DP, so only the labeler trained with it predicts the test DPs — the slot
# from the sentence, the pronoun from the decoder states of the English ("he" / "she").
SYN_WORDS = ["他", "她", "吃", "喝", "饭", "茶", "he", "she", "eat", "drink", "rice", "tea"]
SYN_VOCAB = Vocab(["<pad>", "<s>", "</s>", "<unk>"] + SYN_WORDS)
SYN_EN = {"他": "he", "她": "she", "吃": "eat", "喝": "drink", "饭": "rice", "茶": "tea"}


def _syn_batch(n: int, rng: np.random.Generator, labels: list[str], dropped: bool) -> Batch:
    """n sentences 他|她 吃|喝 饭|茶 (the pronoun deleted when ``dropped``, then labelled at the verb)."""
    index = {s: k for k, s in enumerate(labels)}
    src, tgt, dp = [], [], []
    for _ in range(n):
        words = [str(rng.choice(["他", "她"])), str(rng.choice(["吃", "喝"])), str(rng.choice(["饭", "茶"]))]
        en = [SYN_EN[w] for w in words]
        lab = [0, 0, 0, 0]
        if dropped:
            lab = [index.get(words[0], 0), 0, 0]
            words = words[1:]
        src.append([SYN_VOCAB.index[w] for w in words] + [2])
        tgt.append([SYN_VOCAB.index[w] for w in en] + [2])
        dp.append(lab)
    s, d, t = _t(src), _t(dp), _t(tgt)
    tgt_in = torch.cat([torch.ones(n, 1, dtype=torch.long), t[:, :-1]], 1)
    return Batch(s, tgt_in, t, np.arange(n), int(t.ne(0).sum()), rec_tgt=s.clone(), dp_tgt=d)


def _train_labeler(pronoun_dropout: float, steps: int = 80):
    from doctrans.config import load_experiment
    from doctrans.models.build import build_model
    from doctrans.training.loss import forward_loss
    from conftest import REPO
    torch.manual_seed(0)
    opts = ["model.dropout=0.0", "model.reconstructor.mode=shared", "model.reconstructor.target=original",
            "model.reconstructor.dp_head=labeler"]
    m = build_model(load_experiment(REPO / "pipelines" / "transformer" / "tiny.yaml", opts).model,
                    len(SYN_VOCAB), len(SYN_VOCAB), 0)
    spec = NMTTask._reconstruction_drop(TrainConfig(pronoun_dropout=pronoun_dropout or 0.5), m, SYN_VOCAB)
    pronouns = torch.tensor([SYN_VOCAB.index["他"], SYN_VOCAB.index["她"]])
    rng = np.random.default_rng(0)
    opt = torch.optim.Adam(m.parameters(), lr=5e-3)
    m.train()
    for step in range(steps):
        b = _syn_batch(32, rng, m.dp_labels, dropped=False)
        assert not bool(b.dp_tgt.any())                           # the corpus has no DP
        b = apply_context_usage(b, generator=usage_generator(0, 0, step), pronoun_dropout=pronoun_dropout,
                                pronoun_ids=pronouns, reconstruction=spec)
        out = forward_loss(m, b, 0, 0.0)
        opt.zero_grad()
        (out.total / out.n_tokens).backward()
        opt.step()
    m.eval()
    b = _syn_batch(200, np.random.default_rng(1), m.dp_labels, dropped=True)
    with torch.no_grad():
        pred = m.predict_dps(m.encode(b), b.tgt_in, b.rec_tgt)
    gold = b.dp_tgt
    return float((pred == gold).all(1).float().mean()), int(pred.ne(0).sum())


def test_only_the_labeler_trained_with_pronoun_dropout_labels_dps_the_corpus_never_drops():
    right_pd, n_pd = _train_labeler(0.5)
    right_plain, n_plain = _train_labeler(0.0)
    assert right_pd > 0.9, (right_pd, n_pd)          # slot and pronoun right in > 90% of the sentences
    assert n_plain == 0 and right_plain == 0.0, (right_plain, n_plain)   # never saw a DP: predicts none
