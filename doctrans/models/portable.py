"""The export spec: a model as a standard Transformer another inference engine can run.

``Seq2SeqModel.portable()`` (``models/interface.py``) returns a ``PortableTransformer`` or None;
``doctrans export --format ctranslate2`` (``inference/ct2.py``) writes it. Only the backbones and
context models that are a standard Transformer build one (``models.build.portable_models``).
"""
from __future__ import annotations

from dataclasses import dataclass

from torch import Tensor


@dataclass(frozen=True)
class PortableTransformer:
    """A model that is a standard Transformer encoder–decoder (Vaswani et al. 2017), in terms
    that do not depend on doctrans' modules, for another inference engine (``doctrans export
    --format ctranslate2``, ``inference/ct2.py``).

    Computation: x = E[token] · ``embed_scale`` + ``positions``[position] (no dropout at
    inference); each layer is residual sub-layers (self-attention; decoder: then
    cross-attention; then the ReLU feed-forward), pre-norm z + f(LN(z)) with a final LayerNorm
    on each stack (``pre_norm``) or post-norm LN(z + f(z)) without one; LayerNorm epsilon
    ``layer_norm_eps``; attention heads ``heads``, queries scaled by 1/sqrt(H/heads); the
    decoder's output layer ``out_proj`` (V, H) without bias, then a softmax. Decoding starts
    from ``<s>``; the source ends in ``</s>``.

    ``weights`` (float32 tensors, (out, in) for linear maps), H = d_model, F = d_ff, i = layer:
    ``src_embed`` (Vs, H), ``tgt_embed`` (Vt, H), ``out_proj`` (Vt, H);
    ``enc.{i}.self.{norm,qkv,out}``, ``enc.{i}.ffn.{norm,in,out}``, ``enc.norm`` (pre-norm only);
    ``dec.{i}.self.{norm,qkv,out}``, ``dec.{i}.cross.{norm,q,kv,out}``, ``dec.{i}.ffn.{norm,in,out}``,
    ``dec.norm`` (pre-norm only); each ``NAME.weight`` and ``NAME.bias`` (a LayerNorm's gamma and
    beta). ``qkv`` stacks the query, key and value maps (3H, H), ``kv`` the key and value maps
    (2H, H), in that order; ``in`` is (F, H), ``out`` of the FFN (H, F).

    Source context (the concatenation model, docs/models.md §2): the source read for a sentence
    is its ``source_context`` previous non-empty sentences of the document (each ending in
    ``</s>``, oldest first) followed by itself, the context cut to its newest
    ``max_context_tokens`` tokens when that is > 0. 0 = a sentence-level model.

    Target context (target-side concatenation, ``models/context/tgt_concat.py``): with
    ``target_context`` N > 0 the decoder first reads, as a forced prefix after ``<s>``, the
    model's own translations of those same previous sentences, each as ``<s> y </s>`` without
    its leading ``<s>`` for the first (the decoder's start token), then ``<s>``; the current
    sentence is generated after it, and the prefix is cut to its newest
    ``max_target_context_tokens`` tokens when that is > 0 (0 = a model without target context)."""

    layers_enc: int
    layers_dec: int
    heads: int
    pre_norm: bool
    layer_norm_eps: float
    embed_scale: float
    positions: Tensor
    weights: dict[str, Tensor]
    source_context: int = 0
    max_context_tokens: int = 0
    target_context: int = 0
    max_target_context_tokens: int = 0
