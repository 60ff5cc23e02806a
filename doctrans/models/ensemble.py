"""A decoding-time ensemble of translation models over one vocabulary (``translate --ensemble``).

Every member scores the next token given the same target prefix; the ensemble's distribution is

* ``linear`` (fairseq's ``--path a.pt:b.pt``, uniform there): p(y_t) = Σ_i w_i p_i(y_t | ·);
* ``loglinear``: p(y_t) ∝ Π_i p_i(y_t | ·)^{w_i}, renormalised over the vocabulary,

with weights w_i ≥ 0 summing to 1. A context member reads its context as it would alone (its own
``encode`` of the document batch: context rows, target prefix), a sentence-level member reads the
source sentence only; so a document model and a sentence model combine as "the sentence model's
fluency, the document model's context" (docs/context.md, "Ensembles"). Inference only: an ensemble
is built from trained checkpoints (``inference/loading.py``), never trained. The linear rule is the
NMT ensemble of Sutskever et al. 2014 (§3.6, averaged predictions) and fairseq's; the log-linear
one the product of experts (Hinton 2002) as NMT toolkits offer it for combining differently
trained models.

Teacher forcing (``decode_train``) returns the ensemble's log-probabilities as logits (a
``log_softmax`` of them is themselves), so forced scoring — contrastive pronouns, CXMI — scores
the ensemble as search does. The decoder's hidden states (``decode_hidden`` …) have no single
meaning across members: ``hidden_size`` is 0 and those members raise (no reconstructor reranking).

Shape legend: B rows, V vocabulary (shared), T target length.
"""
from __future__ import annotations

import math
from contextlib import ExitStack, contextmanager

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from doctrans.models.interface import (SENTENCE_MODEL, DocumentSpec, EncoderOutput, NoReconstruction,
                                       SearchBatch)

MODES = ("linear", "loglinear")


class EnsembleState:
    """The members' decoder states, reordered together."""

    def __init__(self, states: list):
        self.states = states

    def reorder(self, index: Tensor) -> "EnsembleState":
        return EnsembleState([s.reorder(index) for s in self.states])


class Ensemble(NoReconstruction, nn.Module):
    """members: ``Seq2SeqModel``s sharing source and target vocabularies; weights (M,) ≥ 0, summing to
    1 (normalised here); mode ``linear`` | ``loglinear`` (module doc). At most one distinct
    ``DocumentSpec`` among the members that read documents: the ensemble reads what they read.
    Raises ValueError for fewer than two members, a weight count that differs, a negative or
    all-zero weight, an unknown mode, or members reading documents differently."""

    def __init__(self, members: list[nn.Module], weights: list[float], mode: str = "linear"):
        super().__init__()
        if len(members) < 2:
            raise ValueError(f"an ensemble needs at least two models, got {len(members)}")
        if len(weights) != len(members):
            raise ValueError(f"{len(weights)} ensemble weights for {len(members)} models")
        if any(w < 0 for w in weights) or sum(weights) <= 0:
            raise ValueError(f"ensemble weights must be ≥ 0 and not all 0, got {weights}")
        if mode not in MODES:
            raise ValueError(f"ensemble mode must be one of {', '.join(MODES)}, got {mode!r}")
        specs = {m.document for m in members if m.document.reads_documents}
        if len(specs) > 1:
            raise ValueError(f"the ensemble's context models read documents differently: {sorted(map(str, specs))}")
        self.members = nn.ModuleList(members)
        total = float(sum(weights))
        self.weights = [w / total for w in weights]
        self.mode = mode
        self.pad_id = members[0].pad_id
        self._document = specs.pop() if specs else DocumentSpec()

    # -- what the search and the document path read ------------------------------------------
    @property
    def document(self) -> DocumentSpec:
        return self._document

    @property
    def max_target_len(self) -> int:
        return min(m.max_target_len for m in self.members)

    sentence_weights_prefix = ""

    @property
    def empty_context(self) -> str:
        """What its context members produce without context (``SENTENCE_MODEL`` if none differs)."""
        own = [m.empty_context for m in self.members if m.empty_context != SENTENCE_MODEL]
        return own[0] if own else SENTENCE_MODEL

    @staticmethod
    def _encode_sentences(member, batch) -> EncoderOutput:
        """A sentence member's encoding of a batch: of its target rows only (a document batch's
        context rows, ``is_target`` False, are read by the context members alone), scattered back
        to the batch's rows — (B, S', H) states, the other rows all padding."""
        is_target = getattr(batch, "is_target", None)
        if is_target is None or bool(is_target.all()):
            return member.encode(SearchBatch(batch.src))
        rows = is_target.nonzero().squeeze(1)
        enc = member.encode(SearchBatch(batch.src.index_select(0, rows)))
        b, (_, s, h) = batch.src.size(0), enc.states.shape
        states = enc.states.new_zeros(b, s, h).index_copy_(0, rows, enc.states)
        mask = enc.src_pad_mask.new_ones(b, s).index_copy_(0, rows, enc.src_pad_mask)
        extra = None if not enc.extra else {k: v.new_zeros((b,) + v.shape[1:]).index_copy_(0, rows, v)
                                            for k, v in enc.extra.items()}
        return EncoderOutput(states, mask, extra, enc.shared)

    def encode(self, batch) -> EncoderOutput:
        """Each member's ``encode`` (a context member of the batch, a sentence member of its
        target rows' sources); member 0's as the output's own fields, every member's (member 0
        included) under ``extra["ensemble.{i}.…"]`` so that ``select`` keeps them row-aligned."""
        encs = [m.encode(batch) if m.document.reads_documents else self._encode_sentences(m, batch)
                for m in self.members]
        extra = {}
        for i, e in enumerate(encs):
            extra[f"ensemble.{i}.states"], extra[f"ensemble.{i}.mask"] = e.states, e.src_pad_mask
            for k, v in (e.extra or {}).items():
                extra[f"ensemble.{i}.extra.{k}"] = v
        shared = {f"ensemble.{i}.{k}": v for i, e in enumerate(encs) for k, v in (e.shared or {}).items()}
        return EncoderOutput(encs[0].states, encs[0].src_pad_mask, extra, shared or None)

    def _member_enc(self, enc: EncoderOutput, i: int) -> EncoderOutput:
        extra = {k[len(f"ensemble.{i}.extra."):]: v for k, v in enc.extra.items()
                 if k.startswith(f"ensemble.{i}.extra.")}
        shared = {k[len(f"ensemble.{i}."):]: v for k, v in (enc.shared or {}).items() if k.startswith(f"ensemble.{i}.")}
        return EncoderOutput(enc.extra[f"ensemble.{i}.states"], enc.extra[f"ensemble.{i}.mask"], extra or None,
                             shared or None)

    def _combine(self, lprobs: list[Tensor]) -> Tensor:
        """Members' log-probabilities (…, V) → the ensemble's (…, V), float32."""
        if self.mode == "linear":
            stacked = torch.stack([lp.float() + math.log(w) if w > 0 else torch.full_like(lp.float(), -math.inf)
                                   for lp, w in zip(lprobs, self.weights)])
            return torch.logsumexp(stacked, dim=0)
        return F.log_softmax(sum(w * lp.float() for lp, w in zip(lprobs, self.weights)), dim=-1)

    def init_state(self, enc: EncoderOutput) -> EnsembleState:
        return EnsembleState([m.init_state(self._member_enc(enc, i)) for i, m in enumerate(self.members)])

    def decode_step(self, state: EnsembleState, prev_tokens: Tensor,
                    vocab: Tensor | None = None) -> tuple[Tensor, EnsembleState]:
        """One step of every member → (the ensemble's log-probabilities (B, V) or (B, C) over a
        shortlist's ids, the state)."""
        out, states = [], []
        for m, s in zip(self.members, state.states):
            lp, s = m.decode_step(s, prev_tokens, vocab)
            out.append(lp)
            states.append(s)
        return self._combine(out), EnsembleState(states)

    def decode_train(self, enc: EncoderOutput, tgt_in: Tensor, select: Tensor | None = None) -> Tensor:
        """Teacher forcing → the ensemble's log-probabilities (B, T, V) (or (N, V) at ``select``) as
        logits (module doc)."""
        return self._combine([F.log_softmax(m.decode_train(self._member_enc(enc, i), tgt_in, select).float(), dim=-1)
                              for i, m in enumerate(self.members)])

    # -- the decoder's states: no single one ---------------------------------------------------
    hidden_size = 0

    def _no_hidden(self, *_args, **_kwargs):
        raise ValueError("an ensemble has no single decoder state (reconstructor reranking needs one model)")

    decode_hidden = output_logits = decode_step_hidden = _no_hidden

    # -- the document side ------------------------------------------------------------------------
    def context_filter(self, src_len, tgt_len, ctx_len) -> dict:
        return {}

    @contextmanager
    def inference_cache(self, capacity: int = 4096):
        with ExitStack() as stack:
            for m in self.members:
                stack.enter_context(m.inference_cache(capacity))
            yield

    def explain_blocks(self) -> list:
        return [b for m in self.members for b in m.explain_blocks()]

    def auxiliary_losses(self, enc: EncoderOutput, batch) -> dict[str, Tensor]:
        return {}

    def context_attention(self, batch) -> None:
        return None

    def portable(self) -> None:
        return None

    def quantizable_linears(self) -> list[nn.Module]:
        return [lin for m in self.members for lin in m.quantizable_linears()]
