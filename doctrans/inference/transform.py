"""Input transforms: what turns a source line into the weighted source variants the decoder
reads (e.g. DP completion with a generator, ``doctrans/dp/apply.py``).

Inference owns this interface and never names an implementation: the caller (the CLI, an
experiment table, a Python user) builds the ``InputSetup`` and gives it to the ``Translator``.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable


@runtime_checkable
class InputTransform(Protocol):
    """Tokenized source lines → per line its variants [(tokenized string, weight)], the weights
    summing to 1, the 1-best first; no variants for a ``None`` line (not translated).

    ``combine`` says how the translator decodes them: ``1best`` the first variant only,
    ``mixture`` all in one beam (log Σ w p), ``max`` each alone and the best-scoring kept.
    ``protect``: tokens BPE must keep whole in the variants."""

    combine: str
    protect: frozenset[str]

    def __call__(self, tok_lines: Sequence[str | None]) -> list[list[tuple[str, float]]]:
        ...


@dataclass(frozen=True)
class InputSetup:
    """What a ``Translator`` is given for its input besides its ``TranslateConfig``.

    transform: the input transform the config asks for (``TranslateConfig.dp_generator`` needs
    one), or None; protect: the tokens BPE keeps whole in ``tok`` input when the checkpoint was
    trained that way (``data.bpe_protect_dp``)."""

    transform: InputTransform | None = None
    protect: frozenset[str] = frozenset()
