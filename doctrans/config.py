"""Experiment configuration: frozen dataclasses filled from YAML plus ``key=value`` overrides.

YAML keys are exactly the dataclass field names; an unknown key raises ``ConfigError`` naming
it (with its dotted path and the file). A YAML file may start with ``extends: OTHER.yaml``
(path relative to the file); the child's keys override the parent's, section by section.

Example::

    extends: ../transformer/small.yaml
    data: {prepared: data/quickstart}
    train: {max_time_min: 45}

Overrides use dotted paths: ``train.lr=5e-4 model.layers_enc=2``; values are parsed as YAML.

Hostile YAML is bounded (``safe_load_bounded``): a config file over ``MAX_CONFIG_BYTES``, or a
document whose aliases expand it beyond ``MAX_EXPANDED`` nodes and characters (a "billion
laughs" alias bomb), is refused with a one-line ConfigError before anything is built from it.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from doctrans.models.build import BACKBONES, CONTEXT_MODELS, DEFAULT_BACKBONE, RECONSTRUCTOR
from doctrans.utils.errors import short_repr
from doctrans.decoding import DecodeConfig  # noqa: F401 (the decode: section; config.DecodeConfig)

MAX_CONFIG_BYTES = 1 << 20       # a config file larger than this is refused (the shipped ones are < 4 KB)
MAX_EXPANDED = 1_000_000         # nodes + scalar characters of a YAML document with its aliases expanded


class ConfigError(ValueError):
    """A config file or override is invalid; the message names the key and the file."""


def _expanded_size(node: yaml.Node, memo: dict[int, int], limit: int) -> int:
    """Nodes + scalar characters of ``node`` with every alias expanded (each shared node counted
    once per reference, computed once); stops counting past ``limit``. Raises ConfigError for a
    recursive alias."""
    key = id(node)
    if key in memo:
        if memo[key] < 0:
            raise ConfigError("recursive YAML alias")
        return memo[key]
    memo[key] = -1
    if isinstance(node, yaml.ScalarNode):
        size = 1 + len(node.value)
    else:
        children = node.value if isinstance(node, yaml.SequenceNode) else [c for kv in node.value for c in kv]
        size = 1
        for child in children:
            size += _expanded_size(child, memo, limit)
            if size > limit:
                break
    memo[key] = size
    return size


def safe_load_bounded(text: str, source: str):
    """``yaml.safe_load(text)`` bounded: ConfigError naming ``source`` for text over
    ``MAX_CONFIG_BYTES`` characters or a document whose aliases expand to more than
    ``MAX_EXPANDED`` nodes and characters (checked on the composed node graph, before any
    Python object is built), or a recursive alias; ``yaml.YAMLError`` for invalid YAML."""
    if len(text) > MAX_CONFIG_BYTES:
        raise ConfigError(f"{source}: {len(text):,} characters: a config is at most {MAX_CONFIG_BYTES:,}")
    loader = yaml.SafeLoader(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        try:
            size = _expanded_size(node, {}, MAX_EXPANDED)
        except ConfigError as e:
            raise ConfigError(f"{source}: {e}") from None
        except RecursionError:
            raise ConfigError(f"{source}: YAML nested too deeply") from None
        if size > MAX_EXPANDED:
            raise ConfigError(f"{source}: YAML aliases expand this config beyond {MAX_EXPANDED:,} nodes and "
                              f"characters (an alias bomb?): refused")
        return loader.construct_document(node)
    finally:
        loader.dispose()


@dataclass(frozen=True)
class DataConfig:
    prepared: str = "data/quickstart"   # prepared dataset dir written by `doctrans preprocess`
    train_split: str = "train"
    dev_split: str = "dev"
    src_suffix: str = "bpe.zh"          # {split}.{src_suffix}: which variant of the source to read
    src_dir: str = ""                   # directory of the source files [default: prepared], e.g. PREP/dp
    src_vocab: str = ""                 # source vocabulary counts file [default: prepared/vocab.zh.txt]
    bpe_protect_dp: bool = False        # translate: keep DP pronouns and #DP# whole when applying BPE
    tgt_suffix: str = "bpe.en"
    max_len: int = 128                  # BPE tokens; longer training pairs are skipped (never dev)
    min_freq: int = 1                   # vocabulary: keep BPE tokens seen at least this often
    doc_batching: str = "runs"          # context models' batches (data/documents.py): runs (runs of
                                        # consecutive sentences) | sorted (length-sorted targets
                                        # plus their missing context rows)
    doc_budget: str = "tokens"          # runs: max_tokens bounds the sum of row widths (tokens; the
                                        # models compute in length buckets) | padded (rows × longest)
    rec_dir: str = ""                   # reconstructor models: directory of x̂ ({split}.dp|dpp.{src_suffix}) and
                                        # {split}.dplabel [default: prepared/dp] (data/reconstruction.py)
    src_vocab_extra: tuple[str, ...] = ()   # tokens appended to the source vocabulary where absent (e.g. #DP#,
                                        # pronoun forms BPE splits); init_from then copies the checkpoint's rows


@dataclass(frozen=True)
class ContextDenseConfig:
    """``train.context_dense``: upweight the context-dense training pairs (data/context_dense.py;
    Mąka et al. 2025): dropped pronouns whose form the previous lines decide."""
    share: float = 0.3                  # dense target rows per epoch, as a share of all (extra batches)
    max_distance: int = 1               # the deciding line at most this many lines back (≤ the model's N)
    dp_dir: str = ""                    # the annotate-dp output with train.dplabel ("" = PREPARED/dp)
    rules: tuple[str, ...] = ()         # the deciding rules that select a line: agreement, agreement_en,
                                        # reply (the I/you flip); () = all (dp/context_dense.py)


@dataclass(frozen=True)
class TrainConfig:
    seed: int = 1
    lr: float = 1e-3                    # peak learning rate (after warm-up)
    lr_schedule: str = "inverse_sqrt"   # inverse_sqrt (per update, after warm-up) | epoch_decay | fixed
    warmup: int = 300                   # updates of linear warm-up, then inverse-sqrt decay (fixed: held)
    lr_decay: float = 1.0               # epoch_decay: LR × lr_decay after every epoch from
    lr_decay_start: int = 1             #   lr_decay_start on (OpenNMT's start_decay_steps/decay)
    optimizer: str = "adam"             # adam | adadelta (Zeiler 2012: the RNNSearch papers', lr 1.0, no decay)
    adam_betas: tuple[float, float] = (0.9, 0.98)
    adam_eps: float = 1e-8
    adadelta_rho: float = 0.95          # S2 §5.3.3, S3 §5.1 [P]; docs/models.md §1.2
    adadelta_eps: float = 1e-6
    weight_decay: float = 0.0
    clip_norm: float = 1.0              # 0 disables gradient clipping
    max_nonfinite: int = 20             # updates with a NaN/inf loss or gradient are skipped (no optimizer step);
                                        # this many in a row stop the run with an error (fairseq's fp16 trainer
                                        # stops after ~20 overflows in a row, at its minimum loss scale)
    label_smoothing: float = 0.1
    max_tokens: int = 4096              # target+source tokens budget per batch (max of the two sides)
    accum: int = 1                      # gradient accumulation: batches per update (per process under torchrun)
    init_from: str = ""                 # two-stage training: start from this checkpoint's weights (a path,
                                        # or a shipped model's name: `doctrans models`)
                                        # (parameters it lacks start fresh; extra ones are an error)
    freeze: tuple[str, ...] = ()        # fnmatch patterns of parameter names not to train
    init_lr_scale: float = 1.0          # LR factor for the parameters loaded by init_from
    coword_dropout: float = 0.0         # p: current-sentence source tokens → <unk> (Fernandes et al. 2021 §5;
                                        # data/context_usage.py); for a sentence model: source word dropout
    context_dropout: float = 0.0        # q: a training row sees the empty context (context models only)
    pronoun_dropout: float = 0.0        # p: each whole-word source pronoun of the current sentence is deleted
                                        # (a synthetic dropped pronoun; with a reconstructor also a DP of x̂ and
                                        # of the DP labels; data/context_usage.py) [I]
    pronoun_dropout_words: tuple[str, ...] = ("我", "你", "他", "她", "它", "我们", "你们", "他们", "她们", "它们")
                                        # the pronouns it deletes: thesis Table 4.3's basic forms (dp.pronouns)
    split_sentences: float = 0.0        # r: a target row is split in two, its first half becoming its context
                                        # (Lupo et al. 2022 §3; data/context_usage.py; document batches only)
    random_context: float = 0.0         # p: a target row with context reads the sentences before a line of
                                        # another document instead — the random-context control of Li et al.
                                        # 2020 (1.0: every row; data/context_usage.foreign_context)
    context_margin: float = 0.0         # δ > 0: Jean & Cho 2019's context ranking loss, log p(y|x,C) should beat
                                        # log p(y|x,C̃) (C̃ another row's context) by δ nats (training.loss.
                                        # context_margin_loss; one more forward/backward per batch); 0: off
    context_margin_weight: float = 1.0  # α: the hinge's weight beside the label-smoothed cross-entropy
    context_margin_level: str = "sentence"   # sentence (δ per sentence) | token (δ per target token)
    context_margin_detach: bool = False # True: no gradient through the random-context branch [I]
    context_dense: Any = None           # {share, max_distance, dp_dir}: context-dense pairs upweighted
                                        # (ContextDenseConfig, data/context_dense.py); None: off
    context_attention_supervision: float = 0.0   # weight of the loss pulling one context-attention head
                                        # from a dropped pronoun to the context word that decides it (Yin et
                                        # al. 2021; training/attention_supervision.py); 0: off
    eval_cxmi_sentences: int = 200      # dev CXMI (vs empty and random context) of a context model at each
                                        # evaluation, on the first K dev lines; 0: off
    max_steps: int = 0                  # updates; 0 = unlimited
    max_epochs: int = 0                 # 0 = unlimited
    max_time_min: float = 0.0           # wall-clock budget in minutes for this run; 0 = unlimited
    max_cpu_min: float = 0.0            # CPU-time budget in minutes (all threads of the training
                                        # process, all resumed runs): equal CPU-hours on a busy machine
    eval_every: int = 500               # updates between dev evaluations (0: only at the end)
    eval_every_epochs: int = 0          # also evaluate after every N-th epoch (0: off)
    eval_bleu: bool = True              # compute dev BLEU (greedy/beam) at each evaluation
    eval_beam: int = 1                  # beam for dev BLEU (1 = greedy)
    eval_max_sentences: int = 0         # 0 = whole dev set
    save_every: int = 500               # updates between "last" checkpoints
    save_every_epochs: int = 0          # also save "last" after every N-th epoch (0: off)
    keep_last: int = 0                  # also keep the last K save points as checkpoint{STEP}.pt (weights
                                        # only, for `doctrans average`, fairseq's --keep-last-epochs); 0: off
    keep_every: int = 0                 # also keep checkpoint{STEP}.pt for good at every multiple of N updates
                                        # (a learning curve; fairseq's --keep-interval-updates-pattern);
                                        # a multiple of save_every; 0: off
    patience: int = 0                   # evaluations without improvement before stopping; 0 = off
    metric: str = "bleu"                # early-stopping/best-checkpoint metric: bleu | xent_nats
    metric_mode: str = "max"            # max | min
    threads: int = 0                    # torch intra-op threads; 0 = all cores
    device: str = "auto"                # auto (cuda when available, else cpu) | cpu | cuda
    autocast: str = "none"              # none | bf16: bfloat16 autocast on the device (fp32 master weights) |
                                        # auto: bf16 where native (CPU avx512_bf16/amx_bf16, bf16 GPU), else none
    log_every: int = 50                 # updates between log lines
    tensorboard: bool = True            # write TensorBoard events to RUN_DIR/tensorboard/
    plot: bool = True                   # write RUN_DIR/learning_curves.png when training ends


@dataclass(frozen=True)
class ExperimentConfig:
    name: str = "transformer"
    run_dir: str = "runs/transformer"
    data: DataConfig = field(default_factory=DataConfig)
    model: Any = field(default_factory=BACKBONES[DEFAULT_BACKBONE][0])   # the backbone's config (model.backbone)
    context: Any = None                 # a context model's config (context.type); None = sentence-level
    train: TrainConfig = field(default_factory=TrainConfig)
    decode: DecodeConfig = field(default_factory=DecodeConfig)


def merge_trees(base: dict, over: dict) -> dict:
    """Recursive dict merge: ``over``'s keys win, sub-mappings are merged key by key."""
    out = dict(base)
    for k, v in over.items():
        if isinstance(v, dict) and isinstance(out.get(k), dict):
            out[k] = merge_trees(out[k], v)
        else:
            out[k] = v
    return out


def load_yaml_tree(path: Path, seen: tuple[Path, ...] = ()) -> dict:
    """The YAML mapping at ``path`` with its ``extends:`` chain merged in. Raises ConfigError
    for a missing file, invalid YAML, a non-mapping top level or a circular ``extends``."""
    path = path.resolve()
    if path in seen:
        raise ConfigError(f"{path}: circular 'extends'")
    if not path.is_file():
        raise ConfigError(f"config file not found: {path}")
    if path.stat().st_size > 4 * MAX_CONFIG_BYTES:
        raise ConfigError(f"{path}: {path.stat().st_size:,} bytes: a config is at most {MAX_CONFIG_BYTES:,} characters")
    try:
        doc = safe_load_bounded(path.read_text(encoding="utf-8"), str(path)) or {}
    except yaml.YAMLError as e:
        raise ConfigError(f"{path}: invalid YAML: {e}") from e
    except UnicodeDecodeError as e:
        raise ConfigError(f"{path}: not UTF-8 text ({e.reason} at byte {e.start})") from None
    if not isinstance(doc, dict):
        raise ConfigError(f"{path}: top level must be a mapping")
    parent = doc.pop("extends", None)
    if parent:
        doc = merge_trees(load_yaml_tree(path.parent / parent, seen + (path,)), doc)
    return doc


def _coerce(value: Any, ftype: Any, path: str, source: str) -> Any:
    """Make YAML scalars fit the field type (``5e-4`` is a string in YAML 1.1, lists → tuples)."""
    ftype = str(ftype)
    if ftype.startswith("tuple") and isinstance(value, list):
        return tuple(_coerce(v, "float" if "float" in ftype else "", path, source) for v in value)
    if ftype == "float" and not isinstance(value, bool):
        try:
            return float(value)
        except (TypeError, ValueError):
            raise ConfigError(f"{source}: '{path}' must be a number, got {short_repr(value)}") from None
    if ftype == "int" and isinstance(value, str):
        raise ConfigError(f"{source}: '{path}' must be an integer, got {short_repr(value)}")
    return value


def from_dict(cls: type, data: dict, where: str = "", source: str = "") -> Any:
    """Build dataclass ``cls`` from ``data``; unknown keys raise ConfigError naming them."""
    if not isinstance(data, dict):
        raise ConfigError(f"{source}: '{where or 'config'}' must be a mapping, got {short_repr(data)}")
    fields = {f.name: f for f in dataclasses.fields(cls)}
    kwargs = {}
    for key, value in data.items():
        path = f"{where}.{key}" if where else key
        if key not in fields:
            raise ConfigError(
                f"{source}: unknown config key {short_repr(path)} (known: {', '.join(sorted(fields))})"
            )
        ftype = fields[key].type
        sub = _DATACLASS_FIELDS.get((cls, key))
        if value is None and fields[key].default is None:      # an optional section left out
            kwargs[key] = None
            continue
        if callable(sub) and not isinstance(sub, type):
            sub = sub(value, path, source)
        kwargs[key] = from_dict(sub, value, path, source) if sub else _coerce(value, ftype, path, source)
    return cls(**kwargs)


def backbone_config_class(section: Any, path: str = "model", source: str = "") -> type:
    """The config dataclass of the backbone that ``section["backbone"]`` names (default
    ``transformer``), from ``models/build.py:BACKBONES``. Raises ConfigError for an unknown name."""
    name = section.get("backbone", DEFAULT_BACKBONE) if isinstance(section, dict) else DEFAULT_BACKBONE
    if name not in BACKBONES:
        raise ConfigError(f"{source}: unknown {path}.backbone {short_repr(name)} (known: {', '.join(sorted(BACKBONES))})")
    return BACKBONES[name][0]


def context_config_class(section: Any, path: str = "context", source: str = "") -> type:
    """The config dataclass of the context model that ``section["type"]`` names, from
    ``models/build.py:CONTEXT_MODELS``. Raises ConfigError for a missing or unknown type."""
    name = section.get("type") if isinstance(section, dict) else None
    if name not in CONTEXT_MODELS:
        raise ConfigError(f"{source}: {path}.type must be one of {', '.join(sorted(CONTEXT_MODELS))}, got {short_repr(name)}")
    return CONTEXT_MODELS[name][0]


# Nested sections: a dataclass, or a function (section dict, path, source) → dataclass chosen by the data.
_DATACLASS_FIELDS: dict = {
    (ExperimentConfig, "data"): DataConfig,
    (ExperimentConfig, "model"): backbone_config_class,
    (ExperimentConfig, "context"): context_config_class,
    (ExperimentConfig, "train"): TrainConfig,
    (ExperimentConfig, "decode"): DecodeConfig,
    (TrainConfig, "context_dense"): ContextDenseConfig,
    **{(cfg_cls, "reconstructor"): RECONSTRUCTOR[0] for cfg_cls, _ in BACKBONES.values()},   # model.reconstructor
}


def parse_overrides(overrides: list[str] | tuple[str, ...]) -> dict:
    """``["train.lr=1e-4", "model.layers_enc=2"]`` → nested dict, values parsed as YAML."""
    tree: dict = {}
    for item in overrides:
        if "=" not in item:
            raise ConfigError(f"override '{item}' is not of the form key=value")
        key, raw = item.split("=", 1)
        node = tree
        parts = key.strip().split(".")
        for p in parts[:-1]:
            node = node.setdefault(p, {})
        node[parts[-1]] = safe_load_bounded(raw, f"override {key.strip()}")
    return tree


def override_context(context: Any, options: list[str] | tuple[str, ...], source: str = "--context-option") -> Any:
    """``context`` (a context model's config dataclass) with ``["KEY=VALUE", …]`` applied
    (values of ``str`` fields taken as written, others parsed as YAML; e.g. a checkpoint's
    ``test_ablation`` changed at translate time);
    ``context`` itself when there are none. Raises ConfigError for a malformed option, an
    unknown key (naming the known ones), ``type``, or options without a context model."""
    if not options:
        return context
    if context is None:
        raise ConfigError(f"{source}: the model has no context model to set {', '.join(options)} on")
    tree = to_dict(context)
    types = {f.name: str(f.type) for f in dataclasses.fields(context)}
    for item in options:
        key, eq, raw = item.partition("=")
        key = key.strip()
        if not eq or not key:
            raise ConfigError(f"{source}: '{item}' is not of the form KEY=VALUE")
        if key == "type":
            raise ConfigError(f"{source}: the context model's type cannot be changed (it is {context.type!r})")
        if key not in tree:
            raise ConfigError(f"{source}: unknown key '{key}' of context model {context.type!r} "
                              f"(known: {', '.join(sorted(k for k in tree if k != 'type'))})")
        tree[key] = raw.strip() if types[key] == "str" else safe_load_bounded(raw, f"{source} {key}")    # test_ablation=null: "null"
    return from_dict(type(context), tree, "context", source)


def load_experiment(path: str | Path, overrides: list[str] | tuple[str, ...] = ()) -> ExperimentConfig:
    """Load an experiment YAML (following ``extends``) and apply ``key=value`` overrides."""
    tree = merge_trees(load_yaml_tree(Path(path)), parse_overrides(overrides))
    return from_dict(ExperimentConfig, tree, source=str(path))


def to_dict(cfg: Any) -> dict:
    """Plain-types dict of a config (tuples become lists), e.g. for YAML/JSON/checkpoints."""
    def conv(v: Any) -> Any:
        if isinstance(v, tuple):
            return [conv(x) for x in v]
        if isinstance(v, dict):
            return {k: conv(x) for k, x in v.items()}
        return v
    return conv(dataclasses.asdict(cfg))


def experiment_from_dict(data: dict, source: str = "checkpoint") -> ExperimentConfig:
    """Inverse of ``to_dict`` for an ExperimentConfig."""
    return from_dict(ExperimentConfig, data, source=source)
