"""The RNN decoder hooks: what a context model that works *inside* an RNN encoder–decoder
(HRNN, multi-encoder, continuous cache, inter-sentence gate: docs/models.md §2.1–2.4) uses of
the RNNSearch backbone (``models/backbones/rnnsearch.py``) — ``RNNParts`` — and the hooks it
hands the decoder: ``DecoderHook`` (per-row tensors and callbacks), called per step with
``StepInputs`` and answering ``StepExtra``. ``models/context/base.py: HookedRNNContext`` is the
base of such models. Nothing outside ``doctrans/models`` uses this module.

Shape legend as ``models/interface.py``: B rows, T target length, H the GRU size, E the word
embedding size.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Protocol, runtime_checkable

from torch import Tensor

from doctrans.models.interface import DecoderState, EncoderOutput, SourceBatch


@dataclass
class StepInputs:
    """What an RNN decoder step offers a context model's step hook (``DecoderHook.step``).

    s_prev: (B, H) s_{t-1}; s_tilde: (B, H) s̃_t = GRU_1(s_{t-1}, E[y_{t-1}]); c: (B, 2H) the
    attention context c_t; emb: (B, E) E_tgt[y_{t-1}]; rows: ``DecoderHook.rows``."""

    s_prev: Tensor
    s_tilde: Tensor
    c: Tensor
    emb: Tensor
    rows: dict[str, Tensor]


@dataclass
class StepExtra:
    """A step hook's contribution to one RNN decoder step (each may be None = nothing).

    gru2: (B, 3H) added to GRU_2's input pre-activation W_ih c_t + b_ih (an extra input a of
    GRU_2 enters as W_a a, in the r, z and n blocks: S2 eq. 3.6, 3.8, 3.9); keep: (B, 3H)
    multiplies GRU_2's input and hidden pre-activations W_ih c_t and W_hh s̃_t before their
    biases are added (a context gate interpolating them, docs/models.md §2.1 ``lcnmt``); readout:
    (B, k·E) added to the readout's pre-activation (e.g. C'_o c'_t, docs/models.md §2.2);
    gru2_input: (B, 3H) *replaces* GRU_2's input projection W_ih c_t (b_ih, ``gru2`` and
    ``keep`` still apply; the readout keeps c_t), e.g. W_ih((1 − z_t) ⊙ c_t) + C_1(z_t ⊙ c^a_t)
    of the inter-sentence gate (Kuang & Xiong 2018 eq. 10, docs/models.md §2.4, with ``RNNParts.project_gru2_input``)."""

    gru2: Tensor | None = None
    keep: Tensor | None = None
    readout: Tensor | None = None
    gru2_input: Tensor | None = None


@dataclass
class DecoderHook:
    """A context model's hooks into an RNN decoder (``RNNParts``), for B rows.

    rows: per-row tensors (B, …) the hook reads (e.g. the global context D (B, H)); kept
    aligned with the decoder state in beam search (``select``). s0: (B, H) added to the
    pre-activation of s_0 (Init_dec, S2 eq. 3.4) or None. step: ``StepInputs`` → ``StepExtra``,
    called once per target position, or None. readout_state: (s_t (B, T, H), c_t (B, T, 2H),
    rows) → the states (B, T, H) the readout reads instead of s_t (the recurrence keeps s_t; e.g.
    the continuous cache's ŝ_t, docs/models.md §2.3), called once over all positions in teacher
    forcing and with T = 1 per incremental step, or None."""

    rows: dict[str, Tensor] = field(default_factory=dict)
    s0: Tensor | None = None
    step: Callable[[StepInputs], StepExtra] | None = None
    readout_state: Callable[[Tensor, Tensor, dict[str, Tensor]], Tensor] | None = None

    def select(self, index: Tensor) -> "DecoderHook":
        """Rows ``index`` (B',) of ``rows`` and ``s0``; the same callbacks."""
        return DecoderHook({k: v.index_select(0, index) for k, v in self.rows.items()},
                           None if self.s0 is None else self.s0.index_select(0, index), self.step,
                           self.readout_state)


@runtime_checkable
class RNNParts(Protocol):
    """What a context model that works *inside* an RNN encoder–decoder (HRNN, multi-encoder,
    continuous cache, inter-sentence gate: docs/models.md §2.1–2.4) uses of the RNNSearch backbone: initial encoder states and the decoder
    hooks (``DecoderHook``). Every context parameter stays the context model's own, so
    ``train.freeze: ["backbone.*"]`` trains only them (S2 §3.6)."""

    @property
    def emb_size(self) -> int:
        """E, the word embedding size."""
        ...

    @property
    def rnn_size(self) -> int:
        """H, the GRU size (annotations are 2H)."""
        ...

    @property
    def readout_size(self) -> int:
        """Size of the readout's pre-activation (``StepExtra.readout``)."""
        ...

    @property
    def source_embedding(self) -> Any:
        """E_src, an ``nn.Embedding``."""
        ...

    @property
    def target_embedding(self) -> Any:
        """E_tgt, an ``nn.Embedding`` (e.g. the continuous cache's word keys)."""
        ...

    def project_gru2_input(self, c: Tensor) -> Tensor:
        """GRU_2's input projection W_ih c without bias: c (…, 2H) → (…, 3H) (for a hook's
        ``StepExtra.gru2_input``)."""
        ...

    def encode(self, batch: SourceBatch, h0: Tensor | None = None) -> EncoderOutput:
        """``Seq2SeqModel.encode`` with the encoder GRUs' initial states h0 (2, B, H) (forward,
        backward direction; None = zeros): Init_enc, S2 §3.2.2."""
        ...

    def decode_train(self, enc: EncoderOutput, tgt_in: Tensor, select: Tensor | None = None,
                     hook: DecoderHook | None = None) -> Tensor:
        """``Seq2SeqModel.decode_train`` with ``hook`` (B rows) in every step."""
        ...

    def init_state(self, enc: EncoderOutput, hook: DecoderHook | None = None) -> DecoderState:
        """``Seq2SeqModel.init_state``; the state carries ``hook``, reordered with it, and
        ``decode_step`` applies it."""
        ...

    def decode_states(self, enc: EncoderOutput, tgt_in: Tensor, hook: DecoderHook | None = None
                      ) -> tuple[Tensor, Tensor]:
        """Teacher forcing: tgt_in (B, T) → decoder states s_t (B, T, H) and attention contexts
        c_t (B, T, 2H) of every step."""
        ...
