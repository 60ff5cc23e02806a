"""Transformer encoder–decoder (Vaswani et al. 2017), the doctrans backbone T.

Notes: ``docs/models.md`` §1.3. Pre-norm by default (``norm: pre``, with a final
LayerNorm on each stack, as OpenNMT-py/HAN use; ``post`` is the original paper's order),
sinusoidal positions, decoder input embedding tied to the output projection
(``share_dec_embeddings``), embeddings scaled by sqrt(H).

Speed notes (2-core CPU): one fused QKV projection for self-attention,
``F.scaled_dot_product_attention`` for the attention core (an explicit form for bf16 on CPU,
where SDPA's flash kernel is slow: ``layers/attention.py``), causal masking via ``is_causal``
(no mask tensor), and an output projection that the loss applies only to non-padding
positions (see ``doctrans/training/loss.py``). Incremental decoding keeps per-layer key/value
caches in an explicit ``DecoderState`` so a beam step never re-runs the prefix.

Shape legend: B batch, S source length, T target length, H d_model, V vocabulary.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from doctrans.layers.attention import attention
from doctrans.layers.masks import attn_keep_mask, pad_mask
from doctrans.layers.output import project
from doctrans.models.interface import EncoderOutput, SentenceModelDefaults, SourceBatch
from doctrans.models.portable import PortableTransformer
from doctrans.models.rows import length_buckets, rows_per_group


@dataclass(frozen=True)
class TransformerConfig:
    backbone: str = "transformer"       # the row of models/build.py:BACKBONES
    layers_enc: int = 3
    layers_dec: int = 3
    d_model: int = 256                  # H
    heads: int = 4
    d_ff: int = 1024
    dropout: float = 0.1                # residual, embedding and FFN-output dropout
    attn_dropout: float = 0.0           # dropout on attention weights
    relu_dropout: float = 0.0           # dropout inside the FFN
    norm: str = "pre"                   # "pre" | "post" (docs/models.md §1.3)
    share_dec_embeddings: bool = True   # tie decoder input embedding and output projection
    share_all_embeddings: bool = False  # also tie the source embedding (needs a joint vocabulary)
    max_positions: int = 1024
    reconstructor: Any = None           # a ReconstructorConfig: reconstructors / DP heads (models/reconstructor.py)


def sinusoidal_positions(n: int, dim: int) -> Tensor:
    """Sinusoidal position encodings (Vaswani et al. 2017, §3.5). → (n, dim)."""
    pos = torch.arange(n, dtype=torch.float32)[:, None]
    inv = torch.exp(torch.arange(0, dim, 2, dtype=torch.float32) * (-math.log(10000.0) / dim))
    pe = torch.zeros(n, dim)
    pe[:, 0::2] = torch.sin(pos * inv)
    pe[:, 1::2] = torch.cos(pos * inv)
    return pe


@dataclass
class LayerCache:
    """Key/value cache of one decoder layer (shapes: R state rows in G groups of g, ``DecoderState``).

    self_k/self_v: (R, heads, t, H/heads) for the t target positions each row produced so far (None
    before the first step); cross_k/cross_v: (G, heads, S, H/heads), computed once per encoder row;
    prefix_k/prefix_v: (G, heads, P, H/heads), a forced target prefix's keys/values
    (``Transformer.init_state_with_prefix``), or None."""

    self_k: Tensor | None
    self_v: Tensor | None
    cross_k: Tensor
    cross_v: Tensor
    prefix_k: Tensor | None = None
    prefix_v: Tensor | None = None


@dataclass
class DecoderState:
    """Everything a decoding step needs besides the next input token.

    The R state rows come in G groups of ``group`` = g consecutive rows that read one encoder row
    (beam search: a sentence's K hypotheses). What the rows of a group share is kept once per
    group and read by its g rows as g query positions: the cross-attention keys/values and
    ``memory_keep`` (G, 1, 1, S) bool SDPA mask (True = attend) or None, and a forced target
    prefix (``prefix_k``/``prefix_v``, ``prefix_keep`` (G, 1, 1, P) True at its tokens, False at
    its padding, ``prefix_len`` (G,) tokens per group's prefix, ``prefix_max`` its maximum as a
    Python int — the position check without a device sync per step; None / 0 without a prefix). Only
    the rows' own keys/values (``LayerCache.self_k``) are per row. step: positions decoded after
    the prefix (columns of ``self_k``); a row of group j is at position ``prefix_len[j] + step``,
    or at ``step`` when ``prefix_offset`` > 0 (the prefix was read at positions ``prefix_offset``
    …: ``init_state_with_prefix(…, offset)``).
    src_rows: (R,) the encoder row each state row reads (``init_state``: 0 … B−1), or None: then
    every row is its own group and ``reorder`` copies the shared tensors at every step (the
    behaviour before groups; tests compare with it).
    """

    layers: list[LayerCache]
    memory_keep: Tensor | None
    step: int
    src_rows: Tensor | None = None
    group: int = 1
    prefix_keep: Tensor | None = None
    prefix_len: Tensor | None = None
    prefix_max: int = 0
    prefix_offset: int = 0

    def reorder(self, index: Tensor) -> "DecoderState":
        """Select state rows (beam reordering / dropping finished sentences). index: (R',).

        The rows' own caches are selected row by row. The shared tensors are selected per group,
        and only when the groups change: a beam step that only reorders the hypotheses of each
        sentence keeps them as they are; rows that come in equal consecutive blocks from one
        group each (the beam widening, sentences leaving) form the new groups; any other
        selection makes every row its own group (copying the shared tensors per row)."""
        def sel(t: Tensor | None, i: Tensor) -> Tensor | None:
            return None if t is None else t.index_select(0, i)
        old = index if self.group == 1 else torch.div(index, self.group, rounding_mode="floor")  # (R',) old groups
        n_groups = self.layers[0].cross_k.size(0) if self.layers else 0
        g = rows_per_group(old, self.group) if self.src_rows is not None else 1
        picked = old if g == 1 else old[::g]                                         # (G',) old group of each new one
        same = picked.numel() == n_groups and torch.equal(picked, torch.arange(n_groups, device=picked.device))
        if same:
            layers = [LayerCache(sel(c.self_k, index), sel(c.self_v, index), c.cross_k, c.cross_v,
                                 c.prefix_k, c.prefix_v) for c in self.layers]
            return DecoderState(layers, self.memory_keep, self.step, sel(self.src_rows, index), g,
                                self.prefix_keep, self.prefix_len, self.prefix_max, self.prefix_offset)
        layers = [LayerCache(sel(c.self_k, index), sel(c.self_v, index), sel(c.cross_k, picked),
                             sel(c.cross_v, picked), sel(c.prefix_k, picked), sel(c.prefix_v, picked))
                  for c in self.layers]
        prefix_len = sel(self.prefix_len, picked)
        prefix_max = int(prefix_len.max()) if prefix_len is not None and prefix_len.numel() else 0
        return DecoderState(layers, sel(self.memory_keep, picked), self.step, sel(self.src_rows, index), g,
                            sel(self.prefix_keep, picked), prefix_len, prefix_max, self.prefix_offset)


class MultiHeadAttention(nn.Module):
    """Scaled dot-product multi-head attention (Vaswani et al. 2017, eq. 1 and §3.2.2).

    Self-attention uses one fused (H → 3H) projection; cross-attention projects the query
    (H → H) and the memory (H → 2H) separately so memory keys/values are computed once.
    """

    def __init__(self, d_model: int, heads: int, dropout: float, self_attn: bool):
        super().__init__()
        if d_model % heads:
            raise ValueError(f"d_model {d_model} is not divisible by heads {heads}")
        self.heads, self.dk, self.dropout = heads, d_model // heads, dropout
        self.self_attn = self_attn
        if self_attn:
            self.qkv = nn.Linear(d_model, 3 * d_model)
        else:
            self.q = nn.Linear(d_model, d_model)
            self.kv = nn.Linear(d_model, 2 * d_model)
        self.out = nn.Linear(d_model, d_model)

    def _split(self, x: Tensor) -> Tensor:
        # x: (B, L, H) → (B, heads, L, dk)
        b, n, _ = x.shape
        return x.view(b, n, self.heads, self.dk).transpose(1, 2)

    def project_kv(self, memory: Tensor) -> tuple[Tensor, Tensor]:
        """memory: (B, S, H) → keys, values (B, heads, S, dk)."""
        k, v = self.kv(memory).chunk(2, dim=-1)
        return self._split(k), self._split(v)

    def _attend(self, q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None, causal: bool) -> Tensor:
        drop = self.dropout if self.training else 0.0
        o = attention(q, k, v, mask, dropout_p=drop, causal=causal)            # SDPA, or explicit for bf16 on CPU
        b, _, n, _ = o.shape
        return self.out(o.transpose(1, 2).reshape(b, n, self.heads * self.dk))   # (B, L, H)

    def forward_self(self, x: Tensor, keep: Tensor | None, causal: bool) -> Tensor:
        """x: (B, L, H); keep: (B,1,1,L) or None → (B, L, H)."""
        q, k, v = (self._split(t) for t in self.qkv(x).chunk(3, dim=-1))
        return self._attend(q, k, v, keep, causal)

    def project_self_kv(self, x: Tensor) -> tuple[Tensor, Tensor]:
        """The self-attention keys and values of x (B, L, H) → (B, heads, L, dk) each."""
        _, k, v = (self._split(t) for t in self.qkv(x).chunk(3, dim=-1))
        return k, v

    def forward_prefix(self, x: Tensor, cache: LayerCache) -> Tensor:
        """A forced target prefix x (B, P, H) (right-padded): a causal pass over it (a token never
        sees the padding after it) that keeps its keys/values as ``cache.prefix_k``/``prefix_v``."""
        q, k, v = (self._split(t) for t in self.qkv(x).chunk(3, dim=-1))
        cache.prefix_k, cache.prefix_v = k, v
        return self._attend(q, k, v, None, True)

    def forward_self_step(self, x: Tensor, cache: LayerCache, group: int = 1,
                          prefix_keep: Tensor | None = None) -> Tensor:
        """One incremental step. x: (R, 1, H), R rows in groups of ``group``; appends this step's
        k/v to ``cache.self_k``/``self_v``. With a forced prefix (``cache.prefix_k`` (G, heads, P,
        dk), ``prefix_keep`` (R, 1, 1, P) True at its tokens, per row) each row attends its group's prefix
        and its own positions in one softmax, the prefix read by the group's rows as ``group``
        query positions (never copied per row). → (R, 1, H)."""
        q, k, v = (self._split(t) for t in self.qkv(x).chunk(3, dim=-1))
        if cache.self_k is not None:
            k = torch.cat([cache.self_k, k], dim=2)
            v = torch.cat([cache.self_v, v], dim=2)
        cache.self_k, cache.self_v = k, v
        if cache.prefix_k is None:
            return self._attend(q, k, v, None, False)
        r, p = q.size(0), cache.prefix_k.size(2)
        n_groups = r // group
        qg = q.reshape(n_groups, group, self.heads, self.dk).transpose(1, 2)          # (G, heads, g, dk)
        s_pre = torch.matmul(qg, cache.prefix_k.transpose(-1, -2))                    # (G, heads, g, P)
        s_pre = s_pre.transpose(1, 2).reshape(r, self.heads, 1, p)                    # (R, heads, 1, P)
        s_own = torch.matmul(q, k.transpose(-1, -2))                                  # (R, heads, 1, t)
        scores = torch.cat([s_pre, s_own], -1).float() * (self.dk ** -0.5)
        scores[..., :p].masked_fill_(~prefix_keep, torch.finfo(scores.dtype).min)
        w = torch.softmax(scores, dim=-1).to(v.dtype)                                 # (R, heads, 1, P+t)
        w_pre = w[..., :p].reshape(n_groups, group, self.heads, p).transpose(1, 2)    # (G, heads, g, P)
        o = torch.matmul(w_pre, cache.prefix_v).transpose(1, 2).reshape(r, self.heads, 1, self.dk)
        o = o + torch.matmul(w[..., p:], v)                                           # (R, heads, 1, dk)
        return self.out(o.transpose(1, 2).reshape(r, 1, self.heads * self.dk))

    def forward_cross_step(self, x: Tensor, k: Tensor, v: Tensor, keep: Tensor | None, group: int = 1) -> Tensor:
        """One incremental step of cross-attention. x: (R, 1, H), R rows in groups of ``group``
        that share one memory: k, v (G, heads, S, dk), keep (G, 1, 1, S) or None; a group's rows
        are its ``group`` query positions. → (R, 1, H)."""
        r = x.size(0)
        q = self.q(x).view(r // group, group, self.heads, self.dk).transpose(1, 2)     # (G, heads, g, dk)
        o = attention(q, k, v, keep)                                                  # (G, heads, g, dk)
        return self.out(o.transpose(1, 2).reshape(r, 1, self.heads * self.dk))

    def forward_cross(self, x: Tensor, k: Tensor, v: Tensor, keep: Tensor | None) -> Tensor:
        """x: (B, T, H); k, v: (B, heads, S, dk); keep: (B,1,1,S) or None → (B, T, H)."""
        return self._attend(self._split(self.q(x)), k, v, keep, False)


class FeedForward(nn.Module):
    """FFN(z) = max(0, z W1 + b1) W2 + b2 (Vaswani et al. 2017, eq. 2)."""

    def __init__(self, d_model: int, d_ff: int, relu_dropout: float):
        super().__init__()
        self.w1, self.w2 = nn.Linear(d_model, d_ff), nn.Linear(d_ff, d_model)
        self.drop = nn.Dropout(relu_dropout)

    def forward(self, x: Tensor) -> Tensor:
        return self.w2(self.drop(F.relu(self.w1(x))))


class Residual(nn.Module):
    """One residual sub-layer Sub(z, f) (docs/models.md §1.3): pre-norm z + drop(f(LN(z))) or
    post-norm LN(z + drop(f(z))), with its own LayerNorm. ``Transformer.residual_sublayer``
    gives context models one with the backbone's norm order and dropout (e.g. QCN's
    context-attention sub-layer, Yang et al. 2019 §3.3, docs/models.md §2.6)."""

    def __init__(self, d_model: int, dropout: float, pre: bool):
        super().__init__()
        self.norm, self.drop, self.pre = nn.LayerNorm(d_model), nn.Dropout(dropout), pre

    def forward(self, z: Tensor, f) -> Tensor:
        """z: (…, H); f: (…, H) → (…, H) → (…, H)."""
        if self.pre:
            return z + self.drop(f(self.norm(z)))
        return self.norm(z + self.drop(f(z)))


class _Sublayers(nn.Module):
    """Residual wrapper: pre-norm z + drop(f(LN(z))) or post-norm LN(z + drop(f(z)))."""

    def __init__(self, d_model: int, n: int, dropout: float, pre: bool):
        super().__init__()
        self.norms = nn.ModuleList(nn.LayerNorm(d_model) for _ in range(n))
        self.drop = nn.Dropout(dropout)
        self.pre = pre

    def apply(self, i: int, z: Tensor, f) -> Tensor:  # noqa: A003 - mirrors "Sub(z, f)"
        if self.pre:
            return z + self.drop(f(self.norms[i](z)))
        return self.norms[i](z + self.drop(f(z)))


class EncoderLayer(nn.Module):
    def __init__(self, cfg: TransformerConfig):
        super().__init__()
        self.attn = MultiHeadAttention(cfg.d_model, cfg.heads, cfg.attn_dropout, self_attn=True)
        self.ffn = FeedForward(cfg.d_model, cfg.d_ff, cfg.relu_dropout)
        self.sub = _Sublayers(cfg.d_model, 2, cfg.dropout, cfg.norm == "pre")

    def attention_sublayer(self, x: Tensor, keep: Tensor | None) -> Tensor:
        """z ← Sub(z, SelfAttn). x: (B, S, H); keep: (B,1,1,S) or None → (B, S, H)."""
        return self.sub.apply(0, x, lambda z: self.attn.forward_self(z, keep, causal=False))

    def ffn_sublayer(self, x: Tensor) -> Tensor:
        """z ← Sub(z, FFN). x: (B, S, H) → (B, S, H)."""
        return self.sub.apply(1, x, self.ffn)

    def ffn_input(self, x: Tensor) -> Tensor:
        """What the FFN reads of ``x`` (B, S, H): LN(x) pre-norm, x itself post-norm (already
        normalised there): the normalised states after self-attention."""
        return self.sub.norms[1](x) if self.sub.pre else x

    def forward(self, x: Tensor, keep: Tensor | None) -> Tensor:
        # x: (B, S, H)
        return self.ffn_sublayer(self.attention_sublayer(x, keep))


class DecoderLayer(nn.Module):
    def __init__(self, cfg: TransformerConfig):
        super().__init__()
        self.self_attn = MultiHeadAttention(cfg.d_model, cfg.heads, cfg.attn_dropout, self_attn=True)
        self.cross_attn = MultiHeadAttention(cfg.d_model, cfg.heads, cfg.attn_dropout, self_attn=False)
        self.ffn = FeedForward(cfg.d_model, cfg.d_ff, cfg.relu_dropout)
        self.sub = _Sublayers(cfg.d_model, 3, cfg.dropout, cfg.norm == "pre")

    def forward(self, y: Tensor, mem_k: Tensor, mem_v: Tensor, mem_keep: Tensor | None) -> Tensor:
        """Teacher forcing. y: (B, T, H); mem_k/mem_v: (B, heads, S, dk); mem_keep: (B,1,1,S) or None."""
        y = self.sub.apply(0, y, lambda z: self.self_attn.forward_self(z, None, causal=True))
        y = self.sub.apply(1, y, lambda z: self.cross_attn.forward_cross(z, mem_k, mem_v, mem_keep))
        return self.sub.apply(2, y, self.ffn)

    def step(self, y: Tensor, cache: LayerCache, mem_keep: Tensor | None, group: int = 1,
             prefix_keep: Tensor | None = None) -> Tensor:
        """One incremental step. y: (R, 1, H), R rows in groups of ``group`` (``DecoderState``)."""
        y = self.sub.apply(0, y, lambda z: self.self_attn.forward_self_step(z, cache, group, prefix_keep))
        y = self.sub.apply(1, y, lambda z: self.cross_attn.forward_cross_step(z, cache.cross_k, cache.cross_v,
                                                                               mem_keep, group))
        return self.sub.apply(2, y, self.ffn)

    def prefix(self, y: Tensor, cache: LayerCache, mem_keep: Tensor | None, last: bool = False) -> Tensor | None:
        """A forced prefix y (B, P, H): fills ``cache.prefix_k``/``prefix_v`` and returns the layer's
        output, or (``last``: no layer reads it) only fills the cache and returns None."""
        if last:
            cache.prefix_k, cache.prefix_v = self.self_attn.project_self_kv(self.sub.norms[0](y) if self.sub.pre else y)
            return None
        y = self.sub.apply(0, y, lambda z: self.self_attn.forward_prefix(z, cache))
        y = self.sub.apply(1, y, lambda z: self.cross_attn.forward_cross(z, cache.cross_k, cache.cross_v, mem_keep))
        return self.sub.apply(2, y, self.ffn)


class Transformer(SentenceModelDefaults, nn.Module):
    """Sentence-level Transformer NMT model implementing ``models.interface.Seq2SeqModel``.

    ``forward`` is not used, so each caller says which part of the contract it needs.
    """

    def __init__(self, cfg: TransformerConfig, src_vocab: int, tgt_vocab: int, pad_id: int = 0):
        super().__init__()
        if cfg.d_model % cfg.heads or cfg.d_model % 2:
            raise ValueError(f"d_model {cfg.d_model} must be even and divisible by heads {cfg.heads}")
        if cfg.backbone != "transformer":
            raise ValueError(f"TransformerConfig.backbone must be 'transformer', got {cfg.backbone!r}")
        if cfg.norm not in ("pre", "post"):
            raise ValueError(f"model.norm must be 'pre' or 'post', got {cfg.norm!r}")
        if cfg.share_all_embeddings and src_vocab != tgt_vocab:
            raise ValueError("model.share_all_embeddings needs one joint vocabulary "
                             f"(got {src_vocab} source and {tgt_vocab} target types)")
        self.cfg, self.pad_id = cfg, pad_id
        h = cfg.d_model
        self.src_embed = nn.Embedding(src_vocab, h, padding_idx=pad_id)
        self.tgt_embed = self.src_embed if cfg.share_all_embeddings else nn.Embedding(tgt_vocab, h, padding_idx=pad_id)
        self.out_proj = nn.Linear(h, tgt_vocab, bias=False)
        if cfg.share_dec_embeddings or cfg.share_all_embeddings:
            self.out_proj.weight = self.tgt_embed.weight
        self.register_buffer("positions", sinusoidal_positions(cfg.max_positions, h), persistent=False)
        self.embed_scale = math.sqrt(h)
        self.drop = nn.Dropout(cfg.dropout)
        self.encoder = nn.ModuleList(EncoderLayer(cfg) for _ in range(cfg.layers_enc))
        self.decoder = nn.ModuleList(DecoderLayer(cfg) for _ in range(cfg.layers_dec))
        pre = cfg.norm == "pre"
        self.enc_norm = nn.LayerNorm(h) if pre else nn.Identity()
        self.dec_norm = nn.LayerNorm(h) if pre else nn.Identity()
        self._init_weights()

    def _init_weights(self) -> None:
        """Xavier-uniform matrices, zero biases, embeddings N(0, d^-1/2) with a zero padding row
        (the Transformer paper leaves the initialisation open; this follows fairseq's). Each
        attention projection q, k, v is one (H, H) map with Xavier gain 1/√2, as fairseq's
        ``MultiheadAttention``: the fused self-attention (3H, H) matrix has exactly that bound
        already; the cross-attention's q (H, H) and fused kv (2H, H) are drawn per (H, H) block
        (plain Xavier on them would be 1.41× / 1.15× wider; measured: 0.046 nats of dev
        cross-entropy at 400 quickstart updates, benchmarks/RESULTS.md 2026-11-25). [Choice:
        fairseq leaves its FFN matrices and q/k/v biases at ``nn.Linear``'s default; here they are
        Xavier / zero — fairseq's variant was measured no better (4.087 vs 4.075–4.079 nats).]"""
        for name, p in self.named_parameters():
            if p.dim() > 1 and "embed" not in name:
                nn.init.xavier_uniform_(p)
            elif "bias" in name:
                nn.init.zeros_(p)
        for layer in self.decoder:
            attn = layer.cross_attn
            for block in (attn.q.weight, *attn.kv.weight.chunk(2, dim=0)):
                nn.init.xavier_uniform_(block, gain=2 ** -0.5)
        for emb in {id(self.src_embed): self.src_embed, id(self.tgt_embed): self.tgt_embed}.values():
            nn.init.normal_(emb.weight, mean=0.0, std=self.cfg.d_model ** -0.5)
            with torch.no_grad():
                emb.weight[self.pad_id].zero_()

    def _embed(self, table: nn.Embedding, tokens: Tensor, offset: int = 0, positions: Tensor | None = None) -> Tensor:
        # tokens: (B, L) → (B, L, H); positions (B, L) explicit position ids, else offset … offset+L−1
        if positions is not None:
            if positions.numel() and int(positions.max()) >= self.cfg.max_positions:
                raise ValueError(f"position {int(positions.max())} exceeds "
                                 f"model.max_positions={self.cfg.max_positions}")
            return self.drop(table(tokens) * self.embed_scale + self.positions[positions])
        n = tokens.size(1)
        if offset + n > self.cfg.max_positions:
            raise ValueError(f"sequence of {offset + n} tokens exceeds model.max_positions={self.cfg.max_positions}")
        x = table(tokens) * self.embed_scale + self.positions[offset:offset + n]
        return self.drop(x)

    @property
    def hidden_size(self) -> int:
        """H, the size of encoder/decoder states (``d_model``)."""
        return self.cfg.d_model

    @property
    def encoder_size(self) -> int:
        """H of ``EncoderOutput.states`` (``d_model``, as ``hidden_size``)."""
        return self.cfg.d_model

    @property
    def max_target_len(self) -> int:
        """Target positions the sinusoid table covers (``max_positions``)."""
        return self.cfg.max_positions

    def encode(self, batch: SourceBatch) -> EncoderOutput:
        """batch.src: (B, S) token ids → states (B, S, H), src_pad_mask (B, S) True at padding."""
        return self.encode_with(batch.src)

    # -- the encoder parts context models build on (models.interface.EncoderParts) ----------
    def encode_with(self, src: Tensor, layer_fn=None, positions: Tensor | None = None) -> EncoderOutput:
        """``encode`` of src (B, S), with layer k computed by ``layer_fn(k, layer, x, keep)``
        → x (B, S, H) instead of ``layer(x, keep)`` when given: ``layer`` offers
        ``attention_sublayer(x, keep)``, ``ffn_input(x)`` and ``ffn_sublayer(x)``, so a context
        model can put its own sub-layer between them (QCN, HGC: docs/models.md §2.6–2.7).
        keep: (B, 1, 1, S) bool SDPA mask (True = attend) or None. ``positions``: (B, S) position
        ids of the tokens (default 0 … S−1; the concatenation models' ``context_position_offset``).
        Raises ValueError when a position exceeds ``max_positions``."""
        pad = pad_mask(src, self.pad_id)
        keep = attn_keep_mask(pad)
        x = self._embed(self.src_embed, src, positions=positions)
        for k, layer in enumerate(self.encoder):
            x = layer(x, keep) if layer_fn is None else layer_fn(k, layer, x, keep)
        return EncoderOutput(self.enc_norm(x), pad)

    @property
    def source_embedding(self) -> nn.Embedding:
        """E_src, the source word embedding table (unscaled, no positions)."""
        return self.src_embed

    def embed_source(self, src: Tensor) -> Tensor:
        """The encoder input of src (B, S): scaled embeddings + positions, dropout → (B, S, H)."""
        return self._embed(self.src_embed, src)

    def embed_target(self, tgt_in: Tensor) -> Tensor:
        """The decoder input of tgt_in (B, T), as ``embed_source`` → (B, T, H)."""
        return self._embed(self.tgt_embed, tgt_in)

    @property
    def encoder_layers(self) -> int:
        """Number of encoder layers (the ``k`` of ``encode_with``)."""
        return len(self.encoder)

    def residual_sublayer(self) -> Residual:
        """A new residual sub-layer Sub(z, f) with the backbone's norm order and dropout."""
        return Residual(self.cfg.d_model, self.cfg.dropout, self.cfg.norm == "pre")

    # -- the parts context models build on (models.interface.BackboneParts) --------------
    def decode_hidden(self, enc: EncoderOutput, tgt_in: Tensor, positions: Tensor | None = None) -> Tensor:
        """Teacher forcing. tgt_in: (B, T) → top decoder states (B, T, H), after the final LN.
        ``positions``: (B, T) position ids of tgt_in's tokens (default 0 … T−1)."""
        keep = attn_keep_mask(enc.src_pad_mask)
        y = self._embed(self.tgt_embed, tgt_in, positions=positions)
        for layer in self.decoder:
            k, v = layer.cross_attn.project_kv(enc.states)
            y = layer(y, k, v, keep)
        return self.dec_norm(y)

    def output_logits(self, hidden: Tensor, vocab: Tensor | None = None) -> Tensor:
        """hidden: (…, H) top decoder states → unnormalised scores (…, V), or (…, C) for the
        target ids ``vocab`` (C,) only (``layers.output.project``)."""
        return project(self.out_proj, hidden, vocab)

    def decode_step_hidden(self, state: DecoderState, prev_tokens: Tensor) -> tuple[Tensor, DecoderState]:
        """One incremental step. prev_tokens: (R,) → (top decoder state (R, H), state); updates
        ``state`` in place (appends the rows' self-attention keys/values, advances ``step``).
        Raises ValueError when a forced prefix and the output exceed ``max_positions``."""
        row_keep = None
        if state.prefix_len is None:
            y = self._embed(self.tgt_embed, prev_tokens[:, None], offset=state.step)     # (R, 1, H)
        elif state.prefix_offset:                         # the prefix sat at positions ≥ prefix_offset
            if state.step >= state.prefix_offset:
                raise ValueError(f"output reaches the target prefix's positions (from {state.prefix_offset})")
            y = self._embed(self.tgt_embed, prev_tokens[:, None], offset=state.step)     # (R, 1, H)
            row_keep = state.prefix_keep.repeat_interleave(state.group, 0)                # (R, 1, 1, P)
        else:                                             # per-group positions after a ragged prefix
            if state.prefix_max + state.step >= self.cfg.max_positions:
                raise ValueError(f"target prefix and output exceed model.max_positions={self.cfg.max_positions}")
            pos = (state.prefix_len + state.step).repeat_interleave(state.group)          # (R,)
            y = self.drop(self.tgt_embed(prev_tokens[:, None]) * self.embed_scale + self.positions[pos][:, None])
            row_keep = state.prefix_keep.repeat_interleave(state.group, 0)                # (R, 1, 1, P), once per step
        for layer, cache in zip(self.decoder, state.layers):
            y = layer.step(y, cache, state.memory_keep, state.group, row_keep)
        state.step += 1
        return self.dec_norm(y[:, 0]), state

    def self_attention_weights(self, enc: EncoderOutput, tgt_in: Tensor, layer: int = -1, head: int = 0,
                               positions: Tensor | None = None) -> Tensor:
        """Teacher forcing of tgt_in (B, T) → the causal self-attention weights (B, T, T) of decoder
        ``layer``, ``head`` (queries × keys, rows summing to 1; dropout off), with gradients
        (``models.interface.TargetPrefixParts``; attention supervision). ``positions``: as
        ``decode_hidden``'s."""
        layers = list(self.decoder)
        layer = layer % len(layers)
        keep = attn_keep_mask(enc.src_pad_mask)
        y = self._embed(self.tgt_embed, tgt_in, positions=positions)
        for lay in layers[:layer]:
            k, v = lay.cross_attn.project_kv(enc.states)
            y = lay(y, k, v, keep)
        target = layers[layer]
        z = target.sub.norms[0](y) if target.sub.pre else y
        attn = target.self_attn
        q, k, _ = (attn._split(t) for t in attn.qkv(z).chunk(3, dim=-1))
        scores = torch.matmul(q[:, head], k[:, head].transpose(-1, -2)).float() * attn.dk ** -0.5   # (B, T, T)
        t = tgt_in.size(1)
        causal = torch.ones(t, t, dtype=torch.bool, device=tgt_in.device).tril()
        return torch.softmax(scores.masked_fill(~causal, float("-inf")), dim=-1)

    def init_state_with_prefix(self, enc: EncoderOutput, prefix: Tensor, offset: int = 0) -> DecoderState:
        """``init_state`` followed by force-decoding a target prefix per row (``models.interface.
        TargetPrefixParts``). prefix: (B, P) ids, right-padded with ``pad_id`` (rows may be
        shorter, or empty); the prefix is run in one causal pass (its outputs are not needed, so
        the last layer only projects its keys/values; rows in length buckets, ``models.rows.
        length_buckets``, each cut to its longest prefix) and its keys/values kept once per row
        (``LayerCache.prefix_k``; a row's beam hypotheses read them as a group, never copies), so
        the next ``decode_step`` of row b reads its L_b prefix tokens at positions 0 … L_b−1 and
        takes position L_b — what teacher forcing of the concatenation ``prefix_b · tgt_in_b``
        computes. ``offset`` > 0: the prefix is read at positions offset … offset+L_b−1 and the
        next step takes position 0 (teacher forcing with those positions: the concatenation
        models' ``context_position_offset``). P = 0: ``init_state``. Raises ValueError when
        offset + P exceeds ``max_positions``."""
        state = self.init_state(enc)
        if prefix.size(1) == 0:
            return state
        keep = prefix.ne(self.pad_id)                                            # (B, P)
        lengths = keep.sum(1)                                                     # (B,)
        last = len(self.decoder) - 1

        def run(tokens: Tensor, caches: list[LayerCache], mem_keep: Tensor | None) -> None:
            y = self._embed(self.tgt_embed, tokens, offset=offset)                # (B', W, H)
            for i, (layer, cache) in enumerate(zip(self.decoder, caches)):
                y = layer.prefix(y, cache, mem_keep, last=i == last)

        buckets = length_buckets(lengths)
        if len(buckets) == 1:
            run(prefix, state.layers, state.memory_keep)
        else:                       # ragged prefixes: each length bucket cut to its own longest
            shape = (prefix.size(0), self.cfg.heads, prefix.size(1), self.cfg.d_model // self.cfg.heads)
            for cache in state.layers:
                cache.prefix_k, cache.prefix_v = cache.cross_k.new_zeros(shape), cache.cross_v.new_zeros(shape)
            for rows in buckets:
                width = int(lengths[rows].max())
                if width == 0:
                    continue
                parts = [LayerCache(None, None, c.cross_k[rows], c.cross_v[rows]) for c in state.layers]
                run(prefix[rows, :width], parts, None if state.memory_keep is None else state.memory_keep[rows])
                for cache, part in zip(state.layers, parts):
                    cache.prefix_k[rows, :, :width], cache.prefix_v[rows, :, :width] = part.prefix_k, part.prefix_v
        state.prefix_keep, state.prefix_len = keep[:, None, None, :], lengths
        state.prefix_max = int(state.prefix_len.max())
        state.prefix_offset = offset
        return state

    # -- the model contract ------------------------------------------------------------------
    def decode_train(self, enc: EncoderOutput, tgt_in: Tensor, select: Tensor | None = None) -> Tensor:
        """Teacher forcing. tgt_in: (B, T) = <s> y_1 … y_{T-1} → logits (B, T, V), or (N, V) at
        the positions where ``select`` (B, T) is True (the output projection runs only there)."""
        hidden = self.decode_hidden(enc, tgt_in)
        return self.out_proj(hidden if select is None else hidden[select])

    def init_state(self, enc: EncoderOutput) -> DecoderState:
        """Precompute every layer's cross-attention keys/values once. enc.states: (B, S, H)."""
        layers = []
        for layer in self.decoder:
            k, v = layer.cross_attn.project_kv(enc.states)
            layers.append(LayerCache(None, None, k, v))
        return DecoderState(layers, attn_keep_mask(enc.src_pad_mask), 0,
                            torch.arange(enc.states.size(0), device=enc.states.device))

    def decode_step(self, state: DecoderState, prev_tokens: Tensor,
                    vocab: Tensor | None = None) -> tuple[Tensor, DecoderState]:
        """One incremental step. prev_tokens: (B,) last emitted ids → (log-probs (B, V), or
        (B, C) normalised over the target ids ``vocab`` (C,), state).

        Updates ``state`` in place (appends self-attention keys/values, advances ``step``).
        """
        hidden, state = self.decode_step_hidden(state, prev_tokens)
        return F.log_softmax(self.output_logits(hidden, vocab).float(), dim=-1), state

    # -- deployment (models.interface: portable, quantizable_linears) ------------------------
    def portable(self) -> PortableTransformer:
        """This Transformer in engine-neutral terms (``PortableTransformer``): its weights under
        the portable names, copied to float32 CPU tensors; the sinusoid table of all
        ``max_positions``."""
        w: dict[str, Tensor] = {}

        def put(name: str, module: nn.Module) -> None:
            w[f"{name}.weight"] = module.weight.detach().float().cpu().clone()
            bias = module.bias if isinstance(module, (nn.Linear, nn.LayerNorm)) else None
            if bias is not None:
                w[f"{name}.bias"] = bias.detach().float().cpu().clone()

        put("src_embed", self.src_embed)
        put("tgt_embed", self.tgt_embed)
        put("out_proj", self.out_proj)
        for i, layer in enumerate(self.encoder):
            put(f"enc.{i}.self.norm", layer.sub.norms[0])
            put(f"enc.{i}.self.qkv", layer.attn.qkv)
            put(f"enc.{i}.self.out", layer.attn.out)
            put(f"enc.{i}.ffn.norm", layer.sub.norms[1])
            put(f"enc.{i}.ffn.in", layer.ffn.w1)
            put(f"enc.{i}.ffn.out", layer.ffn.w2)
        for i, layer in enumerate(self.decoder):
            put(f"dec.{i}.self.norm", layer.sub.norms[0])
            put(f"dec.{i}.self.qkv", layer.self_attn.qkv)
            put(f"dec.{i}.self.out", layer.self_attn.out)
            put(f"dec.{i}.cross.norm", layer.sub.norms[1])
            put(f"dec.{i}.cross.q", layer.cross_attn.q)
            put(f"dec.{i}.cross.kv", layer.cross_attn.kv)
            put(f"dec.{i}.cross.out", layer.cross_attn.out)
            put(f"dec.{i}.ffn.norm", layer.sub.norms[2])
            put(f"dec.{i}.ffn.in", layer.ffn.w1)
            put(f"dec.{i}.ffn.out", layer.ffn.w2)
        pre = self.cfg.norm == "pre"
        if pre:
            put("enc.norm", self.enc_norm)
            put("dec.norm", self.dec_norm)
        eps = {m.eps for m in self.modules() if isinstance(m, nn.LayerNorm)}
        if len(eps) != 1:
            raise ValueError(f"the LayerNorms have several epsilons {sorted(eps)}: not one portable value")
        return PortableTransformer(len(self.encoder), len(self.decoder), self.cfg.heads, pre, eps.pop(),
                                   self.embed_scale, self.positions.detach().float().cpu().clone(), w)

    def quantizable_linears(self) -> list[nn.Module]:
        """The output layer and every feed-forward layer (the attention projections stay float)."""
        ffn = [lin for layer in [*self.encoder, *self.decoder] for lin in (layer.ffn.w1, layer.ffn.w2)]
        return [self.out_proj, *ffn]
