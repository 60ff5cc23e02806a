"""A trained DP generator: the bundle ``annotate-dp apply --generator`` and ``translate
--dp-generator`` load, its checkpoint, and the 1-best decision rule (thesis §4.3.2–4.3.3).

A generator gives, per sentence, probabilities (S + 1, L) over ``labels`` (column 0 = P(N), no
DP) at each token and a final ``</s>``. The 1-best decision inserts the most probable pronoun
where P(N) < τ (``threshold``, tuned on dev at training time). Model-specific work is done by
the ``DPModel`` adapter of ``DP_MODELS[cfg.model.name]``; this module names no model.

Checkpoint (``weights_only`` loadable: tensors and primitive types): ``kind: dp_generator``,
``config`` (the sectioned config, ``to_dict``), ``vocab``, ``labels``, ``model`` (the adapter's
``state_dict``), ``model_extra`` (its ``extra_state``), ``threshold``, plus the training loop's
``optimizer``, ``state`` and ``rng`` (``doctrans.training.trainer``).
"""
from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import torch

from doctrans.data.vocab import Vocab
from doctrans.dp.annotate import DPP_TOKEN, NO_DP_LABEL
from doctrans.dp.config import DPGenConfig, dp_config_from_dict
from doctrans.dp.data import DPSentence
from doctrans.dp.models import DP_MODELS
from doctrans.dp.models.base import DPModel
from doctrans.runtime.checkpoint import load_torch_file


def decide(probs: np.ndarray, labels: list[str], threshold: float) -> list[str]:
    """Per position: ``N`` if P(N) ≥ threshold, else the most probable pronoun. probs (T, L)."""
    best_dp = probs[:, 1:].argmax(1) + 1
    return [NO_DP_LABEL if probs[t, 0] >= threshold else labels[best_dp[t]] for t in range(len(probs))]


def one_best(tokens: Sequence[str], probs: np.ndarray, labels: Sequence[str], threshold: float
             ) -> tuple[list[str], list[str], list[int]]:
    """(DP tokens, DPP tokens, slot positions) of the 1-best decision (``decide``): the pronoun
    (DP) or ``#DP#`` (DPP) inserted before each slot. probs (S + 1, L)."""
    dp, dpp, slots = [], [], []
    best = probs[:, 1:].argmax(1) + 1
    for t in range(len(tokens) + 1):
        if probs[t, 0] < threshold:
            dp.append(labels[best[t]])
            dpp.append(DPP_TOKEN)
            slots.append(t)
        if t < len(tokens):
            dp.append(tokens[t])
            dpp.append(tokens[t])
    return dp, dpp, slots


def build_model(cfg: DPGenConfig, vocab: Vocab, labels: list[str], train_sents: Sequence[DPSentence]) -> DPModel:
    """A fresh ``DPModel`` of ``cfg.model.name`` for training on ``train_sents``."""
    return DP_MODELS[cfg.model.name][1].build(cfg.model, vocab, labels, train_sents)


class DPGenerator:
    """A trained generator: ``distributions(sents)`` → per sentence (S + 1, L) probabilities,
    column 0 = P(N); ``labels`` names the columns; ``model`` is its ``DPModel``."""

    def __init__(self, cfg: DPGenConfig, vocab: Vocab, labels: list[str], model: DPModel,
                 threshold: float = 0.5):
        self.cfg, self.vocab, self.labels, self.model = cfg, vocab, labels, model
        self.threshold = threshold

    @torch.no_grad()
    def distributions(self, sents: list[DPSentence], batch: int = 128) -> list[np.ndarray]:
        """Sentences are batched ``batch`` at a time in length order; output in input order."""
        self.model.train(False)
        out: list[np.ndarray | None] = [None] * len(sents)
        order = sorted(range(len(sents)), key=lambda k: len(sents[k].tokens))
        for b in range(0, len(order), batch):
            idx = order[b:b + batch]
            for k, probs in zip(idx, self.model.batch_probs(sents, idx)):
                out[k] = probs
        return out

    def checkpoint_extra(self) -> dict:
        """What a checkpoint holds besides ``model`` (``DPModel.state_dict``), ``config`` and the
        training loop's state: the vocabulary, labels, the model's extra state and τ."""
        return {"vocab": list(self.vocab.tokens), "labels": list(self.labels),
                "model_extra": self.model.extra_state(), "threshold": float(self.threshold)}

    @classmethod
    def load(cls, path: str | Path) -> "DPGenerator":
        """Load ``best.pt``/``last.pt`` (weights_only). Raises ``ValueError`` if it is not a DP
        generator checkpoint (or no doctrans checkpoint at all, or truncated/corrupt) or has the flat config of doctrans before ``doctrans.dp``."""
        ck = load_torch_file(path)
        if not isinstance(ck, dict) or ck.get("kind") != "dp_generator":
            raise ValueError(f"{path} is not a DP generator checkpoint (doctrans train pipelines/dp/…)")
        if "config" not in ck or not isinstance(ck["config"].get("model"), dict):
            raise ValueError(f"{path}: a DP generator checkpoint with the old flat config (before the "
                             "sectioned data/model/train YAML); retrain it with doctrans train pipelines/dp/…")
        cfg = dp_config_from_dict(ck["config"], source=str(path))
        vocab = Vocab(ck["vocab"])
        model = DP_MODELS[cfg.model.name][1](cfg.model, vocab, ck["labels"], ck.get("model_extra"))
        model.load_state_dict(ck["model"])
        return cls(cfg, vocab, ck["labels"], model, ck["threshold"])


class DPEnsemble:
    """Several trained generators used as one: the per-position distributions of the members
    are averaged (checkpoint ensembling, as fairseq's ``--path a.pt:b.pt``). Same interface as
    ``DPGenerator`` for ``complete_lines`` / ``annotate-dp apply --generator`` / ``translate
    --dp-generator``: ``labels``, ``threshold``, ``distributions(sents)`` → per sentence (S + 1, L).

    ``threshold`` is the mean of the members' dev-tuned τ [choice: an ensemble has no τ of its
    own; pass ``--threshold`` to override]. Raises ``ValueError`` if the members' label
    inventories differ (``paths`` name them in the message)."""

    def __init__(self, members: list[DPGenerator], paths: Sequence[str | Path] = ()):
        if not members:
            raise ValueError("an ensemble needs at least one generator")
        names = [str(p) for p in paths] or [f"member {k}" for k in range(len(members))]
        for m, name in zip(members[1:], names[1:]):
            if m.labels != members[0].labels:
                raise ValueError(f"{name}: label inventory differs from {names[0]}; cannot ensemble")
        self.members, self.labels = members, members[0].labels
        self.threshold = float(np.mean([m.threshold for m in members]))

    def distributions(self, sents: list[DPSentence], batch: int = 128) -> list[np.ndarray]:
        per_member = [m.distributions(sents, batch) for m in self.members]
        return [np.mean(np.stack(ps), axis=0) for ps in zip(*per_member)]


def load_generator(spec: str | Path | Sequence[str | Path]) -> DPGenerator | DPEnsemble:
    """A generator from one checkpoint path, or an ensemble (``DPEnsemble``) from several: a
    sequence of paths, or one string joining them with ``:``. Raises ``FileNotFoundError``
    naming a missing checkpoint, ``ValueError`` for a non-generator checkpoint or mismatched
    label inventories."""
    if isinstance(spec, (str, Path)):
        spec = [spec] if Path(spec).is_file() else [p for p in str(spec).split(":") if p]
    paths = [Path(p) for p in spec]
    for p in paths:
        if not p.is_file():
            raise FileNotFoundError(f"DP generator checkpoint {p} not found")
    if len(paths) == 1:
        return DPGenerator.load(paths[0])
    return DPEnsemble([DPGenerator.load(p) for p in paths], paths)
