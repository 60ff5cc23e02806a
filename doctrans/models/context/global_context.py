"""Hierarchical global context, HGC (Chen, Li & Gong 2020, CCL, S4 §2, which extends Tan et al.
2019's "Hierarchical Modeling of Global Context"; docs/models.md §2.7), on a Transformer backbone.

The context of a sentence is its whole **sub-document** (≤ K = 30 consecutive sentences, both
preceding and following; source side only). The sentences of a sub-document are encoded in one
forward pass (``batch.block`` (B,) says which batch rows form one; the data path and the
translator batch whole sub-documents, ``models/context/base.py``). In encoder layer k (every
layer with ``layers: all``, the last with ``last``) [P eq. 3–11]:

    S_i = Sub(A_i, SelfAttn)                  the layer's own self-attention sub-layer     (N_d,S,H)
    α_i = softmax_j(w_2ᵀ tanh(W_1 s_ij))      structured self-attentive pooling, eq. 3     (N_d,S)
    v_i = Σ_j α_ij s_ij                       sentence vectors, eq. 4                      (N_d,H)
    U   = softmax_i'(s_ij · v_i' / √H)        word → sentence weights, eq. 5               (N_d,S,N_d)
    Z   = softmax_(i'j')(s_ij · s_i'j' / √H)  word → word weights over the sub-document, eq. 6 (N_d,S,M)
    Q   = combine(U, Z)                       eq. 7                                        (N_d,S,M)
    C_i = Q · S_flat                          eq. 8                                        (N_d,S,H)
    H_i = Sub(S_i, FFN)                       the layer's own FFN sub-layer, eq. 9
    λ   = σ([H_i ; C_i] W^G + b)              eq. 11
    out = λ ⊙ H_i + (1 − λ) ⊙ C_i             eq. 10, the layer's output

Choices [I], each a config option (``HGCConfig``):

* ``combine``: S4 writes Q = U Z, whose shapes do not multiply; the text says the sentence
  weights "correct" the word weights, so Q[(i,j),(i',j')] = U[(i,j),i'] · Z[(i,j),(i',j')] (each
  word's weight scaled by the weight of its sentence), optionally ``renormalise``d to sum 1;
  ``hierarchical: false`` is the paper's word-level ablation Q = Z.
* ``states``: the paper is post-norm, so s_ij is a LayerNorm output. On a pre-norm backbone
  ``normed`` (default) uses the normalised states the FFN reads (``layer.ffn_input``),
  ``residual`` the raw residual stream.
* ``gate_bias``: the initial bias of the gate (the paper gives no initialisation). With the
  sentence-level parameters frozen (stage 2, S4 §3.3), λ ≈ 0.5 at the start would halve every
  layer's output of a trained encoder; a positive bias starts near the sentence model.
* ``layers``: ``all`` (the superscript (k) of S4 throughout) or ``last``.

The current sentence's own words are part of Z ("all words" [P]). A batch without ``block``
(a sentence-level batch) is a sub-document of one sentence per row: the "no context" of this
model. The dot products have no learned projections [P]; the new weights are W_1, w_2, W^G and
biases (``parameters added``: (3H² + 3H + 1) per layer).

Memory: the word → word weights are (M × M) per sub-document (M ≤ K·S tokens, padding removed);
with ``query_chunk`` > 0 they are computed for that many query words at a time (the same
result, smaller peak memory: ``benchmarks/hgc_memory.py``).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import Tensor, nn

from doctrans.models.context.base import ContextModel
from doctrans.models.interface import EncoderOutput, EncoderParts

LAYERS = ("all", "last")
STATES = ("normed", "residual")


@dataclass(frozen=True)
class HGCConfig:
    type: str = "hgc"                   # the row of models/build.py:CONTEXT_MODELS
    block: int = 30                     # K: sentences per sub-document (S4: 30)
    hierarchical: bool = True           # False: the word-level ablation, Q = Z
    renormalise: bool = False           # divide U ⊙ Z by its row sum [I]
    layers: str = "all"                 # all | last encoder layers get the block [I]
    states: str = "normed"              # normed | residual: the s_ij the weights read [I]
    gate_bias: float = 0.0              # initial bias b of the gate λ (eq. 11) [I]
    query_chunk: int = 0                # query words per chunk of the word→word weights (0 = all)


@dataclass
class SubDocuments:
    """Where the real tokens of each sub-document are in a (B, S) batch.

    index: (D, M) flat positions row·S + column of the sub-document's real tokens (row-major),
    0 at padding; keep: (D, M) True at real tokens; sent: (D, M) the token's sentence slot
    0…N_d−1 in its sub-document; rows: (D, N) batch row of each sentence slot, 0 at padding;
    rows_keep: (D, N) True at real slots."""

    index: Tensor
    keep: Tensor
    sent: Tensor
    rows: Tensor
    rows_keep: Tensor

    @staticmethod
    def of(src_pad: Tensor, block: Tensor | None) -> "SubDocuments":
        """src_pad (B, S) True at padding; block (B,) sub-document ids (None: one per row)."""
        b, s = src_pad.shape
        dev = src_pad.device
        if block is None:
            block = torch.arange(b, device=dev)
        _, doc = torch.unique(block, return_inverse=True)                     # (B,) 0…D−1
        d = int(doc.max()) + 1 if b else 0
        order = torch.argsort(doc * b + torch.arange(b, device=dev))           # rows by sub-document, stable
        counts = torch.bincount(doc, minlength=d)                              # (D,) sentences
        slot = torch.arange(b, device=dev) - torch.repeat_interleave(torch.cumsum(counts, 0) - counts, counts)
        rows = torch.zeros((d, int(counts.max()) if b else 0), dtype=torch.long, device=dev)
        rows_keep = torch.zeros_like(rows, dtype=torch.bool)
        rows[doc[order], slot] = order
        rows_keep[doc[order], slot] = True
        real = ~src_pad[order]                                                 # (B, S) in sub-document order
        flat = (order[:, None] * s + torch.arange(s, device=dev)).masked_select(real)   # tokens, row-major
        tok_doc = doc[order][:, None].expand(b, s).masked_select(real)
        tok_sent = slot[:, None].expand(b, s).masked_select(real)
        per_doc = torch.bincount(tok_doc, minlength=d)
        pos = torch.arange(flat.numel(), device=dev) - torch.repeat_interleave(torch.cumsum(per_doc, 0) - per_doc,
                                                                                per_doc)
        m = max(int(per_doc.max()), 1) if b else 1
        index = torch.zeros((d, m), dtype=torch.long, device=dev)
        keep = torch.zeros((d, m), dtype=torch.bool, device=dev)
        sent = torch.zeros((d, m), dtype=torch.long, device=dev)
        index[tok_doc, pos], keep[tok_doc, pos], sent[tok_doc, pos] = flat, True, tok_sent
        return SubDocuments(index, keep, sent, rows, rows_keep)


class GlobalContextLayer(nn.Module):
    """The document-level parameters of one encoder layer: pooling (W_1, w_2, eq. 3) and the
    gate (W^G, b, eq. 11)."""

    def __init__(self, d_model: int, gate_bias: float):
        super().__init__()
        self.w1 = nn.Linear(d_model, d_model)
        self.w2 = nn.Linear(d_model, 1, bias=False)
        self.gate = nn.Linear(2 * d_model, d_model)
        nn.init.constant_(self.gate.bias, gate_bias)

    def sentence_vectors(self, s: Tensor, pad: Tensor) -> Tensor:
        """Structured self-attentive pooling (eq. 3–4): s (B, S, H), pad (B, S) → v (B, H)."""
        e = self.w2(torch.tanh(self.w1(s))).squeeze(-1).masked_fill(pad, float("-inf"))   # (B, S)
        alpha = torch.softmax(e, dim=-1).nan_to_num(0.0)
        return torch.einsum("bs,bsh->bh", alpha, s)

    def combine_gate(self, h: Tensor, c: Tensor) -> Tensor:
        """Eq. 10–11: λ ⊙ H + (1 − λ) ⊙ C. h, c: (…, H) → (…, H)."""
        lam = torch.sigmoid(self.gate(torch.cat([h, c], dim=-1)))
        return lam * h + (1.0 - lam) * c


def global_context(s: Tensor, v: Tensor, docs: SubDocuments, hierarchical: bool = True,
                   renormalise: bool = False, query_chunk: int = 0) -> Tensor:
    """The global context C (eq. 5–8) of every real token.

    s: (B, S, H) token states; v: (B, H) sentence vectors; docs: the batch's sub-documents →
    C (B, S, H), zeros at padding. Z is a softmax over all real tokens of the sub-document (the
    token's own sentence included); U a softmax over its sentences; Q = U ⊙ Z (``hierarchical``,
    each key word weighted by its sentence's U) or Z."""
    b, n, h = s.shape
    flat = s.reshape(b * n, h)
    tok = flat[docs.index] * docs.keep[..., None]                              # (D, M, H)
    sv = v[docs.rows] * docs.rows_keep[..., None]                              # (D, N, H)
    scale = 1.0 / math.sqrt(h)
    key_keep, sent_keep = docs.keep[:, None, :], docs.rows_keep[:, None, :]
    out = []
    m = tok.size(1)
    step = query_chunk if query_chunk > 0 else m
    for a in range(0, m, step):
        q = tok[:, a:a + step]                                                 # (D, m', H)
        z = torch.softmax((q @ tok.transpose(1, 2) * scale).masked_fill(~key_keep, float("-inf")), -1)  # (D, m', M)
        if hierarchical:
            u = torch.softmax((q @ sv.transpose(1, 2) * scale).masked_fill(~sent_keep, float("-inf")), -1)  # (D, m', N)
            z = z * u.gather(2, docs.sent[:, None, :].expand(-1, q.size(1), -1))   # U[(i,j), sentence of key]
            if renormalise:
                z = z / z.sum(-1, keepdim=True).clamp(min=1e-9)
        out.append(z @ tok)                                                    # (D, m', H)
    c = torch.cat(out, dim=1)
    res = c.new_zeros((b * n, h)).index_put((docs.index[docs.keep],), c[docs.keep])   # c's dtype (bf16 under autocast)
    return res.view(b, n, h)


class HGC(ContextModel):
    """The hierarchical global context encoder around a backbone with ``EncoderParts``
    (see the module doc)."""

    backbone_parts = (EncoderParts,)
    empty_context = "a sub-document of the sentence alone: its own global context, gated (docs/models.md §2.7)"

    def __init__(self, backbone, cfg: HGCConfig):
        super().__init__(backbone, 0, cfg.block)
        if cfg.layers not in LAYERS:
            raise ValueError(f"context.layers must be one of {LAYERS}, got {cfg.layers!r}")
        if cfg.states not in STATES:
            raise ValueError(f"context.states must be one of {STATES}, got {cfg.states!r}")
        if cfg.query_chunk < 0:
            raise ValueError(f"context.query_chunk must be ≥ 0, got {cfg.query_chunk}")
        self.cfg = cfg
        n = backbone.encoder_layers
        self.with_context = list(range(n)) if cfg.layers == "all" else [n - 1]
        self.global_layers = nn.ModuleList(GlobalContextLayer(backbone.hidden_size, cfg.gate_bias)
                                           for _ in self.with_context)

    def encode(self, batch) -> EncoderOutput:
        """batch.src (B, S) [and batch.block (B,)] → states (B, S, H): the backbone's encoder
        with the global context block in the chosen layers (eq. 3–11)."""
        src = batch.src
        pad = src.eq(self.pad_id)
        docs = SubDocuments.of(pad, getattr(batch, "block", None))
        where = {k: i for i, k in enumerate(self.with_context)}
        cfg = self.cfg

        def layer_fn(k, layer, x, keep):
            s = layer.attention_sublayer(x, keep)                               # S_i
            h = layer.ffn_sublayer(s)                                           # H_i, eq. 9
            if k not in where:
                return h
            g = self.global_layers[where[k]]
            states = layer.ffn_input(s) if cfg.states == "normed" else s
            c = global_context(states, g.sentence_vectors(states, pad), docs, cfg.hierarchical,
                               cfg.renormalise, cfg.query_chunk)
            return g.combine_gate(h, c)

        return self.backbone.encode_with(src, layer_fn)
