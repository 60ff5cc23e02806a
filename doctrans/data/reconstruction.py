"""Training data of the reconstructor models (docs/models.md §2.9–2.10): the reconstruction target
x̂ and the DP labels, line-aligned with a split, from the ``annotate-dp`` output.

Files (``DP_DIR`` = ``data.rec_dir``, default ``PREPARED/dp``):

* target ``dp``: ``DP_DIR/{split}.dp.{src_suffix}`` (x̂ with the dropped pronouns inserted);
  ``dpp``: ``DP_DIR/{split}.dpp.{src_suffix}`` (``#DP#`` placeholders); ``original``: the source
  file itself (the end-to-end labeler reconstructs x, §2.11).
* DP labels: ``DP_DIR/{split}.dplabel``, one label per *word* of ``{split}.tok.zh`` plus one
  for ``</s>`` (the pronoun dropped immediately before it, or ``N``).

``dp_label_ids`` moves the word labels onto the BPE tokens of the reconstruction target, as the
model contract's ``ReconstructionSpec.target`` places them (``predict_dps``): target ``original``
(the end-to-end labeler, §2.11) labels the first BPE piece of each word and ``</s>`` (the others
0); target ``dpp`` (the DP predictor, §2.10) labels each ``#DP#`` with the label of the word it precedes
(the ``</s>`` slot for a sentence-final one; a second ``#DP#`` before the same word gets 0:
"keep the first", docs/models.md §5 A20), every other position 0.
"""
from __future__ import annotations

import logging
from pathlib import Path

import numpy as np

from doctrans.data.vocab import Vocab
from doctrans.utils.io import read_lines

log = logging.getLogger(__name__)

NO_DP_LABEL = "N"               # the annotation's "no pronoun dropped here" (dp/annotate.py)
PLACEHOLDER = "#DP#"
REC_TARGETS = ("dp", "dpp", "original")
LABELLED_TARGETS = ("original", "dpp")   # targets DP labels can be placed on (dp_label_ids)


def rec_target_path(target: str, split: str, rec_dir: Path, src_dir: Path, src_suffix: str) -> Path:
    """The file of the reconstruction target ``target`` (``REC_TARGETS``) of ``split``. Raises
    ValueError for an unknown target."""
    if target not in REC_TARGETS:
        raise ValueError(f"unknown reconstruction target {target!r} (known: {', '.join(REC_TARGETS)})")
    if target == "original":
        return Path(src_dir) / f"{split}.{src_suffix}"
    return Path(rec_dir) / f"{split}.{target}.{src_suffix}"


def dp_label_ids(bpe_line: str, label_line: str, labels: dict[str, int], target: str,
                 where: str = "<labels>") -> tuple[np.ndarray, int]:
    """The DP label id of every token of ``bpe_line`` and of its ``</s>`` → ((n + 1,) int64, number
    of labels not in ``labels`` (mapped to 0)). ``label_line``: word labels (``N`` or a pronoun),
    one per word of the line (BPE pieces joined at ``@@``; ``#DP#`` is not a word) plus ``</s>``;
    ``labels``: label string → id (``N`` → 0 implied); ``target``: the reconstruction target the
    labels sit on, ``original`` | ``dpp`` (``LABELLED_TARGETS``, see the module docstring). Raises
    ValueError naming ``where`` when the counts differ, or for another target."""
    if target not in LABELLED_TARGETS:
        raise ValueError(f"DP labels cannot be placed on reconstruction target {target!r} "
                         f"({' | '.join(LABELLED_TARGETS)})")
    at_words = target == "original"
    toks, word_labels = bpe_line.split(), label_line.split()
    out = np.zeros(len(toks) + 1, dtype=np.int64)
    unknown = 0

    def lab(k: int) -> int:
        nonlocal unknown
        s = word_labels[k]
        if s == NO_DP_LABEL:
            return 0
        if s not in labels:
            unknown += 1
            return 0
        return labels[s]

    words, used, cont = 0, set(), False
    n_words = sum(1 for i, t in enumerate(toks) if t != PLACEHOLDER and not (i and toks[i - 1].endswith("@@")))
    if n_words + 1 != len(word_labels):
        raise ValueError(f"{where}: {len(word_labels)} labels for {n_words} words + </s> "
                         f"(the .dplabel file and the reconstruction target are not aligned)")
    for j, t in enumerate(toks):
        if t == PLACEHOLDER:
            if not at_words and words not in used:
                out[j] = lab(words)
                used.add(words)
            continue
        if not cont:
            if at_words:
                out[j] = lab(words)
            words += 1
        cont = t.endswith("@@")
    if at_words:
        out[-1] = lab(words)
    return out, unknown


def load_rec_lines(path: Path, vocab: Vocab, n_lines: int) -> tuple[list[str], list[np.ndarray]]:
    """Every line of ``path`` (text, and source-vocabulary ids ending in ``</s>``). Raises
    ValueError naming the file when it has another line count than ``n_lines``."""
    lines = read_lines(path)
    if len(lines) != n_lines:
        raise ValueError(f"{path} has {len(lines)} lines, the split's source has {n_lines}")
    return lines, [vocab.encode(s) for s in lines]


def load_dp_labels(label_path: Path, rec_lines: list[str], labels: list[str], target: str) -> list[np.ndarray]:
    """Label ids per line (``dp_label_ids`` of each line of ``label_path`` against ``rec_lines``);
    ``labels``: the model's ``dp_labels`` (index 0 = NONE). Raises ValueError naming the file
    and line on a line-count or word-count mismatch."""
    label_lines = read_lines(label_path)
    if len(label_lines) != len(rec_lines):
        raise ValueError(f"{label_path} has {len(label_lines)} lines, the reconstruction target has {len(rec_lines)}")
    index = {s: k for k, s in enumerate(labels) if k}
    out, unknown = [], 0
    for k, (x, y) in enumerate(zip(rec_lines, label_lines)):
        ids, u = dp_label_ids(x, y, index, target, f"{label_path}:{k + 1}")
        out.append(ids)
        unknown += u
    if unknown:
        log.warning("%s: %d DP labels outside the model's dp_vocab were mapped to NONE", label_path, unknown)
    return out
