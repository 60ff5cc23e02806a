"""``--quantize int8`` (``inference.translate.quantize_int8``) on every model: the backbones and
every row of CONTEXT_MODELS (their pipelines/context YAMLs, tiny) still search after their
``quantizable_linears`` are replaced, and only those are replaced."""
from __future__ import annotations

import pytest
import torch

from doctrans.inference.beam_search import beam_search
from doctrans.inference.translate import quantize_int8
from doctrans.inference.config import SearchOptions
from unit.test_context_models import N, VARIANTS, VOCAB, doc_batch, model


def _quantized(m) -> set[str]:
    return {n for n, x in m.named_modules()
            if type(x).__module__.startswith("torch.ao.nn.quantized") and type(x).__name__ == "Linear"}


@pytest.mark.parametrize("name", sorted(VARIANTS))
def test_every_context_model_searches_quantized(name):
    m = model(name)
    chosen = {id(x) for x in m.quantizable_linears()}
    want = {n for n, x in m.named_modules() if id(x) in chosen}
    q = quantize_int8(m)
    assert _quantized(q) == want and want                       # exactly the contract's layers, some
    b = doc_batch(N[name])
    with torch.no_grad():
        res = beam_search(q, b, VOCAB, SearchOptions(beam=2, max_len_extra=3))
    assert len(res.tokens) == 3 and all(len(t) <= 3 + 4 * 2 for t in res.tokens)
