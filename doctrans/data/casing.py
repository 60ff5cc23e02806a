"""Restoring case in the output of a model trained on lowercased text (recasing).

doctrans lowercases both sides by default (the thesis setting: TVsub's references are lowercase
and BLEU is case-insensitive), so a model writes ``i don 't know , ross .``. A user reading the
translation expects ``I don't know, Ross.``. ``Recaser`` restores it the way Moses does, with
sacremoses' implementation of Moses' truecaser (``scripts/recaser/train-truecaser.perl``,
``truecase.perl``, ``detruecase.perl``):

1. **learn** (``Recaser.learn``), from cased, Moses-tokenized training targets: for every word,
   how often each spelling occurs where case carries information (not sentence-initially;
   ``MosesTruecaser.learn_truecase_weights``); a word's best spelling is its most frequent one.
   Only words whose best spelling is not all lowercase are kept (``I``, ``I'm``, ``Ross``,
   ``Mr.``, ``McVeigh``), and only those seen ``min_count`` times or more.
2. **recase** (``Recaser.recase``), on tokenized output lines: each word takes its best spelling
   (``MosesTruecaser.truecase``), then the first word of each sentence in the line is
   capitalized (``MosesDetruecaser.detruecase``: after ``.``, ``?``, ``!``, ``:``).

On TVsub's test reference 1 (mixed case), lowercased and recased by a recaser learnt from 300
training episodes: 97.3% of tokens get their reference case (86% of those with a capital).
Case-insensitive scores (``doctrans score``, BLEU in the thesis setting) do not change.

The learnt table is plain data (``to_dict``/``from_dict``: ``{"version", "lang", "lines",
"min_count", "best": {lowercase: spelling}}``); ``doctrans preprocess`` writes it as
``recaser.en.json`` and a checkpoint carries it in its text settings (``data/text.py``).
"""
from __future__ import annotations

import functools
import json
from collections import Counter, defaultdict
from pathlib import Path
from typing import Iterable

VERSION = 1


@functools.lru_cache(maxsize=1)
def _moses():
    from sacremoses import MosesDetruecaser, MosesTruecaser

    return MosesTruecaser, MosesDetruecaser()


class Recaser:
    """A word → best spelling table and the Moses recasing steps over it.

    ``best`` maps lowercase words to their most frequent cased spelling (only words whose best
    spelling has a capital); ``lines``: how many training lines it was learnt from.
    """

    def __init__(self, best: dict[str, str], lang: str = "en", lines: int = 0, min_count: int = 1):
        self.best = dict(best)
        self.lang = lang
        self.lines = lines
        self.min_count = min_count
        truecaser_cls, self._detruecaser = _moses()
        self._truecaser = truecaser_cls()
        # sacremoses' truecase() reads only ``model["best"]`` when use_known=False
        self._truecaser.model = {"best": self.best, "known": Counter()}

    @classmethod
    def learn(cls, tok_lines: Iterable[str], lang: str = "en", min_count: int = 2) -> Recaser:
        """Learn from cased, Moses-tokenized lines (one sentence or more per line). A word is
        kept when its best spelling is not all lowercase and it was seen (in positions that
        count, i.e. not sentence-initially) at least ``min_count`` times. Raises ValueError for
        ``min_count`` < 1."""
        if min_count < 1:
            raise ValueError(f"min_count must be >= 1, got {min_count}")
        truecaser_cls, _ = _moses()
        learner = truecaser_cls()
        casing: dict[str, Counter] = defaultdict(Counter)
        n = 0
        for line in tok_lines:
            n += 1
            for low, surface, weight in learner.learn_truecase_weights(line.split()):
                casing[low][surface] += weight
        best = {}
        for low, spellings in casing.items():
            form, _ = spellings.most_common(1)[0]
            if form != low and sum(spellings.values()) >= min_count:
                best[low] = form
        return cls(best, lang, n, min_count)

    def recase(self, tok_lines: Iterable[str]) -> list[str]:
        """Tokenized lines (as the model writes them, lowercase) → the same tokens recased: each
        word in its best spelling, each sentence's first word capitalized. Tokens and their
        count never change, only their case."""
        out = []
        for line in tok_lines:
            if not line.strip():
                out.append(line)
                continue
            words = self._truecaser.truecase(line, return_str=True)
            out.append(self._detruecaser.detruecase(words, return_str=True))
        return out

    def to_dict(self) -> dict:
        """Primitive types only (for JSON and checkpoints)."""
        return {"version": VERSION, "lang": self.lang, "lines": self.lines, "min_count": self.min_count,
                "best": dict(sorted(self.best.items()))}

    @classmethod
    def from_dict(cls, d: dict, where: str = "<recaser>") -> Recaser:
        """The recaser ``to_dict`` describes. Raises ValueError naming ``where`` for a table of a
        newer doctrans or without ``best``."""
        if not isinstance(d, dict) or not isinstance(d.get("best"), dict):
            raise ValueError(f"{where}: not a recaser table (no 'best' mapping)")
        if d.get("version", 0) > VERSION:
            raise ValueError(f"{where}: recaser version {d.get('version')} is newer than this doctrans reads "
                             f"({VERSION}): upgrade doctrans")
        return cls(d["best"], d.get("lang", "en"), int(d.get("lines", 0)), int(d.get("min_count", 1)))

    @classmethod
    def load(cls, path) -> Recaser:
        """Read a table ``to_dict`` wrote as JSON. Raises FileNotFoundError, ValueError naming the file."""
        try:
            d = json.loads(Path(path).read_text(encoding="utf-8"))
        except json.JSONDecodeError as e:
            raise ValueError(f"{path}: not JSON ({e})") from None
        return cls.from_dict(d, str(path))

    def __len__(self) -> int:
        return len(self.best)

    def __repr__(self) -> str:
        return f"Recaser(lang={self.lang!r}, words={len(self.best)}, lines={self.lines})"
