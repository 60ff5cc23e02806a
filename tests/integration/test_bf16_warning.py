"""`doctrans train` warns when train.autocast=bf16 would be emulated (slow) on this CPU."""
from __future__ import annotations

import logging

from doctrans.config import load_experiment
from doctrans import stages
from doctrans.utils import cpu

from conftest import REPO


def test_train_warns_about_bf16_on_a_cpu_without_native_bf16(reversal_prepared, tmp_path, monkeypatch, caplog):
    monkeypatch.setattr(cpu, "bf16_is_fast", lambda: False)
    cfg = load_experiment(REPO / "pipelines" / "transformer" / "tiny.yaml", [
        f"data.prepared={reversal_prepared}", f"run_dir={tmp_path / 'r'}", "train.autocast=bf16", "train.device=cpu",
        "train.threads=1", "train.max_steps=1", "train.eval_every=0", "train.eval_bleu=false",
        "train.metric=xent_nats", "train.metric_mode=min", "train.plot=false", "train.tensorboard=false"])
    with caplog.at_level(logging.WARNING):
        stages.train(cfg)
    assert "train.autocast=bf16 on a CPU without native bfloat16" in caplog.text
