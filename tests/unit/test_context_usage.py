"""Context-usage training (data/context_usage.py): CoWord dropout masks only current-sentence
source tokens at rate p, never context rows, padding or </s>; context dropout gives a row
exactly the model's empty-context output (every context model of pipelines/context)."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from doctrans.data.batching import Batch
from doctrans.data.context_usage import UNK_ID, apply_context_usage, usage_generator
from doctrans.data.documents import DocBatch

from test_context_models import N, VARIANTS, doc_batch, model


def _doc_batch(rows: int = 30, seed: int = 0) -> DocBatch:
    """One document of ``rows`` sentences of 10–40 tokens (ids 4…49, then </s>, then padding),
    row 0 context-only, every row's context its predecessor (ctx (B, 1))."""
    g = torch.Generator().manual_seed(seed)
    lens = torch.randint(10, 41, (rows,), generator=g)
    src = torch.zeros(rows, 42, dtype=torch.long)
    for r, n in enumerate(lens.tolist()):
        src[r, :n] = torch.randint(4, 50, (n,), generator=g)
        src[r, n] = 2
    tgt = torch.randint(4, 50, (rows, 6), generator=g)
    tgt_in = torch.cat([torch.ones(rows, 1, dtype=torch.long), tgt[:, :5]], 1)
    tgt_out = torch.cat([tgt[:, :5], torch.full((rows, 1), 2)], 1)
    ctx = (torch.arange(rows) - 1)[:, None]
    is_target = torch.ones(rows, dtype=torch.bool)
    is_target[0] = False
    return DocBatch(src, tgt_in, tgt_out, np.arange(rows), 6 * (rows - 1), is_target, ctx)


def test_coword_dropout_masks_current_sentences_at_rate_p_never_context_or_padding():
    b = _doc_batch()
    p = 0.25
    out = apply_context_usage(b, coword_dropout=p, generator=usage_generator(1, 0, 0))
    n = b.src.size(0)
    # every target row is read by the next row except the last one: copied (rows 1…28), the last masked in place
    copies = out.src.size(0) - n
    assert copies == n - 2
    assert out.n_targets == b.n_targets and int(out.is_target.sum()) == int(b.is_target.sum())
    assert torch.equal(out.src[:n - 1], b.src[:n - 1])                    # context rows never masked
    assert not out.is_target[:n - 1].any() and out.is_target[n - 1] and out.is_target[n:].all()
    origin = torch.tensor(out.index[n:])                                  # copies' lines = original rows
    assert origin.tolist() == list(range(1, n - 1))
    assert torch.equal(out.ctx[n:], b.ctx[origin]) and torch.equal(out.tgt_out[n:], b.tgt_out[origin])
    current = torch.cat([out.src[n:], out.src[n - 1:n]])                 # the target rows' sources
    before = torch.cat([b.src[origin], b.src[n - 1:n]])
    changed = current.ne(before)
    assert current.eq(UNK_ID)[changed].all()                              # replaced by <unk> only
    eligible = before.ge(4)                                               # not <pad>, </s>
    assert not changed[~eligible].any()                                   # padding, </s> untouched
    rate = changed.sum().item() / eligible.sum().item()
    sd = (p * (1 - p) / eligible.sum().item()) ** 0.5
    assert abs(rate - p) < 4 * sd, (rate, p)                              # ~700 tokens: sd ≈ 0.016
    again = apply_context_usage(b, coword_dropout=p, generator=usage_generator(1, 0, 0))
    other = apply_context_usage(b, coword_dropout=p, generator=usage_generator(1, 0, 1))
    assert torch.equal(again.src, out.src) and not torch.equal(other.src, out.src)   # seeded per batch


def test_coword_dropout_on_a_sentence_batch_is_word_dropout_and_zero_is_identity():
    b = _doc_batch()
    sent = Batch(b.src, b.tgt_in, b.tgt_out, b.index, b.n_targets)
    out = apply_context_usage(sent, coword_dropout=0.5, context_dropout=0.3, generator=usage_generator(1, 0, 0))
    assert out.src.shape == b.src.shape and out.src.eq(UNK_ID).sum() > 0
    assert torch.equal(out.src.eq(0), b.src.eq(0)) and torch.equal(out.src.eq(2), b.src.eq(2))
    assert apply_context_usage(b) is b
    with pytest.raises(ValueError, match="coword_dropout"):
        apply_context_usage(b, coword_dropout=1.0)


def _real_batch(name: str) -> DocBatch:
    """``doc_batch`` as the data path makes it: ``block`` only for a sub-document model."""
    s = doc_batch(N[name])
    tgt_out = torch.cat([s.tgt_in[:, 1:], torch.zeros(4, 1, dtype=torch.long)], 1)
    blocks = model(name).document.context_block > 0
    return DocBatch(s.src, s.tgt_in, tgt_out, np.arange(4), int(tgt_out[s.is_target].ne(0).sum()),
                    s.is_target, s.ctx, s.block if blocks else None)


def _empty_context(b: DocBatch) -> DocBatch:
    """The empty-context convention of CXMI / the contrastive test (evaluation/forced.py): no
    ctx pointer, each row a sub-document of its own."""
    return DocBatch(b.src, b.tgt_in, b.tgt_out, b.index, b.n_targets, b.is_target, torch.full_like(b.ctx, -1),
                    None if b.block is None else torch.arange(b.src.size(0)))


@pytest.mark.parametrize("name", sorted(VARIANTS))
def test_context_dropout_gives_exactly_the_empty_context_output(name):
    m, b = model(name), _real_batch(name)
    with torch.no_grad():
        full = m.decode_train(m.encode(b), b.tgt_in)
        empty = m.decode_train(m.encode(_empty_context(b)), b.tgt_in)
    checked = kept = 0
    for seed in range(12):
        out = apply_context_usage(b, context_dropout=0.5, generator=usage_generator(seed, 0, 0))
        with torch.no_grad():
            got = m.decode_train(m.encode(out), out.tgt_in)
        for r in out.is_target.nonzero().squeeze(1).tolist():
            line = int(out.index[r])
            dropped = r >= 4 or (bool(out.ctx[r].lt(0).all()) and bool(b.ctx[line].ge(0).any()))
            if dropped:
                assert torch.allclose(got[r], empty[line], atol=1e-5), (seed, r)
                checked += 1
            else:
                assert torch.allclose(got[r], full[line], atol=1e-5), (seed, r)
                kept += 1
    assert checked > 0 and kept > 0


@pytest.mark.parametrize("name", ["concat", "han_encoder"])
def test_coword_copy_reads_the_unmasked_context(name):
    """A masked copy sees its context unmasked: its output = the row masked alone in the
    original batch (its readers not involved), and every other target row's context unchanged."""
    m, b = model(name), _real_batch(name)
    out = apply_context_usage(b, coword_dropout=0.5, generator=usage_generator(3, 0, 0))
    assert out.src.size(0) > 4                                            # row 1 is read by row 2: copied
    with torch.no_grad():
        got = m.decode_train(m.encode(out), out.tgt_in)
        for r in range(4, out.src.size(0)):
            line = int(out.index[r])
            alone = _real_batch(name)
            alone.src[line] = out.src[r]
            ref = m.decode_train(m.encode(alone), alone.tgt_in)
            assert torch.allclose(got[r], ref[line], atol=1e-5)


def test_learning_curves_get_a_cxmi_panel(tmp_path):
    """``learning_curves.png`` gains a third panel (dev CXMI vs empty / random) when the dev
    records carry ``cxmi_empty_nats`` (``train.eval_cxmi_sentences``)."""
    import json

    from PIL import Image

    from doctrans.training.curves import plot_learning_curves

    recs = [{"kind": "train", "step": s, "xent_nats": 4.0 - s / 100} for s in (50, 100)]
    dev = [{"kind": "dev", "step": s, "xent_nats": 3.9, "bleu": 8.0} for s in (50, 100)]
    widths = []
    for extra in ({}, {"cxmi_empty_nats": 0.1, "cxmi_random_nats": 0.02}):
        path = tmp_path / f"m{len(extra)}.jsonl"
        path.write_text("".join(json.dumps(r) + "\n" for r in recs + [{**d, **extra} for d in dev]))
        widths.append(Image.open(plot_learning_curves(path, tmp_path / f"c{len(extra)}.png")).size[0])
    assert widths[1] > widths[0] * 1.3, widths


def test_dev_cxmi_of_a_context_model_and_a_one_document_dev_set():
    """Dev CXMI during training (``evaluation.dev.dev_cxmi``): the first k lines; vs a random
    context only when the dev set has another document (a one-document dev set once raised);
    the model's training mode is restored; a sentence model gets nothing."""
    from doctrans.evaluation.dev import dev_cxmi

    g = np.random.default_rng(0)
    src = [np.r_[g.integers(4, 20, 3), 2] for _ in range(8)]
    tgt = [np.r_[g.integers(4, 20, 4), 2] for _ in range(8)]
    m = model("han_encoder").train()
    two = dev_cxmi(m, src, tgt, np.array([0, 0, 0, 0, 1, 1, 1, 1]), 4)
    assert set(two) == {"cxmi_empty_nats", "cxmi_random_nats", "cxmi_xent_nats"} and m.training
    assert two["cxmi_empty_nats"] != 0.0 and two["cxmi_xent_nats"] > 0
    one = dev_cxmi(m, src, tgt, np.zeros(8, dtype=int), 4)
    assert set(one) == {"cxmi_empty_nats", "cxmi_xent_nats"}
    assert one["cxmi_empty_nats"] == pytest.approx(two["cxmi_empty_nats"])      # the same first 4 lines
    assert dev_cxmi(m.backbone, src, tgt, np.zeros(8, dtype=int), 4) == {}
