"""The DP-generator experiment config (``task: dp_generator``, ``pipelines/dp/*.yaml``).

Sections, each a frozen dataclass; unknown keys are ``ConfigError``s naming the dotted key::

    task: dp_generator
    run_dir: runs/dp_labeler
    data:  {prepared: data/quickstart, batch_sentences: 128}   # DPDataConfig
    model: {name: labeler, emb: 192}       # the dataclass DP_MODELS[model.name][0]
    train: {lr: 0.001, max_epochs: 3}      # doctrans.config.TrainConfig (shared with the NMT trainer)

``train`` starts from ``DP_TRAIN_DEFAULTS`` (the DP trainer's historical settings: Adam betas
(0.9, 0.999), eps 1e-8, clip 1.0, per-epoch LR ``lr · lr_decay^max(0, epoch − lr_decay_start +
1)``, dev scoring and checkpoints once per epoch), then the YAML, then ``key=value`` overrides
(``train.max_epochs=4``). Training runs on the shared loop (``doctrans.training.trainer``), so
``max_steps``, ``eval_every``, ``patience``, ``tensorboard``, ``plot`` … work as for NMT; the few
fields in ``DP_TRAIN_FIXED`` / ``DP_TRAIN_UNUSED`` are ``ConfigError``s when changed.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from doctrans.config import ConfigError, TrainConfig, from_dict, load_yaml_tree, merge_trees, parse_overrides
from doctrans.dp.models import DEFAULT_MODEL, DP_MODELS

TUNE_ON = ("oracle", "annotated")

# TrainConfig fields the DP epoch loop reads, with the DP trainer's defaults
DP_TRAIN_READ: dict[str, Any] = {
    "lr": 1e-3, "lr_decay": 1.0, "lr_decay_start": 1, "adam_betas": (0.9, 0.999), "adam_eps": 1e-8,
    "clip_norm": 1.0, "max_epochs": 10, "max_time_min": 0.0, "seed": 1, "threads": 0, "log_every": 200,
}
# the DP generators' defaults for the loop: evaluate (dev τ, P/R/F) and save once per epoch,
# best epoch by dev pronoun F, per-epoch LR decay
DP_TRAIN_LOOP: dict[str, Any] = {
    "lr_schedule": "epoch_decay", "eval_every": 0, "eval_every_epochs": 1, "save_every": 0,
    "save_every_epochs": 1, "eval_bleu": False, "metric": "prediction_f1", "metric_mode": "max",
}
# values the DP generators support only as given: CPU models (their adapters build CPU tensors),
# no BLEU, one batch per update (the pseudo-DP sampling fixes the target count in the forward pass)
DP_TRAIN_FIXED: dict[str, Any] = {"device": "cpu", "eval_bleu": False, "accum": 1}
# loop fields that do not apply to a DP generator: they must keep the TrainConfig default
DP_TRAIN_UNUSED = ("label_smoothing", "max_tokens", "eval_beam", "eval_max_sentences",
                   "coword_dropout", "context_dropout", "pronoun_dropout", "split_sentences", "context_margin")
DP_TRAIN_DEFAULTS: dict[str, Any] = {**DP_TRAIN_READ, **DP_TRAIN_LOOP, **DP_TRAIN_FIXED}


@dataclass(frozen=True)
class DPDataConfig:
    """``data:`` — the ``annotate-dp`` corpus, vocabulary, batches and dev scoring."""

    prepared: str = "data/quickstart"    # prepared dataset (tokens, docs)
    annotated: str = ""                  # annotate-dp output dir [default: PREPARED/dp]
    train_split: str = "train"
    dev_split: str = "dev"
    max_train_sentences: int = 0         # 0 = all
    min_freq: int = 2                    # word vocabulary
    max_vocab: int = 50_000
    batch_sentences: int = 64
    tune_on: str = "oracle"              # τ and best epoch against: oracle (hand DPs) | annotated
    oracle_dir: str = ""                 # TVsub root [default: from PREPARED/meta.json]
    folds: int = 0                       # > 1: train on the documents outside fold ``fold`` (jackknife,
    fold: int = 0                        # doctrans.dp.jackknife: documents dealt round-robin into folds)

    def __post_init__(self):
        if self.tune_on not in TUNE_ON:
            raise ConfigError(f"data.tune_on must be one of {TUNE_ON}, got {self.tune_on!r}")
        if self.folds == 1 or self.folds < 0:
            raise ConfigError(f"data.folds must be 0 (no jackknife) or ≥ 2, got {self.folds}")
        if self.folds and not 0 <= self.fold < self.folds:
            raise ConfigError(f"data.fold must be in [0, {self.folds}), got {self.fold}")

    @property
    def annotated_dir(self) -> Path:
        return Path(self.annotated) if self.annotated else Path(self.prepared) / "dp"


@dataclass(frozen=True)
class DPGenConfig:
    """A DP-generator experiment (see module doc). ``model`` is the config of one ``DP_MODELS``
    entry, ``model.name`` names it."""

    task: str = "dp_generator"
    run_dir: str = "runs/dp"
    data: DPDataConfig = field(default_factory=DPDataConfig)
    model: Any = field(default_factory=DP_MODELS[DEFAULT_MODEL][0])
    train: TrainConfig = field(default_factory=lambda: TrainConfig(**DP_TRAIN_DEFAULTS))

    def __post_init__(self):
        t, defaults = self.train, TrainConfig()
        if self.task != "dp_generator":
            raise ConfigError(f"task must be dp_generator, got {self.task!r}")
        rows = [name for name, (config_cls, _) in DP_MODELS.items() if type(self.model) is config_cls]
        if not rows or self.model.name not in rows:
            raise ConfigError(f"model: a {type(self.model).__name__} named {self.model.name if rows else None!r} "
                              f"is not a row of DP_MODELS ({', '.join(sorted(DP_MODELS))})")
        if not 0.0 < t.lr_decay <= 1.0:
            raise ConfigError(f"train.lr_decay must be in (0, 1], got {t.lr_decay}")
        if t.max_epochs <= 0 and not t.max_time_min and not t.max_steps:
            raise ConfigError("train.max_epochs must be > 0 unless train.max_steps or train.max_time_min limits the run")
        for f in dataclasses.fields(TrainConfig):
            value = getattr(t, f.name)
            if f.name in DP_TRAIN_FIXED and value != DP_TRAIN_FIXED[f.name]:
                raise ConfigError(f"train.{f.name}: the DP trainer supports only "
                                  f"{DP_TRAIN_FIXED[f.name]!r}, got {value!r}")
            if f.name in DP_TRAIN_UNUSED and value != getattr(defaults, f.name):
                raise ConfigError(f"train.{f.name} is not used by the DP trainer; leave it at its default")


def dp_config_from_dict(tree: dict, source: str = "") -> DPGenConfig:
    """Build a ``DPGenConfig`` from a nested mapping (YAML tree or ``to_dict`` output); the
    ``train`` section is laid over ``DP_TRAIN_DEFAULTS``. Raises ``ConfigError`` naming an
    unknown key, an unknown ``model.name`` or an invalid value."""
    if not isinstance(tree, dict):
        raise ConfigError(f"{source}: config must be a mapping, got {tree!r}")
    sections = {"data", "model", "train"}
    head = from_dict(DPGenConfig, {k: v for k, v in tree.items() if k not in sections}, source=source)
    model = tree.get("model", {})
    if not isinstance(model, dict):
        raise ConfigError(f"{source}: 'model' must be a mapping, got {model!r}")
    name = model.get("name", DEFAULT_MODEL)
    if name not in DP_MODELS:
        raise ConfigError(f"{source}: model.name must be one of {sorted(DP_MODELS)}, got {name!r}")
    train = merge_trees(DP_TRAIN_DEFAULTS, tree.get("train") or {})
    return dataclasses.replace(
        head, data=from_dict(DPDataConfig, tree.get("data", {}), "data", source),
        model=from_dict(DP_MODELS[name][0], model, "model", source),
        train=from_dict(TrainConfig, train, "train", source))


def load_dp_config(path: str | Path, overrides=()) -> DPGenConfig:
    """A ``task: dp_generator`` YAML (following ``extends``) plus dotted ``key=value``
    overrides. Raises ``ConfigError``."""
    tree = merge_trees(load_yaml_tree(Path(path)), parse_overrides(overrides))
    return dp_config_from_dict(tree, source=str(path))


def is_dp_config(path: str | Path) -> bool:
    """True if the YAML (following ``extends``) says ``task: dp_generator``."""
    return load_yaml_tree(Path(path)).get("task") == "dp_generator"
