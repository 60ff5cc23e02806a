"""Query-guided Capsule Network context (Yang et al. 2019, QCN, §3; docs/models.md §2.6) on a
Transformer backbone with ``EncoderParts``.

* **Capsules** (§2.6 "Capsule construction" [I]): every word of the N previous source
  sentences is an input capsule u_i = W_u [E_src[w_i]; onehot_N(dist_i)] + b_u (dist 1 = the
  previous sentence), routed into J output capsules by ``query_guided_routing`` (§2.6
  "Improved routing", the reconstruction of the lost Algorithm 1 [I]) with the query
  q = W_q mean_k E_src[x_k] + b_q of the current sentence. Computed once per sentence.
* **Sub-layer-expanded encoder** (§2.6 [P §3.3]): in every encoder layer,
  z ← Sub(z, SelfAttn); z ← Sub(z, MultiHead(Q=z, K=V=V_caps)); z ← Sub(z, FFN), each layer
  its own context attention, all reading the same J capsules (no mask: they always exist).
* **Regularisation layer** (Yang et al. 2019 §3.4 [P; form I], docs/models.md §2.6, §5 A2): two plain CapsNets
  (``dynamic_routing``, no query) over the encoder and the decoder inputs of each target
  sentence; ρ = mean_j PCC(v^src_j, v^tgt_j); loss CE + β(1 − ρ), training only
  (``auxiliary_losses``, term ``pcc``).

``query_guided: false`` drops the context sub-layers (the paper's "+ regularisation term only":
the backbone plus the training-time term); ``regularise: false`` drops the term ("+ QCN").
Empty context (document start, sentence batches): no input capsules, so every s_j = q_j and
the capsules are the query path alone [I, §2.6] — not the sentence model's output. (With
``query_update: replace`` that path is squash^R(q), and |squash(s)| ≈ |s|² for small s: at
initialisation the empty-context capsules are ≈ 0 and the sub-layer adds little but its bias.)

The capsules are a bag of (word, sentence distance): routing is invariant to the order of the
context words, so "the first word of sentence m−1" is not identifiable (the synthetic task of
``tests/system/test_context_synthetic.py``: 0.41 first-token accuracy, the bag bound 0.414).
``capsule_input: encoder_input`` [I] builds u_i (and q) from the encoder input instead
(scaled E_src[w_i] + the word's position in its sentence, as the regularisation CapsNets read
it): 1.00 there. The default stays §2.6's plain embeddings.

Our implementation, not changing the function: u_i's word part W_u^E E[w] is computed once
per real (non-padding) source token of the batch and gathered by the rows that read it (each
row's context tokens packed, padded to the most any row has); the predictions û_{j|i} = W_j u_i
are never built as a (B, I, J, H) tensor (``LinearPredictions``: routing needs only
W_j Σ_i c_ij u_i and u_i · W_jᵀ v_j), nor are the PCCs' broadcast differences (``pcc_pairs``:
one matrix product); rows are routed in ``ROUTING_GROUPS`` groups of similar context (or
sentence) size, each cut to its own longest, since routing's per-word products are memory-bound
over the padded inputs; the regularisation CapsNets route through the Gram matrices W_jᵀ W_j
(``_gram_routing``: 4 products per row instead of 7); the context attention folds
its query and output projections into the J capsules (``capsule_attention``: no
(B, S, H) × (H, H) product) and runs on the target rows only, in length buckets
(``models.rows.length_buckets``).

Size (measured with ``build_model``): at the paper's shapes (4+4 layers, H 512, d_ff 2048,
8 heads, 30K source / 30K target vocabularies, tied decoder embeddings, N 3, J 4) the sentence
Transformer has 60.15M parameters and QCN + regularisation 68.03M: +4.21M context attention and
its sub-layer norms, +1.58M capsule maps (W_u 0.26M, W_q 0.26M, W_1..W_J 1.05M), +2.10M the two
regularisation CapsNets (computed in training only). The paper reports no parameter counts.
Training speed with and without the implementation choices above (``benchmarks/context_speed.py``):
measured in benchmarks/RESULTS.md, "QCN training speed, before and after factored routing" and
"QCN + regularisation reaches the training-speed goal; grid-minimising length buckets".
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from doctrans.models.context.base import ContextModel, context_rows
from doctrans.models.interface import SENTENCE_MODEL, EncoderOutput, EncoderParts
from doctrans.models.rows import length_buckets, scatter_rows

PCC_TARGETS = ("input", "prediction")
ROUTING_GROUPS = 2     # groups of target rows by context size in routing / the regularisation CapsNets
AGREEMENT_MODS = ("mul", "add", "one_plus")
QUERY_UPDATES = ("replace", "add")
CAPSULE_INPUTS = ("embedding", "encoder_input")


@dataclass(frozen=True)
class QCNConfig:
    type: str = "qcn"                   # the row of models/build.py:CONTEXT_MODELS
    context_sents: int = 3              # N previous source sentences (S0: 3)
    capsules: int = 4                   # J output capsules (S0: 4)
    iterations: int = 4                 # R routing iterations (S0: 4)
    heads: int = 8                      # context attention heads (S0: 8 at H 512)
    dropout: float = 0.2                # on context embeddings and context-attention weights [I]
    query_guided: bool = True           # the QCN context sub-layers (off: "+ regularisation only")
    regularise: bool = True             # the training-time PCC term (§2.6 regularisation layer)
    beta: float = 1.0                   # β of CE + β(1 − ρ) [I, range {0.1, 0.5, 1}]
    reg_capsules: int = 4               # J of the two regularisation CapsNets
    reg_iterations: int = 4             # their Sabour routing iterations
    pcc_target: str = "input"           # input (PCC(q_j, u_i)) | prediction (PCC(q_j, û_{j|i})) [I]
    agreement_mod: str = "mul"          # mul p·a | add a + p | one_plus (1 + p)·a [I]
    query_update: str = "replace"       # replace q_j ← v_j | add q_j ← q_j + v_j [I]
    capsule_input: str = "embedding"    # embedding E_src[w] (§2.6) | encoder_input (+ positions) [I]
    eps: float = 1e-8                   # ε of squash and PCC


def squash(s: Tensor, eps: float = 1e-8) -> Tensor:
    """Capsule non-linearity (Sabour et al. 2017 eq. 1; §2.6):
    v = (|s|² / (1 + |s|²)) · s / (|s| + ε). s: (…, H) → (…, H), same direction, norm < 1."""
    norm = torch.linalg.vector_norm(s, dim=-1, keepdim=True)                   # (…, 1), grad 0 at 0
    return s * (norm * norm / (1 + norm * norm) / (norm + eps))


def pcc(a: Tensor, b: Tensor, eps: float = 1e-8) -> Tensor:
    """Pearson correlation over the last dimension (S0 eq. 7, cov(X,Y)/(σ_X σ_Y); §2.6):
    Σ_k (a_k − ā)(b_k − b̄) / (|a − ā| |b − b̄| + ε). a, b: broadcastable (…, H) → (…) ∈ [−1, 1]."""
    a = a - a.mean(-1, keepdim=True)
    b = b - b.mean(-1, keepdim=True)
    na, nb = torch.linalg.vector_norm(a, dim=-1), torch.linalg.vector_norm(b, dim=-1)
    return (a * b).sum(-1) / (na * nb + eps)


class LinearPredictions(NamedTuple):
    """Predictions û_{j|i} = W_j x_i (one linear map per output capsule, no bias) kept factored:
    routing needs only Σ_i c_ij û_{j|i} = W_j (Σ_i c_ij x_i) and û_{j|i} · v_j = x_i · (W_jᵀ v_j),
    so the (B, I, J, H) tensor is never built (the same values: ``dense``) [our implementation].
    x: (B, I, H_in); weight: (J·H, H_in), rows j·H…(j+1)·H = W_j."""

    x: Tensor
    weight: Tensor


def _weighted_sum(u_hat, c: Tensor) -> Tensor:
    """Σ_i c_ij û_{j|i}: c (B, I, J) → (B, J, H)."""
    if isinstance(u_hat, Tensor):
        return torch.einsum("bij,bijh->bjh", c, u_hat)
    x, w = u_hat
    m = torch.einsum("bij,bik->bjk", c, x)                                       # (B, J, H_in)
    return torch.einsum("bjk,jhk->bjh", m, w.view(c.size(-1), -1, x.size(-1)))


def _agreement(u_hat, v: Tensor) -> Tensor:
    """û_{j|i} · v_j: v (B, J, H) → (B, I, J)."""
    if isinstance(u_hat, Tensor):
        return torch.einsum("bijh,bjh->bij", u_hat, v)
    x, w = u_hat
    t = torch.einsum("bjh,jhk->bjk", v, w.view(v.size(1), -1, x.size(-1)))    # (B, J, H_in): W_jᵀ v_j
    return torch.einsum("bik,bjk->bij", x, t)


def _dense(u_hat, capsules: int) -> Tensor:
    """(B, I, J, H) predictions of a tensor or ``LinearPredictions``."""
    return u_hat if isinstance(u_hat, Tensor) else F.linear(u_hat.x, u_hat.weight).unflatten(-1, (capsules, -1))


def _centred(x: Tensor) -> tuple[Tensor, Tensor]:
    """(x − mean over the last dimension, its norm): (…, H) → ((…, H), (…))."""
    xc = x - x.mean(-1, keepdim=True)
    return xc, torch.linalg.vector_norm(xc, dim=-1)


def pcc_pairs(q: Tensor, u, eps: float = 1e-8) -> Tensor:
    """``pcc`` of every (q_j, u_i) pair by one matrix product (no (B, I, J, H) temporaries):
    q (B, J, H), u (B, I, H) or its ``_centred`` pair (kept across routing iterations)
    → (B, I, J) = pcc(q[:, None], u[:, :, None])."""
    (qc, qn), (uc, un) = _centred(q), (_centred(u) if isinstance(u, Tensor) else u)
    return torch.einsum("bih,bjh->bij", uc, qc) / (un[..., None] * qn[:, None] + eps)


def _gram_pays(rows: int, iterations: int, h_in: int) -> bool:
    """Whether routing ``rows`` rows of factored predictions through the Gram matrices
    (``_gram_routing``: J·H_in²·H once) costs less than the products it saves (rows·(R − 1)·J·H·H_in)."""
    return iterations > 1 and rows * (iterations - 1) > h_in


def dynamic_routing(u_hat, pad: Tensor, iterations: int, eps: float = 1e-8, capsules: int | None = None,
                    gram: Tensor | None = None) -> Tensor:
    """Sabour et al. 2017 routing-by-agreement (Procedure 1; §2.6 regularisation layer):
    c_ij = softmax_j(b_ij), s_j = Σ_i c_ij û_{j|i}, v_j = squash(s_j), b_ij += û_{j|i}·v_j.
    u_hat: (B, I, J, H) predictions, or ``LinearPredictions`` (then ``capsules`` = J); pad:
    (B, I) True at padding (contributes nothing) → v (B, J, H). Gradients flow through every
    iteration (b is not detached). Factored predictions route through the Gram matrices
    (``_gram_routing``: the same function, fewer products) when ``gram`` (their
    ``gram_matrices``) is given or when that pays for these rows (``_gram_pays``)."""
    dense = isinstance(u_hat, Tensor)
    b, i = (u_hat if dense else u_hat.x).shape[:2]
    if not dense and (gram is not None or _gram_pays(b, iterations, u_hat.x.size(-1))):
        return _gram_routing(u_hat, pad, iterations, eps, capsules, gram)
    logits = (u_hat if dense else u_hat.x).new_zeros((b, i, u_hat.size(2) if dense else capsules))
    keep = (~pad).unsqueeze(-1).to(logits.dtype)                               # (B, I, 1)
    for r in range(iterations):
        c = logits.softmax(-1) * keep                                          # (B, I, J)
        v = squash(_weighted_sum(u_hat, c), eps)                               # (B, J, H)
        if r < iterations - 1:
            logits = logits + _agreement(u_hat, v)
    return v


def gram_matrices(weight: Tensor, capsules: int) -> Tensor:
    """G_j = W_jᵀ W_j of a predictions weight (J·H, H_in) → (J, H_in, H_in), symmetric."""
    w = weight.view(capsules, -1, weight.size(-1))
    return torch.einsum("jhk,jhl->jkl", w, w)


def _gram_routing(u_hat: LinearPredictions, pad: Tensor, iterations: int, eps: float, capsules: int,
                  gram: Tensor | None = None) -> Tensor:
    """``dynamic_routing`` of factored predictions û_{j|i} = W_j x_i in x's space: with
    m_j = Σ_i c_ij x_i and G_j = W_jᵀ W_j, s_j = W_j m_j has |s_j|² = m_jᵀ G_j m_j and the
    agreement û_{j|i}·v_j = x_i · (f_j G_j m_j), f_j = squash's scale |s|/(1 + |s|²)·|s|/(|s| + ε);
    so an iteration before the last costs one product G_j m_j instead of W_j m_j and W_jᵀ v_j,
    and only the last forms s_j. The J Gram matrices cost J·H_in²·H once per batch, less than the
    products saved when B·(R − 1) > H_in [our implementation]. Same arguments and result;
    ``gram``: the ``gram_matrices`` of u_hat's weight, if already computed."""
    x, w = u_hat
    if gram is None:
        gram = gram_matrices(w, capsules)                                      # (J, H_in, H_in)
    w = w.view(capsules, -1, x.size(-1))                                       # (J, H, H_in)
    logits = x.new_zeros((x.size(0), x.size(1), capsules))
    keep = (~pad).unsqueeze(-1).to(x.dtype)
    for r in range(iterations):
        c = logits.softmax(-1) * keep                                          # (B, I, J)
        m = torch.einsum("bij,bik->bjk", c, x)                                 # (B, J, H_in)
        if r == iterations - 1:
            return squash(torch.einsum("bjk,jhk->bjh", m, w), eps)            # (B, J, H)
        gm = torch.einsum("bjk,jkl->bjl", m, gram)                             # (B, J, H_in): W_jᵀ s_j
        n2 = (m * gm).sum(-1, keepdim=True).clamp(min=0)                       # |s_j|² (B, J, 1)
        norm = torch.where(n2 > 0, n2, 1).sqrt() * (n2 > 0)                    # |s_j|, gradient 0 at 0
        logits = logits + torch.einsum("bik,bjk->bij", x, gm * (n2 / (1 + n2) / (norm + eps)))
    raise AssertionError("unreachable")


def _in_row_order(parts: list[Tensor], groups: list[Tensor]) -> Tensor:
    """The results of row groups (``length_buckets``: together every row once), parts[g] (R_g, …)
    for rows groups[g] (R_g,), as one (R, …) tensor in row order."""
    return torch.cat(parts).index_select(0, torch.argsort(torch.cat(groups)))


def capsule_attention(z: Tensor, caps: Tensor, mha: nn.MultiheadAttention, training: bool) -> Tensor:
    """``mha(z, caps, caps)[0]`` (no mask; ``mha.dropout`` on the attention weights when
    ``training``) computed with the query and output projections folded into the J keys and
    values: per row and head h, scores = (z W_q^hᵀ + b_q^h) k_hᵀ/√d = z (W_q^hᵀ k_hᵀ/√d) + b_q^h k_hᵀ/√d
    and out = Σ_h a_h (v_h W_o^hᵀ) + b_o, so no (B, S, H) × (H, H) product is run: J·heads
    ≪ H columns instead of H [our implementation; the same function and parameters as
    ``nn.MultiheadAttention``, the QCN context sub-layer of §2.6].
    z: (B, S, H) queries; caps: (B, J, H) keys = values → (B, S, H)."""
    b, s, h = z.shape
    nh, j = mha.num_heads, caps.size(1)
    d = h // nh
    w_q, w_k, w_v = mha.in_proj_weight.chunk(3)
    b_q, b_k, b_v = mha.in_proj_bias.chunk(3)
    k = F.linear(caps, w_k, b_k).view(b, j, nh, d)                              # (B, J, heads, d)
    v = F.linear(caps, w_v, b_v).view(b, j, nh, d)
    scale = d ** -0.5
    a_q = torch.einsum("ndk,bjnd->bknj", w_q.view(nh, d, h), k).reshape(b, h, nh * j)    # (B, H, heads·J)
    c_q = torch.einsum("nd,bjnd->bnj", b_q.view(nh, d), k).reshape(b, 1, nh * j)
    scores = torch.baddbmm(c_q, z, a_q, alpha=scale, beta=scale).view(b, s, nh, j)
    weights = F.dropout(scores.softmax(-1), mha.dropout, training).view(b, s, nh * j)        # (B, S, heads·J)
    vo = torch.einsum("bjnd,hnd->bnjh", v, mha.out_proj.weight.view(h, nh, d)).reshape(b, nh * j, h)
    return torch.baddbmm(mha.out_proj.bias.expand(b, 1, h), weights, vo)


class Routed(NamedTuple):
    """What ``query_guided_routing`` returns: the output capsules and, of its last iteration,
    s_j and the query q_j that entered it (all (B, J, H))."""

    v: Tensor
    s: Tensor
    q: Tensor


def query_guided_routing(u: Tensor, u_hat, query: Tensor, pad: Tensor, iterations: int,
                         pcc_target: str = "input", agreement_mod: str = "mul", query_update: str = "replace",
                         eps: float = 1e-8, capsules: int | None = None) -> Routed:
    """The improved routing of QCN (§2.6, reconstruction of S0 Algorithm 1 [I]):

        b_ij ← 0; q_j ← q                                      (query tiled J times)
        repeat R times:
            p_ij = PCC(q_j, u_i)  (pcc_target=prediction: PCC(q_j, û_{j|i}))
            c_ij = softmax_j(b_ij)   (padding i: 0)
            s_j  = Σ_i c_ij û_{j|i} + q_j ;  v_j = squash(s_j)
            a_ij = û_{j|i} · v_j ;  b_ij += p_ij·a_ij  (add: a + p; one_plus: (1 + p)·a)
            q_j  ← v_j  (add: q_j + v_j)

    The b and q updates of the last iteration do not reach the output and are skipped.
    u: (B, I, H) input capsules; u_hat: (B, I, J, H) their predictions û_{j|i}, or
    ``LinearPredictions`` (then ``capsules`` = J); query: (B, H); pad: (B, I) True at padding.
    With no real context token every s_j = q_j.
    → Routed(v (B, J, H), s (B, J, H), q (B, J, H))."""
    if isinstance(u_hat, Tensor):
        b, _, j, h = u_hat.shape
    else:
        b, j, h = u.size(0), capsules, query.size(-1)
    q = query[:, None].expand(b, j, h)                                          # (B, J, H)
    logits = u.new_zeros((b, u.size(1), j))                                    # (B, I, J)
    keep = (~pad).unsqueeze(-1).to(u.dtype)                                    # (B, I, 1)
    if pcc_target == "prediction":
        target = _dense(u_hat, j)                                              # (B, I, J, H)
    else:
        u_centred = _centred(u)                                                # the same every iteration
    for r in range(iterations):
        c = logits.softmax(-1) * keep                                          # (B, I, J)
        s = _weighted_sum(u_hat, c) + q                                        # (B, J, H)
        v = squash(s, eps)
        if r == iterations - 1:
            break
        p = pcc_pairs(q, u_centred, eps) if pcc_target == "input" else pcc(q[:, None], target, eps)   # (B, I, J)
        a = _agreement(u_hat, v)                                               # (B, I, J)
        logits = logits + (p * a if agreement_mod == "mul" else a + p if agreement_mod == "add" else (1 + p) * a)
        q = v if query_update == "replace" else q + v
    return Routed(v, s, q)


class CapsNet(nn.Module):
    """A plain CapsNet over a sequence (§2.6 regularisation layer): û_{j|i} = W_j x_i (one map
    H → J·H, no bias), ``dynamic_routing``. x: (B, L, H), pad: (B, L) → v (B, J, H)."""

    def __init__(self, hidden: int, capsules: int, iterations: int, eps: float):
        super().__init__()
        self.w = nn.Linear(hidden, capsules * hidden, bias=False)
        self.capsules, self.iterations, self.eps = capsules, iterations, eps

    def forward(self, x: Tensor, pad: Tensor) -> Tensor:
        return dynamic_routing(LinearPredictions(x, self.w.weight), pad, self.iterations, self.eps, self.capsules)

    def forward_bucketed(self, embed, tokens: Tensor, pad_id: int, buckets: int = ROUTING_GROUPS) -> Tensor:
        """``forward(embed(tokens), tokens == pad_id)``, tokens (B, L) with at least one real
        token per row, with the rows routed in at most ``buckets`` length groups
        (``models.rows.length_buckets``), each cut to its longest row. Routing's per-word products are
        memory-bound over the (B, L, H) inputs, and a batch's rows are mostly shorter than its
        longest; a row's capsules depend on its own words only, so this is the same function.
        One embedding call, one set of Gram matrices (``_gram_routing``) for all groups.
        embed: (b, l) → (b, l, H) (``embed_source`` / ``embed_target``) → v (B, J, H)
        [our implementation]."""
        lengths = tokens.ne(pad_id).sum(1)                                       # (B,)
        groups = length_buckets(lengths, buckets, min_rows=32)
        order = torch.cat(groups)                                                # rows by length
        tokens = tokens.index_select(0, order)[:, :max(int(lengths.max()), 1)]
        gram = (gram_matrices(self.w.weight, self.capsules)                      # one set for every group
                if _gram_pays(tokens.size(0), self.iterations, self.w.in_features) else None)
        parts, sizes = [], [g.numel() for g in groups]
        for g, x, t in zip(groups, embed(tokens).split(sizes), tokens.split(sizes)):
            width = max(int(lengths[g].max()), 1)
            parts.append(dynamic_routing(LinearPredictions(x[:, :width], self.w.weight), t[:, :width].eq(pad_id),
                                         self.iterations, self.eps, self.capsules, gram))
        return _in_row_order(parts, groups)


class QCN(ContextModel):
    """QCN context sub-layers and/or the PCC regularisation around a backbone with
    ``EncoderParts`` (see the module doc)."""

    backbone_parts = (EncoderParts,)

    @property
    def empty_context(self) -> str:
        """Without context sub-layers (``query_guided: false``) the backbone's sentence output;
        with them, the capsules of the query path alone (every s_j = q_j, docs/models.md §2.6)."""
        if not self.cfg.query_guided:
            return SENTENCE_MODEL
        return "the capsules of the query path alone (docs/models.md §2.6)"

    def __init__(self, backbone, cfg: QCNConfig):
        super().__init__(backbone, cfg.context_sents)
        for name, value, allowed in (("pcc_target", cfg.pcc_target, PCC_TARGETS),
                                     ("agreement_mod", cfg.agreement_mod, AGREEMENT_MODS),
                                     ("query_update", cfg.query_update, QUERY_UPDATES),
                                     ("capsule_input", cfg.capsule_input, CAPSULE_INPUTS)):
            if value not in allowed:
                raise ValueError(f"context.{name} must be one of {allowed}, got {value!r}")
        if min(cfg.capsules, cfg.iterations, cfg.reg_capsules, cfg.reg_iterations) < 1:
            raise ValueError("context.capsules, iterations, reg_capsules and reg_iterations must be ≥ 1")
        if not (cfg.query_guided or cfg.regularise):
            raise ValueError("context: QCN needs query_guided or regularise (else it is the sentence model)")
        self.cfg = cfg
        h = backbone.hidden_size
        e = backbone.source_embedding.embedding_dim if cfg.capsule_input == "embedding" else h
        if cfg.query_guided:
            self.drop = nn.Dropout(cfg.dropout)
            self.w_u = nn.Linear(e + cfg.context_sents, h)                       # W_u, b_u
            self.w_q = nn.Linear(e, h)                                           # W_q, b_q
            self.w_j = nn.Linear(h, cfg.capsules * h, bias=False)                # W_1..W_J
            self.attn = nn.ModuleList(nn.MultiheadAttention(h, cfg.heads, cfg.dropout, batch_first=True)
                                      for _ in range(backbone.encoder_layers))
            self.subs = nn.ModuleList(backbone.residual_sublayer() for _ in range(backbone.encoder_layers))
        if cfg.regularise:
            self.caps_src = CapsNet(h, cfg.reg_capsules, cfg.reg_iterations, cfg.eps)
            self.caps_tgt = CapsNet(h, cfg.reg_capsules, cfg.reg_iterations, cfg.eps)

    # -- capsules ---------------------------------------------------------------------------
    def context_capsules(self, src: Tensor, targets: Tensor, ctx: Tensor) -> Routed:
        """The J capsules of sentences ``targets`` (B',), rows of src (B, S), whose context rows
        (into src) are ctx (B', N), oldest first, −1 = missing (§2.6 capsule construction and
        improved routing) → Routed with v (B', J, H)."""
        cfg, n = self.cfg, self.context_sents
        real = src.ne(self.pad_id)                                                # (B, S)
        lengths = real.sum(1)                                                     # (B,)
        pos = real.view(-1).nonzero().squeeze(1)                                  # (T,) real tokens, row-major
        if cfg.capsule_input == "embedding":
            emb = self.drop(self.backbone.source_embedding(src.view(-1).index_select(0, pos)))   # (T, E)
        else:                                                                     # (T, H), positions
            emb = self.drop(self.backbone.embed_source(src)).flatten(0, 1).index_select(0, pos)
        w_e, w_d = self.w_u.weight[:, :emb.size(-1)], self.w_u.weight[:, emb.size(-1):]
        u_real = F.linear(emb, w_e)                                              # (T, H): W_u^E e
        u_slot = w_d.flip(1).t() + self.w_u.bias                                 # (N, H): slot n ↔ dist N−n
        # the input capsules of target k: the real tokens of its context rows ctx[k, 0..N−1] in
        # slot order (routing is invariant to their order), padded to the most any row has
        offsets = torch.cumsum(lengths, 0) - lengths                              # (B,) first real token of a row
        count = torch.where(ctx.ge(0), lengths.index_select(0, ctx.clamp(min=0).reshape(-1)).view(ctx.shape), 0)
        total, ends = count.sum(1), torch.cumsum(count, 1)                        # (B',), (B', N)
        width = max(int(total.max()) if total.numel() else 0, 1)
        k = torch.arange(width, device=src.device).expand(ctx.size(0), width)    # (B', I)
        slot = torch.searchsorted(ends, k.contiguous(), right=True).clamp(max=n - 1)   # (B', I)
        first = offsets.index_select(0, ctx.clamp(min=0).reshape(-1)).view(ctx.shape) - (ends - count)
        pad = k.ge(total[:, None])                                                # (B', I)
        index = torch.where(pad, 0, first.gather(1, slot) + k)                    # into the T real tokens
        rows = pos.div(src.size(1), rounding_mode="floor")                        # (T,) the row of each
        sums = emb.new_zeros((src.size(0), emb.size(-1))).index_add(0, rows, emb)         # (B, E)
        mean = sums.index_select(0, targets) / lengths.index_select(0, targets).clamp(min=1)[:, None].to(emb.dtype)
        query = self.w_q(mean)                                                   # (B', H)
        # routing's per-word products are memory-bound over u (B', I, H): rows routed in at most
        # ROUTING_GROUPS groups of similar context size, each cut to its own most (the same function)
        parts, groups = [], length_buckets(total, ROUTING_GROUPS, min_rows=32)
        for g in groups:
            w = max(int(total[g].max()), 1)
            idx, slt = index[g, :w], slot[g, :w]
            u = (u_real.index_select(0, idx.reshape(-1)).view(*idx.shape, -1)
                 + u_slot.index_select(0, slt.reshape(-1)).view(*idx.shape, -1))      # (B'_g, I_g, H)
            parts.append(query_guided_routing(u, LinearPredictions(u, self.w_j.weight), query[g], pad[g, :w],
                                              cfg.iterations, cfg.pcc_target, cfg.agreement_mod, cfg.query_update,
                                              cfg.eps, cfg.capsules))
        return Routed(*(_in_row_order(list(field), groups) for field in zip(*parts)))

    def _layer_fn(self, caps: Tensor):
        """``encode_with``'s layer k with QCN's context sub-layer; caps: (B', J, H)."""
        def layer_fn(k: int, layer, x: Tensor, keep: Tensor | None) -> Tensor:
            x = layer.attention_sublayer(x, keep)                                 # (B', S, H)
            x = self.subs[k](x, lambda z: capsule_attention(z, caps, self.attn[k], self.training))
            return layer.ffn_sublayer(x)
        return layer_fn

    # -- the model contract -----------------------------------------------------------------
    def encode(self, batch) -> EncoderOutput:
        """batch.src (B, S), ctx (B, N), is_target (B,) → states (B, S, H): the sub-layer-expanded
        encoder on the target rows (in length buckets, each cut to its longest source);
        context-only rows are read through their embeddings only and get zero states (they are
        never decoded). ``query_guided: false``: the backbone's encoder, target rows only."""
        src = batch.src
        is_target = getattr(batch, "is_target", None)
        targets = (is_target.to(src.device).nonzero().squeeze(1) if is_target is not None
                   else torch.arange(src.size(0), device=src.device))
        if not targets.numel():
            return self.backbone.encode(batch)
        caps = None
        if self.cfg.query_guided:
            rows = context_rows(batch, self.context_sents, src.device).index_select(0, targets)
            caps = self.context_capsules(src, targets, rows).v                    # (B', J, H)
        lengths = src.index_select(0, targets).ne(self.pad_id).sum(1)
        parts = []
        for g in length_buckets(lengths):
            part = src.index_select(0, targets[g])[:, :int(lengths[g].max())]
            layer_fn = None if caps is None else self._layer_fn(caps[g])
            parts.append((targets[g], self.backbone.encode_with(part, layer_fn)))
        return scatter_rows(parts, src.size(0), src.size(1))

    def auxiliary_losses(self, enc: EncoderOutput, batch) -> dict[str, Tensor]:
        """{"pcc": β(1 − ρ)} averaged over the target sentences (``is_target``, else every row),
        ρ = mean_j PCC(v^src_j, v^tgt_j) of the regularisation CapsNets over the encoder input
        embed_source(src) and the decoder input embed_target(tgt_in) (Yang et al. 2019 §3.4; docs/models.md §2.6, §5 A2);
        {} without ``regularise``. Unit: a per-sentence mean (see ``models.interface``)."""
        if not self.cfg.regularise:
            return {}
        src, tgt = batch.src, batch.tgt_in
        is_target = getattr(batch, "is_target", None)
        if is_target is not None:
            rows = is_target.to(src.device).nonzero().squeeze(1)
            src, tgt = src.index_select(0, rows), tgt.index_select(0, rows)
        v_src = self.caps_src.forward_bucketed(self.backbone.embed_source, src, self.pad_id)   # (B', J, H)
        v_tgt = self.caps_tgt.forward_bucketed(self.backbone.embed_target, tgt, self.pad_id)   # (B', J, H)
        rho = pcc(v_src, v_tgt, self.cfg.eps).mean(-1)                             # (B',)
        return {"pcc": self.cfg.beta * (1 - rho).mean()}
