"""Attention supervision toward the deciding context (issue 52; Yin et al. 2021, "Do Context-Aware
Translation Models Pay the Right Attention?", ACL, §5: attention regularisation toward the context
words humans marked as supporting): ``train.context_attention_supervision: λ``.

**Marks** (``supervision_table``, from ``doctrans annotate-dp``'s alignment instead of human
marks): a training pair's English pronoun that the alignment leaves dropped in the Chinese
(``evaluation.context_needed.dropped_pronouns``) and whose class a he/she/they of a previous
English line decides (the ``agreement_en`` rule, within ``max_distance`` lines) is a query; the
deciding English pronouns of that line are its keys. Positions are BPE units (a word's first
unit). [I: only the target-side rule gives a target token to point at; the source-side rules
(a 他/她 antecedent, the reply flip) would need a head over the source context.]

**Loss** (``attention_supervision_loss``): for each mark, −log of the attention mass the model's
supervised head (``Seq2SeqModel.context_attention``: e.g. the target-side concatenation model's
decoder self-attention over its target prefix) puts, at the position that predicts the pronoun,
on the deciding tokens; averaged over the batch's marks, × λ, added to the training loss
(reported as ``attn_sup``) [I: Yin et al. compare the attention with the marks; the log of the
mass on the marked tokens is their regulariser for a one-hot or uniform-over-marks target up to a
constant].
"""
from __future__ import annotations

import logging
from pathlib import Path

import numpy as np
import torch
from torch import Tensor

from doctrans.utils.io import read_lines

log = logging.getLogger(__name__)

EPS = 1e-9

Mark = tuple[int, int, int]        # (query BPE index in the line's target, distance d, key BPE index in line − d)


def word_starts(bpe_line: str) -> list[int]:
    """The BPE index of each word's first unit (``@@``-joined units are one word)."""
    starts, new = [], True
    for i, tok in enumerate(bpe_line.split()):
        if new:
            starts.append(i)
        new = not tok.endswith("@@")
    return starts


def line_marks(seg: list[str], ref: list[str], doc_ids: list[str], align: list[str], bpe: list[str], line: int,
               max_distance: int = 1) -> list[Mark]:
    """The marks of one line (module doc), in BPE positions; [] when none or when a line's BPE
    does not have the tokenized line's words."""
    from doctrans.evaluation.context_needed import deciding_context, dropped_pronouns
    from doctrans.evaluation.contrastive import english_class
    from doctrans.dp.pronouns import ENGLISH_PRONOUNS

    toks = ref[line].split()
    marks = []
    for j in dropped_pronouns(seg[line], ref[line], align[line]):
        cls = english_class(toks[j])
        d = deciding_context(seg, ref, doc_ids, line, cls, max_distance).get("agreement_en")
        if d is None:
            continue
        prev = ref[line - d].split()
        here, there = word_starts(bpe[line]), word_starts(bpe[line - d])
        if len(here) != len(toks) or len(there) != len(prev):
            continue
        marks += [(here[j], d, there[k]) for k, w in enumerate(prev)
                  if w in ENGLISH_PRONOUNS and english_class(w) == cls]
    return marks


def supervision_table(prepared: Path, dp_dir: Path | None = None, split: str = "train", max_distance: int = 1
                      ) -> dict[int, list[Mark]]:
    """line → its marks, for a prepared split (``{split}.tok.zh/.tok.en/.bpe.en/.docs``) and its
    annotate-dp alignment (``DP_DIR/{split}.align``, default ``PREPARED/dp``). Raises
    FileNotFoundError naming a missing file."""
    from doctrans.data.documents import read_doc_positions

    prepared = Path(prepared)
    dp_dir = Path(dp_dir) if dp_dir else prepared / "dp"
    paths = {k: prepared / f"{split}.{k}" for k in ("tok.zh", "tok.en", "bpe.en", "docs")}
    paths["align"] = dp_dir / f"{split}.align"
    for p in paths.values():
        if not p.is_file():
            raise FileNotFoundError(f"{p} not found: train.context_attention_supervision needs a prepared corpus "
                                    f"and its DP annotation's alignment (doctrans annotate-dp {prepared})")
    seg, ref, bpe, align = (read_lines(paths[k]) for k in ("tok.zh", "tok.en", "bpe.en", "align"))
    names, doc, _ = read_doc_positions(paths["docs"], len(seg))
    doc_ids = [names[d] for d in doc]
    table = {}
    for i in range(len(seg)):
        marks = line_marks(seg, ref, doc_ids, align, bpe, i, max_distance)
        if marks:
            table[i] = marks
    return table


def batch_targets(batch, table: dict[int, list[Mark]], context_sents: int) -> Tensor:
    """The marks of a document batch's target rows as (M, 4) long: (target row, query position in
    its ``tgt_in``, context row, key position in that row's ``tgt_in``) — a BPE index i is
    position i of the row's ``tgt_in`` as a query (it predicts unit i) and i + 1 as a key (after
    ``<s>``). Marks whose line d back is not the row's ``ctx`` column N − d (context dropped, or
    out of the batch) are left out."""
    index = np.asarray(batch.index)
    ctx = batch.ctx.cpu().numpy()
    is_target = batch.is_target.cpu().numpy()
    t_len = batch.tgt_in.ne(0).sum(1).cpu().numpy()
    out = []
    for r in np.flatnonzero(is_target):
        for q, d, k in table.get(int(index[r]), ()):
            if d > context_sents:
                continue
            c = int(ctx[r, context_sents - d])
            if c >= 0 and int(index[c]) == int(index[r]) - d and q < t_len[r] and k + 1 < t_len[c]:
                out.append((int(r), q, c, k + 1))
    return torch.tensor(out, dtype=torch.long).view(-1, 4)


def attention_supervision_loss(att, targets: Tensor, target_rows: Tensor) -> Tensor:
    """Mean over the marks ``targets`` (M, 4) (``batch_targets``) of −log(Σ attention weight on
    the mark's key tokens + ε) at its query position. att: ``ContextAttention`` of the target
    rows ``target_rows`` (B',) (batch row of each of its rows, in order). Returns a scalar (0 with
    gradients when M = 0)."""
    if targets.numel() == 0:
        return att.weights.sum() * 0.0
    dev = att.weights.device
    targets = targets.to(dev)
    pos = torch.full((int(target_rows.max()) + 1,), -1, dtype=torch.long, device=dev)
    pos[target_rows.to(dev)] = torch.arange(target_rows.numel(), device=dev)
    b = pos[targets[:, 0]]
    w = att.weights[b, targets[:, 1]]                                           # (M, K)
    hit = att.key_row[b].eq(targets[:, 2:3]) & att.key_pos[b].eq(targets[:, 3:4])
    return -(w * hit).sum(1).clamp_min(0.0).add(EPS).log().mean()
