"""Label-smoothed cross-entropy (Szegedy et al. 2016; Vaswani et al. 2017 §5.4) over the model
contract (``models.interface``): ``forward_loss(model, batch)`` is the one forward pass that
training, dev evaluation and benchmarks share.

The output projection and softmax are applied only to non-padding target positions
(``decode_train(..., select=keep)``), which saves the (B·T − n_tokens)·H·V multiply-adds that
padding would otherwise cost.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from doctrans.models.rows import length_buckets


@dataclass
class LossOutput:
    total: Tensor                 # scalar: summed label-smoothed loss in nats (divide by n_tokens for the mean)
    terms: dict[str, float]       # {"nll_nats": summed NLL, auxiliary terms × n_tokens, e.g. "pcc"}
    n_tokens: int
    token_logprobs: Tensor | None = None   # (n_tokens,) log p(y_t) (forward_loss(token_logprobs=True))
    token_rows: Tensor | None = None       # (n_tokens,) the batch row of each of them


_CHUNK_ELEMENTS = 1 << 21        # logits per chunk of _SmoothedNLL: a few MB in fp32, so each chunk's passes stay in cache


class _SmoothedNLL(torch.autograd.Function):
    """Per-token −log p(y) and −mean_v log p(v) of logits (N, V), p = softmax, computed in row
    chunks of ≈ 2M logits: each chunk is cast to fp32, reduced (log Σ exp, the gold logit, the
    mean) while it is in cache, and the backward recomputes each chunk's softmax from the saved
    logits and log Σ exp (N,) and writes the gradient softmax·(g_nll + g_smooth) − g_smooth/V −
    g_nll·onehot(y) in place. No (N, V) fp32 tensor is materialised: the autograd graph of
    log_softmax → gather / mean wrote four of them (the log-probabilities, the mean's expanded
    gradient, the gather's scattered zeros, their sum), memory-bound passes: 332 ms against 118 ms
    for a quickstart batch (3,900 tokens × 9,129 types, bf16 logits) of a ≈ 1 s training step
    (``benchmarks/train_kernels.py``; ``benchmarks/RESULTS.md``, "the attention kernel under bf16,
    a fused chunked loss").

    forward(logits (N, V) float, target (N,) long) → (nll (N,), smooth (N,)) in nats, in the
    logits' dtype promoted to at least fp32; backward → the logits' gradient in their dtype."""

    @staticmethod
    def forward(ctx, logits: Tensor, target: Tensor):
        n, v = logits.shape
        work = torch.float32 if logits.dtype in (torch.bfloat16, torch.float16) else logits.dtype   # ≥ fp32
        lse, nll, smooth = (logits.new_empty(n, dtype=work) for _ in range(3))
        rows = max(1, _CHUNK_ELEMENTS // max(v, 1))
        for a in range(0, n, rows):
            x = logits[a:a + rows].to(work)                                    # (r, V)
            lse_c = torch.logsumexp(x, dim=-1)
            lse[a:a + rows] = lse_c
            nll[a:a + rows] = lse_c - x.gather(1, target[a:a + rows, None]).squeeze(1)
            smooth[a:a + rows] = lse_c - x.mean(dim=-1)
        ctx.save_for_backward(logits, lse, target)
        return nll, smooth

    @staticmethod
    def backward(ctx, g_nll: Tensor | None, g_smooth: Tensor | None):
        logits, lse, target = ctx.saved_tensors
        n, v = logits.shape
        g_nll = torch.zeros_like(lse) if g_nll is None else g_nll
        g_smooth = torch.zeros_like(lse) if g_smooth is None else g_smooth
        g_all, g_flat = g_nll + g_smooth, g_smooth / v
        grad = torch.empty_like(logits)
        rows = max(1, _CHUNK_ELEMENTS // max(v, 1))
        for a in range(0, n, rows):
            x = logits[a:a + rows].to(lse.dtype, copy=True).sub_(lse[a:a + rows, None]).exp_()   # softmax
            x.mul_(g_all[a:a + rows, None]).sub_(g_flat[a:a + rows, None])
            x.scatter_add_(1, target[a:a + rows, None], -g_nll[a:a + rows, None])
            grad[a:a + rows] = x
        return grad, None


def label_smoothed_xent(logits: Tensor, target: Tensor, eps: float, token_logprobs: bool = False) -> LossOutput:
    """logits: (N, V) unnormalised scores at N real target tokens (any float dtype; the loss is
    computed in at least fp32); target: (N,) ids.

    loss = (1 − ε)·(−log p(y)) + ε·mean_v(−log p(v)), summed over the N tokens (nats) — ε/V on
    every type, as ``torch.nn.functional.cross_entropy(label_smoothing=ε)``.
    ``token_logprobs``: also return log p(y) (N,) (with gradients) as ``token_logprobs``.
    """
    nll, smooth = _SmoothedNLL.apply(logits, target)           # (N,), (N,)
    total = ((1.0 - eps) * nll + eps * smooth).sum()
    return LossOutput(total=total, terms={"nll_nats": float(nll.detach().sum())}, n_tokens=int(target.numel()),
                      token_logprobs=-nll if token_logprobs else None)


def forward_loss(model, batch, pad_id: int, eps: float, token_logprobs: bool = False) -> LossOutput:
    """Teacher-forced loss of one batch (``batch.src`` (B, S), ``batch.tgt_in`` / ``batch.tgt_out``
    (B, T), ``pad_id`` at padding) through the model contract: encode, decode the non-padding
    target positions, label-smoothed cross-entropy summed over them (nats). A document batch
    (``data.documents.DocBatch``) has ``is_target`` (B,): its context-only rows are encoded
    (every row: the model gathers context from them) but only the target rows are decoded
    (``EncoderOutput.select``), in length buckets (``models.rows.length_buckets``: runs
    of consecutive sentences are not length-sorted), each cut to its longest source and target,
    so a context-only row costs no decoder forward/backward and gets no loss, and padding costs
    little. Same loss as one padded call (up to float summation order). In training mode with
    gradients on, a model's ``auxiliary_losses`` (``models.interface.AuxiliaryLosses``: per-
    sentence means) are added as value × n_tokens and reported in ``terms`` under their names.
    ``token_logprobs`` (document batches): also return each target token's log p(y_t) and its
    batch row (``LossOutput.token_logprobs`` / ``token_rows``, with gradients), in the order
    ``target_logits`` yields them."""
    enc = model.encode(batch)
    out = _xent(model, enc, batch, pad_id, eps, token_logprobs)
    if model.training and torch.is_grad_enabled() and out.n_tokens:
        for name, value in model.auxiliary_losses(enc, batch).items():   # per-sentence means (models.interface)
            out.total = out.total + value * out.n_tokens
            out.terms[name] = float(value.detach()) * out.n_tokens
    return out


def _xent(model, enc, batch, pad_id: int, eps: float, token_logprobs: bool = False) -> LossOutput:
    """The label-smoothed cross-entropy part of ``forward_loss``."""
    tgt_in, tgt_out = batch.tgt_in, batch.tgt_out
    is_target = getattr(batch, "is_target", None)              # (B,) bool, DocBatch only
    if is_target is None:
        keep = tgt_out.ne(pad_id)                              # (B, T) True at real tokens
        logits = model.decode_train(enc, tgt_in, select=keep)  # (N, V)
        return label_smoothed_xent(logits, tgt_out[keep], eps)
    parts, rows = [], []
    for r, logits, gold, keep in target_logits(model, enc, batch, pad_id):
        parts.append(label_smoothed_xent(logits, gold, eps, token_logprobs))
        if token_logprobs:
            rows.append(r[keep.nonzero()[:, 0]])
    if not parts:                                              # no target row
        zero = enc.states.sum() * 0.0
        empty = zero.reshape(1)[:0] if token_logprobs else None
        return LossOutput(total=zero, terms={"nll_nats": 0.0}, n_tokens=0, token_logprobs=empty,
                          token_rows=batch.tgt_in.new_zeros(0) if token_logprobs else None)
    return LossOutput(total=sum((p.total for p in parts[1:]), parts[0].total),
                      terms={"nll_nats": sum(p.terms["nll_nats"] for p in parts)},
                      n_tokens=sum(p.n_tokens for p in parts),
                      token_logprobs=torch.cat([p.token_logprobs for p in parts]) if token_logprobs else None,
                      token_rows=torch.cat(rows) if token_logprobs else None)


MARGIN_LEVELS = ("sentence", "token")


def context_margin_loss(model, batch, real: LossOutput, pad_id: int, margin: float, level: str = "sentence",
                        detach_random: bool = False) -> tuple[Tensor, int]:
    """The pair-wise context ranking loss of Jean & Cho 2019 ("Context-Aware Learning for Neural
    Machine Translation", arXiv:1903.04715, §3): the model should give the reference a higher
    log-likelihood with its real context C than with a random one C̃, by a margin δ:

        sentence level: Σ_rows max(0, δ − (log p(y|x, C) − log p(y|x, C̃)))   (log p summed over y's tokens)
        token level:    Σ_tokens max(0, δ − (log p(y_t|y_<t, x, C) − log p(y_t|y_<t, x, C̃)))

    over the target rows that have context, C̃ from ``data.context_usage.random_context`` (another
    row's context, half a batch away). [I] Jean & Cho combine several levels; doctrans takes one
    (``train.context_margin_level``). ``detach_random`` [I, off = the paper]: no gradient through
    the C̃ branch, so the loss can only raise the real-context likelihood, never learn to
    *lower* the random-context one.

    ``batch``: a ``documents.DocBatch``; ``real``: ``forward_loss(model, batch, …,
    token_logprobs=True)`` of the same batch (its real-context branch, reused); δ = ``margin`` in
    nats. Returns (summed hinge, nats — a scalar with gradients; pairs it sums over). Costs one
    more encode of the batch and a teacher-forced decode of the swapped rows. Raises ValueError for an unknown level or
    a batch ``random_context`` refuses."""
    from doctrans.data.context_usage import random_context

    if level not in MARGIN_LEVELS:
        raise ValueError(f"train.context_margin_level must be one of {MARGIN_LEVELS}, got {level!r}")
    swapped, rows = random_context(batch)
    if rows.numel() == 0 or real.token_logprobs is None or real.token_logprobs.numel() == 0:
        return real.total * 0.0, 0
    with torch.set_grad_enabled(torch.is_grad_enabled() and not detach_random):
        rand = _xent(model, model.encode(swapped), swapped, pad_id, 0.0, token_logprobs=True)
    b = batch.tgt_in.size(0)
    chosen = torch.zeros(b, dtype=torch.bool, device=rows.device)
    chosen[rows] = True
    if level == "sentence":
        def per_row(out):
            return torch.zeros(b, dtype=out.token_logprobs.dtype, device=out.token_logprobs.device
                               ).index_add(0, out.token_rows, out.token_logprobs)
        gap = (per_row(real) - per_row(rand))[chosen.to(real.token_rows.device)]
    else:                  # tokens of each row in position order, rows ascending (rand holds only ``rows``)
        order_r = torch.sort(real.token_rows, stable=True).indices
        order_c = torch.sort(rand.token_rows, stable=True).indices
        keep = chosen.to(real.token_rows.device)[real.token_rows[order_r]]
        gap = real.token_logprobs[order_r][keep] - rand.token_logprobs[order_c]
    return torch.clamp(margin - gap, min=0.0).sum(), int(gap.numel())


def target_logits(model, enc, batch, pad_id: int):
    """Yield, per length bucket of the target rows of a document batch (``batch.is_target``
    (B,) bool), ``(rows (B',), logits (N, V), gold (N,), keep (B', T'))``: the rows' logits at
    their N non-padding target positions (row-major), the gold ids there, and which positions
    of ``batch.tgt_out[rows, :T']`` they are. ``enc`` = ``model.encode(batch)``. The decoding
    path of ``forward_loss``, shared with teacher-forced scoring (``evaluation.forced``)."""
    tgt_in, tgt_out = batch.tgt_in, batch.tgt_out
    rows = batch.is_target.to(tgt_in.device).nonzero().squeeze(1)               # (B',)
    t_len = tgt_out.index_select(0, rows).ne(pad_id).sum(1)
    s_len = (~enc.src_pad_mask).index_select(0, rows).sum(1)
    for group in length_buckets(torch.maximum(s_len, t_len)):
        r = rows[group]
        width = int(t_len[group].max())
        t_in, t_out = tgt_in[r, :width], tgt_out[r, :width]
        keep = t_out.ne(pad_id)
        yield r, model.decode_train(_target_rows(enc, r), t_in, select=keep), t_out[keep], keep


def _target_rows(enc, rows: Tensor):
    """``enc`` (EncoderOutput of B rows) → rows ``rows`` (B',), source cut to their longest."""
    enc = enc.select(rows)
    width = int((~enc.src_pad_mask).sum(1).max()) if rows.numel() else 0
    if width < enc.states.size(1):
        enc = enc.narrow(width)
    return enc


@torch.no_grad()
def dev_xent(model, batches, pad_id: int) -> tuple[float, int]:
    """Mean NLL in nats per target token over an iterable of Batch objects → (nats, tokens)."""
    model.eval()
    total, n = 0.0, 0
    for batch in batches:
        out = forward_loss(model, batch, pad_id, 0.0)
        total += out.terms["nll_nats"]
        n += out.n_tokens
    return total / max(n, 1), n
