"""Token ↔ id vocabularies. Ids 0–3 are the specials ``<pad> <s> </s> <unk>``."""
from __future__ import annotations

from pathlib import Path

import numpy as np

PAD, BOS, EOS, UNK = "<pad>", "<s>", "</s>", "<unk>"
SPECIALS = (PAD, BOS, EOS, UNK)
DP_PLACEHOLDER = "#DP#"   # x̂_DPP's dropped-pronoun position token (an ordinary source word, thesis #DP#)


class Vocab:
    """A fixed token list; ``pad_id=0, bos_id=1, eos_id=2, unk_id=3``."""

    pad_id, bos_id, eos_id, unk_id = 0, 1, 2, 3

    def __init__(self, tokens: list[str]):
        if tuple(tokens[:4]) != SPECIALS:
            raise ValueError(f"vocabulary must start with {SPECIALS}, got {tokens[:4]}")
        self.tokens = list(tokens)
        self.index = {t: i for i, t in enumerate(self.tokens)}
        if len(self.index) != len(self.tokens):
            raise ValueError("vocabulary has duplicate tokens")

    @classmethod
    def from_counts_file(cls, path: str | Path, min_freq: int = 1) -> "Vocab":
        """Read ``token<TAB>count`` lines (``doctrans preprocess`` output), most frequent first."""
        tokens = list(SPECIALS)
        with open(path, encoding="utf-8") as f:
            for lineno, line in enumerate(f, 1):
                parts = line.rstrip("\n").split("\t")
                if len(parts) != 2 or not parts[1].isdigit():
                    raise ValueError(f"{path}:{lineno}: expected 'token<TAB>count', got {line!r}")
                if int(parts[1]) >= min_freq and parts[0] not in SPECIALS:
                    tokens.append(parts[0])
        return cls(tokens)

    def __len__(self) -> int:
        return len(self.tokens)

    def encode(self, line: str, add_eos: bool = True) -> np.ndarray:
        """Whitespace-split ``line`` → int64 ids (unknown → ``<unk>``), plus ``</s>``."""
        ids = [self.index.get(t, self.unk_id) for t in line.split()]
        if add_eos:
            ids.append(self.eos_id)
        return np.asarray(ids, dtype=np.int64)

    def decode(self, ids, strip_specials: bool = True) -> str:
        """Ids → space-joined tokens, stopping at ``</s>``."""
        out = []
        for i in ids:
            i = int(i)
            if i == self.eos_id:
                break
            if strip_specials and i in (self.pad_id, self.bos_id):
                continue
            out.append(self.tokens[i])
        return " ".join(out)
