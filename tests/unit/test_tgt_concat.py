"""The target-side concatenation model (models/context/tgt_concat.py, issue 52): the prefix on
both sides, the loss on the current sentence only, forced decoding of ragged prefixes, context
dropout = the lone sentence, and the rolling history of the model's own translations."""
from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
import torch

from doctrans.config import load_experiment
from doctrans.data.context_usage import apply_context_usage
from doctrans.data.vocab import Vocab
from doctrans.inference.beam_search import beam_search
from doctrans.models.build import build_model
from doctrans.models.interface import SearchBatch
from doctrans.inference.config import SearchOptions

from conftest import REPO, DocBatchStub, stepwise_equals_teacher_forcing

VOCAB = Vocab(["<pad>", "<s>", "</s>", "<unk>"] + [f"t{i}" for i in range(16)])


def model(n: int = 2, seed: int = 0, **extra):
    torch.manual_seed(seed)
    opts = ", ".join(f"{k}: {v}" for k, v in extra.items())
    cfg = load_experiment(REPO / "pipelines" / "transformer" / "tiny.yaml",
                          ["model.dropout=0.0", f"context={{type: tgt_concat, context_sents: {n}"
                           + (f", {opts}" if opts else "") + "}"])
    return build_model(cfg.model, len(VOCAB), len(VOCAB), 0, cfg.context).eval()


def batch() -> DocBatchStub:
    """Rows 0–2 one document, row 3 a lone sentence; row 0 context-only."""
    src = torch.tensor([[4, 5, 2, 0], [6, 7, 8, 2], [9, 2, 0, 0], [10, 11, 2, 0]])
    tgt_in = torch.tensor([[1, 12, 13, 0], [1, 14, 0, 0], [1, 15, 16, 17], [1, 18, 0, 0]])
    ctx = torch.tensor([[-1, -1], [-1, 0], [0, 1], [-1, -1]])
    b = DocBatchStub(src, tgt_in, ctx, torch.tensor([False, True, True, True]))
    b.tgt_out = torch.cat([tgt_in[:, 1:], torch.zeros(4, 1, dtype=torch.long)], 1)
    for r in range(4):
        b.tgt_out[r, int(tgt_in[r].ne(0).sum()) - 1] = 2
    return b


def test_prefix_is_the_previous_targets_each_closed_by_eos():
    m, b = model(), batch()
    prefix = m.target_prefix(b)
    rows = [[t for t in r if t] for r in prefix.tolist()]
    assert rows == [[], [1, 12, 13, 2], [1, 12, 13, 2, 1, 14, 2], []]
    assert m.concatenated_source(b)[2].tolist()[:9] == [4, 5, 2, 6, 7, 8, 2, 9, 2]      # and the source side


def test_prefix_cut_keeps_the_newest_tokens_after_a_start_token():
    m, b = model(max_target_context_tokens=4), batch()
    assert [t for t in m.target_prefix(b)[2].tolist() if t] == [1, 1, 14, 2]


def test_loss_covers_the_current_sentence_only():
    """decode_train returns the current sentence's positions only, and they are the backbone's
    teacher-forced logits of ``prefix · tgt_in`` at those positions; forward_loss counts the
    target rows' own tokens."""
    from doctrans.training.loss import forward_loss

    m, b = model(), batch()
    with torch.no_grad():
        enc = m.encode(b)
        logits = m.decode_train(enc, b.tgt_in)                                   # (B, T, V)
        assert logits.shape == (4, 4, len(VOCAB))
        full = torch.tensor([[1, 12, 13, 2, 1, 14, 2, 1, 15, 16, 17]])           # row 2's decoder input
        base = m.backbone.decode_train(m._plain(enc).select(torch.tensor([2])), full)[0, 7:]
    assert torch.allclose(logits[2], base, atol=1e-5)
    out = forward_loss(m, b, 0, 0.0)
    assert out.n_tokens == int(b.tgt_out[b.is_target].ne(0).sum()) == 2 + 4 + 2


def test_prefix_changes_the_output_and_is_read_from_the_target_side():
    m, b = model(), batch()
    with torch.no_grad():
        ref = m.decode_train(m.encode(b), b.tgt_in)[1]
        b2 = batch()
        b2.tgt_in[0, 1:3] = torch.tensor([4, 5])                                 # previous target only
        other = m.decode_train(m.encode(b2), b2.tgt_in)[1]
    assert not torch.allclose(ref, other, atol=1e-4)


def test_forced_ragged_prefixes_decode_as_teacher_forcing():
    """init_state force-decodes prefixes of 0, 4 and 7 tokens in one pass; every step (and the
    beam's reordering) equals teacher forcing."""
    m, b = model(), batch()
    assert stepwise_equals_teacher_forcing(m, b, atol=1e-5)
    assert stepwise_equals_teacher_forcing(m, b, order=torch.tensor([2, 2, 1, 3, 0]), atol=1e-5)


def _long_batch(rows: int = 32, seed: int = 3) -> DocBatchStub:
    """One document of ``rows`` sentences whose targets are 1–12 tokens: target prefixes of
    very different lengths in one batch (several length buckets)."""
    g = torch.Generator().manual_seed(seed)
    lens = torch.randint(1, 13, (rows,), generator=g)
    src = torch.randint(4, len(VOCAB), (rows, 5), generator=g)
    src[:, -1] = 2
    tgt_in = torch.zeros(rows, 13, dtype=torch.long)
    for r, n in enumerate(lens.tolist()):
        tgt_in[r, 0] = 1
        tgt_in[r, 1:n + 1] = torch.randint(4, len(VOCAB), (n,), generator=g)
    ctx = torch.tensor([[r - 2, r - 1] for r in range(rows)]).clamp(min=-1)
    ctx[1, 0] = -1
    return DocBatchStub(src, tgt_in, ctx, torch.ones(rows, dtype=torch.bool))


def test_bucketed_prefixes_and_grouped_hypotheses_decode_as_teacher_forcing(monkeypatch):
    """Many ragged prefixes: the forced pass runs in length buckets (each cut to its longest),
    and the hypotheses of a row read its prefix and source once as a group — widened, reordered
    within groups, a row leaving, and a selection that breaks the groups all equal teacher
    forcing."""
    import doctrans.models.backbones.transformer as tr
    m, b = model(), _long_batch()
    buckets = []
    real = tr.length_buckets
    monkeypatch.setattr(tr, "length_buckets", lambda lengths: buckets.append(real(lengths)) or buckets[-1])
    assert stepwise_equals_teacher_forcing(m, b, atol=1e-5)
    assert len(buckets[0]) > 1
    wide = torch.arange(32).repeat_interleave(3)                                 # groups of 3
    assert stepwise_equals_teacher_forcing(m, b, order=wide, atol=1e-5)
    with torch.no_grad():
        enc = m.encode(b)
        state = m.init_state(enc).reorder(wide)
        assert state.group == 3 and state.layers[0].prefix_k.size(0) == 32
        full = torch.log_softmax(m.decode_train(enc, b.tgt_in), -1)
        rows = wide.clone()
        for t, keep in enumerate([None, torch.arange(93), torch.tensor([0, 4, 5, 9, 20, 21, 22])]):
            if keep is not None:                       # row 31 leaves; then a selection across groups
                state, rows = state.reorder(keep), rows[keep]
            lp, state = m.decode_step(state, b.tgt_in[rows, t])
            assert torch.allclose(lp, full[rows, t], atol=1e-5)
        assert state.group == 1


def test_context_dropout_gives_exactly_the_lone_sentence_input():
    m, b = model(), batch()
    dropped = apply_context_usage(b, context_dropout=0.999, generator=torch.Generator().manual_seed(0))
    assert dropped.ctx[dropped.is_target].eq(-1).all()
    assert m.target_prefix(dropped).ne(0).sum() == 0
    assert torch.equal(m.concatenated_source(dropped)[:, :4], b.src)
    with torch.no_grad():
        out = m.decode_train(m.encode(dropped), b.tgt_in)
        alone = m.backbone.decode_train(m.backbone.encode(SearchBatch(b.src)), b.tgt_in)
    rows = dropped.is_target                                                     # context-only rows are not encoded
    assert torch.allclose(out[rows], alone[rows], atol=1e-6)


def test_search_without_context_is_the_sentence_model():
    m, b = model(), batch()
    got = beam_search(m, SearchBatch(b.src), VOCAB, SearchOptions(beam=2, max_len_extra=3))
    want = beam_search(m.backbone, SearchBatch(b.src), VOCAB, SearchOptions(beam=2, max_len_extra=3))
    assert got.tokens == want.tokens


def test_rolling_history_is_the_models_own_output(monkeypatch):
    """translate_documents gives sentence k the model's own translations of sentences k−N…k−1 as
    its target prefix, in document order, several documents per batch; a run where the prefix
    is replaced by anything else (e.g. a reference) translates differently. Fails if the prefix
    is not the 1-best just produced (a random tiny model's outputs are degenerate, so the
    search's scores tell the prefixes apart)."""
    from doctrans.inference.documents import translate_documents
    from doctrans.models.context.tgt_concat import TargetConcat

    m = model(n=1, seed=3)
    rng = np.random.default_rng(0)
    docs = [[np.r_[4 + 4 * d + k, rng.integers(4, 20, int(rng.integers(1, 3))), 2] for k in range(3)]
            for d in range(2)]                                  # first token: a unique sentence id
    seen: list[tuple[list[int], list[int]]] = []                # (source of a target row, its prefix)
    real = TargetConcat.target_prefix

    def spy(self, batch):
        prefix = real(self, batch)
        for r in batch.is_target.nonzero().squeeze(1).tolist():
            seen.append(([t for t in batch.src[r].tolist() if t], [t for t in prefix[r].tolist() if t]))
        return prefix

    monkeypatch.setattr(TargetConcat, "target_prefix", spy)
    out = translate_documents(m, docs, VOCAB, SearchOptions(beam=2, lenpen=1.0, max_len_ratio=1.5, max_len_extra=3, batch_sentences=8, history_chunk=0, warmup_beam=0))
    own = {tuple(x.tolist()): VOCAB.encode(y)[:-1].tolist() for d, o in zip(docs, out) for x, y in zip(d, o)}
    prefix_of = {tuple(s): p for s, p in seen}
    for d in docs:
        assert prefix_of[tuple(d[0].tolist())] == []
        for k in range(1, len(d)):
            assert prefix_of[tuple(d[k].tolist())] == [1] + own[tuple(d[k - 1].tolist())] + [2]
    # the history matters: feeding another target as sentence 1's prefix changes its translation
    first, second = docs[0][0], docs[0][1]
    src = torch.nn.utils.rnn.pad_sequence([torch.tensor(second), torch.tensor(first)], batch_first=True)
    outs = []
    for hyp in (own[tuple(first.tolist())], [5, 6, 7, 8, 9], [19, 18]):
        tgt_in = torch.zeros(2, 16, dtype=torch.long)
        tgt_in[:, 0] = 1
        tgt_in[1, 1:1 + len(hyp)] = torch.tensor(hyp)
        b = DocBatchStub(src, tgt_in, torch.tensor([[1], [-1]]), torch.tensor([True, False]))
        res = beam_search(m, b, VOCAB, SearchOptions(beam=2, max_len_extra=3))
        outs.append((res.tokens[0], res.scores[0]))
    assert outs[0][0] == own[tuple(second.tolist())]              # the document path's own prefix, reproduced
    assert len({round(score, 4) for _, score in outs}) == len(outs)  # another prefix: another search


def test_portable_form_names_the_target_context():
    p = model(n=2).portable()
    assert p.source_context == 2 and p.target_context == 2 and p.max_target_context_tokens > 0


def test_context_position_offset_puts_the_sentence_where_the_sentence_model_reads_it():
    """context_position_offset K: the context tokens (source and target prefix) at K, K+1, …,
    the current sentence at 0, 1, … — on both sides, row by row."""
    m, b = model(context_position_offset=100), batch()
    src, split = m._concatenated(b)
    pos = m.source_positions(b, src, split)
    assert pos[2].tolist()[:9] == [100, 101, 102, 103, 104, 105, 106, 0, 1]     # 4 5 </s> 6 7 8 </s> | 9 </s>
    assert pos[3].tolist()[:3] == [0, 1, 2]                        # a lone sentence: as the sentence model
    with torch.no_grad():
        _, _, tpos = m._packed(m.encode(b), b.tgt_in)
    assert tpos[2].tolist()[:11] == [100, 101, 102, 103, 104, 105, 106, 0, 1, 2, 3]
    assert tpos[1].tolist()[:6] == [100, 101, 102, 103, 0, 1]
    assert model().source_positions(b, src, split) is None                       # the default: one numbering


def test_context_position_offset_changes_rows_with_context_only():
    """The same weights with and without the offset: a row without context is the same model,
    rows with context read their sentence at other positions and differ."""
    plain, shifted, b = model(), model(context_position_offset=100), batch()
    shifted.load_state_dict(plain.state_dict())
    with torch.no_grad():
        a = plain.decode_train(plain.encode(b), b.tgt_in)
        o = shifted.decode_train(shifted.encode(b), b.tgt_in)
    assert torch.allclose(a[3], o[3], atol=1e-6)
    assert not torch.allclose(a[2], o[2], atol=1e-4) and not torch.allclose(a[1], o[1], atol=1e-4)


def test_context_position_offset_decodes_as_teacher_forcing():
    """With the offset, the forced prefixes (ragged, in length buckets) and every step of the
    grouped, reordered hypotheses equal teacher forcing with the same positions."""
    m, b = model(context_position_offset=100), batch()
    assert stepwise_equals_teacher_forcing(m, b, atol=1e-5)
    assert stepwise_equals_teacher_forcing(m, b, order=torch.tensor([2, 2, 1, 3, 0]), atol=1e-5)
    m, b = model(context_position_offset=200), _long_batch()
    assert stepwise_equals_teacher_forcing(m, b, order=torch.arange(32).repeat_interleave(3), atol=1e-5)
    assert m.max_target_len == 200


def test_source_concatenation_with_offset_reads_the_sentence_as_the_sentence_model():
    """The 2-to-1 concatenation model takes the option too: a row without context is the
    backbone's input exactly, a row with context is encoded with its context numbered from K."""
    from doctrans.models.context.concat import ConcatContext

    torch.manual_seed(0)
    cfg = load_experiment(REPO / "pipelines" / "transformer" / "tiny.yaml",
                          ["model.dropout=0.0", "context={type: concat, context_sents: 2, context_position_offset: 100}"])
    m = build_model(cfg.model, len(VOCAB), len(VOCAB), 0, cfg.context).eval()
    assert isinstance(m, ConcatContext) and m.portable() is None
    b = batch()
    with torch.no_grad():
        got = m.decode_train(m.encode(b), b.tgt_in)
        alone = m.backbone.decode_train(m.backbone.encode(SearchBatch(b.src)), b.tgt_in)
        src, split = m._concatenated(b)
        pos = torch.tensor([[100, 101, 102, 103, 104, 105, 106, 0, 1]])
        want = m.backbone.decode_train(m.backbone.encode_with(src[2:3, :9], positions=pos), b.tgt_in[2:3])
    assert torch.allclose(got[3], alone[3], atol=1e-6) and not torch.allclose(got[2], alone[2], atol=1e-4)
    assert split.tolist()[1:] == [3, 7, 0] and torch.allclose(got[2], want[0], atol=1e-5)


def test_context_position_offset_limits_are_refused():
    with pytest.raises(ValueError, match="context_position_offset"):
        model(context_position_offset=-1)
    with pytest.raises(ValueError, match="context_position_offset"):
        model(context_position_offset=5000)
    m, b = model(context_position_offset=3), batch()                             # row 1's 4-token sentence reaches it
    with pytest.raises(ValueError, match="source sentence of 4 tokens reaches context.context_position_offset=3"):
        m.encode(b)
    m = model(context_position_offset=4)                                         # the source fits, a 5-token target not
    with torch.no_grad():
        enc = m.encode(b)
        m.decode_train(enc, b.tgt_in)
        with pytest.raises(ValueError, match="target of 5 tokens reaches context.context_position_offset=4"):
            m.decode_train(enc, torch.cat([b.tgt_in, torch.zeros(4, 1, dtype=torch.long)], 1))
    assert model(context_position_offset=100).portable() is None                 # no engine numbers positions so


@pytest.mark.parametrize("bad", [-1])
def test_negative_prefix_cut_is_refused(bad):
    with pytest.raises(ValueError, match="max_target_context_tokens"):
        model(max_target_context_tokens=bad)


def test_history_pieces_keep_every_line_once_after_its_warm_up():
    from doctrans.inference.documents import _history_pieces

    x = np.array([4, 2])
    docs = [[x, None, x, x, x, None, x], [], [None], [x, x]]
    pieces = _history_pieces(docs, chunk=2, n=1)
    assert pieces == [(0, [0, 2], 0), (0, [2, 3, 4], 1), (0, [4, 6], 1), (3, [0, 1], 0)]
    kept = [(d, i) for d, lines, warm in pieces for i in lines[warm:]]
    assert sorted(kept) == [(d, i) for d, lines in enumerate(docs) for i, y in enumerate(lines) if y is not None]
    assert _history_pieces(docs, chunk=1, n=2)[2] == (0, [0, 2, 3], 2)     # up to N warm-up lines


def _two_documents():
    """A model reading N = 1, two documents (7 lines; 3 lines with an empty one) and beam-2 search
    search options (whole documents unless a test cuts them), for the history-piece tests."""
    m = model(n=1, seed=3)
    rng = np.random.default_rng(1)
    docs = [[np.r_[4 + k % 12, rng.integers(4, 20, int(rng.integers(1, 3))), 2] for k in range(7)],
            [np.r_[5, 6, 2], None, np.r_[7, 2]]]
    return m, docs, SearchOptions(beam=2, lenpen=1.0, max_len_ratio=1.5, max_len_extra=3, batch_sentences=64,
                                  history_chunk=0, warmup_beam=0)


def test_history_chunk_translates_pieces_side_by_side(monkeypatch):
    """translate_documents(history_chunk=C): the first C sentences of a document come out as the
    whole-document translation's (same context); a later sentence is what translating its piece
    (warm-up included) as a document of its own gives; empty lines stay in place; each step's
    batch holds one sentence of every piece (C + N steps, not the document's length)."""
    from doctrans.inference import documents
    from doctrans.inference.documents import translate_documents

    m, docs, kw = _two_documents()
    whole = translate_documents(m, docs, VOCAB, kw)
    sizes = []
    real = documents.build_batch

    def spy(chunk, *args, **kwargs):
        sizes.append(len(chunk))
        return real(chunk, *args, **kwargs)

    monkeypatch.setattr(documents, "build_batch", spy)
    out = translate_documents(m, docs, VOCAB, replace(kw, history_chunk=3))
    monkeypatch.setattr(documents, "build_batch", real)
    assert [len(o) for o in out] == [7, 3] and out[1][1] == "" and out[1] == whole[1]
    assert out[0][:3] == whole[0][:3]
    piece = translate_documents(m, [docs[0][2:6]], VOCAB, kw)[0]      # sentences 3–5 with sentence 2 as warm-up
    assert out[0][3:6] == piece[1:]
    assert len(sizes) == 4 and sizes[0] == 4                   # 3 + 1 steps; the first holds every piece's start
    assert translate_documents(m, docs, VOCAB, replace(kw, history_chunk=10)) == whole
    assert translate_documents(m, docs, VOCAB, replace(kw, history_chunk="auto")) == whole    # C = 8 ≥ 7 lines: no cut
    assert translate_documents(m, docs, VOCAB, replace(kw, history_chunk="auto", batch_sentences=1)) == whole
    with pytest.raises(ValueError, match="history_chunk"):
        translate_documents(m, docs, VOCAB, replace(kw, history_chunk=-1))


def test_warmup_beam_searches_the_warm_up_lines_alone_with_that_beam(monkeypatch):
    """translate_documents(history_chunk=C, warmup_beam=W): a piece's warm-up lines are searched
    with beam W in batches of their own (the kept lines with ``beam``), so a later sentence is
    what its piece gives when the warm-up line is the W-beam translation of itself; the
    documents' first pieces (no warm-up) are the whole-document translation's; W = 0 or W =
    ``beam`` is the plain search."""
    from doctrans.inference import documents
    from doctrans.inference.documents import translate_documents

    m, docs, kw = _two_documents()
    whole = translate_documents(m, docs, VOCAB, kw)
    calls = []
    real = documents.beam_search

    def spy(model_, batch, vocab, search, *args, **kwargs):
        calls.append((search.beam, int(batch.is_target.sum())))
        return real(model_, batch, vocab, search, *args, **kwargs)

    monkeypatch.setattr(documents, "beam_search", spy)
    out = translate_documents(m, docs, VOCAB, replace(kw, history_chunk=3, warmup_beam=1))
    # pieces (0,[0,1,2],0) (0,[2..5],1) (0,[5,6],1) (1,[0,2],0): step 0 = 2 kept starts + 2 warm-ups
    assert calls[:2] == [(2, 2), (1, 2)] and all(b == 2 for b, _ in calls[2:]) and len(calls) == 5
    monkeypatch.setattr(documents, "beam_search", real)
    assert out[0][:3] == whole[0][:3] and out[1] == whole[1]
    for lo, hi in ((2, 6), (5, 7)):                        # each later piece after its greedy warm-up line
        greedy = translate_documents(m, [[docs[0][lo]]], VOCAB, replace(kw, beam=1))[0][0]
        piece = translate_documents(m, [docs[0][lo:hi]], VOCAB, kw,
                                    given={(0, 0): VOCAB.encode(greedy, add_eos=False).tolist()})[0]
        assert out[0][lo + 1:hi] == piece[1:]
    plain = translate_documents(m, docs, VOCAB, replace(kw, history_chunk=3))
    assert plain[0][6] != out[0][6]                         # this model's greedy warm-up changes line 6
    assert translate_documents(m, docs, VOCAB, replace(kw, history_chunk=3, warmup_beam=2)) == plain


def test_auto_history_chunk_fills_one_batch():
    """``history_chunk="auto"``: the shortest pieces (at least ``MIN_CHUNK`` lines) whose number fits
    one batch of ``batch_sentences`` — the TVsub test's two documents (330 and 824 lines, batch 64)
    in pieces of 19 (18 + 44 = 62 pieces; 18 lines would make 19 + 46 = 65) — whole documents
    when the documents alone fill a batch; empty lines do not count; an int passes through."""
    from doctrans.inference.documents import MIN_CHUNK, _history_pieces, history_chunk_for

    x = np.array([4, 2])
    test = [[x] * 330, [x] * 824]
    assert history_chunk_for(test, "auto", 64) == 19
    assert len(_history_pieces(test, 19, 1)) == 62 and len(_history_pieces(test, 18, 1)) > 64
    assert history_chunk_for(test, "auto", 128) == 10                     # 33 + 83 = 116 pieces
    assert history_chunk_for([[x] * 100], "auto", 64) == MIN_CHUNK         # 13 pieces, not 64 of 2 lines
    assert history_chunk_for([[x, None] * 50], "auto", 64) == MIN_CHUNK
    assert history_chunk_for([[x] * 40] * 64, "auto", 64) == 0            # 64 documents fill the batch already
    assert history_chunk_for([[x] * 40] * 63 + [[None]], "auto", 64) == 40     # 63 pieces: the documents uncut
    assert history_chunk_for(test, 0, 64) == 0 and history_chunk_for(test, 32, 64) == 32
    for bad in (-1, "8", True, 2.5):
        with pytest.raises(ValueError, match="history_chunk"):
            history_chunk_for(test, bad, 64)
