"""RNNSearch (Bahdanau et al. 2015) with the conditional-GRU decoder, the doctrans backbone R.

Notes: ``docs/models.md`` §1.2 (equations, reference-code choices) and §1.4 (sizes).
The thesis (S2) and the inter-sentence-gate paper (S3) build on this model; it is the dl4mt /
Nematus "cGRU" with *feedback attention* [P S3 eq. 7–8; C]::

    h_i  = [GRU_f(→h_{i-1}, E_src[x_i]) ; GRU_b(←h_{i+1}, E_src[x_i])]          (B, S, 2H)
    s_0  = tanh(W_init · mean_i h_i + b)            (``init: last``: h_S, S2 eq. 3.3)   (B, H)
    s̃_t  = GRU_1(s_{t-1}, E_tgt[y_{t-1}])                                         (B, H)
    α_t  = masked_softmax_i(v_a^T tanh(W_a s̃_t + U_a h_i + b_a))                  (B, S)
    c_t  = Σ_i α_ti h_i                                                           (B, 2H)
    s_t  = GRU_2(state=s̃_t, input=c_t)                                            (B, H)
    o_t  = tanh(W_o s_t + C_o c_t + V_o E_tgt[y_{t-1}] + b_o)                      (B, E)
    p(y_t | y_<t, x) = softmax(W_out dropout(o_t) + b_out)                        (B, V)

Choices [I] (the sources are silent or the code differs from the equations):

* GRU cells are PyTorch's (S2 eq. 2.9 up to where the reset gate sits: PyTorch computes
  ``tanh(W a + b + r ⊙ (U h + b'))``, the thesis ``tanh(W a + U(r ⊙ h) + b)``; each gate has an
  input and a hidden bias, 3H more parameters per cell than the Theano code).
* ``maxout_part`` k > 1 replaces the tanh by a maxout over k pieces of a k·E readout (Bahdanau
  et al. 2015, §A.2.2); k = 1 (the default) is the reference code's tanh readout [C].
* ``bos_zero`` (default, as the reference code [C]): y_0 is a zero vector, not E_tgt[<s>]; the
  first target column (``<s>``) is never looked up.
* Weights: recurrent matrices orthogonal per gate, other matrices Xavier-uniform, embeddings
  N(0, 0.01²) with a zero ``<pad>`` row, biases zero (the dl4mt code uses N(0, 0.01²) and
  orthogonal recurrent matrices; Xavier trains the small configs faster with Adam).

Speed (2-core CPU): the encoder is one packed bi-``nn.GRU`` call, so padding never changes real
positions; the attention keys U_a h_i are computed once per sentence (``init_state``, and once
per ``decode_hidden`` call), never per step. GRU_1's state is s_{t-1}, the output of GRU_2 at
the previous step, so the decoder recurrence cannot be split into a GRU_1 pass and a GRU_2
pass: teacher forcing computes GRU_1's input projection W E_tgt[y_{t-1}] for all t in one
matmul and loops over t only for GRU_1's hidden part, the attention and GRU_2; the readout and
the output layer run once over all positions after the loop.

Context hooks (``models.rnn_hooks.RNNParts``, for ``models/context/{hier_rnn,multi_encoder,inter_sentence_gate,cache}.py``):
``encode(batch, h0)`` starts both encoder GRUs from given states (Init_enc); a ``DecoderHook``
adds a term to s_0's pre-activation (Init_dec) and, through a per-step callback on
(s_{t-1}, s̃_t, c_t, E[y_{t-1}]), an extra input to GRU_2 and an extra readout term (Auxi,
Gating Auxi, the multi-encoder's c'_t), or replaces GRU_2's input projection W_ih c_t while the
readout keeps c_t (the inter-sentence gate's [z ⊙ c^a ; (1 − z) ⊙ c^b], ``project_gru2_input``
giving W_ih of any vector); a ``readout_state`` callback on (s_t, c_t) gives the state the
readout reads instead of s_t while the recurrence keeps s_t (the continuous cache's ŝ_t), and
``decode_states`` returns the teacher-forced s_t and c_t; the hook's per-row tensors travel in
``DecoderState`` through beam reordering. With an extra input GRU_2 is computed explicitly (``gru_step``, the same
maths as ``nn.GRUCell``), the extra projection being the context model's parameter.

Configs: ``pipelines/rnnsearch/tiny.yaml`` (tests, seconds), ``small.yaml`` (E = H = 256, Adam;
the quickstart data on a CPU), ``base.yaml`` (the thesis: E 620, H 1000, Adadelta, beam 10; 86.7M
parameters with 30K vocabularies, ``tests/unit/test_rnnsearch.py``).

Shape legend: B batch, S source length, T target length, E embedding size, H hidden size
(``rnn_size``), A attention width, V vocabulary.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from doctrans.layers.init import init_rnn_weights
from doctrans.layers.masks import pad_mask
from doctrans.layers.output import project
from doctrans.models.interface import EncoderOutput, SentenceModelDefaults, SourceBatch
from doctrans.models.rnn_hooks import DecoderHook, StepExtra, StepInputs

INITS = ("mean", "last")


@dataclass(frozen=True)
class RNNSearchConfig:
    backbone: str = "rnnsearch"         # the row of models/build.py:BACKBONES
    emb_size: int = 256                 # E (620 in S2 ch.5/6 and S3)
    rnn_size: int = 256                 # H (1000); annotations are 2H
    attn_size: int = 0                  # A, width of the attention MLP; 0 = H [C] (docs/models.md §1.2)
    dropout: float = 0.5                # on the readout o_t only [P S2 ch.5, S3]
    maxout_part: int = 1                # 1 = tanh readout [C]; 2 = Bahdanau's maxout
    init: str = "mean"                  # s_0 from the mean annotation [C] | "last": h_S [P S2 eq. 3.3]
    bos_zero: bool = True               # y_0 = zero embedding, as the reference code [C]
    share_dec_embeddings: bool = False  # tie W_out to E_tgt (both V × E); the thesis does not
    max_target_len: int = 256           # longest target search may produce (incl. </s>)
    reconstructor: Any = None           # a ReconstructorConfig: reconstructors / DP heads (models/reconstructor.py)


@dataclass
class DecoderState:
    """The decoder's incremental state for B rows.

    s: (B, H) s_{t-1}; keys: (B, S, A) U_a h_i; states: (B, S, 2H) h_i; score_bias: (B, S),
    −inf at source padding, 0 elsewhere; step: target positions decoded so far; hook: a context
    model's ``DecoderHook`` for these B rows, or None.
    """

    s: Tensor
    keys: Tensor
    states: Tensor
    score_bias: Tensor
    step: int
    hook: DecoderHook | None = None
    src_rows: Tensor | None = None      # (B,) the encoder row each state row reads, or None

    def reorder(self, index: Tensor) -> "DecoderState":
        """Rows ``index`` (B',) of the state (beam reordering, dropping finished rows). The source
        side (``keys``, ``states``, ``score_bias``) is copied only when some row's encoder row
        changes (a beam step that reorders each sentence's hypotheses among themselves keeps it)."""
        src = None if self.src_rows is None else self.src_rows.index_select(0, index)
        same = src is not None and torch.equal(src, self.src_rows)
        return DecoderState(self.s.index_select(0, index),
                            self.keys if same else self.keys.index_select(0, index),
                            self.states if same else self.states.index_select(0, index),
                            self.score_bias if same else self.score_bias.index_select(0, index), self.step,
                            None if self.hook is None else self.hook.select(index), src)


def gru_step(cell: nn.GRUCell, gi: Tensor, h: Tensor, keep: Tensor | None = None) -> Tensor:
    """One step of ``cell`` whose input projection ``gi`` = W_ih a + b_ih (B, 3H) was computed
    beforehand (for all t at once, or with an extra input's W_x x added); h: (B, H) → h' (B, H).
    Same maths as ``cell(a, h)``. ``keep`` (B, 3H) multiplies W_hh h before b_hh is added
    (``StepExtra.keep``; the caller scales its part of ``gi``)."""
    if keep is None:
        gh = F.linear(h, cell.weight_hh, cell.bias_hh)                       # (B, 3H)
    else:
        gh = keep * F.linear(h, cell.weight_hh) + cell.bias_hh
    i_r, i_z, i_n = gi.chunk(3, dim=-1)
    h_r, h_z, h_n = gh.chunk(3, dim=-1)
    r, z = torch.sigmoid(i_r + h_r), torch.sigmoid(i_z + h_z)
    n = torch.tanh(i_n + r * h_n)
    return n + z * (h - n)                                                   # (1 − z) n + z h


class RNNSearch(SentenceModelDefaults, nn.Module):
    """Bi-GRU encoder + conditional-GRU decoder with feedback attention (S3 eq. 7–8; docs/models.md §1.2),
    implementing ``models.interface.Seq2SeqModel`` and ``BackboneParts``.

    Encoder states are the annotations (B, S, 2H) (``encoder_size`` = 2H); the decoder's "hidden"
    states of ``BackboneParts`` are the readout o_t (B, T, E) (``hidden_size`` = E), before the
    readout dropout, which ``output_logits`` applies.
    """

    def __init__(self, cfg: RNNSearchConfig, src_vocab: int, tgt_vocab: int, pad_id: int = 0):
        super().__init__()
        if cfg.backbone != "rnnsearch":
            raise ValueError(f"RNNSearchConfig.backbone must be 'rnnsearch', got {cfg.backbone!r}")
        if cfg.init not in INITS:
            raise ValueError(f"model.init must be one of {INITS}, got {cfg.init!r}")
        if cfg.maxout_part < 1:
            raise ValueError(f"model.maxout_part must be ≥ 1, got {cfg.maxout_part}")
        self.cfg, self.pad_id = cfg, pad_id
        e, h, a, k = cfg.emb_size, cfg.rnn_size, cfg.attn_size or cfg.rnn_size, cfg.maxout_part
        self.src_embed = nn.Embedding(src_vocab, e, padding_idx=pad_id)
        self.tgt_embed = nn.Embedding(tgt_vocab, e, padding_idx=pad_id)
        self.encoder = nn.GRU(e, h, batch_first=True, bidirectional=True)
        self.init_proj = nn.Linear(2 * h, h)                                 # W_init, b
        self.gru1 = nn.GRUCell(e, h)
        self.attn_query = nn.Linear(h, a)                                    # W_a, b_a
        self.attn_key = nn.Linear(2 * h, a, bias=False)                      # U_a
        self.attn_v = nn.Linear(a, 1, bias=False)                            # v_a
        self.gru2 = nn.GRUCell(2 * h, h)
        self.readout = nn.Linear(h + 2 * h + e, k * e)                       # [W_o C_o V_o], b_o
        self.drop = nn.Dropout(cfg.dropout)
        self.out_proj = nn.Linear(e, tgt_vocab)                              # W_out, b_out
        if cfg.share_dec_embeddings:
            self.out_proj.weight = self.tgt_embed.weight
        self._init_weights()

    def _init_weights(self) -> None:
        init_rnn_weights(self.named_parameters(), self.pad_id)

    @property
    def hidden_size(self) -> int:
        """E, the size of the readout o_t (what ``decode_hidden`` returns)."""
        return self.cfg.emb_size

    @property
    def encoder_size(self) -> int:
        """2H, the size of the annotations h_i (``EncoderOutput.states``)."""
        return 2 * self.cfg.rnn_size

    @property
    def emb_size(self) -> int:
        """E (``RNNParts``)."""
        return self.cfg.emb_size

    @property
    def rnn_size(self) -> int:
        """H (``RNNParts``)."""
        return self.cfg.rnn_size

    @property
    def readout_size(self) -> int:
        """k·E, the readout's pre-activation size (``StepExtra.readout``; ``RNNParts``)."""
        return self.cfg.maxout_part * self.cfg.emb_size

    @property
    def source_embedding(self) -> nn.Embedding:
        """E_src (``RNNParts``)."""
        return self.src_embed

    @property
    def target_embedding(self) -> nn.Embedding:
        """E_tgt (``RNNParts``)."""
        return self.tgt_embed

    def project_gru2_input(self, c: Tensor) -> Tensor:
        """GRU_2's input projection without its bias, W_ih c (``RNNParts``): c (…, 2H) → (…, 3H)."""
        return F.linear(c, self.gru2.weight_ih)

    @property
    def max_target_len(self) -> int:
        """``max_target_len`` of the config (an RNN has no position limit)."""
        return self.cfg.max_target_len

    def encode(self, batch: SourceBatch, h0: Tensor | None = None) -> EncoderOutput:
        """batch.src: (B, S) → annotations h_i (B, S, 2H), zeros at padding, and src_pad_mask
        (B, S). Packed, so a row's states do not depend on its padding. An all-padding row is
        read as one token (its mask stays all True). h0: (2, B, H) initial states →h_0, ←h_{S+1}
        of the forward and backward GRU (Init_enc, S2 §3.2.2); None = zeros."""
        src = batch.src
        pad = pad_mask(src, self.pad_id)                                     # (B, S)
        lengths = (~pad).sum(1).clamp(min=1).cpu()
        packed = nn.utils.rnn.pack_padded_sequence(self.src_embed(src), lengths, batch_first=True,
                                                   enforce_sorted=False)
        out, _ = self.encoder(packed, h0)
        states, _ = nn.utils.rnn.pad_packed_sequence(out, batch_first=True, total_length=src.size(1))
        return EncoderOutput(states, pad)                                    # (B, S, 2H)

    # -- decoder pieces ------------------------------------------------------------------
    def _init_s(self, states: Tensor, src_pad_mask: Tensor, extra: Tensor | None = None) -> Tensor:
        """s_0 = tanh(W_init · pool(h) + b [+ extra]), pool = masked mean [C] or h_S [S2 eq. 3.3];
        extra (B, H): ``DecoderHook.s0`` (W_D D of S2 eq. 3.4). states: (B, S, 2H) → (B, H)."""
        keep = (~src_pad_mask).unsqueeze(-1).to(states.dtype)                # (B, S, 1)
        if self.cfg.init == "mean":
            pooled = (states * keep).sum(1) / keep.sum(1).clamp(min=1.0)
        else:
            last = keep.squeeze(-1).sum(1).long().sub(1).clamp(min=0)       # (B,)
            pooled = states[torch.arange(states.size(0), device=states.device), last]
        pre = self.init_proj(pooled)
        return torch.tanh(pre if extra is None else pre + extra)

    def _prev_embed(self, prev: Tensor, first: bool) -> Tensor:
        """E_tgt[y_{t-1}] of prev (B, T) whose first column is t = 0 when ``first``
        → (B, T, E), zero there with ``bos_zero``."""
        emb = self.tgt_embed(prev)
        if first and self.cfg.bos_zero:
            emb = torch.cat([torch.zeros_like(emb[:, :1]), emb[:, 1:]], dim=1)
        return emb

    def _attend(self, s_tilde: Tensor, keys: Tensor, states: Tensor, score_bias: Tensor) -> Tensor:
        """Bahdanau attention with s̃_t as query. s_tilde: (B, H), keys: (B, S, A),
        states: (B, S, 2H), score_bias: (B, S) → c_t (B, 2H)."""
        q = self.attn_query(s_tilde).unsqueeze(1)                            # (B, 1, A)
        scores = self.attn_v(torch.tanh(keys + q)).squeeze(-1) + score_bias  # (B, S)
        alpha = torch.softmax(scores, dim=-1)
        return torch.bmm(alpha.unsqueeze(1), states).squeeze(1)              # (B, 2H)

    def _gru2(self, c: Tensor, s_tilde: Tensor, extra: StepExtra | None) -> Tensor:
        """s_t = GRU_2(state=s̃_t, input=c_t), with a hook's replacement ``extra.gru2_input``
        (B, 3H) of the input projection W_ih c_t, extra input ``extra.gru2`` (B, 3H) and gate
        ``extra.keep`` (B, 3H) (``StepExtra``). c: (B, 2H), s_tilde: (B, H) → (B, H)."""
        if extra is None or (extra.gru2 is None and extra.keep is None and extra.gru2_input is None):
            return self.gru2(c, s_tilde)
        gi = F.linear(c, self.gru2.weight_ih) if extra.gru2_input is None else extra.gru2_input   # (B, 3H)
        gi = (gi if extra.keep is None else extra.keep * gi) + self.gru2.bias_ih
        return gru_step(self.gru2, gi if extra.gru2 is None else gi + extra.gru2, s_tilde, extra.keep)

    def _readout(self, s: Tensor, c: Tensor, emb: Tensor, extra: Tensor | None = None) -> Tensor:
        """o_t = tanh (or maxout) of W_o s_t + C_o c_t + V_o E[y_{t-1}] + b_o [+ extra].
        s: (…, H), c: (…, 2H), emb: (…, E), extra: (…, k·E) (``StepExtra.readout``) → (…, E)."""
        pre = self.readout(torch.cat([s, c, emb], dim=-1))                  # (…, k·E)
        if extra is not None:
            pre = pre + extra
        k = self.cfg.maxout_part
        if k == 1:
            return torch.tanh(pre)
        return pre.unflatten(-1, (self.cfg.emb_size, k)).amax(-1)

    def _score_bias(self, src_pad_mask: Tensor, dtype: torch.dtype) -> Tensor:
        # (B, S): −inf at padding, 0 elsewhere (an all-padding row attends everywhere, not NaN)
        mask = src_pad_mask & ~src_pad_mask.all(1, keepdim=True)
        return torch.zeros(mask.shape, dtype=dtype, device=mask.device).masked_fill(mask, float("-inf"))

    # -- the parts context models build on (models.interface.BackboneParts) --------------
    def decode_hidden(self, enc: EncoderOutput, tgt_in: Tensor, hook: DecoderHook | None = None) -> Tensor:
        """Teacher forcing. tgt_in: (B, T) = <s> y_1 … y_{T-1} → readouts o_t (B, T, E).

        Loop (``_recur``): for t = 1..T: s̃_t = GRU_1(s_{t-1}, ·) from the precomputed input
        projection; c_t = attention(s̃_t); [extra = hook.step(s_{t-1}, s̃_t, c_t, E[y_{t-1}])];
        s_t = GRU_2(s̃_t, c_t [+ extra]). Then the readout over all t at once, reading
        ``hook.readout_state``'s ŝ_t instead of s_t where the hook has one.
        """
        ss, cs, emb, rs = self._recur(enc, tgt_in, hook)
        if hook is not None and hook.readout_state is not None:
            ss = hook.readout_state(ss, cs, hook.rows)
        return self._readout(ss, cs, emb, rs)

    def decode_states(self, enc: EncoderOutput, tgt_in: Tensor, hook: DecoderHook | None = None
                      ) -> tuple[Tensor, Tensor]:
        """Teacher forcing. tgt_in: (B, T) → the decoder states s_t (B, T, H) and attention
        contexts c_t (B, T, 2H) of every step (``RNNParts``; e.g. a cache's values and keys)."""
        ss, cs, _, _ = self._recur(enc, tgt_in, hook)
        return ss, cs

    def _recur(self, enc: EncoderOutput, tgt_in: Tensor, hook: DecoderHook | None
               ) -> tuple[Tensor, Tensor, Tensor, Tensor | None]:
        """The teacher-forced recurrence of ``decode_hidden`` → s_t (B, T, H), c_t (B, T, 2H),
        E[y_{t-1}] (B, T, E) and the hook's readout terms (B, T, k·E) or None."""
        states = enc.states                                                  # (B, S, 2H)
        keys = self.attn_key(states)                                         # (B, S, A), once
        bias = self._score_bias(enc.src_pad_mask, states.dtype)
        emb = self._prev_embed(tgt_in, first=True)                           # (B, T, E)
        gi1 = F.linear(emb, self.gru1.weight_ih, self.gru1.bias_ih)         # (B, T, 3H)
        step = None if hook is None else hook.step
        s = self._init_s(states, enc.src_pad_mask, None if hook is None else hook.s0)   # (B, H)
        ss, cs, rs = [], [], []
        for t in range(tgt_in.size(1)):
            s_tilde = gru_step(self.gru1, gi1[:, t], s)
            c = self._attend(s_tilde, keys, states, bias)
            extra = None if step is None else step(StepInputs(s, s_tilde, c, emb[:, t], hook.rows))
            s = self._gru2(c, s_tilde, extra)
            ss.append(s)
            cs.append(c)
            if extra is not None and extra.readout is not None:
                rs.append(extra.readout)
        return torch.stack(ss, 1), torch.stack(cs, 1), emb, torch.stack(rs, 1) if rs else None

    def output_logits(self, hidden: Tensor, vocab: Tensor | None = None) -> Tensor:
        """hidden: (…, E) readouts → W_out dropout(o) + b_out, unnormalised scores (…, V), or
        (…, C) for the target ids ``vocab`` (C,) only (``layers.output.project``)."""
        return project(self.out_proj, self.drop(hidden), vocab)

    def decode_step_hidden(self, state: DecoderState, prev_tokens: Tensor) -> tuple[Tensor, DecoderState]:
        """One step. prev_tokens: (B,) → (readout o_t (B, E), state); updates ``state`` in place
        (s_t, ``step``); applies ``state.hook``'s step and readout state."""
        emb = self._prev_embed(prev_tokens[:, None], first=state.step == 0)[:, 0]   # (B, E)
        s_tilde = self.gru1(emb, state.s)
        c = self._attend(s_tilde, state.keys, state.states, state.score_bias)
        hook = state.hook
        extra = None if hook is None or hook.step is None else hook.step(StepInputs(state.s, s_tilde, c, emb, hook.rows))
        state.s = self._gru2(c, s_tilde, extra)
        state.step += 1
        s_read = state.s
        if hook is not None and hook.readout_state is not None:
            s_read = hook.readout_state(state.s[:, None], c[:, None], hook.rows)[:, 0]
        return self._readout(s_read, c, emb, None if extra is None else extra.readout), state

    # -- the model contract ------------------------------------------------------------------
    def decode_train(self, enc: EncoderOutput, tgt_in: Tensor, select: Tensor | None = None,
                     hook: DecoderHook | None = None) -> Tensor:
        """Teacher forcing. tgt_in: (B, T) → logits (B, T, V), or (N, V) at the positions where
        ``select`` (B, T) is True (the output layer runs only there); ``hook``: a context
        model's ``DecoderHook`` for the B rows."""
        hidden = self.decode_hidden(enc, tgt_in, hook)
        return self.output_logits(hidden if select is None else hidden[select])

    def init_state(self, enc: EncoderOutput, hook: DecoderHook | None = None) -> DecoderState:
        """s_0, the attention keys U_a h_i (computed once here) and the padding bias.
        enc.states: (B, S, 2H); ``hook`` (B rows) is kept in the state."""
        states = enc.states
        s0 = self._init_s(states, enc.src_pad_mask, None if hook is None else hook.s0)
        return DecoderState(s0, self.attn_key(states), states, self._score_bias(enc.src_pad_mask, states.dtype), 0,
                            hook, torch.arange(states.size(0), device=states.device))

    def decode_step(self, state: DecoderState, prev_tokens: Tensor,
                    vocab: Tensor | None = None) -> tuple[Tensor, DecoderState]:
        """One step. prev_tokens: (B,) last emitted ids (``<s>`` first) → (log-probs (B, V)
        float32, or (B, C) normalised over the target ids ``vocab`` (C,), state); updates
        ``state`` in place."""
        hidden, state = self.decode_step_hidden(state, prev_tokens)
        return F.log_softmax(self.output_logits(hidden, vocab).float(), dim=-1), state
