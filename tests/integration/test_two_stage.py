"""Two-stage training (the HAN recipe, docs/models.md §2.5): train.init_from / freeze / init_lr_scale."""
from __future__ import annotations

import logging

import pytest
import torch

from conftest import QUIET_TRAIN, REPO
from doctrans.config import load_experiment
from doctrans import stages

TINY = REPO / "pipelines" / "transformer" / "tiny.yaml"
HAN = "context={type: han, context_sents: 2, attach: %s, heads: 2, d_ff: 32, dropout: 0.0}"


def _run(prep, run_dir, *extra):
    return stages.train(load_experiment(TINY, [f"data.prepared={prep}", f"run_dir={run_dir}", *QUIET_TRAIN, *extra]))


def _weights(run_dir):
    return torch.load(run_dir / "last.pt", weights_only=True)["model"]


def test_context_model_starts_from_the_sentence_model(reversal_prepared, tmp_path, caplog):
    stage1 = _run(reversal_prepared, tmp_path / "s1", "train.max_steps=3")
    s1 = _weights(stage1)
    # frozen backbone, 0 updates of the rest would change nothing: check the copy and the freeze
    with caplog.at_level(logging.INFO, logger="doctrans.training.train"):
        stage2 = _run(reversal_prepared, tmp_path / "s2", "train.max_steps=2", HAN % "encoder",
                      f"train.init_from={stage1 / 'last.pt'}", "train.freeze=[backbone.*]")
    n_backbone = sum(v.numel() for v in s1.values()) / 1e6
    assert any("train.freeze ['backbone.*']" in r.message and f"{n_backbone:.2f}M of" in r.message
               for r in caplog.records), [r.message for r in caplog.records]   # the user sees what is frozen
    s2 = _weights(stage2)
    assert all(torch.equal(s2[f"backbone.{k}"], v) for k, v in s1.items())        # copied and frozen
    assert any(k.startswith("han_enc.") for k in s2)
    ck = torch.load(stage2 / "last.pt", weights_only=True)
    assert ck["state"]["step"] == 2

    # the joint model starts from the HAN encoder: encoder-side HAN copied, decoder-side fresh
    joint = _run(reversal_prepared, tmp_path / "joint", "train.max_steps=1", HAN % "both",
                 f"train.init_from={stage2 / 'last.pt'}", "train.freeze=[backbone.*, han_enc.*]")
    j = _weights(joint)
    assert all(torch.equal(j[k], v) for k, v in s2.items())
    assert any(k.startswith("han_dec.") for k in j)


def test_init_from_errors_name_the_problem(reversal_prepared, tmp_path):
    han = _run(reversal_prepared, tmp_path / "han", "train.max_steps=1", HAN % "encoder")
    with pytest.raises(ValueError, match="keys the model does not have: backbone"):   # context ckpt → sentence model
        _run(reversal_prepared, tmp_path / "bad", "train.max_steps=1", f"train.init_from={han / 'last.pt'}")
    with pytest.raises(ValueError, match="matches no parameter"):
        _run(reversal_prepared, tmp_path / "bad2", "train.max_steps=1", HAN % "encoder",
             f"train.init_from={han / 'last.pt'}", "train.freeze=[nothing.*]")
    with pytest.raises(ValueError, match="init_from"):
        _run(reversal_prepared, tmp_path / "bad3", "train.max_steps=1", "train.freeze=[encoder.*]")


def test_lower_lr_for_pretrained_parameters(reversal_prepared, tmp_path):
    stage1 = _run(reversal_prepared, tmp_path / "s1", "train.max_steps=2")
    stage2 = _run(reversal_prepared, tmp_path / "s2", "train.max_steps=2", HAN % "encoder", "train.warmup=0",
                  f"train.init_from={stage1 / 'last.pt'}", "train.init_lr_scale=0.1")
    groups = torch.load(stage2 / "last.pt", weights_only=True)["optimizer"][0]["param_groups"]
    assert sorted(round(g["lr"] / groups[0]["lr"] * (1 / g["lr_scale"]) * groups[0]["lr_scale"], 6)
                  for g in groups) == [1.0, 1.0]
    assert sorted(g["lr_scale"] for g in groups) == [0.1, 1.0]


@pytest.mark.parametrize("stage2", [("train.init_lr_scale=0.1",), ("train.freeze=[backbone.*]",),
                                    ("train.init_lr_scale=0.1", "train.freeze=[backbone.encoder.*]")])
def test_resume_of_a_two_stage_run_equals_the_uninterrupted_run(reversal_prepared, tmp_path, stage2):
    """A stage-2 run with train.init_lr_scale and/or train.freeze, stopped and resumed, ends with
    exactly the weights of the run that was not stopped (before the fix: resume rebuilt one
    parameter group and refused the checkpoint's two, or said freeze "needs init_from")."""
    stage1 = _run(reversal_prepared, tmp_path / "s1", "train.max_steps=2")
    common = (HAN % "encoder", f"train.init_from={stage1 / 'last.pt'}", *stage2)
    whole = _run(reversal_prepared, tmp_path / "whole", "train.max_steps=4", *common)
    part = _run(reversal_prepared, tmp_path / "part", "train.max_steps=2", *common)
    cfg = load_experiment(TINY, [f"data.prepared={reversal_prepared}", f"run_dir={part}", *QUIET_TRAIN,
                                 "train.max_steps=4", *common])
    stages.train(cfg, resume=True)
    a, b = _weights(whole), _weights(part)
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    if any("freeze" in x for x in stage2):
        s1 = _weights(stage1)
        assert all(torch.equal(b[f"backbone.{k}"], v) for k, v in s1.items() if k.startswith("encoder."))
