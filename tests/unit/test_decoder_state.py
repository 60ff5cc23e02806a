"""Issue 30: a beam step that only reorders each sentence's hypotheses keeps the decoder state's
source side (Transformer: cross-attention keys/values and mask; RNNSearch: attention keys,
annotations, padding bias) instead of copying it; rows that change encoder row (the beam
widening, sentences leaving) still select it; the search's results do not change."""
import dataclasses

import pytest
import torch

from conftest import backbones, tiny_backbone
from doctrans.data.vocab import Vocab
from doctrans.inference.beam_search import beam_search
from doctrans.models.build import build_model
from doctrans.models.interface import SearchBatch
from doctrans.inference.config import SearchOptions

VOCAB = Vocab(["<pad>", "<s>", "</s>", "<unk>"] + [f"t{i}" for i in range(12)])


def _model(backbone):
    torch.manual_seed(1)
    return build_model(tiny_backbone(backbone).model, len(VOCAB), len(VOCAB)).eval()


def _src():
    return torch.tensor([[5, 6, 7, 2], [8, 9, 2, 0], [10, 11, 12, 2]])


def _source_side(backbone, state, per_row=False):
    """The state's source-side tensors; ``per_row``: one row per state row (the Transformer keeps
    them once per group of ``state.group`` rows that read one encoder row)."""
    if backbone == "transformer":
        shared = [t for c in state.layers for t in (c.cross_k, c.cross_v)] + [state.memory_keep]
        return [t.repeat_interleave(state.group, 0) for t in shared] if per_row else shared
    return [state.keys, state.states, state.score_bias]


@pytest.mark.parametrize("backbone", backbones())
def test_reordering_within_sentences_keeps_the_source_side_and_leaving_rows_select_it(backbone):
    m = _model(backbone)
    with torch.no_grad():
        state = m.init_state(m.encode(SearchBatch(_src())))
        wide = state.reorder(torch.arange(3).repeat_interleave(2))          # rows 0 0 1 1 2 2
        same = wide.reorder(torch.tensor([1, 0, 2, 3, 5, 4]))
        fewer = same.reorder(torch.tensor([0, 1, 4, 5]))                   # sentence 1 leaves
    ref = [t for t in _source_side(backbone, state)]
    assert all(a is b for a, b in zip(_source_side(backbone, same), _source_side(backbone, wide)) if a is not None)
    for got, full in zip(_source_side(backbone, fewer, per_row=True), ref):
        if full is not None:
            assert torch.equal(got, full.index_select(0, torch.tensor([0, 0, 2, 2])))
    assert fewer.src_rows.tolist() == [0, 0, 2, 2]


@pytest.mark.parametrize("backbone", backbones())
def test_search_results_equal_the_always_copying_state(backbone):
    m = _model(backbone)
    g = torch.Generator().manual_seed(4)
    src = torch.cat([torch.randint(4, len(VOCAB), (7, 5), generator=g), torch.full((7, 1), 2)], 1)
    src[2, 3:] = torch.tensor([2, 0, 0])
    with torch.no_grad():
        kept = beam_search(m, src, VOCAB, SearchOptions(beam=4, nbest=4))
        real_init = m.init_state
        m.init_state = lambda enc: dataclasses.replace(real_init(enc), src_rows=None)   # copy at every step
        copied = beam_search(m, src, VOCAB, SearchOptions(beam=4, nbest=4))
    # the same search; the Transformer's grouped attention (a sentence's hypotheses as query positions
    # of one memory) may differ from row-by-row attention in the last float bit
    assert kept.tokens == copied.tokens and [[h for _, h in n] for n in kept.nbest] == [[h for _, h in n] for n in copied.nbest]
    assert kept.scores == pytest.approx(copied.scores, abs=1e-5)


def test_transformer_keeps_the_source_side_once_per_sentence():
    """The K hypotheses of a sentence read one copy of its cross-attention keys/values (a group of
    K query positions): the widening makes groups of K, a sentence leaving selects its group only,
    and a selection that breaks the blocks falls back to one group per row."""
    m = _model("transformer")
    with torch.no_grad():
        state = m.init_state(m.encode(SearchBatch(_src())))
        wide = state.reorder(torch.arange(3).repeat_interleave(2))
        fewer = wide.reorder(torch.tensor([0, 1, 4, 5]))
        mixed = fewer.reorder(torch.tensor([0, 2, 3]))
    assert (state.group, wide.group, fewer.group, mixed.group) == (1, 2, 2, 1)
    assert wide.layers[0].cross_k.size(0) == 3 and fewer.layers[0].cross_k.size(0) == 2
    assert torch.equal(fewer.layers[0].cross_k, state.layers[0].cross_k[[0, 2]])
    assert torch.equal(mixed.layers[0].cross_k, state.layers[0].cross_k[[0, 2, 2]])
