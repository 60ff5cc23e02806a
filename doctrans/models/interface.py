"""The model contract: what training, the loss, beam/greedy search and translate may use.

Every backbone (and, later, every context model wrapped around one) provides exactly this;
nothing outside ``doctrans/models`` reads a model's config, its attention-mask layout or its
layers. A new backbone is one file in ``models/backbones/`` that satisfies ``Seq2SeqModel``,
one row in ``models/build.py:BACKBONES`` and ``pipelines/<name>/{tiny,small,base}.yaml``; the
backbone-parametrized tests then check it.

Beside this module: ``models/reconstruction_spec.py`` (``ReconstructionSpec``, the errors of a
model without a reconstructor), ``models/portable.py`` (``PortableTransformer``, the export spec)
and ``models/rnn_hooks.py`` (the RNN decoder hooks context models use of RNNSearch).

Shape legend: B batch rows, S source length, T target length, H hidden size, V target vocabulary.
Tokens are batch-first ``long`` tensors padded with the vocabulary's ``pad_id``; every row
ends in ``</s>`` (source) or starts with ``<s>`` (target input).
"""
from __future__ import annotations

from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from torch import Tensor, nn

from doctrans.models.portable import PortableTransformer
from doctrans.models.reconstruction_spec import ReconstructionSpec, no_dp_message, no_reconstructor_message


SENTENCE_MODEL = "sentence model"
"""``Seq2SeqModel.empty_context`` of a model whose output without context is its backbone's."""


@dataclass
class EncoderOutput:
    """What ``encode`` returns and ``decode_train``/``init_state`` consume.

    states: (B, S, H) encoder states; src_pad_mask: (B, S) bool, True at padding.
    ``extra`` holds model-specific tensors whose first dimension is B and that are not indexed
    by source position (e.g. an RNN's initial decoder state, or a context model's pointers into
    ``shared``); ``select`` keeps them aligned with ``states``, and a caller may cut ``states``
    to fewer source positions without touching them. ``shared`` holds tensors that rows refer
    to by index rather than own (e.g. a context memory computed once per context sentence and
    read by many rows and by every beam hypothesis); ``select`` passes it on unchanged.
    """

    states: Tensor
    src_pad_mask: Tensor
    extra: dict[str, Tensor] | None = None
    shared: dict[str, Tensor] | None = None

    def select(self, index: Tensor) -> "EncoderOutput":
        """Rows ``index`` (B',) of everything, e.g. to repeat each sentence once per beam."""
        extra = None if self.extra is None else {k: v.index_select(0, index) for k, v in self.extra.items()}
        return EncoderOutput(self.states.index_select(0, index), self.src_pad_mask.index_select(0, index), extra,
                             self.shared)

    def narrow(self, width: int) -> "EncoderOutput":
        """The first ``width`` source positions of ``states`` and ``src_pad_mask``; ``extra``
        and ``shared`` unchanged."""
        return EncoderOutput(self.states[:, :width], self.src_pad_mask[:, :width], self.extra, self.shared)


class SourceBatch(Protocol):
    """Anything with a ``src`` (B, S) tensor: ``data.batching.Batch`` or a search batch."""

    src: Tensor


@dataclass
class SearchBatch:
    """The source side of a batch to translate. src: (B, S) padded ids; ctx: (B, N) long or None,
    for a model that reads documents, the batch rows of each row's previous N sentences, oldest
    first, −1 where there is none (as ``data.documents.DocBatch.ctx``); None = no context."""

    src: Tensor
    ctx: Tensor | None = None


@runtime_checkable
class DecoderState(Protocol):
    """The incremental decoder state of B' live hypotheses (keys/values, RNN state, step)."""

    def reorder(self, index: Tensor) -> "DecoderState":
        """Rows ``index`` (B'',) of the state: beam reordering, dropping finished rows, and the
        beam's widening after step 0 (``beam_search`` decodes step 0 on one row per sentence,
        then repeats each row K times: ``index`` may repeat rows and be longer than the state,
        so nothing may assume the row count of ``init_state`` is the beam's)."""
        ...


@dataclass(frozen=True)
class DocumentSpec:
    """What a model reads of a document, i.e. what the data path and the translator must give it.

    context_sents: N ≥ 0, the previous N sentences of the same document, as context rows of the
    batch pointed to by ``batch.ctx`` (B, N) (``models/context/base.py``); context_block: K ≥ 0,
    a model whose context is its sub-document of K consecutive sentences (``batch.block`` (B,));
    needs_target: context rows carry their target (the reference in training, the model's own
    1-best at translation time), so documents are translated sentence by sentence in order. A
    sentence-level model is ``DocumentSpec()`` (all zero)."""

    context_sents: int = 0
    context_block: int = 0
    needs_target: bool = False

    @property
    def reads_documents(self) -> bool:
        """Whether the model is trained and translated on document batches."""
        return self.context_sents > 0 or self.context_block > 0


@runtime_checkable
class Seq2SeqModel(Protocol):
    """An encoder–decoder NMT model as the rest of doctrans sees it (an ``nn.Module``).

    Three parts: the sentence contract (``encode`` … ``decode_step``), the decoder's states
    (``decode_hidden``, ``output_logits``, ``decode_step_hidden``: what a model that reads the
    decoder's states, e.g. a reconstructor, uses) and the document side (``document`` …
    ``auxiliary_losses``). ``SentenceModelDefaults`` gives a sentence-level model the document
    side; ``models/context/base.py: ContextModel`` implements it for context models. Nothing
    outside ``doctrans/models`` reads any other attribute of a model."""

    pad_id: int

    @property
    def max_target_len(self) -> int:
        """Longest target (incl. ``</s>``) the model can produce; search forces ``</s>`` there.
        Also the longest source (incl. ``</s>``) it can encode."""
        ...

    def encode(self, batch: SourceBatch) -> EncoderOutput:
        """Encode ``batch.src`` (B, S) → EncoderOutput (states (B, S, H), src_pad_mask (B, S)).
        Raises ``ValueError`` if S exceeds what the model can represent."""
        ...

    def decode_train(self, enc: EncoderOutput, tgt_in: Tensor, select: Tensor | None = None) -> Tensor:
        """Teacher forcing. tgt_in: (B, T) = ``<s> y_1 … y_{T-1}`` → unnormalised logits
        (B, T, V); with ``select`` (B, T) bool only the selected positions, (N, V) in row-major
        order (the loss passes the non-padding positions, so padding costs no output layer).
        Equals ``output_logits(decode_hidden(enc, tgt_in))`` (at ``select``)."""
        ...

    def init_state(self, enc: EncoderOutput) -> DecoderState:
        """Decoder state before the first step for every row of ``enc`` (B rows)."""
        ...

    def decode_step(self, state: Any, prev_tokens: Tensor, vocab: Tensor | None = None) -> tuple[Tensor, Any]:
        """One incremental step. prev_tokens: (B,) ids emitted last (``<s>`` first) →
        (log-probabilities (B, V) in float32, the advanced state). May update ``state`` in place.
        Equals ``log_softmax(output_logits(h, vocab))`` for ``h, state = decode_step_hidden(state,
        prev_tokens)``: with ``vocab`` (C,) target ids (a lexical shortlist,
        ``inference/shortlist.py``) the output layer runs for those ids only and the result is
        (B, C), normalised over them."""
        ...

    # -- the decoder's states ----------------------------------------------------------------
    @property
    def hidden_size(self) -> int:
        """D, the size of the decoder states of ``decode_hidden`` / ``decode_step_hidden``."""
        ...

    def decode_hidden(self, enc: EncoderOutput, tgt_in: Tensor) -> Tensor:
        """Teacher forcing: tgt_in (B, T) → the decoder's top states (B, T, D), the input of the
        output layer (a Transformer's final-LN states; RNNSearch's readout o_t), with whatever
        the model's context adds to them."""
        ...

    def output_logits(self, hidden: Tensor, vocab: Tensor | None = None) -> Tensor:
        """(…, D) decoder states → unnormalised scores (…, V); with ``vocab`` (C,) target ids
        only their scores, (…, C) (``layers.output.project``)."""
        ...

    def decode_step_hidden(self, state: Any, prev_tokens: Tensor) -> tuple[Tensor, Any]:
        """``decode_step`` before the output layer: prev_tokens (B,) → (top decoder state (B, D)
        of each live hypothesis, the advanced state)."""
        ...

    # -- the document side ---------------------------------------------------------------------
    @property
    def document(self) -> DocumentSpec:
        """What the model reads of a document (``DocumentSpec()`` for a sentence model)."""
        ...

    @property
    def empty_context(self) -> str:
        """What a row without context produces (a document's first sentence, or a batch without
        ``ctx``/``block``): ``SENTENCE_MODEL`` when the output equals the backbone's sentence-level
        output (every backbone, and a context model whose context only adds to it), else a short
        phrase saying what the model reads instead, with its docs/models.md section (e.g. HRNN's
        NULL sentence, §2.1)."""
        ...

    @property
    def sentence_weights_prefix(self) -> str:
        """Where a sentence-level checkpoint's weights go in this model's ``state_dict`` for
        two-stage training (``train.init_from``): "" for a backbone, "backbone." for a model
        wrapping one."""
        ...

    def context_filter(self, src_len, tgt_len, ctx_len) -> dict:
        """Training tuples the model refuses (e.g. a length filter on the context). src_len,
        tgt_len (n,) int arrays; ctx_len (n, N) (−1 where there is no such sentence) →
        {rule name: (n,) bool array, True = not a training target}; {} for none."""
        ...

    def inference_cache(self, capacity: int = 4096) -> AbstractContextManager:
        """A context manager within which the model may keep per-sentence context computations
        between ``encode`` calls (translating a document collection); a no-op for a model
        without any."""
        ...

    def explain_blocks(self) -> list[tuple[str, nn.Module, str]]:
        """The model's context attention blocks for pictures (``translate --explain-context``):
        [(name, block with a ``recorder`` list attribute, side "source" | "target")]; [] for none."""
        ...

    def auxiliary_losses(self, enc: EncoderOutput, batch: Any) -> dict[str, Tensor]:
        """Training-only loss terms beside the cross-entropy (``AuxiliaryLosses``); {} for none."""
        ...

    def context_attention(self, batch: Any) -> "ContextAttention | None":
        """The head attention supervision pulls toward the deciding context word
        (``ContextAttention``), for the target rows of a teacher-forced document batch
        (``batch.is_target`` rows, in order; all rows without it); None for a model whose
        context attention is not exposed (``train.context_attention_supervision`` then refuses it)."""
        ...

    # -- reconstruction and dropped pronouns (docs/models.md §2.9–2.10) ------------------------
    @property
    def reconstruction(self) -> ReconstructionSpec:
        """What the model reconstructs (``ReconstructionSpec()`` for a model without a reconstructor)."""
        ...

    @property
    def dp_labels(self) -> list[str]:
        """The DP label set: index 0 is "NONE", the rest the Chinese pronoun vocabulary V_dp the
        model predicts (``doctrans/dp/pronouns.py``); [] for a model that predicts no DPs."""
        ...

    def reconstruction_score(self, enc: EncoderOutput, tgt_in: Tensor, rec_target: Tensor,
                             hidden: Tensor | None = None, top_words: int = 0) -> Tensor:
        """log R(x̂ | states) per row, summed over x̂'s tokens incl. </s>, float32 (B,).
        enc: B rows (e.g. each source repeated once per k-best candidate); tgt_in (B, T) the
        candidate ``<s> y_1 … y_n`` teacher-forced (padded with pad_id); rec_target (B, S')
        x̂ in SOURCE-vocabulary ids ending in </s>, padded with pad_id (what spec.target says).
        ``hidden`` (B, T, D): the decoder states of tgt_in (``decode_hidden``'s, e.g. kept by the
        beam search that produced the candidates, ``beam_search(keep_states=True)``), so the
        decoder does not run again; None = one teacher-forced pass for all B rows. ``top_words``
        K > 0: each token's log-probability normalised over the K most frequent source words
        (ids below K) and the token itself, not the whole source vocabulary (a reranking
        approximation; 0 = exact). Raises ValueError for a model without a reconstructor, or
        for ``hidden`` whose first two dimensions are not tgt_in's."""
        ...

    def predict_dps(self, enc: EncoderOutput, tgt_in: Tensor, rec_target: Tensor,
                    threshold: float | None = None) -> Tensor:
        """DP labels (B, S') long, ids into ``dp_labels``, one per rec_target position (0 = NONE,
        and 0 at padding). ``threshold`` τ: None = the model's configured decision rule; 0 = the
        arg-max label; τ in (0, 1] = the most likely pronoun wherever P(NONE) < τ (ValueError
        outside [0, 1]). spec.target "original" (labeler §2.11): label j ≠ 0 means the pronoun
        dp_labels[label] is missing immediately BEFORE rec_target[:, j] (the </s> slot = at the
        end). spec.target "dpp" (predictor §2.10): label j ≠ 0 only at #DP# placeholder
        positions, meaning the placeholder is that pronoun. Raises ValueError for a model that
        predicts no DPs."""
        ...

    # -- deployment ------------------------------------------------------------------------------
    def portable(self) -> PortableTransformer | None:
        """The model as a standard Transformer another inference engine can run
        (``PortableTransformer``: ``doctrans export``), or None when it is not one (an RNN, a
        context model with its own layers)."""
        ...

    def quantizable_linears(self) -> list[nn.Module]:
        """The ``nn.Linear`` layers int8 dynamic quantization may replace for CPU decoding
        (``translate --quantize int8``): the output layer and the feed-forward layers."""
        ...


class NoReconstruction:
    """The reconstruction members of ``Seq2SeqModel`` for a model without a reconstructor
    (docs/models.md §2.8–2.11): ``ReconstructionSpec()``, no DP labels, and
    ``reconstruction_score`` / ``predict_dps`` raising ValueError (``no_reconstructor_message``,
    ``no_dp_message``). A base of ``SentenceModelDefaults`` and of ``ContextModel``."""

    reconstruction = ReconstructionSpec()
    dp_labels: list[str] = []

    def reconstruction_score(self, enc: EncoderOutput, tgt_in: Tensor, rec_target: Tensor,
                             hidden: Tensor | None = None, top_words: int = 0) -> Tensor:
        raise ValueError(no_reconstructor_message(self))

    def predict_dps(self, enc: EncoderOutput, tgt_in: Tensor, rec_target: Tensor,
                    threshold: float | None = None) -> Tensor:
        raise ValueError(no_dp_message(self))


class SentenceModelDefaults(NoReconstruction):
    """The document side of ``Seq2SeqModel`` for a sentence-level model (a backbone): reads no
    document, filters nothing, caches nothing, no context attention, no auxiliary loss. A
    backbone class lists it as a base beside ``nn.Module``."""

    document = DocumentSpec()
    empty_context = SENTENCE_MODEL
    sentence_weights_prefix = ""

    def context_filter(self, src_len, tgt_len, ctx_len) -> dict:
        return {}

    def inference_cache(self, capacity: int = 4096) -> AbstractContextManager:
        return nullcontext()

    def explain_blocks(self) -> list:
        return []

    def auxiliary_losses(self, enc: EncoderOutput, batch: Any) -> dict[str, Tensor]:
        return {}

    def context_attention(self, batch: Any) -> None:
        return None

    def portable(self) -> PortableTransformer | None:
        return None

    def quantizable_linears(self) -> list[nn.Module]:
        """Every ``nn.Linear`` of the model (a backbone with its own choice overrides this)."""
        return [m for m in self.modules() if isinstance(m, nn.Linear)]


def protocol_members(proto: type) -> list[str]:
    """The public members (methods, properties, annotated attributes) a ``Protocol`` class
    declares, in declaration order, its Protocol bases' included."""
    names: list[str] = []
    for klass in reversed(proto.__mro__):
        if klass in (object, Protocol) or not getattr(klass, "_is_protocol", False):
            continue
        for name in list(getattr(klass, "__annotations__", {})) + list(vars(klass)):
            if not name.startswith("_") and name not in names:
                names.append(name)
    return names


def missing_members(obj: Any, proto: type) -> list[str]:
    """The members of ``proto`` (``protocol_members``) that ``obj`` lacks."""
    return [name for name in protocol_members(proto) if not hasattr(obj, name)]


@runtime_checkable
class BackboneParts(Protocol):
    """What a context model (``models/context/``) uses of a backbone besides the contract:
    the top decoder states and the output layer, separately, so a context block can sit
    between them (e.g. HAN decoder, docs/models.md §2.5)."""

    @property
    def hidden_size(self) -> int:
        """Size of the top decoder states (``decode_hidden``, ``output_logits``' input)."""
        ...

    @property
    def encoder_size(self) -> int:
        """Size of ``EncoderOutput.states`` (equal to ``hidden_size`` for a Transformer; 2H
        annotations vs an E-sized readout for RNNSearch)."""
        ...

    def decode_hidden(self, enc: EncoderOutput, tgt_in: Tensor) -> Tensor:
        """Teacher forcing: tgt_in (B, T) → top decoder states (B, T, H), H = ``hidden_size``."""
        ...

    def output_logits(self, hidden: Tensor, vocab: Tensor | None = None) -> Tensor:
        """(…, H) → unnormalised scores (…, V), or (…, C) for the target ids ``vocab`` (C,)."""
        ...

    def decode_step_hidden(self, state: Any, prev_tokens: Tensor) -> tuple[Tensor, Any]:
        """One incremental step: prev_tokens (B,) → (top decoder state (B, H), state)."""
        ...


@runtime_checkable
class TargetPrefixParts(Protocol):
    """What a context model that puts previous target sentences before the current one in the
    decoder (target-side concatenation, ``models/context/tgt_concat.py``) uses of a backbone
    besides the contract: decoding that starts after a forced prefix of per-row length, and
    tokens read at given positions (the concatenation models' ``context_position_offset``: the
    current sentence at the sentence model's positions, its context from a fixed offset)."""

    def init_state_with_prefix(self, enc: EncoderOutput, prefix: Tensor, offset: int = 0) -> DecoderState:
        """``init_state(enc)`` after force-decoding ``prefix`` (B, P) target ids, right-padded
        with ``pad_id``: the next ``decode_step`` of row b continues right after its own prefix
        tokens (positions and attention as teacher forcing of ``prefix_b · tgt_in_b``); with
        ``offset`` > 0 the prefix is read at positions offset … and the continuation starts at 0."""
        ...

    def self_attention_weights(self, enc: EncoderOutput, tgt_in: Tensor, layer: int = -1, head: int = 0,
                               positions: Tensor | None = None) -> Tensor:
        """Teacher forcing of tgt_in (B, T) → the decoder self-attention weights (B, T, T) of one
        layer and head, with gradients (attention supervision); ``positions`` (B, T) as
        ``decode_hidden``'s."""
        ...

    def decode_hidden(self, enc: EncoderOutput, tgt_in: Tensor, positions: Tensor | None = None) -> Tensor:
        """``BackboneParts.decode_hidden`` with tgt_in's tokens at ``positions`` (B, T) (default
        0 … T−1)."""
        ...

    def encode_with(self, src: Tensor, layer_fn=None, positions: Tensor | None = None) -> EncoderOutput:
        """``EncoderParts.encode_with`` with src's tokens at ``positions`` (B, S) (default 0 … S−1)."""
        ...


@dataclass
class ContextAttention:
    """One context-attention head of a model, for attention supervision (Yin et al. 2021,
    ``training/attention_supervision.py``): weights (B, T, K) from each current target position
    (``tgt_in``'s, the position that predicts ``tgt_out`` there) over K context tokens, with
    gradients; key_row (B, K) the batch row each key token belongs to (−1: not a context token,
    e.g. a break or padding) and key_pos (B, K) its position in that row's ``tgt_in`` (target
    context) or ``src`` (source context), as ``side`` says ("target" | "source")."""

    weights: Tensor
    key_row: Tensor
    key_pos: Tensor
    side: str = "target"


@runtime_checkable
class EncoderParts(Protocol):
    """What a context model that works *inside* the encoder layers (QCN's context-attention
    sub-layer, HGC's global context: docs/models.md §2.6–2.7) uses of a backbone."""

    @property
    def hidden_size(self) -> int:
        ...

    @property
    def encoder_layers(self) -> int:
        """Number of encoder layers."""
        ...

    @property
    def source_embedding(self) -> Any:
        """E_src, an ``nn.Embedding`` (unscaled, no positions)."""
        ...

    def embed_source(self, src: Tensor) -> Tensor:
        """The encoder input (B, S, H) of src (B, S)."""
        ...

    def embed_target(self, tgt_in: Tensor) -> Tensor:
        """The decoder input (B, T, H) of tgt_in (B, T)."""
        ...

    def encode_with(self, src: Tensor, layer_fn=None) -> EncoderOutput:
        """``encode`` with layer k computed by ``layer_fn(k, layer, x, keep)``; ``layer`` has
        ``attention_sublayer(x, keep)``, ``ffn_input(x)``, ``ffn_sublayer(x)``."""
        ...

    def residual_sublayer(self) -> Any:
        """A new ``nn.Module`` computing Sub(z, f) as the backbone's own sub-layers do."""
        ...


def reads_documents(model: Seq2SeqModel) -> bool:
    """Whether ``model`` reads document context, and so is trained and translated on document
    batches (``data/documents.py``, ``inference/documents.py``): ``model.document.reads_documents``."""
    return model.document.reads_documents


def bind_vocabularies(model, src_vocab, tgt_vocab) -> None:
    """Give every submodule of ``model`` that reads token *strings* (not only ids) the training
    vocabularies (``data.vocab.Vocab``): calls its ``bind_vocab(src_vocab, tgt_vocab)``. Called by
    the trainer right after building the model (on resume the checkpoint then restores the same
    values); what a module derives from the strings lives in its persistent buffers, so checkpoints
    carry it and translation needs no call (e.g. the continuous cache's ``exclude_stopwords``,
    docs/models.md §2.3). Errors are the modules' (e.g. ValueError for a vocabulary of the wrong size)."""
    for m in model.modules():
        bind = getattr(m, "bind_vocab", None)
        if callable(bind):
            bind(src_vocab, tgt_vocab)


@runtime_checkable
class AuxiliaryLosses(Protocol):
    """``Seq2SeqModel.auxiliary_losses`` in detail: training-only loss terms beside the cross-entropy
    (e.g. QCN's PCC regularisation, Yang et al. 2019 §3.4, docs/models.md §2.6).

    ``training.loss.forward_loss`` calls it only while the model is in training mode with
    gradients on (never for dev cross-entropy, scoring or search), after ``encode`` and the
    decoder. Each value is a scalar tensor in its own unit, weight included, **averaged over the
    batch's target sentences** (``is_target`` rows, else every row); the loss adds
    value × n_tokens to ``LossOutput.total`` and reports the same product under the term's name
    in ``LossOutput.terms``, so after the trainer's division by target tokens the total holds
    the term's per-sentence mean (over ``train.accum`` batches: their token-weighted mean) and
    ``metrics.jsonl`` shows it under its name."""

    def auxiliary_losses(self, enc: EncoderOutput, batch: Any) -> dict[str, Tensor]:
        """enc: ``encode(batch)``; batch: the training batch (src, tgt_in, ctx, is_target …)
        → {name: scalar tensor}; {} for none."""
        ...
