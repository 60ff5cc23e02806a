"""Beam search against hand-checkable references: greedy argmax, order, length limits.

The search tests run on every backbone of BACKBONES (random weights, pipelines/<name>/tiny.yaml)."""
from __future__ import annotations

import pytest
import torch
from torch import nn

from conftest import backbones, tiny_backbone
from doctrans.data.vocab import Vocab
from doctrans.inference.beam_search import beam_search
from doctrans.models.build import build_model
from doctrans.models.interface import SearchBatch
from doctrans.training.early_stopping import EarlyStopping
from doctrans.training.state import TrainState

VOCAB = Vocab(["<pad>", "<s>", "</s>", "<unk>"] + [f"t{i}" for i in range(12)])

each_backbone = pytest.mark.parametrize("backbone", backbones())


def model(backbone: str, seed: int = 0) -> nn.Module:
    torch.manual_seed(seed)
    cfg = tiny_backbone(backbone).model
    return build_model(cfg, len(VOCAB), len(VOCAB)).eval()


def greedy_reference(m: nn.Module, src: torch.Tensor, max_len: int) -> list[int]:
    """Re-run the whole prefix every step (no cache): the slow, obviously-correct greedy decoder."""
    return _mixture_reference(m, [src], [1.0], max_len)


@each_backbone
def test_beam_1_equals_uncached_greedy(backbone):
    m = model(backbone)
    srcs = [torch.tensor([[5, 6, 7, 2]]), torch.tensor([[8, 2]]), torch.tensor([[9, 10, 11, 12, 13, 2]])]
    for src in srcs:
        max_len = int(src.size(1) * 1.5) + 10
        res = beam_search(m, src, VOCAB, beam=1, max_len_ratio=1.5, max_len_extra=10)
        assert res.tokens[0] == greedy_reference(m, src, max_len)


@each_backbone
def test_batched_beam_equals_one_by_one_and_respects_max_length(backbone):
    m = model(backbone, 1)
    batch = torch.tensor([[5, 6, 7, 2, 0, 0], [8, 2, 0, 0, 0, 0], [9, 10, 11, 12, 13, 2]])
    together = beam_search(m, batch, VOCAB, beam=4, max_len_ratio=1.0, max_len_extra=2)
    for r in range(3):
        row = batch[r:r + 1, : int(batch[r].ne(0).sum())]
        alone = beam_search(m, row, VOCAB, beam=4, max_len_ratio=1.0, max_len_extra=2)
        assert together.tokens[r] == alone.tokens[0]
        assert abs(together.scores[r] - alone.scores[0]) < 1e-4
        assert len(together.tokens[r]) + 1 <= int(row.size(1)) + 2 + 1   # +1: </s> itself


@each_backbone
def test_wider_beam_never_finds_a_worse_best_score(backbone):
    m = model(backbone, 2)
    src = torch.tensor([[5, 6, 7, 8, 2]])
    s1 = beam_search(m, src, VOCAB, beam=1, lenpen=0.0).scores[0]
    s5 = beam_search(m, src, VOCAB, beam=5, lenpen=0.0).scores[0]
    assert s5 >= s1 - 1e-6


def test_early_stopping_patience_and_modes():
    st = TrainState()
    es = EarlyStopping("bleu", "max", patience=2)
    assert es.update(st, 10.0) and st.best_metric == 10.0
    assert not es.update(st, 9.0) and not es.should_stop(st)
    assert es.update(st, 11.0) and st.bad_evals == 0
    es.update(st, 5.0)
    es.update(st, 5.0)
    assert es.should_stop(st)
    lo = EarlyStopping("xent_nats", "min", patience=0)
    st2 = TrainState()
    assert lo.update(st2, 3.0) and lo.update(st2, 2.0) and not lo.update(st2, 2.5)
    assert not lo.should_stop(st2)                      # patience 0 = never stop


def _mixture_reference(m: nn.Module, variants: list[torch.Tensor], weights: list[float], max_len: int) -> list[int]:
    """Greedy over log Σ_r w_r p(y | x_r), re-running every prefix (no cache)."""
    encs = [m.encode(SearchBatch(v)) for v in variants]
    ys = [VOCAB.bos_id]
    for _ in range(max_len):
        p = sum(w * torch.softmax(m.decode_train(enc, torch.tensor([ys]))[0, -1], -1)
                for w, enc in zip(weights, encs))
        lp = p.log()
        lp[VOCAB.pad_id] = lp[VOCAB.bos_id] = -float("inf")
        nxt = int(lp.argmax())
        if nxt == VOCAB.eos_id:
            break
        ys.append(nxt)
    return ys[1:]


@each_backbone
def test_mixture_of_identical_variants_equals_plain_search(backbone):
    m = model(backbone, 3)
    batch = torch.tensor([[5, 6, 7, 2, 0], [8, 9, 10, 11, 2]])
    plain = beam_search(m, batch, VOCAB, beam=4)
    for n in (2, 3, 6):
        mixed = beam_search(m, batch.repeat_interleave(n, 0), VOCAB, beam=4, variants=n)
        assert mixed.tokens == plain.tokens
        assert all(abs(a - b) < 1e-5 for a, b in zip(mixed.scores, plain.scores))
    # weight 0 drops a variant: [1, 0] over (x, y) decodes x alone
    other = torch.tensor([[12, 13, 14, 2, 0], [5, 2, 0, 0, 0]])
    pair = torch.stack([batch, other], 1).reshape(4, 5)
    only_first = beam_search(m, pair, VOCAB, beam=4, variants=2, weights=torch.tensor([[1.0, 0.0]] * 2))
    assert only_first.tokens == plain.tokens


@each_backbone
def test_mixture_greedy_matches_uncached_reference(backbone):
    m = model(backbone, 4)
    x1, x2 = torch.tensor([[5, 6, 7, 2]]), torch.tensor([[5, 9, 6, 7, 2]])
    src = torch.cat([torch.nn.functional.pad(x1, (0, 1)), x2])
    res = beam_search(m, src, VOCAB, beam=1, variants=2, weights=torch.tensor([[0.3, 0.7]]),
                      max_len_ratio=1.5, max_len_extra=10)
    assert res.tokens[0] == _mixture_reference(m, [x1, x2], [0.3, 0.7], 8 + 10)   # ceil(1.5 × 5) + 10, longest variant


@each_backbone
def test_decode_corpus_drops_zero_weight_variants_without_changing_results(backbone):
    import numpy as np
    from doctrans.inference.translate import decode_corpus

    m = model(backbone, 5)
    a, b, c = (np.array(x) for x in ([5, 6, 7, 2], [5, 9, 6, 7, 2], [8, 2]))
    src = [[a, b, a], [c, c, c], [b, a, c]]
    weights = [[0.5, 0.5, 0.0], [1.0, 0.0, 0.0], [0.2, 0.3, 0.5]]
    got = decode_corpus(m, src, VOCAB, 3, 1.0, 1.5, 10, batch_sentences=4, weights=weights)
    for item, w, hyp in zip(src, weights, got):
        keep = [x for x, wi in zip(item, w) if wi > 0]
        width = max(len(x) for x in keep)
        batch = torch.stack([torch.nn.functional.pad(torch.from_numpy(x), (0, width - len(x))) for x in keep])
        ref = beam_search(m, batch, VOCAB, beam=3, variants=len(keep),
                          weights=torch.tensor([[wi for wi in w if wi > 0]]))
        assert hyp == VOCAB.decode(ref.tokens[0])


@each_backbone
def test_nbest_lists_start_with_the_1best_and_leave_it_unchanged(backbone):
    m = model(backbone, 2)
    batch = torch.tensor([[5, 6, 7, 2, 0, 0], [8, 2, 0, 0, 0, 0], [9, 10, 11, 12, 13, 2]])
    plain = beam_search(m, batch, VOCAB, beam=4, lenpen=1.0)
    res = beam_search(m, batch, VOCAB, beam=4, lenpen=1.0, nbest=3)
    assert plain.nbest is None and res.tokens == plain.tokens and res.scores == plain.scores
    for r in range(3):
        lst = res.nbest[r]
        assert 1 <= len(lst) <= 3 and lst[0] == (res.scores[r], res.tokens[r])
        assert [s for s, _ in lst] == sorted((s for s, _ in lst), reverse=True)
        assert len({tuple(t) for _, t in lst}) == len(lst)              # distinct hypotheses
    with pytest.raises(ValueError, match="nbest=5 exceeds the beam size 4"):
        beam_search(m, batch, VOCAB, beam=4, nbest=5)
