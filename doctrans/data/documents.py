"""Document-level parallel data and document-aware batches (docs/models.md §1.1 and §2.5 "Batching").

``DocData`` holds *every* line of a prepared split in file order, which is document order:
documents are contiguous and positions go 0, 1, 2… (``doctrans preprocess`` keeps filtered
train sentences as context-only lines, marked ``0`` in ``train.target``). Rows the loss is
computed on have ``is_target``.

A batch (``make_doc_batches``) is a list of *runs*: consecutive sentences of one document,
never reordered. Before each run, the N sentences that precede its first sentence in the same
document are added as **context-only rows**, so no sentence loses its context at a batch start
(HAN_NMT masks it instead, docs/models.md §2.5). The context of row r, ``DocBatch.ctx[r]``, is the
batch rows of the previous N sentences of its document, oldest first: every sentence is encoded
once per step and context models gather context states *inside the batch* (no re-encoding of
context sentences per row, as contextual-mt does). Token budgets count context rows. The epoch
order shuffles documents with (seed, epoch), never the sentences inside a document, so a
resumed run sees the same batches.

A second mode, ``make_sorted_doc_batches`` (``data.doc_batching: sorted``), buckets target
sentences by length as ``batching.make_batches`` does and adds to each batch the context
lines its targets lack (a line that is both a target and a context is one row): far less
padding in the target rows, up to N context-only rows per target. Both modes give every target
the same context and obey the same budget; ``benchmarks/RESULTS.md`` compares their speed.

Shape legend: B rows, S source length, T target length, N context sentences.
"""
from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from doctrans.data.batching import pad_sequences, read_targets
from doctrans.data.vocab import Vocab
from doctrans.utils.io import read_lines

log = logging.getLogger(__name__)


@dataclass
class DocData:
    """Every line of one split, in document order.

    src[i], tgt[i]: int64 id arrays ending in ``</s>``; ``doc``: (n,) document number 0…D−1 in
    file order (``doc_ids[doc[i]]`` its name); ``pos``: (n,) position in the document (0, 1…);
    ``is_target``: (n,) bool, True where the loss is computed; ``doc_start``: (D + 1,) document
    d holds lines ``doc_start[d]:doc_start[d + 1]``.
    """

    src: list[np.ndarray]
    tgt: list[np.ndarray]
    doc: np.ndarray
    pos: np.ndarray
    is_target: np.ndarray
    doc_ids: list[str]
    doc_start: np.ndarray
    rec: list[np.ndarray] | None = None     # a reconstructor's x̂ per line (``batching.ParallelData.rec``)
    dp: list[np.ndarray] | None = None      # its DP label ids per line

    def __len__(self) -> int:
        return len(self.src)

    @property
    def line(self) -> np.ndarray:
        """(n,) line index in the files (every line is a row), as ``ParallelData.line``."""
        return np.arange(len(self.src), dtype=np.int64)

    @property
    def n_docs(self) -> int:
        return len(self.doc_ids)


def read_doc_positions(path: Path, n_lines: int) -> tuple[list[str], np.ndarray, np.ndarray]:
    """A ``{split}.docs`` file (``doc_id<TAB>position`` per line) → (document names in file
    order, doc (n,) int64 numbers into them, pos (n,) int64).

    Raises ValueError naming the file (and the line, 1-based) when: its line count differs
    from ``n_lines``; a line is not ``id<TAB>integer``; a position does not follow the previous
    one of its document by exactly 1 (going backwards, repeating or skipping: a gap is what a
    dataset of format 1, which removed filtered sentences, looks like); a document id
    reappears after another document (documents must be contiguous).
    """
    lines = read_lines(path)
    if len(lines) != n_lines:
        raise ValueError(f"{path} has {len(lines)} lines but the text files have {n_lines}")
    names: list[str] = []
    number: dict[str, int] = {}
    doc, pos = np.empty(n_lines, dtype=np.int64), np.empty(n_lines, dtype=np.int64)
    for k, line in enumerate(lines):
        d, _, p = line.partition("\t")
        if not d or not p.strip().lstrip("-").isdigit():
            raise ValueError(f"{path}:{k + 1}: expected 'doc_id<TAB>position', got {line!r}")
        p = int(p)
        if k and d == names[-1]:
            if p != pos[k - 1] + 1:
                raise ValueError(f"{path}:{k + 1}: document {d} position {p} follows position {pos[k - 1]}; "
                                 "positions must go up by 1 (a gap means sentences were removed: "
                                 "re-run `doctrans preprocess`)")
        elif d in number:
            raise ValueError(f"{path}:{k + 1}: document {d} reappears after document {names[-1]} "
                             "(the lines of a document must be contiguous)")
        else:
            number[d] = len(names)
            names.append(d)
        doc[k], pos[k] = number[d], p
    return names, doc, pos


def _cut(ids: np.ndarray, max_len: int) -> np.ndarray:
    """``ids`` cut to ``max_len`` units + ``</s>`` (its last id) when longer."""
    return ids if len(ids) <= max_len + 1 else np.concatenate([ids[:max_len], ids[-1:]])


def load_doc_data(src_path: Path, tgt_path: Path, docs_path: Path, src_vocab: Vocab, tgt_vocab: Vocab,
                  max_len: int = 0, target_path: Path | None = None) -> DocData:
    """Read line-aligned BPE files and their ``.docs`` → DocData with every line.

    ``is_target`` is True exactly on the pairs ``batching.load_parallel`` (same arguments)
    keeps: ``1`` in ``target_path`` (None: every line) and, with ``max_len`` > 0, neither side
    over ``max_len`` units nor empty. With ``max_len`` > 0 a context-only side over it is cut to
    ``max_len`` units + ``</s>`` (bounded batch width; models have a maximum length).
    Raises ValueError naming the file (and line) on line-count mismatches and bad ``.docs``
    (see ``read_doc_positions``).
    """
    src_lines, tgt_lines = read_lines(src_path), read_lines(tgt_path)
    if len(src_lines) != len(tgt_lines):
        raise ValueError(f"{src_path} has {len(src_lines)} lines but {tgt_path} has {len(tgt_lines)}")
    names, doc, pos = read_doc_positions(docs_path, len(src_lines))
    flags = read_targets(target_path, len(src_lines)) if target_path is not None else None
    src, tgt = [], []
    is_target = np.ones(len(src_lines), dtype=bool) if flags is None else flags.copy()
    for i, (s, t) in enumerate(zip(src_lines, tgt_lines)):
        a, b = src_vocab.encode(s), tgt_vocab.encode(t)
        if max_len and (len(a) > max_len + 1 or len(b) > max_len + 1 or len(a) == 1 or len(b) == 1):
            is_target[i] = False
            a, b = _cut(a, max_len), _cut(b, max_len)
        src.append(a)
        tgt.append(b)
    doc_start = np.searchsorted(doc, np.arange(len(names) + 1)).astype(np.int64)
    return DocData(src, tgt, doc, pos, is_target, names, doc_start)


def filter_context_tuples(data: DocData, rules, context_sents: int) -> dict[str, int]:
    """Unmark (``is_target`` False, in place) the target lines whose tuple (x, previous N source
    sentences, y) a context model refuses: ``rules`` is its ``context_filter(src_len, tgt_len,
    ctx_len)`` (``models/context/base.py``; lengths without ``</s>``, ctx_len (n, N) oldest
    first, −1 before the document start) → {rule: (n,) bool drop mask}. A refused line stays as
    the context of the next ones. Logs and returns, per rule, how many target lines it removes
    (a line may fail several rules)."""
    n = len(data)
    src_len = np.fromiter((len(x) - 1 for x in data.src), dtype=np.int64, count=n)
    tgt_len = np.fromiter((len(x) - 1 for x in data.tgt), dtype=np.int64, count=n)
    lines = np.arange(n, dtype=np.int64)
    ctx_len = np.full((n, context_sents), -1, dtype=np.int64)
    for k in range(context_sents):                          # column k: sentence m − (N − k)
        prev = lines - (context_sents - k)
        ok = prev >= data.doc_start[data.doc]
        ctx_len[ok, k] = src_len[prev[ok]]
    counts = {}
    drop = np.zeros(n, dtype=bool)
    for name, mask in rules(src_len, tgt_len, ctx_len).items():
        mask = np.asarray(mask, dtype=bool) & data.is_target
        counts[name] = int(mask.sum())
        drop |= mask
        log.info("context tuple filter %s: %d of %d training tuples removed", name, counts[name],
                 int(data.is_target.sum()))
    data.is_target &= ~drop
    return counts


def load_doc_split(prepared: Path, split: str, src_vocab: Vocab, tgt_vocab: Vocab, max_len: int = 0,
                   src_suffix: str = "bpe.zh", tgt_suffix: str = "bpe.en", src_dir: Path | None = None) -> DocData:
    """``load_doc_data`` of ``PREPARED/{split}.{src_suffix}`` (or ``src_dir``'s, e.g. an
    annotate-dp directory), ``{split}.{tgt_suffix}``, ``{split}.docs`` and, where it exists,
    ``{split}.target`` (train of a dataset of format 2)."""
    prepared = Path(prepared)
    target = prepared / f"{split}.target"
    return load_doc_data(Path(src_dir or prepared) / f"{split}.{src_suffix}", prepared / f"{split}.{tgt_suffix}",
                         prepared / f"{split}.docs", src_vocab, tgt_vocab, max_len,
                         target if target.is_file() else None)


# --- batches ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class DocBatchSpec:
    """What ``collate_doc`` turns into a DocBatch (the trainer's batch key).

    rows: (B,) line indices into DocData, runs of consecutive sentences, each run preceded by
    its context-only rows; is_target: (B,) bool, the rows the loss is computed on;
    context_sents: N.
    """

    rows: np.ndarray
    is_target: np.ndarray
    context_sents: int
    block: int = 0                      # K > 0: rows are whole sub-documents of K sentences



@dataclass
class DocBatch:
    """A document-aware batch: the fields of ``batching.Batch`` plus context.

    src: (B, S) ids; tgt_in: (B, T) = <s> y…; tgt_out: (B, T) = y… </s>; padded with 0.
    index: (B,) line indices into the DocData. is_target: (B,) bool, False at context-only
    rows (no loss there). ctx: (B, N) long, the batch row of the previous N sentences of the
    same document, oldest first (column N−1 = sentence m−1); −1 where that sentence is not in
    the batch: before the document start, or before a context-only row's own run.
    n_targets: real target tokens (incl. </s>) of the is_target rows (what the loss sums over).
    block: (B,) long or None, with sub-documents (``DocBatchSpec.block`` K > 0): rows with the
    same value are one sub-document (K consecutive sentences of a document starting at a
    position divisible by K), numbered 0, 1… in row order; None otherwise.
    """

    src: torch.Tensor
    tgt_in: torch.Tensor
    tgt_out: torch.Tensor
    index: np.ndarray
    n_targets: int
    is_target: torch.Tensor
    ctx: torch.Tensor
    block: torch.Tensor | None = None
    rec_tgt: torch.Tensor | None = None     # (B, S') as ``batching.Batch.rec_tgt``
    dp_tgt: torch.Tensor | None = None      # (B, S') as ``batching.Batch.dp_tgt``

    def to(self, device: torch.device) -> DocBatch:
        """Move the tensors to ``device`` (in place); returns self."""
        for name in ("src", "tgt_in", "tgt_out", "is_target", "ctx", "block", "rec_tgt", "dp_tgt"):
            if getattr(self, name) is not None:
                setattr(self, name, getattr(self, name).to(device, non_blocking=True))
        return self


class _Packer:
    """Greedy packing of runs into batches under a token budget (see make_doc_batches)."""

    def __init__(self, data: DocData, max_tokens: int, context_sents: int, budget: str = "tokens"):
        self.data, self.max_tokens, self.n, self.budget = data, max_tokens, context_sents, budget
        src_len = np.fromiter((len(x) for x in data.src), dtype=np.int64, count=len(data))
        tgt_len = np.fromiter((len(x) for x in data.tgt), dtype=np.int64, count=len(data))
        self.width = np.maximum(src_len, tgt_len)           # as batching.make_batches
        self.batches: list[DocBatchSpec] = []
        self.rows: list[int] = []
        self.target: list[bool] = []
        self.longest = 0
        self.total = 0                                      # sum of the rows' widths

    def fits(self, lines: list[int]) -> bool:
        if self.budget == "tokens":
            return self.total + sum(int(self.width[i]) for i in lines) <= self.max_tokens
        longest = max([self.longest, *(int(self.width[i]) for i in lines)])
        return longest * (len(self.rows) + len(lines)) <= self.max_tokens

    def add(self, line: int, target: bool) -> None:
        self.rows.append(line)
        self.target.append(target)
        self.longest = max(self.longest, int(self.width[line]))
        self.total += int(self.width[line])

    def trim(self) -> None:
        """Drop trailing context-only rows (context of nothing in this batch)."""
        while self.target and not self.target[-1]:
            self.total -= int(self.width[self.rows.pop()])
            self.target.pop()
        self.longest = max((int(self.width[i]) for i in self.rows), default=0)

    def flush(self) -> None:
        self.trim()
        if self.rows:
            self.batches.append(DocBatchSpec(np.asarray(self.rows, dtype=np.int64),
                                             np.asarray(self.target, dtype=bool), self.n))
        self.rows, self.target, self.longest, self.total = [], [], 0, 0

    def add_document(self, d: int) -> None:
        """Runs of document ``d``: a run starts at a target line with its N preceding lines as
        context-only rows, and grows while the batch fits; a full batch is flushed and the
        document goes on in the next one."""
        data, start, end = self.data, int(self.data.doc_start[d]), int(self.data.doc_start[d + 1])
        i = start
        while True:
            while i < end and not data.is_target[i]:
                i += 1
            if i == end:
                return
            ctx = list(range(max(start, i - self.n), i))
            if self.rows and not self.fits(ctx + [i]):
                self.flush()
            for c in ctx:
                self.add(c, False)
            self.add(i, True)
            i += 1
            while i < end and self.fits([i]):
                self.add(i, bool(data.is_target[i]))
                i += 1
            if i == end:
                self.trim()
                return
            self.flush()


DOC_BATCHING = ("runs", "sorted")
DOC_BUDGETS = ("tokens", "padded")


def _context_lines(data: DocData, line: int, n: int) -> range:
    """The (up to) ``n`` lines before ``line`` in its document, oldest first."""
    return range(max(int(data.doc_start[data.doc[line]]), line - n), line)


def _row_widths(data: DocData) -> np.ndarray:
    """(n,) padded width of each line as a batch row: max(source, target), lengths with their
    ``</s>`` (the widths of ``src`` and ``tgt_in``), as make_batches."""
    src_len = np.fromiter((len(x) for x in data.src), dtype=np.int64, count=len(data))
    tgt_len = np.fromiter((len(x) for x in data.tgt), dtype=np.int64, count=len(data))
    return np.maximum(src_len, tgt_len)


def _sorted_order(data: DocData, width: np.ndarray, n: int, rng: np.random.Generator) -> np.ndarray:
    """Target lines sorted by the widest row they bring (themselves or a context line), then by
    their own width, ties broken by ``rng``."""
    targets = np.flatnonzero(data.is_target)
    widest = width[targets].copy()
    for back in range(1, n + 1):
        prev = targets - back
        same = (prev >= 0) & (data.doc[np.maximum(prev, 0)] == data.doc[targets])
        widest[same] = np.maximum(widest[same], width[prev[same]])
    return targets[np.lexsort((rng.random(len(targets)), width[targets], widest))]


def _spec(rows: dict[int, bool], n: int) -> DocBatchSpec:
    """Rows (line → is target) in line order (documents contiguous, sentences in order)."""
    lines = np.asarray(sorted(rows), dtype=np.int64)
    return DocBatchSpec(lines, np.asarray([rows[int(i)] for i in lines], dtype=bool), n)


def make_sorted_doc_batches(data: DocData, max_tokens: int, context_sents: int, seed: int,
                            epoch: int = 0) -> list[DocBatchSpec]:
    """Length-sorted document batches of ``epoch``, in training order (``data.doc_batching:
    sorted``).

    Target lines are sorted by the widest row they bring into a batch (their own width
    max(source, target) or that of one of their N context lines), ties broken with
    (seed, epoch), and cut greedily: a target joins the batch with those of its N preceding
    lines (same document) that the batch lacks, as context-only rows; a line that is both a
    target and another target's context is one (target) row. The padded size ``rows × longest``,
    context rows included, stays within ``max_tokens`` unless one target with its context alone
    exceeds it (a batch of its own). Rows are in line order; the batch order is shuffled with
    (seed, epoch). Every target line is a target row exactly once per epoch; deterministic in
    (seed, epoch). Returns DocBatchSpecs as ``make_doc_batches``.
    """
    rng = np.random.default_rng(seed * 1000003 + epoch)
    width = _row_widths(data)
    batches: list[DocBatchSpec] = []
    rows: dict[int, bool] = {}
    longest = 0
    for t in _sorted_order(data, width, context_sents, rng):
        t = int(t)
        new = [c for c in _context_lines(data, t, context_sents) if c not in rows]
        new += [] if t in rows else [t]
        need = max([longest, int(width[t]), *(int(width[c]) for c in new)])
        if rows and need * (len(rows) + len(new)) > max_tokens:
            batches.append(_spec(rows, context_sents))
            rows, longest = {}, 0
            new = [*_context_lines(data, t, context_sents), t]
            need = max(int(width[c]) for c in new)
        for c in new:
            rows.setdefault(c, False)
        rows[t], longest = True, need
    if rows:
        batches.append(_spec(rows, context_sents))
    return [batches[i] for i in rng.permutation(len(batches))]


def sub_documents(data: DocData, block: int) -> list[np.ndarray]:
    """The sub-documents of ``data``: each document cut into consecutive pieces of ``block``
    lines (positions 0…K−1, K…2K−1, …; the last piece shorter), in file order, as line arrays
    (Chen et al. 2020 §3.1, docs/models.md §2.7: S4 cuts documents into sub-documents of at most 30 sentences)."""
    out = []
    for d in range(data.n_docs):
        lines = np.arange(int(data.doc_start[d]), int(data.doc_start[d + 1]), dtype=np.int64)
        out += [lines[k:k + block] for k in range(0, len(lines), block)]
    return out


def make_block_batches(data: DocData, max_tokens: int, block: int, seed: int, epoch: int = 0,
                       budget: str = "tokens") -> list[DocBatchSpec]:
    """Batches of whole sub-documents (``sub_documents``) for a model whose context is the
    sub-document (``context_block`` K > 0): sub-documents with at least one target line, in an
    order shuffled with (seed, epoch), packed greedily so that the batch size (``budget`` as in
    ``make_doc_batches``) stays within ``max_tokens`` unless one sub-document alone exceeds it
    (a batch of its own). All lines of a sub-document are rows (non-targets as context-only
    rows), so every sentence sees its whole sub-document; sentences are never reordered inside
    one. Deterministic in (seed, epoch)."""
    units = [u for u in sub_documents(data, block) if data.is_target[u].any()]
    width = _row_widths(data)
    batches: list[DocBatchSpec] = []
    rows: list[np.ndarray] = []
    total = longest = count = 0
    for k in np.random.default_rng(seed * 1000003 + epoch).permutation(len(units)):
        u = units[int(k)]
        w = width[u]
        size = (total + int(w.sum()) if budget == "tokens"
                else max(longest, int(w.max())) * (count + len(u)))
        if rows and size > max_tokens:
            batches.append(_block_spec(data, rows, block))
            rows, total, longest, count = [], 0, 0, 0
        rows.append(u)
        total, longest, count = total + int(w.sum()), max(longest, int(w.max())), count + len(u)
    if rows:
        batches.append(_block_spec(data, rows, block))
    return batches


def _block_spec(data: DocData, units: list[np.ndarray], block: int) -> DocBatchSpec:
    lines = np.concatenate(units)
    return DocBatchSpec(lines, data.is_target[lines].copy(), 0, block)


def block_ids(data: DocData, rows: np.ndarray, block: int) -> np.ndarray:
    """(B,) sub-document number of each row (same document, same position // ``block``),
    numbered 0, 1… in order of first appearance."""
    keys = list(zip(data.doc[rows].tolist(), (data.pos[rows] // block).tolist()))
    number: dict[tuple[int, int], int] = {}
    return np.asarray([number.setdefault(k, len(number)) for k in keys], dtype=np.int64)


def make_doc_batches(data: DocData, max_tokens: int, context_sents: int, seed: int,
                     epoch: int = 0, mode: str = "runs", budget: str = "tokens", block: int = 0) -> list[DocBatchSpec]:
    """Document-aware batches of ``epoch``, in training order. ``mode`` "sorted" delegates to
    ``make_sorted_doc_batches``; "runs" (below). Raises ValueError on another mode or budget.

    Documents are visited in an order shuffled with (seed, epoch) and cut into runs of
    consecutive sentences packed greedily into batches; a batch may hold runs of several
    documents, and a document longer than a batch goes on in the next batch. Each run starts
    with the ``context_sents`` (N) sentences before its first sentence (same document) as
    context-only rows; non-target lines inside a run are context-only rows too. The batch size,
    context rows included, stays within ``max_tokens`` unless one sentence with its context
    alone exceeds it (then it is a batch of its own); its size is, with ``budget`` "tokens"
    (default), the sum over rows of max(source, target) — what the models compute, since
    they encode and decode a document batch in length buckets (``models.context.base.
    length_buckets``) — or, with "padded", ``rows × max(longest source, longest target)``
    (half of which is padding for runs of subtitle lines: ``benchmarks/RESULTS.md``). A
    sentence batch (``batching.make_batches``, length-sorted) holds about the same number of
    tokens as a "tokens" document batch of the same ``max_tokens``. Every target line is a
    target row exactly once per epoch. Deterministic in (seed, epoch), so resuming at
    (epoch, k) gives the same batches. ``mode`` "sorted" always uses the padded budget.
    """
    if context_sents < 0:
        raise ValueError(f"context_sents must be >= 0, got {context_sents}")
    if mode not in DOC_BATCHING:
        raise ValueError(f"document batching mode must be one of {DOC_BATCHING}, got {mode!r}")
    if budget not in DOC_BUDGETS:
        raise ValueError(f"document batch budget must be one of {DOC_BUDGETS}, got {budget!r}")
    if block > 0:
        return make_block_batches(data, max_tokens, block, seed, epoch, budget)
    if mode == "sorted":
        return make_sorted_doc_batches(data, max_tokens, context_sents, seed, epoch)
    order = np.random.default_rng(seed * 1000003 + epoch).permutation(data.n_docs)
    packer = _Packer(data, max_tokens, context_sents, budget)
    for d in order:
        packer.add_document(int(d))
    packer.flush()
    return packer.batches


def context_rows(data: DocData, rows: np.ndarray, context_sents: int) -> np.ndarray:
    """(B, N) batch row of the n-th previous sentence (same document) of each row, oldest
    first, −1 where that sentence is not among ``rows``."""
    row_of = {int(line): r for r, line in enumerate(rows)}
    ctx = np.full((len(rows), context_sents), -1, dtype=np.int64)
    for r, line in enumerate(rows):
        for n in range(context_sents):
            prev = int(line) - (context_sents - n)
            if prev >= 0 and data.doc[prev] == data.doc[line]:
                ctx[r, n] = row_of.get(prev, -1)
    return ctx


def collate_doc(data: DocData, spec: DocBatchSpec, vocab: Vocab) -> DocBatch:
    """Pad the rows of ``spec`` into a DocBatch (see DocBatch for the shapes)."""
    src = [data.src[i] for i in spec.rows]
    tgt = [data.tgt[i] for i in spec.rows]
    return DocBatch(
        src=pad_sequences(src, vocab.pad_id),
        tgt_in=pad_sequences(tgt, vocab.pad_id, prefix=vocab.bos_id, drop_last=True),
        tgt_out=pad_sequences(tgt, vocab.pad_id),
        index=np.asarray(spec.rows),
        n_targets=int(sum(len(t) for t, keep in zip(tgt, spec.is_target) if keep)),
        is_target=torch.from_numpy(np.asarray(spec.is_target, dtype=bool)),
        ctx=torch.from_numpy(context_rows(data, spec.rows, spec.context_sents)),
        block=torch.from_numpy(block_ids(data, spec.rows, spec.block)) if spec.block > 0 else None,
        rec_tgt=None if data.rec is None else pad_sequences([data.rec[i] for i in spec.rows], vocab.pad_id),
        dp_tgt=None if data.dp is None else pad_sequences([data.dp[i] for i in spec.rows], 0),
    )


def document_numbers(doc_ids: Sequence[str], where: str = "<docs>") -> np.ndarray:
    """Document ids per line → (L,) numbers 0, 1… in order of appearance. Raises ValueError
    naming ``where`` and the line when a document's lines are not contiguous."""
    number: dict[str, int] = {}
    out = np.zeros(len(doc_ids), dtype=np.int64)
    for k, d in enumerate(doc_ids):
        if d not in number:
            number[d] = len(number)
        elif k and doc_ids[k - 1] != d:
            raise ValueError(f"{where}:{k + 1}: document {d} reappears after document {doc_ids[k - 1]} "
                             "(the lines of a document must be contiguous)")
        out[k] = number[d]
    return out
