"""The marks of attention supervision (issue 52; ``training/attention_supervision.py``): from
``doctrans annotate-dp``'s alignment, a training pair's English pronoun left dropped in the Chinese
(``dp.context_rules.dropped_pronouns``) whose class a he/she/they of a previous English line decides
(the ``agreement_en`` rule, within ``max_distance`` lines) is a query; the deciding English
pronouns of that line are its keys. Positions are BPE units (a word's first unit) [I: only the
target-side rule gives a target token to point at].
"""
from __future__ import annotations

from pathlib import Path

from doctrans.utils.io import read_lines

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
    from doctrans.dp.context_rules import deciding_context, dropped_pronouns, english_class
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
