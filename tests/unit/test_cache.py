"""Continuous cache (models/context/cache.py, docs/models.md §2.3): cell rules (one per word, specials
skipped, FIFO of ``size``, overwrite / average), the in-batch cache = one written sentence by
sentence from the backbone's teacher-forced steps, ŝ_t only in the readout, empty cache = the
backbone, incremental decoding with beam reordering and S2's +4.0M."""
from __future__ import annotations

from dataclasses import dataclass

import pytest
import torch

from conftest import REPO, added_parameters, stepwise_equals_teacher_forcing
from conftest import DocBatchStub as Batch
from doctrans.config import load_experiment
from doctrans.models.backbones.rnnsearch import RNNSearch, RNNSearchConfig
from doctrans.models.build import build_model
from doctrans.models.context.cache import CacheConfig, ContinuousCache
from doctrans.models.interface import SearchBatch

V, E, H = 20, 6, 5


@dataclass
class NoTargets:
    src: torch.Tensor
    ctx: torch.Tensor


def batch() -> Batch:
    """Rows 0–2 one document (row 0 context only), row 3 a document of one sentence; N = 2.
    Row 0's target repeats t4; row 2's repeats row 1's t7."""
    src = torch.tensor([[4, 5, 6, 2], [7, 2, 0, 0], [8, 9, 2, 0], [13, 2, 0, 0]])
    tgt_in = torch.tensor([[1, 4, 5, 4, 0], [1, 6, 7, 8, 3], [1, 9, 7, 0, 0], [1, 12, 13, 14, 0]])
    return Batch(src, tgt_in, torch.tensor([[-1, -1], [-1, 0], [0, 1], [-1, -1]]),
                 torch.tensor([False, True, True, True]))


def cache(seed: int = 0, **cfg) -> ContinuousCache:
    torch.manual_seed(seed)
    backbone = RNNSearch(RNNSearchConfig(emb_size=E, rnn_size=H, dropout=0.0), V, V)
    return ContinuousCache(backbone, CacheConfig(**{"context_sents": 2, **cfg})).double().eval()


def test_cells_one_per_word_newest_kept_specials_skipped():
    m = cache(size=3)
    words = torch.tensor([[4, 5, 4, -1, 6, 7], [9, -1, -1, -1, -1, -1]])         # −1: nothing to write
    keys = torch.arange(12.0).view(2, 6, 1).expand(-1, -1, 2 * H).double()
    values = torch.arange(12.0).view(2, 6, 1).expand(-1, -1, H).double()
    k, v, mask = m.cells(keys, values, words)
    # row 0: t4 (step 2 overwrites step 0), t5, t6, t7 → the newest 3 cells: t4@2, t6@4, t7@5
    assert mask.tolist() == [[True, True, True], [True, False, False]]
    assert k[0, :, 0].tolist() == [2.0, 4.0, 5.0] and v[1, 0, 0].item() == 6.0
    k, v, mask = cache(size=10, on_repeat="average").cells(keys, values, words)
    assert mask[0].sum() == 4 and k[0, :4, 0].tolist() == [1.0, 1.0, 4.0, 5.0]    # t5@1, t4 = mean(0, 2), …


def test_in_batch_cache_equals_writing_each_previous_sentence():
    """Row 2's cells = the steps of X_0's and X_1's targets teacher-forced one sentence at a time
    by the backbone (oldest first, one cell per word, ``</s>``/``<unk>``/padding skipped)."""
    m, b = cache(size=25), batch()
    with torch.no_grad():
        enc = m.encode(b)
        steps = []
        for r, n in ((0, 4), (1, 2)):                                             # source lengths
            one = m.backbone.encode(SearchBatch(b.src[r:r + 1, :n]))
            s, c = m.backbone.decode_states(one, b.tgt_in[r:r + 1, :4])
            steps.append((s[0], c[0], b.tgt_in[r, 1:4].tolist()))
    # history: t4(s0) t5(s1) t4(s2) | t6(s0) t7(s1) t8(s2), <unk>(row 1, step 3) skipped
    cells = {}
    for s, c, words in steps:
        for t, w in enumerate(words):
            if w > 3:
                cells.pop(w, None)
                cells[w] = (c[t], s[t])
    n = len(cells)
    assert enc.extra["cache_mask"][2].sum() == n == 5
    assert torch.allclose(enc.extra["cache_keys"][2, :n], torch.stack([k for k, _ in cells.values()]), atol=1e-12)
    assert torch.allclose(enc.extra["cache_values"][2, :n], torch.stack([v for _, v in cells.values()]), atol=1e-12)
    assert not enc.extra["cache_mask"][3].any() and not enc.extra["cache_mask"][0].any()   # new document


def test_cache_enters_the_readout_only():
    """decode_train = readout(ŝ_t) over the backbone's own s_t, c_t: a_t = softmax(c_t · k_i),
    λ_t = σ(W [s; m; c] + b), ŝ_t = (1 − λ_t) s_t + λ_t m_t; an empty cache is the backbone."""
    m, b = cache(), batch()
    bb = m.backbone
    with torch.no_grad():
        enc = m.encode(b)
        s, c = bb.decode_states(enc, b.tgt_in)                                    # the backbone's recurrence
        keys, values, mask = (enc.extra[f"cache_{k}"] for k in ("keys", "values", "mask"))
        scores = torch.einsum("btd,bkd->btk", c, keys).masked_fill(~mask[:, None], float("-inf"))
        mem = torch.softmax(scores, -1).nan_to_num() @ values
        lam = torch.sigmoid(m.gate(torch.cat([s, mem, c], -1)))
        s_hat = torch.where(mask.any(1)[:, None, None], (1 - lam) * s + lam * mem, s)
        emb = bb._prev_embed(b.tgt_in, first=True)
        ref = bb.output_logits(torch.tanh(bb.readout(torch.cat([s_hat, c, emb], -1))))
        out = m.decode_train(enc, b.tgt_in)
        base = bb.decode_train(bb.encode(SearchBatch(b.src)), b.tgt_in)
    assert torch.allclose(out[1:], ref[1:], atol=1e-12)
    assert torch.allclose(out[3], base[3], atol=1e-12)                            # empty cache
    assert not torch.allclose(out[1:3], base[1:3], atol=1e-4)


@pytest.mark.parametrize("cfg", [{}, {"size": 2}, {"on_repeat": "average"}, {"gate_inputs": ("s", "m")}])
def test_incremental_decoding_with_reordering_matches_teacher_forcing(cfg):
    m, b = cache(**cfg), batch()
    assert stepwise_equals_teacher_forcing(m, b, torch.tensor([3, 1, 1, 2]))   # decode_step: float32


def test_previous_targets_change_the_cache_and_the_gate_trains():
    m, b = cache(), batch()
    m.train()
    out = m.decode_train(m.encode(b), b.tgt_in)
    other = batch()
    other.tgt_in[1, 1:3] = torch.tensor([10, 11])                                 # another 1-best of X_1
    with torch.no_grad():
        assert not torch.allclose(out[2], m.decode_train(m.encode(other), other.tgt_in)[2], atol=1e-4)
    out[1:].sum().backward()
    assert m.gate.weight.grad.abs().sum() > 0


def test_bad_configs_and_batches_are_refused():
    backbone = RNNSearch(RNNSearchConfig(emb_size=E, rnn_size=H), V, V)
    for bad in ({"size": 0}, {"gate_inputs": ("s", "x")}, {"gate_inputs": ()}, {"on_repeat": "keep"}):
        with pytest.raises(ValueError):
            ContinuousCache(backbone, CacheConfig(**bad))
    b = batch()
    with pytest.raises(ValueError, match="tgt_in"):                              # ctx rows without targets
        cache().encode(NoTargets(b.src, b.ctx))


def test_gate_adds_s2s_four_million_parameters():
    """S2 Table 3.9: the cache adds 4.0M at H 1000: λ_t from s (1000), m (1000), c (2000). Meta device."""
    exp = load_experiment(REPO / "pipelines" / "context" / "cache_500.yaml")
    base = load_experiment(REPO / "pipelines" / "rnnsearch" / "base.yaml").model
    with torch.device("meta"):
        model = build_model(base, 30000, 30000, 0, exp.context)
    added = added_parameters(model)
    assert added == 4000 * 1000 + 1000
    assert exp.context.size == 500 and exp.train.freeze == ("backbone.*",)


def test_exclude_stopwords_writes_no_cell_for_stop_words_and_punctuation():
    """``exclude_stopwords``: bind_vocab marks whole-word stop words and punctuation (not a BPE
    piece ``it@@`` of a longer word); their steps write no cell, the other words do; the mask is a
    buffer, so a checkpoint carries it."""
    from doctrans.data.vocab import Vocab
    from doctrans.models.interface import bind_vocabularies
    tokens = ["<pad>", "<s>", "</s>", "<unk>", "the", "house", "it@@", ",", "it", "cat"] + [f"w{i}" for i in range(10)]
    vocab = Vocab(tokens)
    m = cache(exclude_stopwords=True)
    bind_vocabularies(m, vocab, vocab)
    assert m.no_write.nonzero().squeeze(1).tolist() == [4, 7, 8]                  # the, ",", it
    assert "no_write" in m.state_dict()
    enc = m.backbone.encode(SearchBatch(torch.tensor([[11, 2]])))
    _, _, words = m.history(enc, torch.tensor([[1, 4, 5, 6, 7, 8, 9]]), torch.tensor([0]))
    assert words.tolist() == [[-1, 5, 6, -1, -1, 9, -1]]          # the / , / it / </s>-step skipped
    assert not hasattr(cache(), "no_write")                        # off by default: no buffer
