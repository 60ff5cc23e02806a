"""Inter-sentence gate, NMT_ISG (Kuang & Xiong 2018, S3, §4; docs/models.md §2.4) on the RNNSearch backbone.

A = the previous source sentence X_{m-1} (N = 1), B = the current sentence x, both read by the
backbone's own encoder and embeddings [P]; a second attention network ATT_a, with its own
parameters, is queried by the same s̃_t as the backbone's ATT_b::

    h^a   = Enc(A)  (B, L, 2H) ;  h^b = Enc(x)  (B, S, 2H)
    c^b_t = ATT_b(s̃_t, h^b) = the backbone's c_t                                  (B, 2H)
    c^a_t = ATT_a(s̃_t, h^a)                                                       (B, 2H)
    z_t   = σ(U_z s_{t-1} + W_z E[y_{t-1}] + C_b c^b_t + C_a c^a_t + b_z)   [S3 eq. 9]
    s_t   = GRU_2(s̃_t, [z_t ⊙ c^a_t ; (1 − z_t) ⊙ c^b_t])                [S3 eq. 10; I]
    o_t   = tanh(W_o s_t + C_o c^b_t + V_o E[y_{t-1}] + b_o)   only c^b_t  [S3 eq. 11]

GRU_2's input matrices are C_1 (new, on the gated c^a_t) and C_2 = the backbone's W_ih (on the
gated c^b_t), so GRU_2's input projection is *replaced* (``StepExtra.gru2_input``), not added to:
``gate_on: context`` [I, S3 Fig. 2]: z_t ∈ R^{2H} gates the context vectors before projection,
W_ih((1 − z_t) ⊙ c^b_t) + C_1(z_t ⊙ c^a_t); ``projected``: z_t ∈ R^H gates each of the r, u, n
blocks after projection, (1 − z̄_t) ⊙ W_ih c^b_t + z̄_t ⊙ C_1 c^a_t, z̄_t = [z_t; z_t; z_t]
(docs/models.md §2.4, §5 A14). With z_t = 0 both are exactly the backbone.

Empty context [P]: a document's first sentence reads A = (eos, eos, eos), encoded normally.
Test-time ablations of S3 Table 1 (``test_ablation``; ``doctrans translate --context-option
test_ablation=…`` sets them on a trained checkpoint): ``null`` (+NULL) every A := eos³; ``zero``
(+z=0) z_t = 0, i.e. the backbone's GRU_2 input W_ih c^b_t; ``random`` (+RV) c^a_t := a vector
drawn from U(−1, 1), in the gate and GRU_2 [I: one vector per row and sentence, constant over t,
drawn from a generator seeded with ``random_seed`` at every ``encode``, so a call is
deterministic and beam hypotheses of a row share it].

Tuple filtering [P S3 footnote 1] (``context_filter``, applied by the training data path to the
train split): a tuple (x, A, y) is no training target if any of x, A, y has more than
``max_len`` tokens, or, when A exists, max(|x|, |A|) / min(|x|, |A|) > ``max_len_ratio``
[I: the threshold is not given; a document start's eos³ is not compared]. The sentence stays in
the data as the context of the next one.

Init [P]: ``train.init_from`` an RNNSearch checkpoint loads every backbone parameter; the gate
parts (U_z, W_z, C_b, C_a, b_z: ``gate``; ATT_a; C_1) are this module's and start fresh; nothing
frozen [I]. The previous sentences are rows of the batch (``batch.ctx``): every row the batch
needs (the targets and their A) is encoded once, in length buckets, and ATT_a's keys of each A
are projected once per batch.

Shape legend: B rows, S source length, L length of A, H GRU size, E embedding size.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor, nn

from doctrans.layers.init import init_rnn_weights
from doctrans.models.context.base import HookedRNNContext, context_rows
from doctrans.models.interface import EncoderOutput, SearchBatch
from doctrans.models.rnn_hooks import DecoderHook, RNNParts, StepExtra, StepInputs
from doctrans.models.rows import encode_bucketed, scatter_rows

GATE_ON = ("context", "projected")
EMPTY_CONTEXTS = ("eos3",)
ABLATIONS = ("none", "null", "zero", "random")
EOS3 = (2, 2, 2)                # (eos, eos, eos): A of a document's first sentence [P]


@dataclass(frozen=True)
class ISGConfig:
    type: str = "isg"                   # the row of models/build.py:CONTEXT_MODELS
    context_sents: int = 1              # N: A = the previous source sentence only [P]
    gate_on: str = "context"            # z ∈ R^2H on c^a, c^b | "projected": z ∈ R^H on W c (A14)
    empty_context: str = "eos3"         # A of a document start: (eos, eos, eos) [P]
    test_ablation: str = "none"         # none | null (A := eos³) | zero (z = 0) | random (c^a ~ U(−1, 1))
    random_seed: int = 0                # the generator of test_ablation: random
    max_len: int = 50                   # training tuples with x, A or y longer are dropped [P]; 0 = off
    max_len_ratio: float = 3.0          # … or with max(|x|,|A|)/min(|x|,|A|) above this [I]; 0 = off


class InterSentenceGate(HookedRNNContext):
    """NMT_ISG: the previous sentence's attention context c^a_t and the current one's c^b_t,
    gated by z_t into GRU_2 of an RNNSearch backbone (``models.rnn_hooks.RNNParts``; module doc)."""

    empty_context = "the previous sentence read as (eos, eos, eos) (docs/models.md §2.4)"

    def __init__(self, backbone, cfg: ISGConfig):
        super().__init__(backbone, cfg.context_sents)
        if not isinstance(backbone, RNNParts):
            raise ValueError(f"context type 'isg' needs an RNN backbone (rnnsearch), got {type(backbone).__name__}")
        if cfg.context_sents != 1:
            raise ValueError(f"context.context_sents of isg is 1 (the previous sentence), got {cfg.context_sents}")
        for name, value, allowed in (("gate_on", cfg.gate_on, GATE_ON), ("empty_context", cfg.empty_context,
                                     EMPTY_CONTEXTS), ("test_ablation", cfg.test_ablation, ABLATIONS)):
            if value not in allowed:
                hint = " (YAML reads a bare null as None: write 'null')" if value is None else ""
                raise ValueError(f"context.{name} must be one of {allowed}, got {value!r}{hint}")
        if cfg.max_len < 0 or cfg.max_len_ratio < 0:
            raise ValueError(f"context.max_len and max_len_ratio must be ≥ 0, got {cfg.max_len}, {cfg.max_len_ratio}")
        self.cfg = cfg
        e, h = backbone.emb_size, backbone.rnn_size
        self.att_a_query = nn.Linear(h, h)                                         # ATT_a: W, b
        self.att_a_key = nn.Linear(2 * h, h, bias=False)                           # U
        self.att_a_v = nn.Linear(h, 1, bias=False)                                 # v
        self.gate = nn.Linear(h + e + 2 * h + 2 * h, 2 * h if cfg.gate_on == "context" else h)   # U_z W_z C_b C_a, b_z
        self.ctx_gru2 = nn.Linear(2 * h, 3 * h, bias=False)                        # C_1 (GRU_2 input of c^a)
        init_rnn_weights(((n, p) for n, p in self.named_parameters() if not n.startswith("backbone.")), self.pad_id)

    # -- the data path's tuple filter --------------------------------------------------------------
    def context_filter(self, src_len: np.ndarray, tgt_len: np.ndarray, ctx_len: np.ndarray) -> dict[str, np.ndarray]:
        """S3's training-tuple filter (module doc). src_len, tgt_len: (n,) tokens of x and y
        (``</s>`` not counted); ctx_len: (n, 1) tokens of A, −1 where A does not exist (eos³ is
        then used) → {rule: (n,) bool, True = drop the tuple}."""
        a = ctx_len[:, -1]
        has_a = a >= 0
        rules = {}
        if self.cfg.max_len:
            a_len = np.where(has_a, a, len(EOS3))
            rules["max_len"] = (src_len > self.cfg.max_len) | (tgt_len > self.cfg.max_len) | (a_len > self.cfg.max_len)
        if self.cfg.max_len_ratio:
            lo = np.maximum(np.minimum(src_len, a), 1)
            rules["len_ratio"] = has_a & (np.maximum(src_len, a) / lo > self.cfg.max_len_ratio)
        return rules

    # -- encoding ------------------------------------------------------------------------------------
    def _previous(self, batch, targets: Tensor) -> Tensor:
        """Each target row's batch row of A (B_t,), −1 where eos³ is read (document start, +NULL)."""
        prev = context_rows(batch, 1, batch.src.device)[:, 0].index_select(0, targets)
        return torch.full_like(prev, -1) if self.cfg.test_ablation == "null" else prev

    def _encode_rows(self, src: Tensor, rows: Tensor) -> EncoderOutput:
        """The backbone's annotations of rows ``rows`` (R,) of src (B, S) → (B, S, 2H), zeros and
        masked at the other rows (encoded in length buckets)."""
        parts = encode_bucketed(self.backbone, src, rows)
        if parts is None:
            parts = [(rows, self.backbone.encode(SearchBatch(src.index_select(0, rows))))]
        return scatter_rows(parts, src.size(0), src.size(1))

    def _encode_cached(self, src: Tensor, rows: Tensor) -> EncoderOutput:
        """``_encode_rows`` through the inference cache: a sentence's annotations (keyed by its
        tokens) are computed once per collection — as the sentence to translate or as the A of
        the next one, whichever batch comes first — and reused by the other."""
        lengths = src.index_select(0, rows).ne(self.pad_id).sum(1).clamp(min=1)

        def compute(miss: list[int]) -> list[tuple[Tensor]]:
            r = rows[torch.tensor(miss, device=rows.device)]
            enc = self._encode_rows(src, r)
            return [(enc.states[i, :n],) for i, n in zip(r.tolist(), lengths[miss].tolist())]

        entries = self._cached_rows("isg_enc", self._row_keys(src.index_select(0, rows)), compute)
        states = entries[0][0].new_zeros((src.size(0), src.size(1), entries[0][0].size(-1)))
        mask = torch.ones(src.shape, dtype=torch.bool, device=src.device)
        for r, (e,) in zip(rows.tolist(), entries):
            states[r, :e.size(0)] = e
            mask[r, :e.size(0)] = False
        return EncoderOutput(states, mask)

    def _context_table(self, enc: EncoderOutput, needed: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """h^a of the R rows ``needed`` (R,) of ``enc`` plus the eos³ row R → states (R+1, L, 2H),
        ATT_a keys U h^a (R+1, L, H), score bias (R+1, L), −inf at padding."""
        eos = self.backbone.encode(SearchBatch(enc.states.new_tensor(EOS3, dtype=torch.long)[None]))
        a_pad = enc.src_pad_mask.index_select(0, needed)                            # (R, S)
        width = max(int((~a_pad).sum(1).max()) if needed.numel() else 0, len(EOS3))
        grow = max(width - a_pad.size(1), 0)
        states = nn.functional.pad(enc.states.index_select(0, needed), (0, 0, 0, grow))[:, :width]
        pad = nn.functional.pad(a_pad, (0, grow), value=True)[:, :width]
        states = torch.cat([states, nn.functional.pad(eos.states, (0, 0, 0, width - len(EOS3)))])
        pad = torch.cat([pad, nn.functional.pad(eos.src_pad_mask, (0, width - len(EOS3)), value=True)])
        bias = states.new_zeros(pad.shape).masked_fill(pad, float("-inf"))
        return states, self.att_a_key(states), bias

    def encode(self, batch) -> EncoderOutput:
        """batch.src (B, S), ctx (B, 1), is_target (B,) → h^b: the target rows' annotations (B, S, 2H)
        (context-only rows: their own annotations, never decoded; other rows zeros), ``shared``
        isg_states / isg_keys / isg_bias (R+1, L, ·): h^a of the R sentences read as A and the
        eos³ row R, and ``extra`` isg_row (B,): each row's index into them (+ isg_rv (B, 2H),
        c^a of the ``random`` ablation). Within ``inference_cache`` every sentence's annotations
        are computed once per collection (``_encode_cached``)."""
        src = batch.src
        is_target = getattr(batch, "is_target", None)
        targets = (torch.arange(src.size(0), device=src.device) if is_target is None
                   else is_target.to(src.device).nonzero().squeeze(1))
        prev = self._previous(batch, targets)                                        # (B_t,)
        needed, slot = torch.unique(prev, return_inverse=True)
        keep = needed.ge(0)
        rows = torch.unique(torch.cat([targets, needed[keep]]))
        enc = self._encode_rows(src, rows) if self._active_caches() is None else self._encode_cached(src, rows)
        states, keys, bias = self._context_table(enc, needed[keep])
        remap = torch.cumsum(keep.long(), 0) - 1                                     # needed → row of the table
        remap = torch.where(keep, remap, torch.full_like(remap, states.size(0) - 1))  # missing → eos³
        row = torch.full((src.size(0),), states.size(0) - 1, dtype=torch.long, device=src.device)
        extra = {"isg_row": row.index_copy(0, targets, remap[slot])}
        if self.cfg.test_ablation == "random":
            gen = torch.Generator().manual_seed(self.cfg.random_seed)
            rv = torch.rand((src.size(0), states.size(-1)), generator=gen, dtype=torch.float64) * 2 - 1
            extra["isg_rv"] = rv.to(device=states.device, dtype=states.dtype)       # (B, 2H) ~ U(−1, 1)
        return EncoderOutput(enc.states, enc.src_pad_mask, extra,
                             {"isg_states": states, "isg_keys": keys, "isg_bias": bias})

    # -- decoding ------------------------------------------------------------------------------------
    def hook(self, enc: EncoderOutput) -> DecoderHook:
        """Each row's h^a, ATT_a keys and bias (B, L, ·) from ``enc.shared`` (and isg_rv)."""
        row = enc.extra["isg_row"]
        rows = {k: enc.shared[f"isg_{k}"].index_select(0, row) for k in ("states", "keys", "bias")}
        if "isg_rv" in enc.extra:
            rows["rv"] = enc.extra["isg_rv"]
        return DecoderHook(rows, None, self.step)

    def attend_previous(self, s_tilde: Tensor, rows: dict[str, Tensor]) -> Tensor:
        """c^a_t = ATT_a(s̃_t, h^a): s_tilde (B, H) → (B, 2H)."""
        q = self.att_a_query(s_tilde).unsqueeze(1)                                  # (B, 1, H)
        scores = self.att_a_v(torch.tanh(rows["keys"] + q)).squeeze(-1) + rows["bias"]      # (B, L)
        return torch.bmm(torch.softmax(scores, -1).unsqueeze(1), rows["states"]).squeeze(1)

    def gate_value(self, x: StepInputs, c_a: Tensor) -> Tensor:
        """z_t = σ(U_z s_{t-1} + W_z E[y_{t-1}] + C_b c^b_t + C_a c^a_t + b_z) [S3 eq. 9]:
        (B, 2H) with ``gate_on: context``, (B, H) with ``projected``."""
        return torch.sigmoid(self.gate(torch.cat([x.s_prev, x.emb, x.c, c_a], -1)))

    def step(self, x: StepInputs) -> StepExtra:
        """GRU_2's input projection from [z_t ⊙ c^a_t ; (1 − z_t) ⊙ c^b_t] (S3 eq. 10, module doc),
        c^b_t = x.c: ``StepExtra.gru2_input`` (B, 3H); the readout keeps c^b_t (eq. 11)."""
        c_b = x.c
        if self.cfg.test_ablation == "zero":                                        # z_t = 0
            return StepExtra(gru2_input=self.backbone.project_gru2_input(c_b))
        c_a = x.rows["rv"] if "rv" in x.rows else self.attend_previous(x.s_tilde, x.rows)
        z = self.gate_value(x, c_a)
        if self.cfg.gate_on == "context":
            gi = self.backbone.project_gru2_input((1 - z) * c_b) + self.ctx_gru2(z * c_a)
        else:
            z3 = z.repeat(1, 3)                                                     # (B, 3H)
            gi = (1 - z3) * self.backbone.project_gru2_input(c_b) + z3 * self.ctx_gru2(c_a)
        return StepExtra(gru2_input=gi)
