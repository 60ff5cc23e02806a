"""A joint model's DP predictions as a DP-completed source (``translate --dp-out FILE``).

``model.predict_dps`` (docs/models.md §2.10–2.11, thesis ch. 6) gives one label per position of
the reconstruction target x̂ (BPE units, then ``</s>``), 0 = none, else an index into
``model.dp_labels``. ``completed_words`` turns them into the source words with the predicted
pronouns inserted — the format of ``annotate-dp apply --generator``'s ``OUT.dp.zh`` — so ``doctrans
score dp FILE --base SRC.tok.zh --oracle …`` scores a joint model against the hand oracle exactly
as it scores the external generator (thesis Table 6.6).

* target ``original`` (the end-to-end labeler §2.11): label j ≠ 0 = the pronoun is missing
  immediately before unit j (j = |x̂| − 1, the ``</s>`` slot: at the end). [Choice: a label on a
  unit inside a word (BPE continuation) puts the pronoun before that word: DPs sit between words.]
* target ``dpp`` (the joint predictor §2.10): x̂ holds ``#DP#`` placeholders; one labelled ≠ 0
  becomes that pronoun, one labelled 0 is dropped (not a DP); labels elsewhere are ignored.
"""
from __future__ import annotations

from collections.abc import Sequence

from doctrans.data.vocab import DP_PLACEHOLDER as DPP_TOKEN

BPE_CONT = "@@"


def completed_words(units: Sequence[str], labels: Sequence[int], dp_labels: Sequence[str], target: str) -> list[str]:
    """The DP-completed source words (module doc). units: x̂'s BPE units without ``</s>``;
    labels: one per unit plus one for ``</s>`` (longer: the rest, padding, is ignored).
    Raises ``ValueError`` for fewer labels than units + 1, a label outside ``dp_labels`` or an
    unknown ``target``."""
    if target not in ("original", "dpp"):
        raise ValueError(f"DP predictions need reconstruction target 'original' or 'dpp', got {target!r}")
    if len(labels) < len(units) + 1:
        raise ValueError(f"{len(labels)} DP labels for {len(units)} units + </s>")
    for lab in labels[:len(units) + 1]:
        if not 0 <= int(lab) < len(dp_labels):
            raise ValueError(f"DP label {int(lab)} outside the model's {len(dp_labels)} labels")
    words: list[str] = []
    current = ""                      # the word being assembled from BPE units
    pending: list[str] = []           # pronouns to insert before the word that starts next / is open
    for j, unit in enumerate(units):
        lab = int(labels[j])
        if target == "dpp" and unit == DPP_TOKEN and not current:
            if lab:
                words.append(dp_labels[lab])
            continue
        if target == "original" and lab:
            if current:               # inside a word: before that word
                pending.append(dp_labels[lab])
            else:
                words.append(dp_labels[lab])
        if unit.endswith(BPE_CONT):
            current += unit[:-len(BPE_CONT)]
            continue
        words.extend(pending)
        pending = []
        words.append(current + unit)
        current = ""
    if current:                        # a dangling continuation: keep what was there
        words.extend(pending)
        words.append(current)
    end = int(labels[len(units)])
    if target == "original" and end:
        words.append(dp_labels[end])
    return words
