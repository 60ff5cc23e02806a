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
from doctrans.inference.config import SearchOptions


VOCAB = Vocab(["<pad>", "<s>", "</s>", "<unk>"] + [f"t{i}" for i in range(12)])

each_backbone = pytest.mark.parametrize("backbone", backbones())


def Unguarded(**kw) -> SearchOptions:
    """The search without the repeated n-gram guard (``no_repeat_ngram_size`` 0): the references
    below know nothing of it (random tiny models repeat themselves)."""
    return SearchOptions(no_repeat_ngram_size=0, **kw)


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
        res = beam_search(m, src, VOCAB, Unguarded(beam=1, max_len_ratio=1.5, max_len_extra=10))
        assert res.tokens[0] == greedy_reference(m, src, max_len)


@each_backbone
def test_batched_beam_equals_one_by_one_and_respects_max_length(backbone):
    m = model(backbone, 1)
    batch = torch.tensor([[5, 6, 7, 2, 0, 0], [8, 2, 0, 0, 0, 0], [9, 10, 11, 12, 13, 2]])
    together = beam_search(m, batch, VOCAB, Unguarded(beam=4, max_len_ratio=1.0, max_len_extra=2))
    for r in range(3):
        row = batch[r:r + 1, : int(batch[r].ne(0).sum())]
        alone = beam_search(m, row, VOCAB, Unguarded(beam=4, max_len_ratio=1.0, max_len_extra=2))
        assert together.tokens[r] == alone.tokens[0]
        assert abs(together.scores[r] - alone.scores[0]) < 1e-4
        assert len(together.tokens[r]) + 1 <= int(row.size(1)) + 2 + 1   # +1: </s> itself


@each_backbone
def test_wider_beam_never_finds_a_worse_best_score(backbone):
    m = model(backbone, 2)
    src = torch.tensor([[5, 6, 7, 8, 2]])
    s1 = beam_search(m, src, VOCAB, Unguarded(beam=1, lenpen=0.0)).scores[0]
    s5 = beam_search(m, src, VOCAB, Unguarded(beam=5, lenpen=0.0)).scores[0]
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
    plain = beam_search(m, batch, VOCAB, Unguarded(beam=4))
    for n in (2, 3, 6):
        mixed = beam_search(m, batch.repeat_interleave(n, 0), VOCAB, Unguarded(beam=4), variants=n)
        assert mixed.tokens == plain.tokens
        assert all(abs(a - b) < 1e-5 for a, b in zip(mixed.scores, plain.scores))
    # weight 0 drops a variant: [1, 0] over (x, y) decodes x alone
    other = torch.tensor([[12, 13, 14, 2, 0], [5, 2, 0, 0, 0]])
    pair = torch.stack([batch, other], 1).reshape(4, 5)
    only_first = beam_search(m, pair, VOCAB, Unguarded(beam=4), variants=2, weights=torch.tensor([[1.0, 0.0]] * 2))
    assert only_first.tokens == plain.tokens


@each_backbone
def test_mixture_greedy_matches_uncached_reference(backbone):
    m = model(backbone, 4)
    x1, x2 = torch.tensor([[5, 6, 7, 2]]), torch.tensor([[5, 9, 6, 7, 2]])
    src = torch.cat([torch.nn.functional.pad(x1, (0, 1)), x2])
    res = beam_search(m, src, VOCAB, Unguarded(beam=1, max_len_ratio=1.5, max_len_extra=10), variants=2, weights=torch.tensor([[0.3, 0.7]]))
    assert res.tokens[0] == _mixture_reference(m, [x1, x2], [0.3, 0.7], 8 + 10)   # ceil(1.5 × 5) + 10, longest variant


@each_backbone
def test_decode_corpus_drops_zero_weight_variants_without_changing_results(backbone):
    import numpy as np
    from doctrans.inference.translate import decode_corpus

    m = model(backbone, 5)
    a, b, c = (np.array(x) for x in ([5, 6, 7, 2], [5, 9, 6, 7, 2], [8, 2]))
    src = [[a, b, a], [c, c, c], [b, a, c]]
    weights = [[0.5, 0.5, 0.0], [1.0, 0.0, 0.0], [0.2, 0.3, 0.5]]
    got = decode_corpus(m, src, VOCAB, Unguarded(beam=3, lenpen=1.0, max_len_ratio=1.5, max_len_extra=10, batch_sentences=4), weights=weights)
    for item, w, hyp in zip(src, weights, got):
        keep = [x for x, wi in zip(item, w) if wi > 0]
        width = max(len(x) for x in keep)
        batch = torch.stack([torch.nn.functional.pad(torch.from_numpy(x), (0, width - len(x))) for x in keep])
        ref = beam_search(m, batch, VOCAB, Unguarded(beam=3), variants=len(keep), weights=torch.tensor([[wi for wi in w if wi > 0]]))
        assert hyp == VOCAB.decode(ref.tokens[0])


@each_backbone
def test_nbest_lists_start_with_the_1best_and_leave_it_unchanged(backbone):
    m = model(backbone, 2)
    batch = torch.tensor([[5, 6, 7, 2, 0, 0], [8, 2, 0, 0, 0, 0], [9, 10, 11, 12, 13, 2]])
    plain = beam_search(m, batch, VOCAB, Unguarded(beam=4, lenpen=1.0))
    res = beam_search(m, batch, VOCAB, Unguarded(beam=4, lenpen=1.0, nbest=3))
    assert plain.nbest is None and res.tokens == plain.tokens and res.scores == plain.scores
    for r in range(3):
        lst = res.nbest[r]
        assert 1 <= len(lst) <= 3 and lst[0] == (res.scores[r], res.tokens[r])
        assert [s for s, _ in lst] == sorted((s for s, _ in lst), reverse=True)
        assert len({tuple(t) for _, t in lst}) == len(lst)              # distinct hypotheses
    with pytest.raises(ValueError, match="nbest=5 exceeds the beam size 4"):
        beam_search(m, batch, VOCAB, Unguarded(beam=4, nbest=5))


def _loop_reference_search(m, src, vocab, beam, lenpen, max_len_ratio, max_len_extra, variants=1, weights=None,
                           nbest=0, copies=False):
    """The search as it was before issue 30 (a Python loop over the finished hypotheses and one
    over the live sentences at every step): the reference of the vectorised bookkeeping.
    ``copies``: start from K copies of ``<s>`` per sentence (the start before step 0 ran on one
    row per sentence); otherwise from one, as ``beam_search``."""
    import math

    from doctrans.inference.beam_search import SearchResult, VariantMixture, _Columns, _max_lengths
    enc = m.encode(SearchBatch(src))
    r, dev = variants, src.device
    b, k = src.size(0) // r, beam
    kk = k if copies else 1
    mix = VariantMixture(r, weights, b, dev)
    expand = (torch.arange(b)[:, None, None] * r + torch.arange(r)[None, None, :]).expand(b, kk, r).reshape(-1)
    state = m.init_state(enc.select(expand))
    max_len = _max_lengths(src, vocab.pad_id, max_len_ratio, max_len_extra, m.max_target_len - 1).view(b, r).max(1).values
    scores = torch.full((b, kk), -math.inf)
    scores[:, 0] = 0.0
    history = torch.full((b * kk, 1), vocab.bos_id, dtype=torch.long)
    active = torch.arange(b)
    finished = [[] for _ in range(b)]
    step = 0
    while active.numel():
        lprobs, state = m.decode_step(state, mix.expand_tokens(history[:, -1]))
        lprobs = _Columns(vocab, None).mask_specials(mix(lprobs, active, kk), (max_len[active] <= step).repeat_interleave(kk))
        n_active, vsize = active.numel(), lprobs.size(1)
        top_s, top_i = (scores.view(-1, 1) + lprobs).view(n_active, kk * vsize).topk(2 * k, dim=1)
        top_beam, top_tok = top_i // vsize, top_i % vsize
        is_eos = top_tok.eq(vocab.eos_id) & torch.isfinite(top_s)
        norm = (step + 1) ** lenpen if lenpen else 1.0
        for a, j in is_eos[:, :k].nonzero().tolist():
            sent = int(active[a])
            if len(finished[sent]) < k:
                finished[sent].append((float(top_s[a, j]) / norm, history[a * kk + int(top_beam[a, j]), 1:].tolist()))
        done = torch.tensor([len(finished[int(s)]) >= k for s in active], dtype=torch.bool)
        done |= max_len[active] <= step
        cont_s, pos = top_s.masked_fill(is_eos, -math.inf).topk(k, dim=1)
        keep_rows = (~done).nonzero().squeeze(1)
        rows = (keep_rows[:, None] * kk + top_beam.gather(1, pos)[keep_rows]).reshape(-1)
        history = torch.cat([history.index_select(0, rows), top_tok.gather(1, pos)[keep_rows].reshape(-1, 1)], 1)
        scores, active = cont_s[keep_rows], active[keep_rows]
        state = state.reorder(mix.state_rows(rows))
        kk = k
        step += 1
    best = [max(f, key=lambda h: h[0]) for f in finished]
    lists = [sorted(f, key=lambda h: -h[0])[:nbest] for f in finished] if nbest > 0 else None
    return SearchResult([h[1] for h in best], [h[0] for h in best], lists)


def _random_src(n: int, low: int, high: int, seed: int) -> torch.Tensor:
    """n padded source rows of random words, lengths in [low, high), each ending in </s> → (n, S)."""
    g = torch.Generator().manual_seed(seed)
    rows = [torch.cat([torch.randint(4, len(VOCAB), (int(k),), generator=g), torch.tensor([2])])
            for k in torch.randint(low, high, (n,), generator=g)]
    src = torch.zeros((n, max(len(x) for x in rows)), dtype=torch.long)
    for i, x in enumerate(rows):
        src[i, :len(x)] = x
    return src


class EosBoost(nn.Module):
    """``model`` with ``</s>`` made ``boost`` nats likelier at every step: hypotheses finish at
    many steps, several per sentence and step (more than a sentence has room for)."""

    def __init__(self, model, boost: float):
        super().__init__()
        self.model, self.boost, self.pad_id = model, boost, model.pad_id
        self.max_target_len = model.max_target_len

    def encode(self, batch):
        return self.model.encode(batch)

    def init_state(self, enc):
        return self.model.init_state(enc)

    def decode_step(self, state, prev_tokens):
        lprobs, state = self.model.decode_step(state, prev_tokens)
        lprobs[:, 2] += self.boost
        return lprobs, state


@each_backbone
@pytest.mark.parametrize("beam,lenpen,variants,boost", [(1, 1.0, 1, 0.0), (4, 1.0, 1, 0.0), (5, 0.0, 1, 2.5),
                                                        (4, 1.0, 1, 2.0), (3, 0.6, 2, 2.0)])
def test_vectorised_bookkeeping_equals_the_per_hypothesis_loop(backbone, beam, lenpen, variants, boost):
    """Issue 30: finishing hypotheses and retiring sentences without Python loops over them gives
    exactly the hypotheses, scores and n-best lists (order of equal scores included) of the loop."""
    m = EosBoost(model(backbone, 3), boost).eval()
    src = _random_src(6 * variants, 1, 8, seed=7)
    weights = torch.tensor([[0.7, 0.3]] * 6) if variants > 1 else None
    with torch.no_grad():
        got = beam_search(m, src, VOCAB, Unguarded(beam=beam, lenpen=lenpen, max_len_ratio=1.2, max_len_extra=3, nbest=beam), variants=variants, weights=weights)
        ref = _loop_reference_search(m, src, VOCAB, beam, lenpen, 1.2, 3, variants, weights, nbest=beam)
    assert got.tokens == ref.tokens and got.scores == ref.scores and got.nbest == ref.nbest
    assert beam == 1 or sum(len(n) for n in got.nbest) > len(got.nbest)     # several finished per sentence


def test_finish_takes_finished_hypotheses_in_candidate_order_up_to_the_beam():
    """``_finish`` on a hand-made step (K = 3): sentence 7 had 2 finished and 3 of its first K
    candidates end in </s> → it takes only the first; sentence 9 had none → its one; candidates
    beyond the first K never finish."""
    from doctrans.inference.beam_search import _finish, _finished_lists

    k, records = 3, []
    active, had = torch.tensor([7, 9]), torch.tensor([2, 0])
    history = torch.arange(6 * 3).view(6, 3)                          # (nA*K, step + 1) rows 0–5
    top_s = torch.tensor([[-1.0, -2.0, -3.0, -4.0, -5.0, -6.0], [-1.5, -2.5, -3.5, -4.5, -5.5, -6.5]])
    top_beam = torch.tensor([[2, 0, 1, 0, 0, 0], [1, 0, 2, 0, 0, 0]])
    is_eos = torch.tensor([[True, True, True, False, False, False], [False, True, False, True, True, True]])
    took = _finish(records, active, had, history, (top_s, top_beam, is_eos), k, k, step=2)
    assert took.tolist() == [1, 1]
    lists = _finished_lists(records, 10, lenpen=1.0)
    assert lists[7] == [(-1.0 / 3, history[0 * k + 2, 1:].tolist(), None)]
    assert lists[9] == [(-2.5 / 3, history[1 * k + 0, 1:].tolist(), None)]
    assert all(not f for i, f in enumerate(lists) if i not in (7, 9))


class RowCounter(EosBoost):
    """``model`` recording how many decoder rows each ``decode_step`` gets."""

    def __init__(self, model):
        super().__init__(model, 0.0)
        self.rows: list[int] = []

    def decode_step(self, state, prev_tokens):
        self.rows.append(int(prev_tokens.numel()))
        return super().decode_step(state, prev_tokens)


@each_backbone
@pytest.mark.parametrize("beam,variants", [(4, 1), (3, 2)])
def test_step_zero_decodes_one_row_per_sentence_and_variant(backbone, beam, variants):
    """Issue 30: at step 0 only <s> is live, so the first decoder step runs on the B·R encoder
    rows, not on K identical copies of each; from step 1 on, K hypotheses per sentence. The
    translations, scores and n-best lists are those of the K-copy start (the loop reference)."""
    m = RowCounter(model(backbone, 5)).eval()
    src = _random_src(5 * variants, 2, 7, seed=3)
    with torch.no_grad():
        got = beam_search(m, src, VOCAB, Unguarded(beam=beam, lenpen=1.0, max_len_ratio=1.2, max_len_extra=3, nbest=beam), variants=variants)
        first = m.rows[:2]
        ref = _loop_reference_search(m.model, src, VOCAB, beam, 1.0, 1.2, 3, variants, nbest=beam, copies=True)
    assert first == [5 * variants, 5 * beam * variants]
    # the same hypotheses; scores equal up to float rounding (step 0's matrix products run on
    # 1/K of the rows, which can change the last bits)
    assert got.tokens == ref.tokens
    assert [[t for _, t in n] for n in got.nbest] == [[t for _, t in n] for n in ref.nbest]
    assert torch.allclose(torch.tensor(got.scores), torch.tensor(ref.scores), atol=1e-5)


@each_backbone
def test_a_vocabulary_smaller_than_two_beams_starts_from_k_copies(backbone):
    """V < 2K: step 0 cannot take 2K candidates from one row, so the search starts from K copies
    of <s> (widened by a reorder) — exactly the K-copy reference."""
    beam = 9                                                            # 2K = 18 > 16 types
    m = RowCounter(model(backbone, 2)).eval()
    src = _random_src(4, 1, 6, seed=11)
    with torch.no_grad():
        got = beam_search(m, src, VOCAB, Unguarded(beam=beam, lenpen=1.0, max_len_ratio=1.2, max_len_extra=3, nbest=beam))
        ref = _loop_reference_search(m.model, src, VOCAB, beam, 1.0, 1.2, 3, nbest=beam, copies=True)
    assert m.rows[0] == 4 * beam
    # the same search; the Transformer reads a sentence's K copies as K query positions of one memory
    # (grouped attention), which may differ from row-by-row attention in the last float bit
    assert got.tokens == ref.tokens and got.scores == pytest.approx(ref.scores, abs=1e-6)
    assert [[h for _, h in n] for n in got.nbest] == [[h for _, h in n] for n in ref.nbest]


@each_backbone
@pytest.mark.parametrize("shortlist", [False, True])
def test_kept_states_are_the_teacher_forced_states_of_each_nbest_hypothesis(backbone, shortlist):
    """Issue 28 (reranking without a second decoder pass): ``keep_states`` returns the same
    hypotheses and scores, and each n-best hypothesis' states equal ``decode_hidden`` of
    ``<s> y`` teacher-forced — sentences finishing at different steps, hypotheses reordered."""
    from doctrans.inference.shortlist import Shortlist, VocabularyMap

    m = model(backbone, 3)
    src = _random_src(5, 2, 7, seed=4)
    sl = None
    if shortlist:                                       # every source word's candidates: 4 target words
        rules = {f"t{w}": [f"t{(w * 3 + j) % 12}" for j in range(4)] for w in range(12)}
        sl = Shortlist(VocabularyMap([], rules), VOCAB, VOCAB)
    with torch.no_grad():
        plain = beam_search(m, src, VOCAB, Unguarded(beam=4, lenpen=1.0, nbest=4), shortlist=sl)
        res = beam_search(m, src, VOCAB, Unguarded(beam=4, lenpen=1.0, nbest=4), shortlist=sl, keep_states=True)
        assert plain.nbest_states is None
        assert res.tokens == plain.tokens and res.nbest == plain.nbest
        assert all(abs(a - b) < 1e-5 for a, b in zip(res.scores, plain.scores))
        lengths = set()
        for r in range(src.size(0)):
            enc = m.encode(SearchBatch(src[r:r + 1]))
            assert len(res.nbest_states[r]) == len(res.nbest[r])
            for (_, ids), states in zip(res.nbest[r], res.nbest_states[r]):
                tgt_in = torch.tensor([[VOCAB.bos_id, *ids]])
                ref = m.decode_hidden(enc, tgt_in)[0]
                assert states.shape == ref.shape
                assert torch.allclose(states, ref, atol=1e-5)
                lengths.add(len(ids))
    assert len(lengths) > 1                             # hypotheses of different lengths were checked


def test_keep_states_needs_an_nbest_and_one_variant():
    m = model("transformer")
    src = torch.tensor([[5, 6, 2, 5, 6, 2]]).view(2, 3)
    with pytest.raises(ValueError, match="needs nbest ≥ 1"):
        beam_search(m, src, VOCAB, Unguarded(beam=2), keep_states=True)
    with pytest.raises(ValueError, match="variants=2"):
        beam_search(m, src, VOCAB, Unguarded(beam=2, nbest=2), variants=2, keep_states=True)


class _Tokens:
    """A decoder state that is only the reorderable rows (the scripted model keeps none)."""

    def reorder(self, rows):
        return self


class Repeater(nn.Module):
    """A scripted model that loves to repeat: after token t it gives t's successor in the cycle
    t0 t1 t2 (after <s>: t0) 4 nats more than any other token, and </s> 20 nats less — so an
    unguarded search writes t0 t1 t2 t0 t1 t2 … until the length limit."""

    max_target_len, pad_id = 64, 0

    def encode(self, batch):
        return batch.src

    def init_state(self, enc):
        return _Tokens()

    def decode_step(self, state, prev_tokens):
        cycle = {1: 4, 4: 5, 5: 6, 6: 4}
        logits = torch.zeros(prev_tokens.numel(), len(VOCAB))
        logits[torch.arange(prev_tokens.numel()), [cycle.get(int(t), 4) for t in prev_tokens]] = 4.0
        logits[:, 2] = -20.0
        return torch.log_softmax(logits, -1), state


def _ngrams(ids: list[int], n: int) -> list[tuple[int, ...]]:
    return [tuple(ids[i:i + n]) for i in range(len(ids) - n + 1)]


@pytest.mark.parametrize("n", [1, 2, 3, 4])
@pytest.mark.parametrize("beam", [1, 3])
def test_no_repeat_ngram_size_keeps_every_ngram_of_the_output_unique(n, beam):
    """Issue 75 item 2: with ``no_repeat_ngram_size`` N no n-gram of N target ids occurs twice in
    an output of a model that loves to repeat; without it (0) the cycle repeats to the limit."""
    src = torch.tensor([[7, 8, 9, 10, 2, 0], [7, 8, 9, 10, 11, 2]])
    off = beam_search(Repeater(), src, VOCAB, SearchOptions(beam=beam, max_len_extra=6, no_repeat_ngram_size=0))
    on = beam_search(Repeater(), src, VOCAB, SearchOptions(beam=beam, max_len_extra=6, no_repeat_ngram_size=n))
    for ids in off.tokens:
        assert ids[:6] == [4, 5, 6, 4, 5, 6] and len(set(_ngrams(ids, n))) < len(_ngrams(ids, n))
    for ids in on.tokens:
        assert len(ids) >= n and len(set(_ngrams(ids, n))) == len(_ngrams(ids, n)), ids


def test_block_repeats_equals_a_brute_force_reference():
    """``block_repeats`` blocks exactly the tokens that follow an earlier occurrence of the last
    N − 1 tokens (random histories over 4 tokens: many repeats), in vocabulary and shortlist columns."""
    from doctrans.inference.beam_search import _Columns, block_repeats

    g = torch.Generator().manual_seed(0)
    out_ids = torch.tensor([2, 4, 5, 6, 7, 9])                          # a shortlist's columns
    for n in (1, 2, 3, 5):
        hist = torch.cat([torch.ones(6, 1, dtype=torch.long), torch.randint(4, 8, (6, 9), generator=g)], 1)
        for cols in (_Columns(VOCAB, None), _Columns(VOCAB, out_ids)):
            got = block_repeats(torch.zeros(6, cols.size), hist, n, cols)
            for h, row in zip(hist[:, 1:].tolist(), got):
                banned = {h[i + n - 1] for i in range(len(h) - n + 1) if h[i:i + n - 1] == h[len(h) - n + 1:]}
                blocked = set(cols.ids((row == -float("inf")).nonzero().flatten()).tolist())
                assert blocked == banned


def test_lines_ended_by_the_length_limit_are_counted_in_the_log(tmp_path, caplog):
    """Issue 75 item 2: a model whose </s> never wins (its output row zeroed, greedy) writes
    every line to the length limit, and the Translator logs how many lines, naming the input."""
    import logging

    from doctrans.config import load_experiment, to_dict
    from doctrans.data.text import TextProcessor
    from doctrans.inference.translate import TranslateConfig, Translator
    from conftest import REPO

    exp = load_experiment(REPO / "pipelines" / "transformer" / "tiny.yaml", ["model.dropout=0.0"])
    torch.manual_seed(0)
    m = build_model(exp.model, len(VOCAB), len(VOCAB))
    state = m.state_dict()
    state["out_proj.weight"] *= 10.0
    state["out_proj.weight"][2] = 0.0                                    # </s>: logit 0, below the best of 12
    text = TextProcessor("en", bpe_codes_text="#version: 0.2\n").settings()
    ck = tmp_path / "m.pt"
    torch.save({"model": state, "config": to_dict(exp), "vocab": {"src": VOCAB.tokens, "tgt": VOCAB.tokens},
                "text": {"src": text, "tgt": text}}, ck)
    tr = Translator(TranslateConfig(checkpoint=str(ck), input_format="bpe", tokenized=True, beam=1,
                                    max_len_extra=3, no_repeat_ngram_size=0))
    with caplog.at_level(logging.INFO):
        out = tr.translate(["t1 t2 t3", "", "t4 t5"], name="in.txt")
    assert [len(x.split()) for x in out] == [9, 0, 8]                    # ceil(1.5 × (3 + 1)) + 3, ceil(1.5 × 3) + 3
    assert "in.txt: 2 line(s) of 2 ended by the length limit" in caplog.text
    assert "in.txt:1, in.txt:3" in caplog.text
