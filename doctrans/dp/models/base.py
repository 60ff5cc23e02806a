"""The interface every DP generator model implements (``DP_MODELS`` in ``__init__``).

``doctrans.dp.generator`` (inference) and ``doctrans.dp.train`` (the epoch loop) talk to a model
only through ``DPModel``; they never name one. A model is a small adapter around its
``torch.nn.Module`` network(s): it builds them from its config section, turns a batch of
``DPSentence`` into per-position probabilities (``batch_probs``) or into a training loss
(``batch_loss``), may run a pre-stage before the epochs (``prepare``) and may keep extra,
non-tensor checkpoint state (``extra_state``, e.g. a feature vocabulary).

Positions of a sentence: its S tokens and a final ``</s>``; label column 0 is ``N`` (no DP).
"""
from __future__ import annotations

import random
from collections.abc import Callable, Sequence

import numpy as np
import torch

from doctrans.config import TrainConfig
from doctrans.data.vocab import Vocab
from doctrans.dp.data import DPSentence, encode, pad


class DPModel:
    """Base class of the per-model adapters.

    ``__init__(cfg, vocab, labels, extra)``: build the networks; ``extra`` is a checkpoint's
    ``extra_state()`` (None for a fresh model, see ``build``). ``modules`` maps checkpoint names
    to networks; ``network`` is the one the epoch loop optimises.
    """

    name = ""

    def __init__(self, cfg, vocab: Vocab, labels: list[str], extra: dict | None = None):
        self.cfg, self.vocab, self.labels = cfg, vocab, labels
        self.lab_id = {l: i for i, l in enumerate(labels)}
        self.modules: dict[str, torch.nn.Module] = {}
        self.network: torch.nn.Module | None = None

    @classmethod
    def build(cls, cfg, vocab: Vocab, labels: list[str], train_sents: Sequence[DPSentence]) -> "DPModel":
        """A fresh model for training; ``train_sents`` may supply extra state (default: none)."""
        return cls(cfg, vocab, labels)

    # --- inference ----------------------------------------------------------------------------

    def batch_probs(self, sents: Sequence[DPSentence], idx: list[int]) -> list[np.ndarray]:
        """Per sentence ``sents[k]``, k in ``idx``: probabilities (S_k + 1, L) over ``labels``
        (column 0 = P(N)), rows summing to 1. Called under ``torch.no_grad`` in eval mode."""
        raise NotImplementedError

    # --- training -----------------------------------------------------------------------------

    def prepare(self, train: Sequence[DPSentence], dev: Sequence[DPSentence], train_cfg: TrainConfig,
                log: Callable[[dict], None]) -> None:
        """A pre-stage before the epochs (run once per run, not repeated on resume); ``log``
        writes one metrics record. Default: nothing."""

    def batch_loss(self, sents: Sequence[DPSentence], idx: list[int], rng: random.Random
                   ) -> tuple[torch.Tensor, int]:
        """Training loss of the batch ``idx`` of ``sents``: (summed cross-entropy in nats, a
        0-dim tensor with a graph; the number of targets it sums over). ``rng`` drives any
        per-batch sampling (it is the epoch's batching RNG, so runs are reproducible)."""
        raise NotImplementedError

    # --- state --------------------------------------------------------------------------------

    def extra_state(self) -> dict:
        """Primitive-typed state a checkpoint needs besides the weights (default: none)."""
        return {}

    def state_dict(self) -> dict:
        """The weights of every network as one ``nn.ModuleDict(self.modules)`` state dict
        (keys ``<module name>.<parameter>``): the format the training loop saves."""
        return torch.nn.ModuleDict(self.modules).state_dict()

    def load_state_dict(self, state: dict) -> None:
        torch.nn.ModuleDict(self.modules).load_state_dict(state)

    def train(self, mode: bool = True) -> None:
        for m in self.modules.values():
            m.train(mode)

    def n_parameters(self) -> int:
        return sum(p.numel() for m in self.modules.values() for p in m.parameters())

    # --- helpers for subclasses ---------------------------------------------------------------

    def tokens(self, rows: Sequence[Sequence[str]]) -> torch.Tensor:
        """(B, T) ids of token lists, each followed by ``</s>``, padded with the pad id."""
        return pad([encode(self.vocab, t) for t in rows], self.vocab.pad_id)

    def gold(self, labels: Sequence[Sequence[str]]) -> list[list[int]]:
        """Label ids per position (an unknown label counts as ``N``)."""
        return [[self.lab_id.get(l, 0) for l in lab] for lab in labels]
