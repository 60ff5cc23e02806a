"""Context models (models/context/): every row of CONTEXT_MODELS through the model contract on a
hand-made document batch — shapes, incremental decoding = teacher forcing, empty context =
the sentence model, the context actually read, context rows never translated."""
from __future__ import annotations

from contextlib import nullcontext


import pytest
import torch

from doctrans.config import load_experiment, to_dict
from doctrans.data.vocab import Vocab
from doctrans.inference.beam_search import beam_search
from doctrans.models.build import CONTEXT_MODELS, build_model
from doctrans.models.interface import SENTENCE_MODEL, SearchBatch, Seq2SeqModel
from doctrans.inference.config import SearchOptions

from conftest import REPO, DocBatchStub, stepwise_equals_teacher_forcing

VOCAB = Vocab(["<pad>", "<s>", "</s>", "<unk>"] + [f"t{i}" for i in range(16)])
CONTEXT_YAMLS = sorted((REPO / "pipelines" / "context").glob("*.yaml"))
TINY = {"context_sents": 2, "heads": 2, "d_ff": 32, "dropout": 0.0}     # what fits the tiny backbone


def _tiny_context(path) -> dict:
    """The ``context`` section of a pipelines/context YAML, sized for the tiny backbone."""
    ctx = load_experiment(path).context
    return {k: min(v, TINY[k]) if k == "context_sents" else TINY.get(k, v) for k, v in to_dict(ctx).items()}


VARIANTS = {p.stem: _tiny_context(p) for p in CONTEXT_YAMLS}
BACKBONE = {p.stem: load_experiment(p).model.backbone for p in CONTEXT_YAMLS}   # its tiny YAML is used
N = {name: v.get("context_sents", 2) for name, v in VARIANTS.items()}     # ≤ 2 (multi_encoder: 1)


def reads_context(name: str) -> bool:
    """False for QCN's regularisation-only variant (no context sub-layers)."""
    return VARIANTS[name].get("query_guided", True)


def model(name: str, seed: int = 0):
    torch.manual_seed(seed)
    ctx = VARIANTS[name]
    cfg = load_experiment(REPO / "pipelines" / BACKBONE[name] / "tiny.yaml",
                          ["model.dropout=0.0", f"context={ctx}".replace("'", "").replace("True", "true")])
    return build_model(cfg.model, len(VOCAB), len(VOCAB), 0, cfg.context).eval()


def doc_batch(n: int = 2) -> DocBatchStub:
    """One document of 3 sentences (rows 0–2) and a 1-sentence document (row 3): ``ctx`` (4, n ≤ 2)
    for the models of previous sentences, ``block`` (two sub-documents) for the sub-document models."""
    src = torch.tensor([[4, 5, 2, 0], [6, 7, 8, 2], [9, 2, 0, 0], [10, 11, 2, 0]])
    tgt_in = torch.tensor([[1, 12, 13, 0], [1, 14, 0, 0], [1, 15, 16, 17], [1, 18, 0, 0]])
    ctx = torch.tensor([[-1, -1], [-1, 0], [0, 1], [-1, -1]])[:, 2 - n:]
    return DocBatchStub(src, tgt_in, ctx, torch.tensor([False, True, True, True]), torch.tensor([0, 0, 0, 1]))


def test_every_table_row_has_a_yaml():
    assert {"concat", "han_encoder", "han_decoder", "han_joint"} <= set(VARIANTS)
    assert {v["type"] for v in VARIANTS.values()} == set(CONTEXT_MODELS)


@pytest.mark.parametrize("name", sorted(VARIANTS))
def test_incremental_decoding_matches_teacher_forcing(name):
    m, b = model(name), doc_batch(N[name])
    assert isinstance(m, Seq2SeqModel) and (m.context_sents == N[name] or m.context_block > 0)
    with torch.no_grad():
        assert m.decode_train(m.encode(b), b.tgt_in).shape == (4, 4, len(VOCAB))      # (B, T, V)
    assert stepwise_equals_teacher_forcing(m, b, atol=1e-5)


@pytest.mark.parametrize("name", sorted(VARIANTS))
def test_no_context_is_the_sentence_model(name):
    """A row without context (document start) gets exactly the output of a sentence batch (no
    ctx / block at all), which is the backbone's exactly when the model's ``empty_context`` says
    so (``SENTENCE_MODEL``); the others (QCN, HGC, HRNN, ISG) say what they read instead, and
    their own tests check it (test_capsule, test_global_context, test_hier_rnn, test_isg)."""
    m, b = model(name), doc_batch(N[name])
    with torch.no_grad():
        ctx_logits = m.decode_train(m.encode(b), b.tgt_in)
        base = m.backbone.decode_train(m.backbone.encode(b), b.tgt_in)
        plain = m.decode_train(m.encode(SearchBatch(b.src)), b.tgt_in)
    assert torch.allclose(ctx_logits[3], plain[3], atol=1e-6)                  # row 3: no context
    assert torch.allclose(plain, base, atol=1e-6) == (m.empty_context == SENTENCE_MODEL), m.empty_context
    assert m.empty_context and m.backbone.empty_context == SENTENCE_MODEL
    assert (not torch.allclose(ctx_logits[2], plain[2], atol=1e-4)) == reads_context(name)   # reads rows 0, 1


@pytest.mark.parametrize("name", sorted(VARIANTS))
def test_context_read_from_the_right_side(name):
    """Changing the previous source sentence changes the current row's output for every model
    (the HAN decoder reads it through the context's teacher-forced decoder states); changing the
    previous target sentence only for the models with a decoder side (HAN decoder, the continuous
    cache: its cells are the previous targets' decoder states)."""
    m, b = model(name), doc_batch(N[name])
    with torch.no_grad():
        ref = m.decode_train(m.encode(b), b.tgt_in)[1]
        b_src = doc_batch(N[name])
        b_src.src[0, :2] = torch.tensor([15, 16])
        b_tgt = doc_batch(N[name])
        b_tgt.tgt_in[0, 1:3] = torch.tensor([4, 5])
        by_src = m.decode_train(m.encode(b_src), b_src.tgt_in)[1]
        by_tgt = m.decode_train(m.encode(b_tgt), b_tgt.tgt_in)[1]
    reads_src = reads_context(name)
    reads_tgt = VARIANTS[name].get("attach") in ("decoder", "both") or VARIANTS[name]["type"] in ("cache", "tgt_concat")
    assert (not torch.allclose(ref, by_src, atol=1e-5)) == reads_src
    assert (not torch.allclose(ref, by_tgt, atol=1e-5)) == reads_tgt


@pytest.mark.parametrize("name", sorted(VARIANTS))
def test_search_translates_target_rows_only(name):
    m, b = model(name), doc_batch(N[name])
    res = beam_search(m, b, VOCAB, SearchOptions(beam=2, max_len_extra=3))
    assert len(res.tokens) == 3                                                 # rows 1, 2, 3
    single = beam_search(m, DocBatchStub(b.src[3:], b.tgt_in[3:], torch.full((1, N[name]), -1),
                                         torch.tensor([True])), VOCAB, SearchOptions(beam=2, max_len_extra=3))
    assert res.tokens[2] == single.tokens[0]                                    # no context: same output


def test_gather_context_equals_per_row_lookup():
    """In-batch context gathering (``HANBlock.gather_memory`` over ``project_rows``) = looking up
    each row's context rows one by one; a missing slot (−1) reads nothing."""
    from doctrans.models.context.han_block import HANBlock, HANBlockConfig

    block = HANBlock(4, HANBlockConfig(heads=2, d_ff=8, dropout=0.0))
    states = torch.randn(4, 3, 4)
    masked = torch.tensor([[False, False, True]] * 4)
    rows = torch.tensor([[-1, 2], [0, 1], [3, 3], [-1, -1]])
    k_rows, v_rows = block.project_rows(states, masked)
    mem = block.gather_memory(k_rows, v_rows, masked, rows)
    for b in range(4):
        for n in range(2):
            r = int(rows[b, n])
            if r < 0:
                assert mem.slot_gone[b, n] and mem.slot_void[b, n]
            else:
                assert not mem.slot_gone[b, n]
                assert torch.equal(mem.k[b, n], k_rows[r]) and torch.equal(mem.v[b, n], v_rows[r])
                assert mem.word_keep[b, n].tolist() == [True, True, False]
    assert mem.no_context.tolist() == [False, False, False, True]


def _reference_loss(m, b, pad_id: int = 0):
    """The loss before context-only rows were skipped: every row encoded in one call and
    decoded, the loss over the target rows' real tokens (label smoothing 0.1)."""
    from doctrans.training.loss import label_smoothed_xent

    keep = b.tgt_out.ne(pad_id) & b.is_target[:, None]
    return label_smoothed_xent(m.decode_train(m.encode(b), b.tgt_in, select=keep), b.tgt_out[keep], 0.1)


@pytest.mark.parametrize("name", sorted(VARIANTS))
def test_context_rows_encoded_apart_and_not_decoded_same_loss_and_gradients(name, monkeypatch):
    """forward_loss decodes target rows only and the models encode context-only rows apart
    (HAN: without gradient, detach_context; concat: not at all): same loss and gradients as
    one encoder call over every row and the decoder over every row."""
    import doctrans.models.context.concat as concat_mod
    import doctrans.models.context.han as han_mod
    from doctrans.models.context.concat import ConcatContext
    from doctrans.training.loss import forward_loss

    b = doc_batch(N[name])
    b.is_target = torch.tensor([False, True, False, True])             # row 2: context of nothing
    b.tgt_out = torch.cat([b.tgt_in[:, 1:], torch.zeros(4, 1, dtype=torch.long)], 1)
    for r in range(4):                                                  # y… </s>
        b.tgt_out[r, int(b.tgt_in[r].ne(0).sum()) - 1] = 2
    m = model(name)
    out = forward_loss(m, b, 0, 0.1)
    out.total.backward()
    grads = {k: p.grad.clone() for k, p in m.named_parameters() if p.grad is not None}
    m.zero_grad()
    monkeypatch.setattr(han_mod, "split_encode", lambda backbone, batch, context_grad: backbone.encode(batch))
    monkeypatch.setattr(ConcatContext, "encode", lambda self, batch: self.backbone.encode(
        concat_mod.SearchBatch(self.concatenated_source(batch))))
    ref = _reference_loss(m, b)
    ref.total.backward()
    assert out.n_tokens == ref.n_tokens == int(b.tgt_out[b.is_target].ne(0).sum())
    assert torch.allclose(out.total, ref.total, atol=1e-5)
    ref_grads = {k: p.grad for k, p in m.named_parameters() if p.grad is not None}
    assert set(grads) <= set(ref_grads) and grads
    for k, g in ref_grads.items():
        assert torch.allclose(grads.get(k, torch.zeros_like(g)), g, atol=1e-5), k


def _long_doc_batch(seed: int = 0, width: int = 2) -> DocBatchStub:
    """40 rows of two documents (rows 0–24, 25–39) with lengths 2–12, rows 0 and 25 context-only,
    each row's context its ``width`` ≤ 2 predecessors in the same document."""
    g = torch.Generator().manual_seed(seed)
    n, s, t = 40, 12, 12
    src = torch.zeros(n, s, dtype=torch.long)
    tgt_in = torch.zeros(n, t, dtype=torch.long)
    for r in range(n):
        ls, lt = int(torch.randint(2, s + 1, (1,), generator=g)), int(torch.randint(2, t + 1, (1,), generator=g))
        src[r, :ls - 1] = torch.randint(4, len(VOCAB), (ls - 1,), generator=g)
        src[r, ls - 1] = 2
        tgt_in[r, 0] = 1
        tgt_in[r, 1:lt] = torch.randint(4, len(VOCAB), (lt - 1,), generator=g)
    start = [0 if r < 25 else 25 for r in range(n)]
    ctx = torch.tensor([[r - 2 if r - 2 >= start[r] else -1, r - 1 if r - 1 >= start[r] else -1] for r in range(n)])
    is_target = torch.ones(n, dtype=torch.bool)
    is_target[[0, 25]] = False
    b = DocBatchStub(src, tgt_in, ctx[:, 2 - width:], is_target)
    b.tgt_out = torch.cat([tgt_in[:, 1:], torch.zeros(n, 1, dtype=torch.long)], 1)
    for r in range(n):
        b.tgt_out[r, int(tgt_in[r].ne(0).sum()) - 1] = 2
    return b


@pytest.mark.parametrize("name", sorted(VARIANTS))
def test_length_buckets_give_the_loss_and_gradients_of_one_padded_batch(name, monkeypatch):
    """Encoding and decoding a document batch's rows in length buckets (models.rows.length_buckets)
    computes what one padded call computes: same loss and gradients."""
    import doctrans.models.rows as base
    from doctrans.training.loss import forward_loss

    b = _long_doc_batch(0, N[name])
    monkeypatch.setattr(base, "LENGTH_BUCKETS", 4)
    assert len(base.length_buckets(b.src.ne(0).sum(1))) == 4
    results = []
    for buckets in (4, 1):
        monkeypatch.setattr(base, "LENGTH_BUCKETS", buckets)
        m = model(name)
        out = forward_loss(m, b, 0, 0.1)
        out.total.backward()
        results.append((out, {k: p.grad for k, p in m.named_parameters() if p.grad is not None}))
    (out, grads), (ref, ref_grads) = results
    assert out.n_tokens == ref.n_tokens == int(b.tgt_out[b.is_target].ne(0).sum())
    assert torch.allclose(out.total, ref.total, rtol=1e-5)
    assert set(grads) == set(ref_grads) and grads
    for k, g in ref_grads.items():
        assert torch.allclose(grads[k], g, atol=1e-5, rtol=1e-4), k


@pytest.mark.parametrize("name", [n for n in sorted(VARIANTS) if VARIANTS[n].get("attach") in ("decoder", "both")])
def test_beams_sharing_one_context_memory_search_like_one_memory_per_row(name, monkeypatch):
    """Beam search reads the decoder-side context memory once per sentence (its K hypotheses as
    K query positions, ``HAN.decode_step``); the per-row path (every row its own copy) must give
    the same hypotheses and scores."""
    from doctrans.models.context import han

    m, b = model(name), doc_batch(N[name])
    groups = []
    real_step = han.HAN.decode_step_hidden

    def spy(self, state, prev_tokens):
        groups.append(state.group)
        return real_step(self, state, prev_tokens)

    monkeypatch.setattr(han.HAN, "decode_step_hidden", spy)
    grouped = beam_search(m, b, VOCAB, SearchOptions(beam=3, max_len_extra=4))
    # step 0 runs one row per sentence; the widening reorder sets the group to the beam
    assert groups[0] == 1 and len(groups) > 1 and set(groups[1:]) == {3}
    monkeypatch.setattr(han, "rows_per_group", lambda sent, hint=0: 1)    # every row its own memory
    rows = beam_search(m, b, VOCAB, SearchOptions(beam=3, max_len_extra=4))
    assert set(groups[len(groups) - 1:]) == {1}
    assert grouped.tokens == rows.tokens
    assert grouped.scores == pytest.approx(rows.scores, abs=1e-5)


@pytest.mark.parametrize("name", [n for n in sorted(VARIANTS) if VARIANTS[n]["type"] == "han"])
def test_inference_cache_encodes_each_sentence_about_once_and_changes_nothing(name, monkeypatch):
    """translate_documents keeps per-sentence context work between batches (``inference_cache``):
    same translations as without it; a target-side model (documents in order) encodes every
    sentence exactly once, a source-side one fewer rows than without the cache."""
    from doctrans.inference.documents import translate_documents
    from doctrans.models.context.base import ContextModel

    m = model(name)
    g = torch.Generator().manual_seed(5)
    docs = [[torch.cat([torch.randint(4, len(VOCAB), (int(torch.randint(1, 6, (1,), generator=g)),), generator=g),
                        torch.tensor([2])]).numpy() for _ in range(int(n))] for n in (5, 3, 6, 1, 4)]
    n_sents = sum(map(len, docs))
    encoded = []
    real_encode = m.backbone.encode

    def counting(batch):
        encoded.append(int(batch.src.size(0)))
        return real_encode(batch)

    monkeypatch.setattr(m.backbone, "encode", counting)
    with torch.no_grad():
        cached = translate_documents(m, docs, VOCAB, SearchOptions(beam=2, lenpen=1.0, max_len_ratio=1.5, max_len_extra=3, batch_sentences=4, history_chunk=0, warmup_beam=0))
        rows_cached = sum(encoded)
        encoded.clear()
        monkeypatch.setattr(ContextModel, "inference_cache", lambda self, capacity=4096: nullcontext())
        plain = translate_documents(m, docs, VOCAB, SearchOptions(beam=2, lenpen=1.0, max_len_ratio=1.5, max_len_extra=3, batch_sentences=4, history_chunk=0, warmup_beam=0))
        rows_plain = sum(encoded)
    assert cached == plain
    if VARIANTS[name]["attach"] in ("decoder", "both"):
        assert rows_cached == n_sents < rows_plain
    else:
        assert rows_cached < rows_plain


def _random_docs(seed: int = 5, sizes=(5, 3, 6, 1, 4)) -> list:
    """Documents of random 1–5-token sentences (ids ending in </s>), one repeated sentence."""
    g = torch.Generator().manual_seed(seed)
    docs = [[torch.cat([torch.randint(4, len(VOCAB), (int(torch.randint(1, 6, (1,), generator=g)),), generator=g),
                        torch.tensor([2])]).numpy() for _ in range(int(n))] for n in sizes]
    docs[2][3] = docs[0][1].copy()                                   # the same sentence in two documents
    return docs


# what the inference cache saves, per context type: (object, method, rows of its first argument)
CACHE_SPIES = {"han": ("backbone", "encode", lambda batch: batch.src.size(0)),
               "hrnn": ("model", "summarise", lambda tokens: tokens.size(0)),
               "cache": ("backbone", "decode_states", lambda enc: enc.states.size(0)),
               "isg": ("backbone", "encode", lambda batch: batch.src.size(0)),
               "multi_encoder": ("model", "encode_context", lambda tokens: tokens.size(0))}


@pytest.mark.parametrize("name", sorted(VARIANTS))
def test_inference_cache_gives_the_translations_of_the_uncached_path(name, monkeypatch):
    """Every context model translates a collection to the same strings with and without
    ``inference_cache`` (issue 30: the per-document cache of context states); for the models
    that keep per-sentence work in it (HAN, HRNN, the continuous cache, ISG, multi-encoder) it does less of
    that work: fewer rows encoded / summarised / teacher-forced (the multi-encoder, N = 1: only
    a repeated sentence's Enc' states are reused)."""
    from doctrans.inference import documents
    from doctrans.inference.documents import translate_documents

    m, docs = model(name), _random_docs()
    kind = VARIANTS[name]["type"]
    counted: list[int] = []
    if kind in CACHE_SPIES:
        part, method, rows = CACHE_SPIES[kind]
        owner = m.backbone if part == "backbone" else m
        real = getattr(owner, method)

        def spy(first, *args, **kwargs):
            counted.append(int(rows(first)))
            return real(first, *args, **kwargs)

        monkeypatch.setattr(owner, method, spy)
    scores: list[float] = []
    real_search = documents.beam_search

    def recording(*args, **kwargs):
        res = real_search(*args, **kwargs)
        scores.extend(res.scores)
        return res

    monkeypatch.setattr(documents, "beam_search", recording)
    with torch.no_grad():
        cached = translate_documents(m, docs, VOCAB, SearchOptions(beam=2, lenpen=1.0, max_len_ratio=1.5, max_len_extra=3, batch_sentences=4, history_chunk=0, warmup_beam=0))
        work_cached, scores_cached = sum(counted), list(scores)
        counted.clear()
        scores.clear()
        plain = translate_documents(m, docs, VOCAB, SearchOptions(beam=2, lenpen=1.0, max_len_ratio=1.5, max_len_extra=3, batch_sentences=4, history_chunk=0, warmup_beam=0), context_cache=False)
        work_plain = sum(counted)
    assert cached == plain
    assert scores_cached == pytest.approx(scores, abs=1e-5)                   # same batches, same order
    assert [len(d) for d in cached] == [len(d) for d in docs]
    if kind in CACHE_SPIES:
        assert 0 < work_cached < work_plain


@pytest.mark.parametrize("name", [n for n in sorted(VARIANTS) if VARIANTS[n]["type"] == "hgc"])
@pytest.mark.parametrize("regroup", [32, 1])
def test_sub_documents_decoded_in_length_order_translate_as_their_own_batches(name, regroup, monkeypatch):
    """A sub-document model's sentences are encoded with their sub-documents and decoded in
    batches of similar source length (``inference/documents.py``, issue 30): the same
    translations and scores as searching each sub-document batch as it was encoded; with
    ``REGROUP`` 1 the sentences are decoded after every encoded batch."""
    from doctrans.inference import documents

    m, docs = model(name), _random_docs(sizes=(5, 3, 6, 1, 4, 7, 2))
    monkeypatch.setattr(documents, "REGROUP", regroup)
    sents = {(d, i): x for d, lines in enumerate(docs) for i, x in enumerate(lines)}
    order = {d: list(range(len(lines))) for d, lines in enumerate(docs)}
    ref: dict = {}
    with torch.no_grad():
        for rows, batch in documents.block_batches(m, sents, order, m.context_block, 6, VOCAB, torch.device("cpu")):
            res = beam_search(m, batch, VOCAB, SearchOptions(beam=3, lenpen=1.0, max_len_ratio=1.5, max_len_extra=3))
            ref.update({s: (VOCAB.decode(t), sc) for s, t, sc in zip(rows, res.tokens, res.scores)})
        scores = {}
        real = documents.beam_search

        def recording(model_, src, *args, **kwargs):
            res = real(model_, src, *args, **kwargs)
            scores.setdefault("all", []).extend(res.scores)
            return res

        monkeypatch.setattr(documents, "beam_search", recording)
        out = documents.translate_documents(m, docs, VOCAB, SearchOptions(beam=3, lenpen=1.0, max_len_ratio=1.5, max_len_extra=3, batch_sentences=6, history_chunk=0, warmup_beam=0))
    assert out == [[ref[(d, i)][0] for i in range(len(lines))] for d, lines in enumerate(docs)]
    assert sorted(scores["all"]) == pytest.approx(sorted(sc for _, sc in ref.values()), abs=1e-5)


@pytest.mark.parametrize("name", sorted(VARIANTS))
def test_one_decoder_pass_for_loss_and_context_same_loss_and_gradients(name, monkeypatch):
    """Training HAN decoder decodes target and context rows in one teacher-forced pass and the
    loss reuses the target rows' states (``HAN._stashed_hidden``): same loss and gradients as
    decoding the target rows again (the stash turned off). Other models: nothing to reuse."""
    from doctrans.models.context import han
    from doctrans.training.loss import forward_loss

    b = _long_doc_batch(1, N[name])
    results, used = [], []
    real = han.HAN._stashed_hidden

    def spy(self, enc, tgt_in):
        out = real(self, enc, tgt_in)
        used.append(out is not None)
        return out

    for stash in (spy, lambda self, enc, tgt_in: None):
        monkeypatch.setattr(han.HAN, "_stashed_hidden", stash)
        m = model(name).train()
        out = forward_loss(m, b, 0, 0.1)
        out.total.backward()
        results.append((out, {k: p.grad for k, p in m.named_parameters() if p.grad is not None}))
    assert any(used) == (VARIANTS[name].get("attach") == "decoder")
    (out, grads), (ref, ref_grads) = results
    assert torch.allclose(out.total, ref.total, rtol=1e-5)
    assert set(grads) == set(ref_grads) and grads
    for k, g in ref_grads.items():
        assert torch.allclose(grads[k], g, atol=1e-5, rtol=1e-4), k


def test_length_buckets_minimise_the_padded_grid():
    """``models.rows.length_buckets``: a partition of the rows into ≤ K groups of consecutive lengths,
    ≥ min_rows each, whose grid Σ rows × longest is the least of every such cut between
    distinct lengths (brute force on random batches); a long tail gets its own group."""
    import itertools
    import random

    from doctrans.models.rows import length_buckets

    def grid(lengths, groups):
        return sum(len(g) * int(lengths[g].max()) for g in groups)

    def brute(srt, k, m):
        cuts = [i for i in range(1, len(srt)) if srt[i] != srt[i - 1]]
        best = len(srt) * srt[-1]
        for n in range(1, k):
            for c in itertools.combinations(cuts, n):
                b = [0, *c, len(srt)]
                if all(y - x >= m for x, y in zip(b, b[1:])):
                    best = min(best, sum((y - x) * srt[y - 1] for x, y in zip(b, b[1:])))
        return best

    rng = random.Random(0)
    for _ in range(200):
        lengths = torch.tensor([rng.randint(1, 9) for _ in range(rng.randint(1, 14))])
        k, m = rng.randint(1, 4), rng.randint(1, 3)
        groups = length_buckets(lengths, k, m)
        assert sorted(torch.cat(groups).tolist()) == list(range(len(lengths)))
        assert len(groups) <= max(1, min(k, len(lengths) // m))
        assert len(groups) == 1 or all(len(g) >= m for g in groups)
        assert all(int(lengths[a].max()) <= int(lengths[b].min()) for a, b in zip(groups, groups[1:]))
        assert grid(lengths, groups) == brute(sorted(lengths.tolist()), max(1, min(k, len(lengths) // m)), m)
    tail = torch.tensor([5] * 12 + [6] * 12 + [40] * 2)                      # 26 rows, 2 long ones
    groups = length_buckets(tail, 2, 2)
    assert [sorted(tail[g].tolist()) for g in groups] == [[5] * 12 + [6] * 12, [40, 40]]
    assert length_buckets(torch.full((30,), 7), 4, 2)[0].numel() == 30       # one length: one group
    for lengths in (torch.tensor([3] * 40 + [4] * 40), torch.full((64,), 5),  # few distinct lengths, K = 8
                    torch.tensor([1] * 9 + [2] * 50 + [30] * 3)):
        groups = length_buckets(lengths, 8, 8)
        assert all(g.numel() >= 8 for g in groups) or len(groups) == 1
        assert sorted(torch.cat(groups).tolist()) == list(range(len(lengths)))


# ---------------------------------------------------------------- the contract (models/interface.py)

@pytest.mark.parametrize("name", sorted(VARIANTS))
def test_the_contract_is_complete_and_the_decoder_states_come_through_it(name):
    """Every context model has every member of ``Seq2SeqModel`` (document side included), its
    ``document`` matches its data needs, and the decoder states of the contract are the ones its
    output layer reads: teacher-forced (``decode_hidden``) and per hypothesis in search
    (``decode_step_hidden``, over a reordered state as beam search makes it)."""
    from doctrans.models.interface import DocumentSpec, missing_members

    m, b = model(name), doc_batch(N[name])
    assert missing_members(m, Seq2SeqModel) == []
    assert m.document == DocumentSpec(m.context_sents, m.context_block, bool(m.context_needs_target))
    assert m.document.reads_documents and m.sentence_weights_prefix == "backbone."
    with torch.no_grad():
        enc = m.encode(b)
        hidden = m.decode_hidden(enc, b.tgt_in)                                     # (B, T, D)
        assert hidden.shape == (*b.tgt_in.shape, m.hidden_size)
        assert torch.allclose(m.output_logits(hidden), m.decode_train(enc, b.tgt_in), atol=1e-6)
        order = torch.tensor([3, 1, 1, 2])
        state = m.init_state(enc).reorder(order)
        steps = []
        for t in range(b.tgt_in.size(1)):
            h, state = m.decode_step_hidden(state, b.tgt_in[order, t])
            steps.append(h)
        assert torch.allclose(torch.stack(steps, 1), hidden[order], atol=1e-5)


@pytest.mark.parametrize("backbone", ["transformer", "rnnsearch"])
def test_a_backbone_is_a_sentence_model_of_the_contract(backbone):
    from doctrans.models.interface import DocumentSpec, missing_members

    cfg = load_experiment(REPO / "pipelines" / backbone / "tiny.yaml", ["model.dropout=0.0"])
    m = build_model(cfg.model, len(VOCAB), len(VOCAB), 0).eval()
    assert missing_members(m, Seq2SeqModel) == [] and m.document == DocumentSpec()
    assert not m.document.reads_documents and m.sentence_weights_prefix == "" and m.explain_blocks() == []
    with m.inference_cache(8):
        b = doc_batch()
        enc = m.encode(b)
        assert m.auxiliary_losses(enc, b) == {} and m.context_filter([1], [1], [[-1]]) == {}
        assert torch.allclose(m.output_logits(m.decode_hidden(enc, b.tgt_in)), m.decode_train(enc, b.tgt_in))


@pytest.mark.parametrize("name,backbone,part,missing", [
    ("qcn", "rnnsearch", "EncoderParts", "encoder_layers"),
    ("hgc", "rnnsearch", "EncoderParts", "encode_with"),
    ("han_encoder", "rnnsearch", None, None),
    ("hrnn_combination", "transformer", "RNNParts", "rnn_size"),
    ("cache", "transformer", "RNNParts", "target_embedding"),
])
def test_a_context_model_on_a_backbone_without_its_parts_fails_at_build_time(name, backbone, part, missing):
    """QCN or HGC on RNNSearch used to fail deep in a forward pass (AttributeError on
    ``encoder_layers``); ``build_model`` now names the model, the backbone and what it lacks."""
    ctx = VARIANTS[name]
    cfg = load_experiment(REPO / "pipelines" / backbone / "tiny.yaml",
                          [f"context={ctx}".replace("'", "").replace("True", "true")])
    if part is None:                                  # HAN's BackboneParts: both backbones have them
        assert build_model(cfg.model, len(VOCAB), len(VOCAB), 0, cfg.context).document.reads_documents
        return
    with pytest.raises(ValueError) as e:
        build_model(cfg.model, len(VOCAB), len(VOCAB), 0, cfg.context)
    msg = str(e.value)
    assert f"context model {ctx['type']!r}" in msg and part in msg and f"backbone {backbone!r}" in msg
    assert missing in msg and "use model.backbone:" in msg


@pytest.mark.parametrize("name", ["hrnn_combination", "cache", "isg", "multi_encoder", "han_encoder", "han_joint"])
def test_inference_cache_smaller_than_a_batch_still_translates_the_same(name):
    """A cache capacity below the rows of one batch: entries computed for the batch are used even
    when the LRU has dropped them again (no KeyError), same translations as without the cache."""
    from doctrans.inference.documents import build_batch

    m, docs = model(name), _random_docs()
    sents = {(d, i): x for d, lines in enumerate(docs) for i, x in enumerate(lines)}
    order = {d: list(range(len(lines))) for d, lines in enumerate(docs)}
    position = {(d, i): i for d, i in sents}
    targets = [(0, 4), (2, 5), (4, 3)]
    hyps = {s: [5, 6] for s in sents}
    batch = build_batch(targets, sents, order, position, m.context_sents, hyps, VOCAB, torch.device("cpu"))
    with torch.no_grad():
        plain = beam_search(m, batch, VOCAB, SearchOptions(beam=2, max_len_extra=3))
        with m.inference_cache(capacity=1):
            cached = beam_search(m, batch, VOCAB, SearchOptions(beam=2, max_len_extra=3))
    assert cached.tokens == plain.tokens
    assert cached.scores == pytest.approx(plain.scores, abs=1e-5)


def test_sub_document_model_in_training_mode_translates_as_in_eval_mode():
    """translate_documents encodes a sub-document model's batches itself (before beam search,
    which switches the model to eval): a model left in training mode (dropout on) must translate
    exactly as in eval mode, as it did when beam search encoded."""
    from doctrans.inference.documents import translate_documents

    torch.manual_seed(0)
    cfg = load_experiment(REPO / "pipelines" / "transformer" / "tiny.yaml",
                          ["model.dropout=0.5", "context={type: hgc, block: 4}"])
    m = build_model(cfg.model, len(VOCAB), len(VOCAB), 0, cfg.context)
    docs = _random_docs()
    with torch.no_grad():
        ref = translate_documents(m.eval(), docs, VOCAB, SearchOptions(beam=2, lenpen=1.0, max_len_ratio=1.5, max_len_extra=3, batch_sentences=4, history_chunk=0, warmup_beam=0))
        out = translate_documents(m.train(), docs, VOCAB, SearchOptions(beam=2, lenpen=1.0, max_len_ratio=1.5, max_len_extra=3, batch_sentences=4, history_chunk=0, warmup_beam=0))
    assert out == ref


def test_split_encode_encodes_context_only_rows_in_length_buckets_without_gradient():
    """``models.rows.split_encode`` (the HAN models' training encode): the context-only rows —
    many, with CoWord dropout's unmasked originals — are encoded in length buckets, each cut to
    its own longest row, without gradient when ``context_grad`` is off; the states of every real
    position equal one encoder call over all rows."""
    from doctrans.models.rows import split_encode

    b = _long_doc_batch(3)
    b.is_target = torch.arange(40) % 2 == 1                               # 20 context-only rows
    m = model("han_encoder").train()
    for mod in m.modules():                                              # deterministic states
        if isinstance(mod, torch.nn.Dropout):
            mod.p = 0.0
    backbone, calls = m.backbone, []
    real_encode = backbone.encode

    def spy(batch):
        enc = real_encode(batch)
        calls.append((batch.src.size(0), batch.src.size(1), enc.states.requires_grad))
        return enc

    backbone.encode = spy
    out = split_encode(backbone, b, context_grad=False)
    backbone.encode = real_encode
    context_calls = [c for c in calls if not c[2]]
    assert sum(c[0] for c in context_calls) == 20 and len(context_calls) >= 2       # ≥ 2 buckets
    widths = sorted(c[1] for c in context_calls)
    assert widths[0] < int(b.src[~b.is_target].ne(0).sum(1).max())      # the short bucket is cut
    with torch.no_grad():
        ref = real_encode(SearchBatch(b.src))
    real = b.src.ne(0)
    assert torch.allclose(out.states[real], ref.states[real], atol=1e-5)
    assert torch.equal(out.src_pad_mask, ~real)
