"""Reconstructors for dropped pronouns (Wang 2019 thesis ch. 5–6; Wang et al. AAAI-18, EMNLP-18),
wrapped around any backbone through the model contract. Notes: ``docs/models.md`` §2.9–2.10; the
§ numbers below are the design spec's and issue 28's (§2.8 reconstructors … §2.12 labelling context).

**Reconstructor module** (``Reconstructor``; thesis eq. 5.1–5.3): an attention GRU decoder that
regenerates x̂ from one or two sequences of hidden states (memories)::

    r_0  = tanh(W_init · [mean_t v^1_t ; mean_t v^2_t] + b)                        (B, H)
    r̃_j  = GRU_1(r_{j-1}, E_src[x̂_{j-1}])        E_src = the backbone's source embedding
    ĉ^k_j = Σ_t α^k_jt v^k_t,  α^k_j = masked_softmax_t(w_k^T tanh(W_k r̃_j + U_k v^k_t [+ W_c ĉ^other_j]))
    r_j  = GRU_2(r̃_j, [ĉ^1_j ; ĉ^2_j])
    o_j  = tanh(W_o r_j + C_o [ĉ^1_j ; ĉ^2_j] + V_o E_src[x̂_{j-1}] + b)             (B, E)
    log R(x̂ | v) = Σ_j log softmax(W_out o_j + b_out)[x̂_j]        own softmax over the SOURCE vocabulary

x̂_0 is a zero vector (as the backbone RNNSearch's ``bos_zero`` and the dl4mt reference code [C]).
With one memory this is §2.8's enc-rec (v = encoder states) or dec-rec (v = decoder states);
with two, §2.9's shared reconstructor, whose attention order is ``attention``: ``independent``
(both attentions queried by r̃_j, eq. 6.5–6.6), ``enc2dec`` (ĉ^enc first, then its W_c ĉ^enc
inside the decoder attention's tanh, eq. 6.7 [form I]) or ``dec2enc`` (eq. 6.8).

**The model** (``ReconstructedModel``, the ``model.reconstructor`` section): a backbone with
``mode`` ``enc`` | ``dec`` | ``both`` (two separate reconstructors, eq. 5.4) | ``shared``. The
decoder states v = s are the contract's ``decode_hidden`` (teacher-forced; a Transformer's final
LN states; RNNSearch's readout o_t (E), not its GRU state s_t (H) [I: the contract's states;
the thesis' +34.1M assumes s_t]). In training the decoder runs once: ``decode_train`` keeps the
states it computed for ``auxiliary_losses`` (for a document batch decoded in length buckets, with
the rows of each bucket: ``extra["rec_row"]``). Loss terms (nats per target token, weights included):
``rec_enc`` = −λ log R_enc, ``rec_dec`` = −η log R_dec, ``rec`` = −w log R (shared), ``dp``.

**DP heads** (``dp_head``): ``predictor`` (§2.10, eq. 6.9: target ``dpp``; at each step whose
target token is ``#DP#``, softmax(W_p r_j + b_p) over {NONE} ∪ V_dp) or ``labeler`` (§2.11,
eq. 6.11: target ``original``; at every step t of x + ``</s>``, the pronoun dropped immediately
before x_t, the ``</s>`` slot = at the end). ``dp_head_form: mlp`` puts a tanh layer of
``hidden_size`` before the softmax (docs/models.md §5 A19).

**Cross-sentence context** (§2.12, ``context_sents`` N > 0): the previous N source sentences of
the document batch (``batch.ctx``, ``models/context/base.py``) are encoded by the backbone's own
encoder (shared parameters, eq. 6.13), each summarised as the mean of its states, a sentence GRU
over them (oldest first) gives C (its last state; zeros with no history, eq. 6.14). ``encode``
puts C in ``EncoderOutput.extra["dp_context"]`` so it follows the rows through ``select``.
``fuse_into: labeler`` (eq. 6.16 [form I]): P(dp_t) = softmax(W_l tanh(W_h r_t + W_c C + b) + b_l);
``decoder`` (eq. 6.15 [I]): C is added (W_d C) to every decoder state the reconstructor reads.

**Over a context model** [I: a composition the thesis does not build]: the wrapped model may be a
context model (``context:`` section, e.g. the HAN encoder) instead of a sentence backbone; then its
``encode`` (which reads ``batch.ctx``) gives the encoder states the reconstructors read, its
``decode_hidden`` the decoder states, its ``document`` the batches, its ``auxiliary_losses`` (e.g.
QCN's PCC term) are added to the reconstructors', and the reconstructors share the embedding of
the sentence backbone inside it. §2.12's own context (``context_sents``) is refused there: the
context model already reads the previous sentences.

Shape legend: B rows, S source length, T target length, S' reconstruction length (incl. ``</s>``),
D memory width, H reconstructor size, E embedding size, V source vocabulary, L labels (1 + |V_dp|).
"""
from __future__ import annotations

from contextlib import AbstractContextManager
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from doctrans.models.backbones.rnnsearch import gru_step
from doctrans.models.context.base import ContextModel, context_rows
from doctrans.models.interface import DocumentSpec, EncoderOutput
from doctrans.models.reconstruction_spec import ReconstructionSpec, no_dp_message
from doctrans.models.rows import split_encode

MODES = ("enc", "dec", "both", "shared")
ATTENTIONS = ("independent", "enc2dec", "dec2enc")
TARGETS = ("dp", "dpp", "original")
ENCODER_INPUTS = ("original", "annotated")
DP_HEADS = ("none", "predictor", "labeler")
HEAD_FORMS = ("linear", "mlp")
FUSE_INTO = ("labeler", "decoder")
SOFTMAX = ("full", "batch")
SOFTMAX_CHUNK = 2048            # positions per full-softmax chunk (reranking k candidates × B sentences)
NO_DP = "NONE"                  # label 0 of ``dp_labels``
PLACEHOLDER = "#DP#"            # the DPP placeholder token (docs/models.md §3.2)
# Table 4.3's 30 Chinese forms (10 basic, + 的, + 自己), in the order of doctrans/dp/pronouns.py:
# CHINESE_PRONOUNS (models may not import doctrans.dp; tests/unit/test_reconstructor.py checks they agree).
_BASIC = ("我", "你", "他", "她", "它", "我们", "你们", "他们", "她们", "它们")
TABLE_4_3 = tuple(b + s for s in ("", "的", "自己") for b in _BASIC)


@dataclass(frozen=True)
class ReconstructorConfig:
    mode: str = "both"                  # enc | dec | both (separate recs, §2.8) | shared (one rec over both, §2.9)
    attention: str = "enc2dec"          # shared: independent | enc2dec | dec2enc (§2.9, eq. 6.5–6.8)
    target: str = "dp"                  # what is reconstructed: dp (x̂ with DP words) | dpp (#DP# placeholders)
                                        # | original (x itself: the end-to-end labeler, §2.11)
    encoder_input: str = "original"     # original (x) | annotated (the encoder reads x̂ = the target file; §5 A17)
    enc_weight: float = 1.0             # λ, weight of log R_enc (eq. 5.4)
    dec_weight: float = 1.0             # η, weight of log R_dec (eq. 5.4) and of log R_dec in reranking
    weight: float = 1.0                 # shared: weight of log R (eq. 6.10) and in reranking
    hidden_size: int = 0                # H of the reconstructor; 0 = the backbone's hidden_size
    attn_size: int = 0                  # attention width; 0 = H
    dropout: float = 0.0                # on o_j before the reconstructor's softmax
    softmax: str = "full"               # full (over the source vocabulary, the thesis) | batch (training only:
                                        # over the batch's x̂ words, Jean et al. 2015 [I]; scoring always full)
    dp_head: str = "none"               # none | predictor (§2.10, target dpp) | labeler (§2.11, target original)
    dp_head_form: str = "linear"        # linear | mlp (a tanh layer of H first; §5 A19)
    dp_weight: float = 1.0              # weight of −log P(dp | h^rec) (eq. 6.10, 6.12)
    dp_none_weight: float = 1.0         # weight of the positions whose gold label is NONE inside that term
                                        # [I, not the thesis (1 = eq. 6.10/6.12): < 1 counters the labeler's
                                        # NONE imbalance, ≈ 97 % of its positions; docs/dp.md]
    dp_vocab: tuple[str, ...] = TABLE_4_3   # V_dp, the pronouns the head predicts (labels 1…)
    dp_threshold: float = 0.0           # predict_dps: the most likely pronoun wherever P(NONE) < τ (as the
                                        # external generator's τ, docs/models.md §2.11); 0 = arg-max over all labels
    context_sents: int = 0              # §2.12: N previous source sentences for DP labelling (0 = none)
    fuse_into: str = "labeler"          # §2.12: labeler (C in the labelling softmax, eq. 6.16) | decoder (eq. 6.15)


def _masked_mean(states: Tensor, pad: Tensor) -> Tensor:
    """states (B, L, D), pad (B, L) True at padding → (B, D) mean over real positions (0 if none)."""
    keep = (~pad).to(states.dtype).unsqueeze(-1)
    return (states * keep).sum(1) / keep.sum(1).clamp(min=1.0)


def _score_bias(pad: Tensor, dtype: torch.dtype) -> Tensor:
    """(B, L) −inf at padding, 0 elsewhere; an all-padding row attends everywhere (no NaN)."""
    mask = pad & ~pad.all(1, keepdim=True)
    return torch.zeros(mask.shape, dtype=dtype, device=mask.device).masked_fill(mask, float("-inf"))


class Attention(nn.Module):
    """Bahdanau attention of the reconstructor: α_t = masked_softmax(w^T tanh(W q + b + U v_t
    [+ W_c e])) (eq. 5.2; ``extra`` > 0 adds W_c e, the enc→dec / dec→enc feed of eq. 6.7–6.8)."""

    def __init__(self, query: int, memory: int, width: int, extra: int = 0):
        super().__init__()
        self.query = nn.Linear(query, width)                   # W, b
        self.key = nn.Linear(memory, width, bias=False)        # U
        self.feed = nn.Linear(extra, width, bias=False) if extra else None     # W_c
        self.v = nn.Linear(width, 1, bias=False)               # w

    def forward(self, q: Tensor, keys: Tensor, memory: Tensor, bias: Tensor, feed: Tensor | None = None) -> Tensor:
        """q (B, H), keys = U v (B, L, A), memory (B, L, D), bias (B, L) → ĉ (B, D)."""
        pre = self.query(q)
        if self.feed is not None:
            pre = pre + self.feed(feed)
        scores = self.v(torch.tanh(keys + pre.unsqueeze(1))).squeeze(-1) + bias
        return torch.bmm(torch.softmax(scores, -1).unsqueeze(1), memory).squeeze(1)


@dataclass
class RecState:
    """The incremental state of a ``Reconstructor`` (``init_state`` / ``step``)."""

    r: Tensor                   # (B, H)
    memories: list[tuple[Tensor, Tensor, Tensor]]     # [(memory (B, L, D), keys (B, L, A), bias (B, L))]
    step: int


class Reconstructor(nn.Module):
    """The attention GRU reconstructor of eq. 5.1–5.3 (one memory) or eq. 6.1–6.8 (two).

    ``memory_sizes``: D of each memory (1 or 2); ``emb_size``: E of the shared source embedding
    (passed to ``forward``/``init_state``, not owned: "all reconstructor parameters except E_src are
    separate" [P]); ``vocab``: V, the source vocabulary of its own softmax; ``attention``: the order of
    the two attentions (``ATTENTIONS``; ignored with one memory); ``softmax``: ``full`` (over V, the
    thesis) or ``batch``: in training (module in training mode, gradients on) normalised over the
    words of the batch's x̂ only (the "target vocabulary of a batch" approximation of Jean et al.
    2015 §3 [I]: the V-way softmax costs more than the whole Transformer step on a CPU; scoring and
    evaluation always use the full softmax). Raises ValueError for another number of memories or an
    unknown attention order or softmax."""

    def __init__(self, memory_sizes: tuple[int, ...], emb_size: int, hidden: int, attn: int, vocab: int,
                 attention: str = "independent", dropout: float = 0.0, softmax: str = "full"):
        super().__init__()
        if softmax not in SOFTMAX:
            raise ValueError(f"reconstructor softmax must be one of {SOFTMAX}, got {softmax!r}")
        self.softmax = softmax
        if len(memory_sizes) not in (1, 2):
            raise ValueError(f"a reconstructor reads 1 or 2 memories, got {len(memory_sizes)}")
        if attention not in ATTENTIONS:
            raise ValueError(f"reconstructor attention must be one of {ATTENTIONS}, got {attention!r}")
        self.sizes, self.order, self.hidden = tuple(memory_sizes), attention, hidden
        total = sum(memory_sizes)
        self.init = nn.Linear(total, hidden)                               # W_init, b
        self.gru1 = nn.GRUCell(emb_size, hidden)
        two = len(memory_sizes) == 2
        feeds = [0] * len(memory_sizes)
        if two and attention == "enc2dec":
            feeds[1] = memory_sizes[0]
        elif two and attention == "dec2enc":
            feeds[0] = memory_sizes[1]
        self.attn = nn.ModuleList(Attention(hidden, d, attn, f) for d, f in zip(memory_sizes, feeds))
        self.gru2 = nn.GRUCell(total, hidden)
        self.readout = nn.Linear(hidden + total + emb_size, emb_size)     # [W_o C_o V_o], b
        self.drop = nn.Dropout(dropout)
        self.out = nn.Linear(emb_size, vocab)                              # W_out^rec, b
        for name, p in self.named_parameters():
            if "bias" in name:
                nn.init.zeros_(p)
            elif "gru" in name and "weight_hh" in name:
                for block in p.data.chunk(3, 0):
                    nn.init.orthogonal_(block)
            else:
                nn.init.xavier_uniform_(p)

    def _prepare(self, memories: list[tuple[Tensor, Tensor]], r0_extra: Tensor | None) -> tuple[Tensor, list]:
        if len(memories) != len(self.sizes):
            raise ValueError(f"this reconstructor reads {len(self.sizes)} memories, got {len(memories)}")
        pre = self.init(torch.cat([_masked_mean(m, p) for m, p in memories], -1))
        if r0_extra is not None:
            pre = pre + r0_extra
        prepared = [(m, att.key(m), _score_bias(p, m.dtype)) for (m, p), att in zip(memories, self.attn)]
        return torch.tanh(pre), prepared

    def _contexts(self, q: Tensor, prepared: list) -> Tensor:
        """The attention contexts [ĉ^1 ; ĉ^2] (B, ΣD) of query r̃ (B, H) in ``attention`` order."""
        if len(prepared) == 1:
            m, k, b = prepared[0]
            return self.attn[0](q, k, m, b)
        (m0, k0, b0), (m1, k1, b1) = prepared
        if self.order == "dec2enc":
            c1 = self.attn[1](q, k1, m1, b1)
            c0 = self.attn[0](q, k0, m0, b0, c1)
        else:
            c0 = self.attn[0](q, k0, m0, b0)
            c1 = self.attn[1](q, k1, m1, b1, c0 if self.order == "enc2dec" else None)
        return torch.cat([c0, c1], -1)

    def _prev_embed(self, embedding: nn.Embedding, target: Tensor) -> Tensor:
        """E_src[x̂_{j-1}] (B, S', E), a zero vector at j = 1."""
        emb = embedding(target[:, :-1])
        return torch.cat([emb.new_zeros(emb.size(0), 1, emb.size(2)), emb], 1)

    def forward(self, embedding: nn.Embedding, memories: list[tuple[Tensor, Tensor]], target: Tensor,
                pad_id: int, r0_extra: Tensor | None = None, top_words: int = 0) -> tuple[Tensor, Tensor]:
        """Teacher-forced reconstruction. memories: [(states (B, L_k, D_k), pad (B, L_k) True at
        padding)]; target: x̂ (B, S') source ids ending in ``</s>``, padded with ``pad_id``;
        r0_extra (B, H) is added to r_0's pre-activation or None → (log R(x̂_j | ·) (B, S') float32,
        0 at padding; the states r_j (B, S', H) that emit x̂_j). GRU_1's input projection, the
        attention keys, the readout and the softmax run once over all positions; only the
        recurrence loops over j, and at step j only over the rows whose x̂ is longer than j (rows
        taken longest first, as a packed sequence: the states at padding positions are zeros).
        ``top_words`` K > 0 (scoring only, ``_top_log_probs``): each log R(x̂_j) is normalised
        over the source ids below K and x̂_j itself instead of the whole vocabulary (0, or K ≥ V:
        the full softmax)."""
        keep = target.ne(pad_id)
        lengths = keep.sum(1)                                              # (B,)
        order = torch.argsort(lengths, descending=True, stable=True)
        permuted = bool((order != torch.arange(order.numel(), device=order.device)).any())
        if permuted:
            memories = [(m.index_select(0, order), p.index_select(0, order)) for m, p in memories]
            r0_extra = None if r0_extra is None else r0_extra.index_select(0, order)
        r, prepared = self._prepare(memories, r0_extra)
        emb = self._prev_embed(embedding, target)                          # (B, S', E)
        gi1 = F.linear(emb, self.gru1.weight_ih, self.gru1.bias_ih)        # (B, S', 3H)
        if permuted:
            gi1 = gi1.index_select(0, order)
        live = torch.bincount(lengths, minlength=target.size(1) + 1).flip(0).cumsum(0).flip(0)[1:].tolist()
        b = target.size(0)                                                 # live[j]: rows with length > j
        rs, cs = [], []
        for j in range(target.size(1)):
            n = live[j]
            if n == 0:                                                     # (only a padding column is left)
                rs.append(r.new_zeros(b, r.size(1)))
                cs.append(rs[-1].new_zeros(b, sum(self.sizes)))
                continue
            r_tilde = gru_step(self.gru1, gi1[:n, j], r[:n])
            c = self._contexts(r_tilde, [(m[:n], k[:n], bias[:n]) for m, k, bias in prepared])
            r = self.gru2(c, r_tilde)
            rs.append(F.pad(r, (0, 0, 0, b - n)))
            cs.append(F.pad(c, (0, 0, 0, b - n)))
        states, ctx = torch.stack(rs, 1), torch.stack(cs, 1)
        if permuted:
            inverse = torch.empty_like(order)
            inverse[order] = torch.arange(order.numel(), device=order.device)
            states, ctx = states.index_select(0, inverse), ctx.index_select(0, inverse)
        o = self.drop(torch.tanh(self.readout(torch.cat([states[keep], ctx[keep], emb[keep]], -1))))   # (N, E)
        gold = target[keep]
        if self.softmax == "batch" and self.training and torch.is_grad_enabled():
            cand = torch.unique(gold)                                      # (C,) sorted: the batch's x̂ words
            logits = F.linear(o, self.out.weight.index_select(0, cand), self.out.bias.index_select(0, cand))
            gold = torch.searchsorted(cand, gold)
            lp = -F.cross_entropy(logits.float(), gold, reduction="none")  # (N,)
        elif 0 < top_words < self.out.out_features:                        # (N, K + 1) in chunks
            lp = torch.cat([self._top_log_probs(o[i:i + SOFTMAX_CHUNK], gold[i:i + SOFTMAX_CHUNK], top_words)
                            for i in range(0, o.size(0), SOFTMAX_CHUNK)] or [o.new_zeros(0, dtype=torch.float32)])
        else:                                                              # (N, V) in chunks: bounded memory
            lp = torch.cat([-F.cross_entropy(self.out(o[i:i + SOFTMAX_CHUNK]).float(), gold[i:i + SOFTMAX_CHUNK],
                                             reduction="none") for i in range(0, o.size(0), SOFTMAX_CHUNK)]
                           or [o.new_zeros(0, dtype=torch.float32)])
        return lp.new_zeros(target.shape).masked_scatter(keep, lp), states

    def _top_log_probs(self, o: Tensor, gold: Tensor, k: int) -> Tensor:
        """log softmax(W_out o + b_out)[gold] normalised over the ids {0 … k−1} ∪ {gold} only: o (N, E),
        gold (N,) → (N,) float32. The reranking approximation of ``translate --rerank-vocab K``
        [I, not the thesis, which normalises over the whole source vocabulary]: the vocabularies
        are frequency-ordered (``data/vocab.py``), so ids below K are the K most frequent source
        words (and the specials); every candidate translation of a sentence shares x̂ and so the
        same normalisation set, and the set does not depend on the batch."""
        head = F.linear(o, self.out.weight[:k], self.out.bias[:k]).float()               # (N, K)
        inside = gold < k
        own = (o * self.out.weight.index_select(0, gold)).sum(-1) + self.out.bias.index_select(0, gold)
        g = torch.where(inside, head.gather(1, gold.clamp(max=k - 1)[:, None]).squeeze(1), own.float())
        extra = g.masked_fill(inside, float("-inf"))                                       # x̂_j ∉ the K
        return g - torch.logsumexp(torch.cat([head, extra[:, None]], 1), 1)

    def init_state(self, memories: list[tuple[Tensor, Tensor]], r0_extra: Tensor | None = None) -> RecState:
        """The state before x̂_1 (for ``step``)."""
        r, prepared = self._prepare(memories, r0_extra)
        return RecState(r, prepared, 0)

    def step(self, embedding: nn.Embedding, state: RecState, prev: Tensor) -> tuple[Tensor, Tensor, RecState]:
        """One step: prev (B,) = x̂_{j-1} (ignored at j = 1: the zero vector) → (log R(· | x̂_<j)
        (B, V) float32, r_j (B, H), the advanced state). Same maths as ``forward``."""
        emb = embedding(prev)
        if state.step == 0:
            emb = torch.zeros_like(emb)
        r_tilde = self.gru1(emb, state.r)
        c = self._contexts(r_tilde, state.memories)
        r = self.gru2(c, r_tilde)
        o = self.drop(torch.tanh(self.readout(torch.cat([r, c, emb], -1))))
        return F.log_softmax(self.out(o).float(), -1), r, RecState(r, state.memories, state.step + 1)


class DPHead(nn.Module):
    """The DP softmax over L labels from reconstructor states r_t (eq. 6.9 / 6.11): ``linear``
    W_l r + b_l; ``mlp`` W_l tanh(W_h r + b) + b_l; with a context size > 0 (§2.12, eq. 6.16 [I])
    W_l tanh(W_h r + W_c C + b) + b_l."""

    def __init__(self, hidden: int, labels: int, form: str = "linear", context: int = 0):
        super().__init__()
        if form not in HEAD_FORMS:
            raise ValueError(f"reconstructor.dp_head_form must be one of {HEAD_FORMS}, got {form!r}")
        self.hidden = nn.Linear(hidden, hidden) if form == "mlp" or context else None
        self.context = nn.Linear(context, hidden, bias=False) if context else None
        self.out = nn.Linear(hidden, labels)

    def forward(self, r: Tensor, c: Tensor | None = None) -> Tensor:
        """r (B, S', H), c (B, C) or None → logits (B, S', L)."""
        if self.hidden is None:
            return self.out(r)
        pre = self.hidden(r)
        if self.context is not None and c is not None:
            pre = pre + self.context(c).unsqueeze(1)
        return self.out(torch.tanh(pre))


class ReconstructedModel(nn.Module):
    """A backbone with reconstructors (and DP heads, cross-sentence DP context): §2.8–2.12.

    Implements ``models.interface.Seq2SeqModel``: translation is the backbone's; the reconstructors
    and heads only add ``auxiliary_losses`` in training, ``reconstruction_score`` (reranking) and
    ``predict_dps``. Training batches carry ``rec_tgt`` (B, S') (source-vocabulary ids of x̂, ending
    in ``</s>``) and, with a DP head, ``dp_tgt`` (B, S') label ids (``data/reconstruction.py``).
    ``backbone``: a sentence backbone or a context model over one (module docstring, "Over a context
    model"). Raises ValueError for an invalid ``ReconstructorConfig``, or ``context_sents`` > 0 over
    a context model."""

    def __init__(self, backbone: nn.Module, cfg: ReconstructorConfig):
        super().__init__()
        for name, value, known in (("mode", cfg.mode, MODES), ("attention", cfg.attention, ATTENTIONS),
                                   ("target", cfg.target, TARGETS),
                                   ("encoder_input", cfg.encoder_input, ENCODER_INPUTS),
                                   ("dp_head", cfg.dp_head, DP_HEADS), ("fuse_into", cfg.fuse_into, FUSE_INTO)):
            if value not in known:
                raise ValueError(f"model.reconstructor.{name} must be one of {', '.join(known)}, got {value!r}")
        if cfg.dp_head == "predictor" and cfg.target != "dpp":
            raise ValueError("model.reconstructor.dp_head: predictor labels #DP# placeholders, it needs target: dpp")
        if cfg.dp_head == "labeler" and cfg.target != "original":
            raise ValueError("model.reconstructor.dp_head: labeler labels the original source, "
                             "it needs target: original")
        if cfg.context_sents and cfg.dp_head == "none":
            raise ValueError("model.reconstructor.context_sents > 0 needs a dp_head (the context feeds DP labelling)")
        if cfg.context_sents < 0:
            raise ValueError(f"model.reconstructor.context_sents must be ≥ 0, got {cfg.context_sents}")
        if cfg.context_sents and cfg.fuse_into == "decoder" and cfg.mode == "enc":
            raise ValueError("model.reconstructor.fuse_into: decoder needs a reconstructor that reads the decoder")
        if cfg.dp_weight < 0 or not 0 < cfg.dp_none_weight or not 0 <= cfg.dp_threshold <= 1:
            raise ValueError(f"model.reconstructor.dp_weight must be ≥ 0, dp_none_weight > 0 and dp_threshold in "
                             f"[0, 1], got {cfg.dp_weight}, {cfg.dp_none_weight} and {cfg.dp_threshold}")
        if not cfg.dp_vocab or len(set(cfg.dp_vocab)) != len(cfg.dp_vocab) or NO_DP in cfg.dp_vocab:
            raise ValueError("model.reconstructor.dp_vocab must be non-empty, without duplicates or 'NONE'")
        if cfg.context_sents and isinstance(backbone, ContextModel):
            raise ValueError("model.reconstructor.context_sents > 0 cannot be combined with a context model "
                             "(it reads the previous sentences already): set one of them")
        self.backbone, self.cfg, self.pad_id = backbone, cfg, backbone.pad_id
        sentence = self._sentence_model
        emb = sentence.source_embedding
        e, vocab = emb.embedding_dim, emb.num_embeddings
        d_enc, d_dec = sentence.encoder_size, backbone.hidden_size
        h = cfg.hidden_size or backbone.hidden_size
        a = cfg.attn_size or h

        def rec(sizes):
            return Reconstructor(sizes, e, h, a, vocab, cfg.attention, cfg.dropout, cfg.softmax)

        self.rec_enc = rec((d_enc,)) if cfg.mode in ("enc", "both") else None
        self.rec_dec = rec((d_dec,)) if cfg.mode in ("dec", "both") else None
        self.rec_shared = rec((d_enc, d_dec)) if cfg.mode == "shared" else None
        n = cfg.context_sents
        self.ctx_gru = nn.GRUCell(d_enc, h) if n else None                          # sentence-level encoder, eq. 6.14
        self.ctx_dec = nn.Linear(h, d_dec, bias=False) if n and cfg.fuse_into == "decoder" else None   # W_d, eq. 6.15
        self.dp_head = (DPHead(h, len(cfg.dp_vocab) + 1, cfg.dp_head_form,
                               h if n and cfg.fuse_into == "labeler" else 0)
                        if cfg.dp_head != "none" else None)
        self.register_buffer("placeholder_id", torch.tensor(-1), persistent=True)   # #DP# in the source vocabulary
        self._dec_cache: list[tuple[Tensor, Tensor | None, Tensor]] = []    # (tgt_in, rows, states) of decode_train

    # -- vocabularies ----------------------------------------------------------------------------
    def bind_vocab(self, src_vocab, tgt_vocab) -> None:
        """Keep the id of ``#DP#`` in the source vocabulary (−1 if absent; ``interface.bind_vocabularies``).
        Raises ValueError for a predictor (target ``dpp``) whose source vocabulary lacks it."""
        pid = src_vocab.index.get(PLACEHOLDER, -1)
        if self.cfg.dp_head == "predictor" and pid < 0:
            raise ValueError(f"model.reconstructor.dp_head predictor needs {PLACEHOLDER} in the source vocabulary "
                             f"(data.src_vocab_extra: ['{PLACEHOLDER}'])")
        self.placeholder_id.fill_(pid)

    # -- the contract, delegated ---------------------------------------------------------------
    @property
    def _wraps_context(self) -> bool:
        return isinstance(self.backbone, ContextModel)

    @property
    def _sentence_model(self) -> nn.Module:
        """The sentence backbone: ``backbone`` itself, or the one inside the context model."""
        return self.backbone.backbone if self._wraps_context else self.backbone

    @property
    def sentence_weights_prefix(self) -> str:
        """"backbone." (+ the context model's own "backbone." when it wraps one)."""
        return "backbone." + self.backbone.sentence_weights_prefix

    @property
    def document(self) -> DocumentSpec:
        """The context model's ``document``; over a sentence backbone ``DocumentSpec(context_sents)``:
        document batches only with §2.12's context."""
        return self.backbone.document if self._wraps_context else DocumentSpec(self.cfg.context_sents)

    @property
    def empty_context(self) -> str:
        """The translation's: the wrapped model's ``empty_context`` (the reconstructors change no
        translation's output)."""
        return self.backbone.empty_context

    @property
    def max_target_len(self) -> int:
        return self.backbone.max_target_len

    @property
    def hidden_size(self) -> int:
        return self.backbone.hidden_size

    def encode(self, batch) -> EncoderOutput:
        """The backbone's encoding; with §2.12's context, C (B, H) in ``extra["dp_context"]``. A
        document batch (§2.12) is encoded as the context models encode theirs when gradients are
        on (``models.rows.split_encode``: target rows in length buckets, context-only rows
        apart, each cut to its own width — the same states at real positions, less padding;
        benchmarks/RESULTS.md); a sentence batch in one call. Over a context model, its own
        ``encode`` (it reads ``batch.ctx`` and splits the batch itself)."""
        enc = self.backbone.encode(batch) if self._wraps_context else split_encode(self.backbone, batch,
                                                                                   context_grad=True)
        if self.ctx_gru is not None:
            enc.extra = {**(enc.extra or {}), "dp_context": self._sentence_context(enc, batch)}
        self._dec_cache = []
        if self._keeps_states():                # rows travel with the selections of the loss's buckets
            rows = torch.arange(enc.states.size(0), device=enc.states.device)
            enc.extra = {**(enc.extra or {}), "rec_row": rows}
        return enc

    def _keeps_states(self) -> bool:
        return self.training and torch.is_grad_enabled() and (self.rec_dec is not None or self.rec_shared is not None)

    def _sentence_context(self, enc: EncoderOutput, batch) -> Tensor:
        """C (B, H) of eq. 6.13–6.14: the sentence GRU's last state over the mean encoder states of
        the rows ``batch.ctx`` (B, N) points to, oldest first, skipping −1 (zeros if none)."""
        ctx = context_rows(batch, self.cfg.context_sents, enc.states.device)     # (B, N)
        sent = _masked_mean(enc.states, enc.src_pad_mask)                          # (B, D)
        x = sent.index_select(0, ctx.clamp(min=0).flatten()).view(*ctx.shape, -1)  # (B, N, D)
        valid = ctx.ge(0)
        h = x.new_zeros(ctx.size(0), self.ctx_gru.hidden_size)
        for k in range(ctx.size(1)):
            h = torch.where(valid[:, k:k + 1], self.ctx_gru(x[:, k], h), h)
        return h

    def decode_train(self, enc: EncoderOutput, tgt_in: Tensor, select: Tensor | None = None) -> Tensor:
        """The backbone's teacher-forced logits (``output_logits(decode_hidden(…))``); in training
        the decoder states are kept for ``auxiliary_losses`` (with the batch rows they belong to,
        ``extra["rec_row"]``, when the loss decodes a document batch's target rows in buckets)."""
        hidden = self.backbone.decode_hidden(enc, tgt_in)
        if self._keeps_states():
            self._dec_cache.append((tgt_in, None if not enc.extra else enc.extra.get("rec_row"), hidden))
        return self.backbone.output_logits(hidden if select is None else hidden[select])

    def init_state(self, enc: EncoderOutput):
        return self.backbone.init_state(enc)

    def decode_step(self, state, prev_tokens: Tensor, vocab: Tensor | None = None):
        return self.backbone.decode_step(state, prev_tokens, vocab)

    def decode_hidden(self, enc: EncoderOutput, tgt_in: Tensor) -> Tensor:
        return self.backbone.decode_hidden(enc, tgt_in)

    def output_logits(self, hidden: Tensor, vocab: Tensor | None = None) -> Tensor:
        return self.backbone.output_logits(hidden, vocab)

    def decode_step_hidden(self, state, prev_tokens: Tensor):
        return self.backbone.decode_step_hidden(state, prev_tokens)

    def context_filter(self, src_len, tgt_len, ctx_len) -> dict:
        return self.backbone.context_filter(src_len, tgt_len, ctx_len)

    def inference_cache(self, capacity: int = 4096) -> AbstractContextManager:
        return self.backbone.inference_cache(capacity)

    def explain_blocks(self) -> list:
        return self.backbone.explain_blocks()

    def context_attention(self, batch):
        return self.backbone.context_attention(batch)

    def portable(self):
        """None: a model with reconstructors is no standard Transformer for another engine (its
        translation is the backbone's, but reranking and DP prediction need the reconstructors)."""
        return None

    def quantizable_linears(self) -> list[nn.Module]:
        """The backbone's choice (output and feed-forward layers); the reconstructors stay float."""
        return self.backbone.quantizable_linears()

    # -- reconstruction ----------------------------------------------------------------------------
    @property
    def reconstruction(self) -> ReconstructionSpec:
        c = self.cfg
        weight = {"enc": c.enc_weight, "dec": c.dec_weight, "both": c.dec_weight, "shared": c.weight}[c.mode]
        return ReconstructionSpec(c.encoder_input, c.target, c.mode != "enc", weight, self.dp_head is not None)

    @property
    def dp_labels(self) -> list[str]:
        return [NO_DP, *self.cfg.dp_vocab] if self.dp_head is not None else []

    def _dec_memory(self, enc: EncoderOutput, hidden: Tensor, tgt_in: Tensor) -> tuple[Tensor, Tensor]:
        if self.ctx_dec is not None:
            hidden = hidden + self.ctx_dec(enc.extra["dp_context"]).unsqueeze(1)
        return hidden, tgt_in.eq(self.pad_id)

    def _run(self, enc: EncoderOutput, hidden: Tensor | None, tgt_in: Tensor, rec_target: Tensor
             ) -> dict[str, tuple[Tensor, Tensor]]:
        """{"enc" | "dec" | "shared": (token log-probs (B, S'), states (B, S', H))} of the model's
        reconstructors on rec_target (B, S'); ``hidden`` (B, T, D) the decoder states of tgt_in."""
        emb = self._sentence_model.source_embedding
        out = {}
        enc_mem = (enc.states, enc.src_pad_mask)
        if self.rec_enc is not None:
            out["enc"] = self.rec_enc(emb, [enc_mem], rec_target, self.pad_id)
        if self.rec_dec is not None:
            out["dec"] = self.rec_dec(emb, [self._dec_memory(enc, hidden, tgt_in)], rec_target, self.pad_id)
        if self.rec_shared is not None:
            out["shared"] = self.rec_shared(emb, [enc_mem, self._dec_memory(enc, hidden, tgt_in)], rec_target,
                                            self.pad_id)
        return out

    def _labelling_states(self, runs: dict) -> Tensor:
        """The states the DP head reads: the shared reconstructor's, else dec-rec's, else enc-rec's."""
        for key in ("shared", "dec", "enc"):
            if key in runs:
                return runs[key][1]
        raise AssertionError("no reconstructor")

    def _dp_logits(self, enc: EncoderOutput, states: Tensor) -> Tensor:
        c = enc.extra["dp_context"] if self.ctx_gru is not None and self.ctx_dec is None else None
        return self.dp_head(states, c)

    def _dp_positions(self, rec_target: Tensor) -> Tensor:
        """(B, S') True where the DP head predicts: every real position (labeler), the #DP#
        positions (predictor)."""
        if self.cfg.dp_head == "labeler":
            return rec_target.ne(self.pad_id)
        return rec_target.eq(int(self.placeholder_id))

    def reconstruction_score(self, enc: EncoderOutput, tgt_in: Tensor, rec_target: Tensor,
                             hidden: Tensor | None = None, top_words: int = 0) -> Tensor:
        """log R(x̂ | ·) per row (B,) float32: dec-rec's (modes dec, both: eq. 5.4's η term), the
        shared reconstructor's, or enc-rec's (mode enc, the same for every candidate of a source).
        One teacher-forced decoder pass (none when ``hidden``, the decoder states of tgt_in, is
        given) and one reconstructor pass over all B rows; ``top_words``: ``Reconstructor.forward``."""
        key = {"enc": "enc", "dec": "dec", "both": "dec", "shared": "shared"}[self.cfg.mode]
        rec = {"enc": self.rec_enc, "dec": self.rec_dec, "shared": self.rec_shared}[key]
        emb = self._sentence_model.source_embedding
        if key == "enc":
            lp, _ = rec(emb, [(enc.states, enc.src_pad_mask)], rec_target, self.pad_id, top_words=top_words)
        else:
            if hidden is None:
                hidden = self.backbone.decode_hidden(enc, tgt_in)
            elif hidden.shape[:2] != tgt_in.shape:
                raise ValueError(f"hidden states {tuple(hidden.shape)} do not match tgt_in {tuple(tgt_in.shape)}")
            dec = self._dec_memory(enc, hidden, tgt_in)
            mems = [dec] if key == "dec" else [(enc.states, enc.src_pad_mask), dec]
            lp, _ = rec(emb, mems, rec_target, self.pad_id, top_words=top_words)
        return lp.sum(1)

    def predict_dps(self, enc: EncoderOutput, tgt_in: Tensor, rec_target: Tensor,
                    threshold: float | None = None) -> Tensor:
        """The DP label (B, S') long per rec_target position (see ``Seq2SeqModel.predict_dps``): the
        arg-max, or with τ > 0 the most likely pronoun wherever P(NONE) < τ; 0 where the head does
        not predict (padding; non-#DP# positions of a predictor). τ = ``threshold``, or the config's
        ``dp_threshold`` when None. Raises ValueError for τ outside [0, 1]."""
        if self.dp_head is None:
            raise ValueError(no_dp_message(self))
        hidden = None if self.rec_dec is None and self.rec_shared is None else self.backbone.decode_hidden(enc, tgt_in)
        runs = self._run(enc, hidden, tgt_in, rec_target)
        logits = self._dp_logits(enc, self._labelling_states(runs))                    # (B, S', L)
        tau = self.cfg.dp_threshold if threshold is None else threshold
        if not 0.0 <= tau <= 1.0:
            raise ValueError(f"the DP threshold τ must be in [0, 1], got {tau}")
        if tau > 0:
            p_none = torch.softmax(logits.float(), -1)[..., 0]
            labels = torch.where(p_none < tau, logits[..., 1:].argmax(-1) + 1, 0)
        else:
            labels = logits.argmax(-1)
        return labels.masked_fill(~self._dp_positions(rec_target), 0)

    @staticmethod
    def _kept_states(cache: list, tgt_in: Tensor, rows: Tensor | None, width: int) -> Tensor | None:
        """The decoder states ``decode_train`` computed for this batch's target rows: (B', width, D)
        for ``rows`` (B',) (None = every row, one call with ``tgt_in`` itself), assembled from the
        loss's length buckets (each padded with zeros past its own width: padding positions, which
        the reconstructor masks); None when the calls do not cover exactly those rows."""
        if rows is None:
            return cache[0][2] if len(cache) == 1 and cache[0][0] is tgt_in else None
        if not cache or any(r is None for _, r, _ in cache):
            return None
        got = torch.cat([r for _, r, _ in cache])
        if got.numel() != rows.numel() or not torch.equal(got.sort().values, rows):
            return None
        pos = torch.full((int(rows.max()) + 1,), -1, dtype=torch.long, device=rows.device)
        pos[rows] = torch.arange(rows.numel(), device=rows.device)
        ref = cache[0][2]
        out = ref.new_zeros(rows.numel(), width, ref.size(-1))
        for _, r, h in cache:
            out = out.index_copy(0, pos[r], F.pad(h, (0, 0, 0, width - h.size(1))))
        return out

    def auxiliary_losses(self, enc: EncoderOutput, batch) -> dict[str, Tensor]:
        """{"rec_enc", "rec_dec" | "rec", "dp"}: −weight × log-likelihood summed over the target
        sentences' x̂ tokens (labels), divided by the batch's target tokens ``batch.n_targets``:
        the loss multiplies each value by the target tokens (``models.interface.AuxiliaryLosses``),
        so the total is J of eq. 5.4 / 6.10 / 6.12 (every term summed over the same sentences,
        weights λ, η, 1) and the logged terms are nats per target token [I: a per-sentence mean,
        the AuxiliaryLosses default, would weigh log R ≈ 10× more than the thesis' J against the
        per-token cross-entropy]. Over a context model, its own terms too. Needs ``batch.rec_tgt`` (and
        ``batch.dp_tgt`` with a DP head); raises ValueError naming what is missing."""
        inner = self.backbone.auxiliary_losses(enc, batch)        # a context model's own terms ({} for a backbone)
        rec_tgt = getattr(batch, "rec_tgt", None)
        if rec_tgt is None:
            raise ValueError("a reconstructor model's training batches need rec_tgt (the reconstruction target; "
                             "data/reconstruction.py)")
        tgt_in = batch.tgt_in
        cache, self._dec_cache = self._dec_cache, []
        is_target = getattr(batch, "is_target", None)
        rows = None
        if is_target is not None and not bool(is_target.all()):
            rows = is_target.to(tgt_in.device).nonzero().squeeze(1)
            enc, tgt_in, rec_tgt = enc.select(rows), tgt_in.index_select(0, rows), rec_tgt.index_select(0, rows)
            dp_tgt = None if getattr(batch, "dp_tgt", None) is None else batch.dp_tgt.index_select(0, rows)
        else:
            dp_tgt = getattr(batch, "dp_tgt", None)
        rec_tgt = rec_tgt.to(tgt_in.device)
        hidden = None
        if self.rec_dec is not None or self.rec_shared is not None:
            hidden = self._kept_states(cache, batch.tgt_in, rows, tgt_in.size(1))
            if hidden is None:
                hidden = self.backbone.decode_hidden(enc, tgt_in)
        runs = self._run(enc, hidden, tgt_in, rec_tgt)
        c = self.cfg
        weights = {"enc": ("rec_enc", c.enc_weight), "dec": ("rec_dec", c.dec_weight), "shared": ("rec", c.weight)}
        tokens = max(int(batch.n_targets), 1)
        out = {weights[k][0]: -weights[k][1] * lp.sum() / tokens for k, (lp, _) in runs.items()}
        if self.dp_head is not None:
            if dp_tgt is None:
                raise ValueError("a DP predictor/labeler's training batches need dp_tgt (data/reconstruction.py)")
            dp_tgt = dp_tgt.to(tgt_in.device)
            logits = self._dp_logits(enc, self._labelling_states(runs))                  # (B, S', L)
            where = self._dp_positions(rec_tgt)
            lp = F.log_softmax(logits.float(), -1).gather(2, dp_tgt.clamp(min=0).unsqueeze(2)).squeeze(2)
            weight = where.float()
            if c.dp_none_weight != 1.0:
                weight = weight * torch.where(dp_tgt.eq(0), c.dp_none_weight, 1.0)
            out["dp"] = -c.dp_weight * (lp * weight).sum() / tokens
        clash = set(inner) & set(out)
        if clash:
            raise ValueError(f"the context model's loss terms {sorted(clash)} clash with the reconstructor's")
        return {**inner, **out}
