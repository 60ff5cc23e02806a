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


def test_train_autocast_auto_chooses_per_cpu_and_logs_it(reversal_prepared, tmp_path, monkeypatch, caplog):
    """``train.autocast=auto`` trains in bf16 on a CPU with native bf16 and in fp32 without (the
    first update's loss differs between the two, and each equals the explicit setting's)."""
    from doctrans.training.metrics import read_metrics

    def first_loss(name, *over):
        cfg = load_experiment(REPO / "pipelines" / "transformer" / "tiny.yaml", [
            f"data.prepared={reversal_prepared}", f"run_dir={tmp_path / name}", "train.device=cpu",
            "train.threads=1", "train.max_steps=2", "train.log_every=1", "train.eval_every=0", "train.eval_bleu=false",
            "train.metric=xent_nats", "train.metric_mode=min", "train.plot=false", "train.tensorboard=false", *over])
        run = stages.train(cfg)
        rows = [r for r in read_metrics(run / "metrics.jsonl") if r["kind"] == "train"]
        return rows[-1]["loss_nats"]

    with caplog.at_level(logging.INFO):
        monkeypatch.setattr(cpu, "bf16_is_fast", lambda: True)
        auto_fast = first_loss("a", "train.autocast=auto")
        assert "train.autocast=auto → bf16 autocast" in caplog.text
        monkeypatch.setattr(cpu, "bf16_is_fast", lambda: False)
        auto_slow = first_loss("b", "train.autocast=auto")
        assert "train.autocast=auto → fp32" in caplog.text
    assert auto_slow == first_loss("c", "train.autocast=none")
    assert auto_fast == first_loss("d", "train.autocast=bf16") and auto_fast != auto_slow
