"""Context-usage training: CoWord dropout and context dropout on a training batch.

CoWord dropout (Fernandes et al. 2021, "Measuring and Increasing Context Usage in Context-Aware
Machine Translation", ACL, §5): every source token of the *current* sentence is replaced, with
probability p, by a placeholder, so the model has to look to its context for what it lost;
context sentences are never masked. Fernandes et al. replace tokens by a mask token; doctrans
uses ``<unk>`` (id 3 of every vocabulary, ``data/vocab.py``) [I: no vocabulary change, so a
stage-1 checkpoint fits; the model sees ``<unk>`` at test time for out-of-vocabulary words
anyway]. ``<pad>``, ``<s>`` and ``</s>`` are never replaced.

Context dropout [I: the usual "drop the whole context" regulariser, e.g. Lupo et al. 2022 §5;
issue 29]: with probability q a target row sees the empty context — exactly what CXMI's
"empty" condition and the contrastive test give a model (``evaluation/forced.py``): every
``ctx`` pointer −1 (a ``context_sents`` model then reads no previous sentence: its document-
start convention) and, for a sub-document model (``batch.block``), a sub-document of its own.

Batches share rows: in a document batch (``data/documents.py``) a target row is also the
context of the next rows (its ``ctx`` column), and the rows of one sub-document are each
other's context. So:

* CoWord dropout on a target row that another row reads as context (a ``ctx`` pointer to it)
  *copies* the row: the copy (appended at the end, masked, same target and ``ctx``) becomes
  the target, the original stays unmasked as a context-only row. A row no other row reads is
  masked in place. The copies cost encoder time (measured in ``docs/discourse.md``).
* In a sub-document batch every row is part of its block's context: CoWord dropout masks in
  place there (the block's other rows then read the masked sentence too) [I]; a row whose
  context is dropped is copied into a new sub-document of its own (masked there, if at all)
  and the original stays in its block as a context-only row.
* A sentence-level ``Batch`` (no ``ctx``) has only current sentences: CoWord dropout is then
  source word dropout on every row (Sennrich et al. 2016 §4.2 drop whole words; this drops BPE
  units), context dropout does nothing.

Split sentences (Lupo et al. 2022, "Divide and Rule: Effective Pre-Training for Context-Aware
Multi-Encoder Translation Models", ACL, §3) [``train.split_sentences: r``]: with probability r a
target row of a document batch is cut in two — the source at a word boundary drawn uniformly
from its middle third [I], the target at the same relative position, moved to the nearest word
boundary [I: proportional, no word alignment; what the target's second half still needs from
the source's first half is then *only* in the context] — and the halves become two new rows:
the first a context-only row, the second a target row whose context is that first half followed
by the original row's N − 1 most recent context sentences. The original row stays, as a
context-only row. The model is trained to translate a fragment whose other half is in its
context: a strong, dense context signal where real previous subtitles give a sparse one.
Rows whose source or target has fewer than 4 real tokens are not split; with sub-documents
(HGC) the two halves form a sub-document of their own; a sentence-level ``Batch`` is unchanged;
a batch with reconstruction targets (``rec_tgt``) is refused (ValueError). ``n_targets`` is
recounted (the split rows have fewer target tokens).

Pronoun dropout [I: synthetic dropped pronouns; ``train.pronoun_dropout: p``]: every whole-word
source pronoun of the *current* sentence (``train.pronoun_dropout_words``, by default the ten
basic Chinese pronouns of the thesis' Table 4.3: 我 你 他 她 它 我们 你们 他们 她们 它们) is
**deleted** with probability p, the target unchanged — the sentence becomes what a pro-drop
speaker would have said (thesis §4.1: the pronoun is absent, not masked), and the English
pronoun the reference still has must come from the context (a 他/她 in the previous lines)
or, for a sentence model, from the model's own prior. It is CoWord dropout aimed at the words
issue 28/29's measurements say the models fail on (dropped pronouns whose form the previous
sentences decide), with deletion instead of ``<unk>`` so the training source looks like a real
DP source. The copy rule is CoWord dropout's (a row another row reads is copied; its context
copy keeps the pronoun); a row is never left without a real token (its pronouns then stay);
a sentence-level ``Batch`` gets it on every row. Its draws come after CoWord and context
dropout's, so p = 0 leaves their masks unchanged.

Pronoun dropout on a reconstructor's batch (``rec_tgt``, thesis ch. 5–6) [I: synthetic DPs for
the reconstructors; ``ReconstructionDrop``]: a deleted pronoun *is* a dropped pronoun, so the
reconstruction target x̂ and the DP labels are rewritten as ``annotate-dp`` would have written
them for the pro-drop sentence — target ``dp`` (x̂ with the DPs inserted): x̂ unchanged (it keeps
the pronoun the source lost: one more DP to restore); ``dpp`` (#DP# placeholders): the pronoun
becomes a ``#DP#`` in x̂, labelled with the pronoun (a second ``#DP#`` before the same word gets
label 0: ``data/reconstruction.py``'s "keep the first"); ``original`` (x itself, the end-to-end
labeler): x̂ loses the pronoun too and the slot of the next remaining token (the ``</s>`` slot at
the end) is labelled with it, unless a DP before it already is (keep the first). A row whose x̂
does not align token by token with its source (outside ``#DP#``: e.g. a pronoun BPE split in one
and not the other) keeps its pronouns. CoWord dropout and context dropout leave x̂ and the labels
as they are; the copies the copy rule makes carry their rows' x̂ and labels.

Randomness comes from a ``torch.Generator`` the caller seeds per batch (``usage_generator``), so
a resumed run draws the same masks.
"""
from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np
import torch
from torch import Tensor

from doctrans.data.batching import pad_sequences

PAD_ID, BOS_ID, EOS_ID, UNK_ID = 0, 1, 2, 3        # data/vocab.py


def usage_generator(seed: int, epoch: int, index: int) -> torch.Generator:
    """A generator seeded by (seed, epoch, batch index): the same masks for the same batch."""
    return torch.Generator().manual_seed((seed * 1000003 + epoch) * 1000003 + index)


def coword_positions(src: Tensor, p: float, generator: torch.Generator) -> Tensor:
    """src (B, S) ids → bool (B, S): the positions CoWord dropout replaces, each non-special
    token (not ``<pad>``/``<s>``/``</s>``) independently with probability ``p``; ``<unk>``
    may be drawn (it stays ``<unk>``). Raises ValueError unless 0 ≤ p < 1."""
    if not 0.0 <= p < 1.0:
        raise ValueError(f"train.coword_dropout must be in [0, 1), got {p}")
    draw = torch.rand(src.shape, generator=generator) < p
    real = src.ne(PAD_ID) & src.ne(BOS_ID) & src.ne(EOS_ID)
    return draw.to(src.device) & real


def pronoun_positions(src: Tensor, p: float, pronoun_ids: Tensor, generator: torch.Generator,
                      src_joins: np.ndarray | None = None) -> Tensor:
    """src (B, S) ids → bool (B, S): the positions pronoun dropout deletes — tokens whose id is in
    ``pronoun_ids`` (K,) and that are a whole word (the token before does not continue into
    them: ``src_joins[id]`` False, i.e. no ``@@``; None: every match), each independently with
    probability ``p``, never every real token of a row (such a row keeps its pronouns). Raises
    ValueError unless 0 ≤ p < 1."""
    if not 0.0 <= p < 1.0:
        raise ValueError(f"train.pronoun_dropout must be in [0, 1), got {p}")
    draw = (torch.rand(src.shape, generator=generator) < p).to(src.device)
    hit = torch.isin(src, pronoun_ids.to(src.device))
    if src_joins is not None and src.size(1) > 1:
        joins = torch.as_tensor(src_joins, device=src.device)
        hit[:, 1:] &= ~joins[src[:, :-1]]
    drop = draw & hit
    real = (src.ne(PAD_ID) & src.ne(BOS_ID) & src.ne(EOS_ID)).sum(1)
    return drop & drop.sum(1).lt(real)[:, None]


def delete_positions(src: Tensor, drop: Tensor) -> Tensor:
    """src (B, S) ids, drop (B, S) bool → (B, S): each row without its dropped positions, the
    rest in order and ``<pad>`` after it (the width is kept)."""
    if not bool(drop.any()):
        return src
    order = torch.sort(drop.to(torch.int8), dim=1, stable=True).indices
    out = src.gather(1, order)
    pos = torch.arange(src.size(1), device=src.device)[None, :]
    return out.masked_fill(pos >= src.size(1) - drop.sum(1, keepdim=True), PAD_ID)


@dataclass(frozen=True)
class ReconstructionDrop:
    """What pronoun dropout does to a reconstructor's targets (module doc). target: the model's
    ``ReconstructionSpec.target`` ("dp" | "dpp" | "original"); labels: (V,) int64, the DP label
    id (into the model's ``dp_labels``, 0 = NONE) of each source-vocabulary id — needed for the
    labelled targets ``dpp`` / ``original`` when the batch has ``dp_tgt``; placeholder_id: the
    source id of ``#DP#`` (target ``dpp``; −1 otherwise)."""

    target: str
    labels: np.ndarray | None = None
    placeholder_id: int = -1


def _dpp_row(x: np.ndarray, xr: np.ndarray, lab: np.ndarray | None, drop: np.ndarray,
             spec: ReconstructionDrop) -> tuple[np.ndarray, np.ndarray | None] | None:
    """One row of target ``dpp``: each dropped source token becomes ``#DP#`` in x̂ (labelled with
    its pronoun). None when x̂'s non-placeholder tokens are not the source's (outside its own
    placeholders)."""
    ph = spec.placeholder_id
    src_at = np.flatnonzero(x != ph)                   # source positions of the words x̂ also has
    rec_at = np.flatnonzero(xr != ph)
    if len(src_at) != len(rec_at) or not np.array_equal(x[src_at], xr[rec_at]):
        return None
    out, out_lab = xr.copy(), None if lab is None else lab.copy()
    hit = rec_at[drop[src_at]]
    out[hit] = ph
    if out_lab is not None:
        out_lab[hit] = spec.labels[xr[hit]]
        second = np.flatnonzero((out[1:] == ph) & (out[:-1] == ph)) + 1
        out_lab[second] = 0                            # keep the first #DP# before a word
    return out, out_lab


def _original_row(x: np.ndarray, xr: np.ndarray, lab: np.ndarray | None, drop: np.ndarray,
                  spec: ReconstructionDrop) -> tuple[np.ndarray, np.ndarray | None] | None:
    """One row of target ``original``: x̂ loses the dropped tokens, their labels move to the next
    kept slot (keep the first). None when x̂ is not the source."""
    if not np.array_equal(x, xr):
        return None
    keep = ~drop
    if lab is None:
        return xr[keep], None
    # every position's label in sentence order: its own (a DP before it), else a dropped token's pronoun
    cand = np.where(lab != 0, lab, np.where(drop, spec.labels[xr], 0))
    slot = np.cumsum(keep) - keep                      # the kept slot a position's label moves to
    nz = np.flatnonzero(cand)
    out = np.zeros(int(keep.sum()), dtype=lab.dtype)
    slots, first = np.unique(slot[nz], return_index=True)
    inside = slots < len(out)                          # (</s> is never dropped: always inside)
    out[slots[inside]] = cand[nz[first[inside]]]       # keep the first label before each slot
    return xr[keep], out


def reconstruction_targets(src: Tensor, rec_tgt: Tensor, dp_tgt: Tensor | None, drop: Tensor,
                           spec: ReconstructionDrop) -> tuple[Tensor, Tensor | None, Tensor]:
    """The reconstruction targets after pronoun dropout deletes ``drop`` (B, S) bool from ``src``
    (B, S) (the sources before any CoWord masking): → (rec_tgt (B, S'), dp_tgt (B, S') or None,
    drop (B, S)) with the rules of the module doc; rows whose x̂ does not align with their
    source lose their ``drop`` (they keep their pronouns). Widths are kept (padding 0). Raises
    ValueError for an unknown target, or for a labelled batch without ``spec.labels``."""
    if spec.target not in ("dp", "dpp", "original"):
        raise ValueError(f"pronoun dropout: unknown reconstruction target {spec.target!r}")
    if spec.target == "dp" or not bool(drop.any()):
        return rec_tgt, dp_tgt, drop
    if dp_tgt is not None and spec.labels is None:
        raise ValueError("pronoun dropout on DP-labelled targets needs the pronouns' label ids (labels)")
    row_fn = _dpp_row if spec.target == "dpp" else _original_row
    s_np, r_np, d_np = src.cpu().numpy(), rec_tgt.cpu().numpy(), drop.cpu().numpy()
    l_np = None if dp_tgt is None else dp_tgt.cpu().numpy()
    new_r, new_l, new_d = r_np.copy(), None if l_np is None else l_np.copy(), d_np.copy()
    for b in np.flatnonzero(d_np.any(1)):
        n, nr = int((s_np[b] != PAD_ID).sum()), int((r_np[b] != PAD_ID).sum())
        got = row_fn(s_np[b, :n], r_np[b, :nr], None if l_np is None else l_np[b, :nr], d_np[b, :n], spec)
        if got is None:
            new_d[b] = False
            continue
        xr, lab = got
        new_r[b] = PAD_ID
        new_r[b, :len(xr)] = xr
        if lab is not None:
            new_l[b] = 0
            new_l[b, :len(lab)] = lab
    dev = rec_tgt.device
    return (torch.from_numpy(new_r).to(dev), None if new_l is None else torch.from_numpy(new_l).to(dp_tgt.device),
            torch.from_numpy(new_d).to(drop.device))


def apply_context_usage(batch, coword_dropout: float = 0.0, context_dropout: float = 0.0,
                        generator: torch.Generator | None = None, pronoun_dropout: float = 0.0,
                        pronoun_ids: Tensor | None = None, src_joins: np.ndarray | None = None,
                        reconstruction: ReconstructionDrop | None = None):
    """A training batch with CoWord dropout (rate p = ``coword_dropout``) on its target rows'
    sources, context dropout (rate q = ``context_dropout``) on its target rows' context and
    pronoun dropout (rate ``pronoun_dropout`` on the ids ``pronoun_ids`` (K,), whole words by
    ``src_joins`` (V,) bool) on its target rows' sources (see the module docstring for the
    rules). ``batch``: ``batching.Batch`` (src (B, S) …) or ``documents.DocBatch`` (…
    is_target (B,), ctx (B, N), block (B,) or None), with a reconstructor's ``rec_tgt`` /
    ``dp_tgt`` (B, S') or not, on the CPU or a device; ``reconstruction``: how pronoun dropout
    rewrites ``rec_tgt`` / ``dp_tgt`` (``ReconstructionDrop``). Returns a new batch (``batch`` is
    not modified) with B' ≥ B rows, the same ``n_targets`` and the same targets. All rates 0
    returns ``batch`` itself. Raises ValueError unless every rate is in [0, 1), for a pronoun
    dropout without ``pronoun_ids``, or on a batch with ``rec_tgt`` without ``reconstruction``."""
    if not 0.0 <= context_dropout < 1.0:
        raise ValueError(f"train.context_dropout must be in [0, 1), got {context_dropout}")
    if not 0.0 <= coword_dropout < 1.0:
        raise ValueError(f"train.coword_dropout must be in [0, 1), got {coword_dropout}")
    if not 0.0 <= pronoun_dropout < 1.0:
        raise ValueError(f"train.pronoun_dropout must be in [0, 1), got {pronoun_dropout}")
    if pronoun_dropout and pronoun_ids is None:
        raise ValueError("train.pronoun_dropout needs the pronouns' source ids (pronoun_ids)")
    rec_tgt, dp_tgt = getattr(batch, "rec_tgt", None), getattr(batch, "dp_tgt", None)
    if pronoun_dropout and rec_tgt is not None and reconstruction is None:
        raise ValueError("train.pronoun_dropout: a batch with reconstruction targets (rec_tgt) needs to know "
                         "how the deletion changes them (reconstruction: ReconstructionDrop)")
    if coword_dropout == 0.0 and context_dropout == 0.0 and pronoun_dropout == 0.0:
        return batch
    gen = generator if generator is not None else torch.Generator().manual_seed(0)
    is_target, ctx = getattr(batch, "is_target", None), getattr(batch, "ctx", None)

    def pronouns(src: Tensor, rows: Tensor | None = None) -> tuple[Tensor, Tensor | None, Tensor | None]:
        """(drop (B, S), rec_tgt, dp_tgt after it) for the rows ``rows`` (B,) bool (None: all)."""
        if not pronoun_dropout:
            return torch.zeros_like(src, dtype=torch.bool), rec_tgt, dp_tgt
        drop = pronoun_positions(src, pronoun_dropout, pronoun_ids, gen, src_joins)
        if rows is not None:
            drop &= rows[:, None]
        if rec_tgt is None:
            return drop, rec_tgt, dp_tgt
        rec, dp, drop = reconstruction_targets(src, rec_tgt, dp_tgt, drop, reconstruction)
        return drop, rec, dp

    if is_target is None or ctx is None:                          # sentence-level: every row current
        masked = batch.src.masked_fill(coword_positions(batch.src, coword_dropout, gen), UNK_ID)
        pro, rec, dp = pronouns(batch.src)
        return replace(batch, src=delete_positions(masked, pro), rec_tgt=rec, dp_tgt=dp)
    src, dev = batch.src, batch.src.device
    b = src.size(0)
    targets = is_target.to(dev)
    drop_ctx = (torch.rand(b, generator=gen) < context_dropout).to(dev) & targets
    cow = coword_positions(src, coword_dropout, gen) & targets[:, None]
    pro, rec_del, dp_del = pronouns(src, targets)
    block = getattr(batch, "block", None)
    ctx = ctx.clone()
    read = torch.zeros(b, dtype=torch.bool, device=dev)           # rows another row reads through ctx
    read[ctx[ctx.ge(0)]] = True
    copy = (cow | pro).any(1) & read
    if block is not None:                                         # sub-documents: rows are each other's context
        copy |= drop_ctx
    ctx[drop_ctx] = -1
    rows = copy.nonzero().squeeze(1)                              # (C,) rows to copy
    in_place = ~copy[:, None]
    new_src = delete_positions(src.masked_fill(cow & in_place, UNK_ID), pro & in_place)
    rec_kw = {}                                                   # x̂ and labels: the rows in place, then the copies
    if rec_tgt is not None:
        own = ~copy[:, None].to(rec_tgt.device)
        rec_kw["rec_tgt"] = torch.where(own, rec_del, rec_tgt)
        if dp_tgt is not None:
            rec_kw["dp_tgt"] = torch.where(own.to(dp_tgt.device), dp_del, dp_tgt)
    if rows.numel() == 0:
        return replace(batch, src=new_src, ctx=ctx, **rec_kw)
    if rec_tgt is not None:
        rec_kw["rec_tgt"] = torch.cat([rec_kw["rec_tgt"], rec_del.index_select(0, rows.to(rec_tgt.device))])
        if dp_tgt is not None:
            rec_kw["dp_tgt"] = torch.cat([rec_kw["dp_tgt"], dp_del.index_select(0, rows.to(dp_tgt.device))])
    copy_src = delete_positions(src.index_select(0, rows).masked_fill(cow.index_select(0, rows), UNK_ID),
                                pro.index_select(0, rows))
    new_ctx = batch.ctx.clone()                                   # copied originals keep their pointers
    new_ctx[drop_ctx & ~copy] = -1
    new_target = targets.clone()
    new_target[rows] = False                                      # originals: context-only
    out = replace(
        batch,
        src=torch.cat([new_src, copy_src]),
        tgt_in=torch.cat([batch.tgt_in, batch.tgt_in.index_select(0, rows)]),
        tgt_out=torch.cat([batch.tgt_out, batch.tgt_out.index_select(0, rows)]),
        index=np.concatenate([np.asarray(batch.index), np.asarray(batch.index)[rows.cpu().numpy()]]),
        is_target=torch.cat([new_target, torch.ones(rows.numel(), dtype=torch.bool, device=dev)]).to(
            batch.is_target.device),
        ctx=torch.cat([new_ctx, ctx.index_select(0, rows)]),
        **rec_kw,
    )
    if block is not None:                                         # a dropped copy: a sub-document of its own
        fresh = int(block.max()) + 1 + torch.arange(rows.numel(), device=block.device)
        kept = block.index_select(0, rows.to(block.device))
        out.block = torch.cat([block, torch.where(drop_ctx[rows].to(block.device), fresh, kept)])
    return out


MIN_SPLIT = 4                                      # real tokens a side needs to be split (module doc)


def _boundaries(ids: np.ndarray, joins: np.ndarray | None) -> np.ndarray:
    """Cut positions 1..len(ids)−1 of a row of real tokens (no ``</s>``) that do not fall inside
    a BPE word: the token before the cut does not continue (``joins[id]`` False: no ``@@``)."""
    cuts = np.arange(1, len(ids))
    return cuts if joins is None else cuts[~joins[ids[:-1]]]


def _split_point(ids: np.ndarray, joins: np.ndarray | None, generator: torch.Generator) -> int | None:
    """A source cut drawn uniformly from the word boundaries in the middle third (any boundary
    when the middle third has none); None when there is none at all."""
    cuts = _boundaries(ids, joins)
    if cuts.size == 0:
        return None
    n = len(ids)
    mid = cuts[(cuts >= n / 3) & (cuts <= 2 * n / 3)]
    pool = mid if mid.size else cuts
    return int(pool[int(torch.randint(pool.size, (1,), generator=generator))])


def _target_point(ids: np.ndarray, frac: float, joins: np.ndarray | None) -> int | None:
    """The target cut nearest to ``frac`` × its length among its word boundaries."""
    cuts = _boundaries(ids, joins)
    if cuts.size == 0:
        return None
    return int(cuts[np.argmin(np.abs(cuts - frac * len(ids)))])


def split_sentences(batch, rate: float, generator: torch.Generator,
                    src_joins: np.ndarray | None = None, tgt_joins: np.ndarray | None = None):
    """Lupo et al.'s split-sentence rows (module doc) on a ``documents.DocBatch``: each target row
    with ≥ ``MIN_SPLIT`` real source and target tokens is split with probability ``rate``.
    ``src_joins`` / ``tgt_joins``: (V,) bool, True for a BPE unit that continues into the next
    (``…@@``): no cut inside a word (None: any position). Returns a new batch with 2 rows more
    per split (appended: first half, context-only; second half, target), the split originals
    context-only, ``n_targets`` recounted; ``batch`` itself when nothing is split or it has no
    documents. Raises ValueError unless 0 ≤ rate < 1, or for a batch with ``rec_tgt``."""
    if not 0.0 <= rate < 1.0:
        raise ValueError(f"train.split_sentences must be in [0, 1), got {rate}")
    is_target, ctx = getattr(batch, "is_target", None), getattr(batch, "ctx", None)
    if rate == 0.0 or is_target is None or ctx is None:
        return batch
    if getattr(batch, "rec_tgt", None) is not None:
        raise ValueError("train.split_sentences: a reconstructor's targets (rec_tgt) cannot be split")
    src, tgt = batch.src.cpu().numpy(), batch.tgt_out.cpu().numpy()
    draws = torch.rand(src.shape[0], generator=generator)
    halves = []                                                   # (row, src1, src2, tgt1, tgt2)
    for r in np.flatnonzero(is_target.cpu().numpy()):
        if draws[r] >= rate:
            continue
        x = src[r][(src[r] != PAD_ID) & (src[r] != EOS_ID) & (src[r] != BOS_ID)]
        y = tgt[r][(tgt[r] != PAD_ID) & (tgt[r] != EOS_ID)]
        if len(x) < MIN_SPLIT or len(y) < MIN_SPLIT:
            continue
        s = _split_point(x, src_joins, generator)
        t = None if s is None else _target_point(y, s / len(x), tgt_joins)
        if t is None:
            continue
        halves.append((r, x[:s], x[s:], y[:t], y[t:]))
    if not halves:
        return batch
    k, width_s, width_t = len(halves), src.shape[1], tgt.shape[1]
    eos = np.array([EOS_ID])
    new_src = np.zeros((2 * k, width_s), dtype=src.dtype)
    new_out = np.zeros((2 * k, width_t), dtype=tgt.dtype)
    new_in = np.zeros((2 * k, width_t), dtype=tgt.dtype)
    for j, (_, x1, x2, y1, y2) in enumerate(halves):
        for i, (xs, ys) in enumerate(((x1, y1), (x2, y2))):
            row = 2 * j + i
            xe, ye = np.concatenate([xs, eos]), np.concatenate([ys, eos])
            new_src[row, :len(xe)] = xe
            new_out[row, :len(ye)] = ye
            new_in[row, 0] = BOS_ID
            new_in[row, 1:len(ye)] = ys
    b, dev = src.shape[0], batch.src.device
    rows = torch.tensor([h[0] for h in halves], dtype=torch.long, device=ctx.device)
    first = b + 2 * torch.arange(k, device=ctx.device)             # rows of the first halves
    half_ctx = torch.full((2 * k, ctx.size(1)), -1, dtype=ctx.dtype, device=ctx.device)
    if ctx.size(1):
        half_ctx[1::2, :-1] = ctx.index_select(0, rows)[:, 1:]     # the original's N − 1 most recent
        half_ctx[1::2, -1] = first                                 # then its own first half
    targets = is_target.clone()
    targets[rows.to(is_target.device)] = False
    new_target = torch.tensor([False, True] * k, dtype=torch.bool, device=is_target.device)
    all_out = torch.cat([batch.tgt_out, torch.from_numpy(new_out).to(dev)])
    all_target = torch.cat([targets, new_target])
    out = replace(
        batch,
        src=torch.cat([batch.src, torch.from_numpy(new_src).to(dev)]),
        tgt_in=torch.cat([batch.tgt_in, torch.from_numpy(new_in).to(dev)]),
        tgt_out=all_out,
        index=np.concatenate([np.asarray(batch.index), np.repeat(np.asarray(batch.index)[[h[0] for h in halves]], 2)]),
        is_target=all_target,
        ctx=torch.cat([ctx, half_ctx]),
        n_targets=int(all_out[all_target.to(dev)].ne(PAD_ID).sum()),
    )
    block = getattr(batch, "block", None)
    if block is not None:                                         # the two halves: a sub-document of their own
        fresh = int(block.max()) + 1 + torch.arange(k, device=block.device)
        out.block = torch.cat([block, fresh.repeat_interleave(2)])
    return out


def random_context(batch):
    """The ``documents.DocBatch`` with every target row that has context reading *another* row's
    context instead: the contrastive ("random context") input of the context-margin loss
    (Jean & Cho 2019, ``training.loss.context_margin_loss``). Rows with context (``is_target``
    and some ``ctx`` pointer ≥ 0) are taken in batch order, n of them, and row i gets the
    ``ctx`` of row (i + ⌊n/2⌋) mod n [I: half a batch away — in a ``runs`` batch another
    document or a far part of the same one; deterministic, so a resumed run sees the same
    pairs]. Returns ``(batch', rows)``: the new batch (``batch`` is not modified; same rows,
    sources and targets) whose only target rows are the (n,) rows ``rows`` whose context
    changed — the others, whose output would be the real batch's, become context-only, so the
    random branch decodes nothing twice — and ``rows`` (empty when n < 2: nothing to swap with;
    ``batch`` itself is then returned). Raises ValueError for a
    sub-document batch (``block``: its rows are each other's context, there is no ``ctx`` to
    swap) and for a batch without documents."""
    is_target, ctx = _row_context(batch, "train.context_margin")
    rows = (is_target.to(ctx.device) & ctx.ge(0).any(1)).nonzero().squeeze(1)       # (n,)
    n = rows.numel()
    if n < 2:
        return batch, rows[:0]
    new_ctx = ctx.clone()
    new_ctx[rows] = ctx[rows.roll(-(n // 2))]
    swapped = torch.zeros_like(is_target)
    swapped[rows.to(is_target.device)] = True
    return replace(batch, ctx=new_ctx, is_target=swapped), rows


def _row_context(batch, option: str) -> tuple[Tensor, Tensor]:
    """(is_target (B,), ctx (B, N)) of a document batch whose rows each have their own context;
    ValueError naming ``option`` for a batch without documents (a sentence model) or a
    sub-document batch (``block``, e.g. HGC: its rows are each other's context)."""
    is_target, ctx = getattr(batch, "is_target", None), getattr(batch, "ctx", None)
    if is_target is None or ctx is None:
        raise ValueError(f"{option} needs document batches (a context model)")
    if getattr(batch, "block", None) is not None:
        raise ValueError(f"{option}: sub-document batches (model.context_block, e.g. HGC) "
                         "have no per-row context to swap")
    return is_target, ctx


def _append_rows(old: Tensor, new: Tensor) -> Tensor:
    """(B + F, max(S, S')) rows of ``old`` (B, S) then ``new`` (F, S'), the narrower padded."""
    width = max(old.size(1), new.size(1))
    old, new = (torch.nn.functional.pad(t, (0, width - t.size(1)), value=PAD_ID) for t in (old, new))
    return torch.cat([old, new.to(old.device)])


def foreign_context(batch, data, rate: float, generator: torch.Generator, tries: int = 10):
    """The **random-context control** (Li et al. 2020, "Does Multi-Encoder Help? A Case Study on
    Context-Aware Neural Machine Translation", ACL, §3–4: a context encoder fed random sentences
    instead of the real previous ones keeps most of the BLEU gain on small data — the gain is
    robust training, not context) [``train.random_context: p``]: each target row of a
    ``documents.DocBatch`` that has context (some ``ctx`` pointer ≥ 0) is chosen with probability
    ``rate``; a chosen row at line i reads, instead of its own previous sentences, the N lines
    before line q = (i + s) mod L of ``data`` (``documents.DocData``, L lines) inside q's
    document — CXMI's "random context" condition (``evaluation.forced.random_context``: the
    sentences before a position of another document). The shift s (1 ≤ s < L) is drawn once per
    batch, so consecutive rows read consecutive foreign lines [I: one shift keeps the foreign
    context a coherent run, and the extra rows few]; a shift that puts a chosen row in its own
    document is redrawn (``tries`` times), a row still there keeps its context. The foreign lines
    are appended as context-only rows (``is_target`` False, their own ``ctx`` −1 [I]; never
    masked, as every context row), so the batch grows by about one row per chosen row and its
    context encoding costs that much more. Sources and targets of the existing rows, ``n_targets``
    and ``is_target`` stay. ``rate`` 1 trains a model that never sees a row's own previous
    sentences: compared with the same model trained on them (equal updates), it tells how much of
    a context model's gain is its context. No chosen row: ``batch`` unchanged. Returns a new
    batch (``batch`` is not modified) of B + F rows (F appended foreign lines; src / tgt_in /
    tgt_out padded to the wider of the two parts, ctx (B + F, N)). Raises ValueError unless 0 ≤ ``rate`` ≤ 1,
    for a batch without documents (a sentence model), a sub-document batch (``block``, e.g. HGC:
    no per-row context) and a batch with reconstruction targets (``rec_tgt``)."""
    if not 0.0 <= rate <= 1.0:
        raise ValueError(f"train.random_context must be in [0, 1], got {rate}")
    is_target, ctx = _row_context(batch, "train.random_context")
    if getattr(batch, "rec_tgt", None) is not None:
        raise ValueError("train.random_context: batches with reconstruction targets are not supported")
    has = (is_target.cpu() & ctx.cpu().ge(0).any(1))
    chosen = has & (torch.rand(has.numel(), generator=generator) < rate)
    rows = chosen.nonzero().squeeze(1).numpy()                                       # (m,)
    if rows.size == 0:
        return batch
    n, n_ctx = len(data), ctx.size(1)
    lines = np.asarray(batch.index)[rows]
    own = data.doc[lines]
    for _ in range(tries):
        q = (lines + int(torch.randint(1, max(n, 2), (1,), generator=generator))) % n
        if not (data.doc[q] == own).any():
            break
    ok = data.doc[q] != own                                                          # (m,)
    prev = q[:, None] - (n_ctx - np.arange(n_ctx))[None, :]                          # (m, N) oldest first
    valid = (prev >= 0) & (data.doc[np.clip(prev, 0, None)] == data.doc[q][:, None]) & ok[:, None]
    foreign = np.unique(prev[valid])                                                 # (F,) lines to append
    if foreign.size == 0:
        return batch
    b = batch.src.size(0)                                                            # foreign[k] → row b + k
    new_ctx = ctx.clone()
    pointers = torch.from_numpy(np.where(valid, b + np.searchsorted(foreign, prev), -1)).to(ctx.device)
    keep = torch.from_numpy(ok)
    new_ctx[torch.from_numpy(rows[ok]).to(ctx.device)] = pointers[keep.to(ctx.device)]
    tgt = [data.tgt[i] for i in foreign]
    return replace(
        batch,
        src=_append_rows(batch.src, pad_sequences([data.src[i] for i in foreign], PAD_ID)),
        tgt_in=_append_rows(batch.tgt_in, pad_sequences(tgt, PAD_ID, prefix=BOS_ID, drop_last=True)),
        tgt_out=_append_rows(batch.tgt_out, pad_sequences(tgt, PAD_ID)),
        index=np.concatenate([np.asarray(batch.index), foreign]),
        is_target=torch.cat([is_target, torch.zeros(foreign.size, dtype=torch.bool, device=is_target.device)]),
        ctx=torch.cat([new_ctx, torch.full((foreign.size, n_ctx), -1, dtype=ctx.dtype, device=ctx.device)]),
    )
