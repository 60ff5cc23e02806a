"""Experiment configs: YAML + extends + overrides; unknown keys are errors naming the key."""
from __future__ import annotations

from pathlib import Path

import pytest
import torch

from doctrans.config import ConfigError, load_experiment, to_dict, experiment_from_dict
from doctrans.models.build import build_model

REPO_ROOT = Path(__file__).resolve().parents[2]
PIPELINES = REPO_ROOT / "pipelines"


@pytest.mark.parametrize("path", sorted(PIPELINES.rglob("*.yaml")), ids=lambda p: p.name)
def test_every_pipeline_config_loads(path):
    from doctrans.config import to_dict
    from doctrans.dp.config import dp_config_from_dict, is_dp_config, load_dp_config
    from doctrans.dp.models import DP_MODELS

    if path.name == "full_table.yaml":           # the rows of `doctrans table full` (experiments/full_spec.py)
        from doctrans.experiments.full_spec import load_spec

        spec = load_spec(path)
        trained = [r for r in spec.rows if r.trained]
        assert spec.updates > 0 and trained and trained[0].name == "control"
        for row in trained:                      # each row's training config loads with the recipe and its settings
            overrides = [kv.replace("{jk}", "data/prep_full/dp_jk3") for kv in (*spec.recipe, *row.set)]
            load_experiment(REPO_ROOT / row.pipeline, overrides)
        return
    if is_dp_config(path):                       # pipelines/dp/: DP generators
        cfg = load_dp_config(path)
        assert cfg.model.name in DP_MODELS and cfg.train.max_epochs > 0
        assert dp_config_from_dict(to_dict(cfg)) == cfg           # the checkpoint round trip
        return
    cfg = load_experiment(path)
    assert experiment_from_dict(to_dict(cfg)) == cfg                  # the checkpoint round trip
    with torch.device("meta"):                                        # the model's own checks, no memory
        build_model(cfg.model, 100, 100, context=cfg.context)


def test_extends_and_overrides():
    cfg = load_experiment(PIPELINES / "transformer" / "tiny.yaml", ["train.lr=5e-4", "model.layers_enc=1"])
    assert cfg.model.d_model == 32            # from tiny.yaml
    assert cfg.model.d_ff == 64
    assert cfg.train.clip_norm == 1.0         # inherited from small.yaml
    assert cfg.train.lr == 5e-4 and cfg.model.layers_enc == 1
    assert cfg.train.adam_betas == (0.9, 0.98)
    assert experiment_from_dict(to_dict(cfg)) == cfg


def test_unknown_key_names_key_and_file(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("train:\n  lr: 0.1\n  warmpu: 10\n")
    with pytest.raises(ConfigError, match=r"train\.warmpu.*|bad\.yaml"):
        load_experiment(bad)
    with pytest.raises(ConfigError, match="model.dmodel"):
        load_experiment(PIPELINES / "transformer" / "tiny.yaml", ["model.dmodel=3"])
    with pytest.raises(ConfigError, match="key=value"):
        load_experiment(PIPELINES / "transformer" / "tiny.yaml", ["model.d_model"])


def test_dp_config_sections_defaults_and_errors(tmp_path):
    """The sectioned DP config: train defaults of the DP trainer, unknown keys named with their
    section, model keys of the other model rejected, unsupported train settings rejected."""
    from doctrans.dp.config import DPGenConfig, load_dp_config

    cfg = load_dp_config(PIPELINES / "dp" / "labeler.yaml")
    t = cfg.train
    assert (t.adam_betas, t.adam_eps, t.clip_norm, t.lr_schedule) == ((0.9, 0.999), 1e-8, 1.0, "epoch_decay")
    assert DPGenConfig().train.adam_betas == (0.9, 0.999) and DPGenConfig().model.name == "labeler"
    cfg = load_dp_config(PIPELINES / "dp" / "labeler.yaml", ["train.lr=0.1", "train.lr_decay=0.5",
                                                           "train.lr_decay_start=2"])
    from doctrans.training.optim import learning_rate
    assert [learning_rate(cfg.train, 1, e) for e in range(4)] == [0.1, 0.1, 0.05, 0.025]   # decay after 2 epochs
    for bad, key in ((["epochs=3"], "'epochs'"), (["data.epochs=3"], "data.epochs"),
                     (["model.det_emb=8"], "model.det_emb"), (["model.name=nope"], "model.name"),
                     (["data.tune_on=test"], "tune_on"), (["train.label_smoothing=0.2"], "train.label_smoothing"),
                     (["train.device=cuda"], "train.device"), (["train.accum=2"], "train.accum"),
                     (["train.max_epochs=0"], "max_epochs"),
                     # the NMT task's context-usage options: the DP trainer would silently ignore them
                     (["train.pronoun_dropout=0.3"], "train.pronoun_dropout"),
                     (["train.coword_dropout=0.1"], "train.coword_dropout"),
                     (["train.context_dropout=0.2"], "train.context_dropout"),
                     (["train.split_sentences=0.2"], "train.split_sentences"),
                     (["train.context_margin=1.0"], "train.context_margin")):
        with pytest.raises(ConfigError, match=key):
            load_dp_config(PIPELINES / "dp" / "labeler.yaml", bad)
    with pytest.raises(ConfigError, match="model.emb"):          # labeler keys are not thesis keys
        load_dp_config(PIPELINES / "dp" / "labeler.yaml", ["model.name=thesis"])
    from doctrans.dp.models.labeler import LabelerConfig
    with pytest.raises(ConfigError, match="DP_MODELS"):           # a model section is its table row
        DPGenConfig(model=LabelerConfig(name="thesis"))
