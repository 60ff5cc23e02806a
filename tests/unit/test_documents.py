"""Document-aware data and batches (``data.documents``): loading a prepared split with its
``.docs``/``train.target``, context gathered inside the batch against a slow per-sentence
reference, document-level shuffling, and the loss ignoring context-only rows."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from doctrans.data.batching import collate, load_parallel
from doctrans.data.documents import (
    DocBatch, collate_doc, load_doc_split, make_doc_batches, read_doc_positions)
from doctrans.data.documents import _row_widths
from doctrans.data.vocab import SPECIALS, Vocab
from doctrans.training.loss import forward_loss


def _write(path: Path, lines: list[str]) -> Path:
    path.write_text("".join(f"{x}\n" for x in lines), encoding="utf-8")
    return path


def _corpus(n_docs: int = 7, seed: int = 0) -> tuple[list[str], list[str], list[str], list[str]]:
    """(src, tgt, docs, target) lines: documents of 1–12 sentences; every sentence starts with a
    word naming its line, lengths 0–9 words; about one line in five is not a target."""
    rng = np.random.default_rng(seed)
    src, tgt, docs, target = [], [], [], []
    for d in range(n_docs):
        for p in range(int(rng.integers(1, 13))):
            k = len(src)
            n_s, n_t = int(rng.integers(0, 10)), int(rng.integers(1, 10))
            src.append(" ".join([f"s{k}"] + [f"w{int(x)}" for x in rng.integers(0, 9, n_s)]))
            tgt.append(" ".join([f"t{k}"] + [f"v{int(x)}" for x in rng.integers(0, 9, n_t)]))
            docs.append(f"{100 + d}\t{p}")
            target.append("0" if rng.random() < 0.2 else "1")
    src[3], target[3] = "", "0"                       # a filtered empty side stays an empty line
    return src, tgt, docs, target


def _vocab(lines: list[str]) -> Vocab:
    return Vocab(list(SPECIALS) + sorted({t for line in lines for t in line.split()}))


@pytest.fixture
def prepared(tmp_path: Path) -> tuple[Path, Vocab, Vocab]:
    src, tgt, docs, target = _corpus()
    _write(tmp_path / "train.bpe.zh", src)
    _write(tmp_path / "train.bpe.en", tgt)
    _write(tmp_path / "train.docs", docs)
    _write(tmp_path / "train.target", target)
    return tmp_path, _vocab(src), _vocab(tgt)


def test_load_doc_split_fields_and_same_targets_as_load_parallel(prepared):
    prep, sv, tv = prepared
    data = load_doc_split(prep, "train", sv, tv, max_len=6)
    docs = [line.split("\t") for line in (prep / "train.docs").read_text().splitlines()]
    assert len(data) == len(docs) and data.doc_ids == [f"{100 + d}" for d in range(7)]
    assert [(data.doc_ids[d], int(p)) for d, p in zip(data.doc, data.pos)] == [(d, int(p)) for d, p in docs]
    assert list(data.doc_start) == [0, *np.flatnonzero(np.diff(data.doc)) + 1, len(data)]
    pairs, skipped = load_parallel(prep / "train.bpe.zh", prep / "train.bpe.en", sv, tv, max_len=6,
                                   target_path=prep / "train.target")
    assert skipped > 0 and list(pairs.line) == list(np.flatnonzero(data.is_target))
    for i, line in enumerate(pairs.line):
        assert np.array_equal(pairs.src[i], data.src[line]) and np.array_equal(pairs.tgt[i], data.tgt[line])
    assert max(len(s) for s in data.src) <= 7 and data.src[3].tolist() == [sv.eos_id]  # cut / empty
    without = load_doc_split(prep, "train", sv, tv)        # no max_len: targets from the file only
    assert list(without.is_target) == [f == "1" for f in (prep / "train.target").read_text().split()]


def test_old_dataset_without_target_file_is_all_targets(prepared):
    prep, sv, tv = prepared
    (prep / "train.target").unlink()
    assert load_doc_split(prep, "train", sv, tv).is_target.all()
    pairs, skipped = load_parallel(prep / "train.bpe.zh", prep / "train.bpe.en", sv, tv)
    assert (len(pairs), skipped) == (len(load_doc_split(prep, "train", sv, tv)), 0)


@pytest.mark.parametrize("lines, error", [
    (["a\t0", "a\t1", "a\t0"], r"train\.docs:3: document a position 0 follows position 1"),     # backwards
    (["a\t0", "a\t1", "a\t1"], r"train\.docs:3: document a position 1 follows position 1"),     # repeated
    (["a\t0", "a\t2", "b\t0"], r"train\.docs:2: document a position 2 follows position 0.*gap"),  # format 1
    (["a\t0", "b\t0", "a\t1"], r"train\.docs:3: document a reappears after document b"),
    (["a\t0", "a 1", "a\t2"], r"train\.docs:2: expected 'doc_id<TAB>position'"),
    (["a\t0", "a\t1"], r"train\.docs has 2 lines but the text files have 3"),
])
def test_bad_docs_file_names_file_and_line(tmp_path, lines, error):
    with pytest.raises(ValueError, match=error):
        read_doc_positions(_write(tmp_path / "train.docs", lines), 3)


def test_bad_target_file_names_file_and_line(prepared):
    prep, sv, tv = prepared
    flags = (prep / "train.target").read_text().split()
    _write(prep / "train.target", flags[:2] + ["x"] + flags[3:])
    with pytest.raises(ValueError, match=r"train\.target:3: expected 0 or 1"):
        load_doc_split(prep, "train", sv, tv)
    _write(prep / "train.target", flags[:-1])
    with pytest.raises(ValueError, match=r"train\.target has \d+ lines but the text files have"):
        load_parallel(prep / "train.bpe.zh", prep / "train.bpe.en", sv, tv, target_path=prep / "train.target")


def _reference_context(data, line: int, n: int) -> list[int | None]:
    """Slow reference: walk back through the document, oldest first; None before its start."""
    out = []
    for back in range(n, 0, -1):
        j = line - back
        ok = j >= 0 and data.doc[j] == data.doc[line] and data.pos[line] - data.pos[j] == back
        out.append(j if ok else None)
    return out


@pytest.mark.parametrize("mode,budget", [("runs", "tokens"), ("runs", "padded"), ("sorted", "padded")])
@pytest.mark.parametrize("context_sents", [0, 1, 3])
@pytest.mark.parametrize("max_tokens", [1, 40, 150, 10_000])
def test_context_in_batch_equals_per_sentence_reference(prepared, context_sents, max_tokens, mode, budget):
    prep, sv, tv = prepared
    data = load_doc_split(prep, "train", sv, tv, max_len=6)
    specs = make_doc_batches(data, max_tokens, context_sents, seed=3, epoch=1, mode=mode, budget=budget)
    seen = []
    for spec in specs:
        b = collate_doc(data, spec, tv)
        rows = list(b.index)
        assert len(set(rows)) == len(rows) and b.is_target.any()
        assert b.ctx.shape == (len(rows), context_sents) and b.ctx.dtype == torch.long
        assert b.n_targets == int(b.tgt_out[b.is_target].ne(0).sum())
        width = max(b.src.shape[1], b.tgt_in.shape[1])                    # the padded width (tgt ends in </s>)
        widths = [max(len(data.src[i]), len(data.tgt[i])) for i in rows]
        size = sum(widths) if budget == "tokens" else len(rows) * width
        assert size <= max_tokens or int(b.is_target.sum()) == 1
        for r, line in enumerate(rows):
            assert np.array_equal(b.src[r, :len(data.src[line])].numpy(), data.src[line])
            if not b.is_target[r]:
                continue
            assert data.is_target[line]
            seen.append(line)
            for col, ref in enumerate(_reference_context(data, line, context_sents)):
                got = int(b.ctx[r, col])
                if ref is None:
                    assert got == -1
                    continue
                assert got != -1, "a target row lost a context sentence"       # N predecessors → no −1
                assert data.doc[rows[got]] == data.doc[line]                     # never another document
                assert np.array_equal(b.src[got, :len(data.src[ref])].numpy(), data.src[ref])
                assert np.array_equal(b.tgt_out[got, :len(data.tgt[ref])].numpy(), data.tgt[ref])
    assert sorted(seen) == list(np.flatnonzero(data.is_target))            # each target once per epoch


def test_documents_shuffled_sentences_never(prepared):
    prep, sv, tv = prepared
    data = load_doc_split(prep, "train", sv, tv, max_len=6)
    orders = {}
    for epoch in (0, 1, 2):
        specs = make_doc_batches(data, 60, 2, seed=5, epoch=epoch)
        again = make_doc_batches(data, 60, 2, seed=5, epoch=epoch)
        assert all(np.array_equal(a.rows, b.rows) and np.array_equal(a.is_target, b.is_target)
                   for a, b in zip(specs, again)) and len(specs) == len(again)
        targets = [int(line) for s in specs for line, t in zip(s.rows, s.is_target) if t]
        for d in range(data.n_docs):                      # a document's targets in order, together
            mine = [line for line in targets if data.doc[line] == d]
            assert mine == sorted(mine)
        orders[epoch] = list(dict.fromkeys(int(data.doc[line]) for line in targets))
        for s in specs:                                   # inside a batch: runs of consecutive lines
            docs_in = [int(data.doc[line]) for line in s.rows]
            assert docs_in == sorted(docs_in, key=lambda d: orders[epoch].index(d)) or len(set(docs_in)) == 1
            for a, b in zip(s.rows, s.rows[1:]):
                assert b == a + 1 or data.doc[a] != data.doc[b]
    assert orders[0] != orders[1] or orders[1] != orders[2]


def _sorted_key(data, line: int, n: int) -> tuple[int, int]:
    """Slow reference of the sorted mode's key: (widest of the line and its N predecessors in
    the document, its own width)."""
    width = _row_widths(data)
    ctx = [j for j in _reference_context(data, line, n) if j is not None]
    return max(int(width[j]) for j in [*ctx, line]), int(width[line])


@pytest.mark.parametrize("context_sents", [1, 3])
def test_sorted_mode_length_buckets_minimal_rows_and_determinism(prepared, context_sents):
    prep, sv, tv = prepared
    data = load_doc_split(prep, "train", sv, tv, max_len=6)
    specs = make_doc_batches(data, 60, context_sents, seed=5, epoch=2, mode="sorted")
    again = make_doc_batches(data, 60, context_sents, seed=5, epoch=2, mode="sorted")
    assert [(a.rows.tolist(), a.is_target.tolist()) for a in specs] == \
        [(b.rows.tolist(), b.is_target.tolist()) for b in again]
    other = make_doc_batches(data, 60, context_sents, seed=5, epoch=3, mode="sorted")
    assert [a.rows.tolist() for a in specs] != [b.rows.tolist() for b in other]
    spans = []
    for s in specs:
        assert list(s.rows) == sorted(s.rows)                          # line order inside a batch
        targets = [int(line) for line, t in zip(s.rows, s.is_target) if t]
        needed = set(targets) | {j for t in targets for j in _reference_context(data, t, context_sents)}
        assert set(int(x) for x in s.rows) == needed - {None}           # only missing context added
        keys = [_sorted_key(data, t, context_sents) for t in targets]
        spans.append((min(keys), max(keys)))
    spans.sort()
    assert all(hi <= lo for (_, hi), (lo, _) in zip(spans, spans[1:]))   # contiguous length buckets
    multi = [s for s in specs if len({int(data.doc[x]) for x in s.rows}) > 1]
    assert multi, "sorted batches mix documents (each target with its own context)"


def test_unknown_doc_batching_mode_raises(prepared):
    prep, sv, tv = prepared
    data = load_doc_split(prep, "train", sv, tv, max_len=6)
    with pytest.raises(ValueError, match="document batching mode must be one of"):
        make_doc_batches(data, 60, 1, seed=0, mode="bucketed")


def _tiny_transformer(n_src: int, n_tgt: int):
    from doctrans.models.backbones.transformer import Transformer, TransformerConfig

    torch.manual_seed(0)
    cfg = TransformerConfig(layers_enc=1, layers_dec=1, d_model=8, heads=2, d_ff=16, dropout=0.0)
    return Transformer(cfg, src_vocab=n_src, tgt_vocab=n_tgt).eval()


def test_forward_loss_ignores_context_rows(prepared):
    prep, sv, tv = prepared
    data = load_doc_split(prep, "train", sv, tv, max_len=6)
    model = _tiny_transformer(len(sv), len(tv))
    spec = make_doc_batches(data, 10_000, 2, seed=0)[0]
    doc_batch = collate_doc(data, spec, tv)
    assert (~doc_batch.is_target).any() and doc_batch.is_target.any()
    rows = spec.rows[spec.is_target]
    pairs = load_parallel(prep / "train.bpe.zh", prep / "train.bpe.en", sv, tv, max_len=6,
                          target_path=prep / "train.target")[0]
    where = {int(line): i for i, line in enumerate(pairs.line)}
    sent_batch = collate(pairs, np.asarray([where[int(r)] for r in rows]), tv)
    with torch.no_grad():
        doc_out = forward_loss(model, doc_batch, tv.pad_id, 0.1)
        sent_out = forward_loss(model, sent_batch, tv.pad_id, 0.1)
        all_rows = DocBatch(sent_batch.src, sent_batch.tgt_in, sent_batch.tgt_out, sent_batch.index,
                            sent_batch.n_targets, torch.ones(len(rows), dtype=torch.bool),
                            torch.full((len(rows), 0), -1))
        same = forward_loss(model, all_rows, tv.pad_id, 0.1)
    assert doc_out.n_tokens == sent_out.n_tokens == doc_batch.n_targets
    assert torch.allclose(doc_out.total, sent_out.total, atol=1e-4)
    # every row a target: the same loss (decoded in length buckets: float summation order only)
    assert torch.allclose(same.total, sent_out.total, rtol=1e-6)
    assert same.terms["nll_nats"] == pytest.approx(sent_out.terms["nll_nats"], rel=1e-6)
