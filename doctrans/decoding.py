"""``DecodeConfig``: the beam search settings — the experiment config's ``decode:`` section (dev
BLEU during training) and the base of ``inference.config.SearchOptions`` (``doctrans translate``,
``serve``, the Python API) — each declared once with its default and help. A module of its own
(the config layer, below ``inference``), light enough for the command line to read without torch."""
from __future__ import annotations

from dataclasses import dataclass

from doctrans.utils.settings import setting


@dataclass(frozen=True)
class DecodeConfig:
    """The beam search settings (``decode:``; dev BLEU during training), declared once: the
    search options of ``doctrans translate`` / ``serve`` / the Python API extend them
    (``inference.config.SearchOptions``), and their options are made from these fields."""

    beam: int = setting(5, "Beam size (1 = greedy).", min=1)
    lenpen: float = setting(            # GNMT-style length penalty alpha; 0 = none
        1.0, "Length penalty: score = log p / length^lenpen (0 = none).", min=0)
    max_len_ratio: float = setting(     # max target length = ratio * source length + max_len_extra
        1.5, "Max output length = ratio × source length + --max-len-extra.", min=0, min_open=True)
    max_len_extra: int = setting(10, "Tokens an output may have beyond ratio × source length (0 = none; short "
                                     "sources need some).", min=0)
    batch_sentences: int = setting(64, "Sentences per beam-search batch.", min=1)
