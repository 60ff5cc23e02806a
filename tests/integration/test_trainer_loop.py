"""The shared training loop on a task that is not NMT: a linear regression ``Task``.

Checks what every trainable thing relies on: epoch accounting (max_epochs stops exactly, per-
epoch evaluation and saving), the epoch-decay schedule, exact resume, best-checkpoint choice,
TensorBoard events, the learning-curve PNG, and the device choice.
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

import pytest
import torch

from doctrans.config import TrainConfig
from doctrans.training.metrics import read_metrics
from doctrans.training.optim import epoch_decay_lr, learning_rate
from doctrans.training.trainer import StepLoss, Trainer
from doctrans.runtime.device import resolve_device


@dataclass
class _Batch:
    x: torch.Tensor
    y: torch.Tensor
    n_targets: int


class RegressionTask:
    """y = x·w* + noise; 6 batches of 4 rows per epoch, order shuffled by (seed, epoch)."""

    kind = "toy"

    def __init__(self, seed: int = 0):
        g = torch.Generator().manual_seed(seed)
        self.x = torch.randn(24, 3, generator=g)
        self.y = self.x @ torch.tensor([1.0, -2.0, 0.5]) + 0.01 * torch.randn(24, generator=g)
        torch.manual_seed(seed)
        self.model = torch.nn.Linear(3, 1)
        self.config = TrainConfig()
        self.collated: list[tuple[int, int]] = []

    def epoch_batches(self, epoch: int) -> list[list[int]]:
        perm = torch.randperm(24, generator=torch.Generator().manual_seed(100 + epoch)).tolist()
        return [perm[i:i + 4] for i in range(0, 24, 4)]

    def collate(self, key, epoch, index):
        self.collated.append((epoch, index))
        return _Batch(self.x[key], self.y[key], len(key))

    def loss(self, batch) -> StepLoss:
        err = (self.model(batch.x).squeeze(1) - batch.y).pow(2).sum()
        return StepLoss(err, {"nll_nats": float(err.detach())}, batch.n_targets)

    def evaluate(self) -> dict[str, float]:
        with torch.no_grad():
            return {"mse": float((self.model(self.x).squeeze(1) - self.y).pow(2).mean())}

    def checkpoint_extra(self) -> dict:
        return {"note": "toy"}


def _cfg(**kw) -> TrainConfig:
    base = dict(lr=0.05, lr_schedule="epoch_decay", lr_decay=0.5, lr_decay_start=2, adam_betas=(0.9, 0.999),
                clip_norm=0.0, eval_every=0, eval_every_epochs=1, save_every=0, save_every_epochs=1,
                metric="mse", metric_mode="min", log_every=1, eval_bleu=False)
    base.update(kw)
    return replace(TrainConfig(), **base)


def test_epochs_evaluation_schedule_and_outputs(tmp_path: Path):
    task = RegressionTask()
    state = Trainer(task, _cfg(max_epochs=3), tmp_path, torch.device("cpu")).fit()
    assert state.step == 18 and state.epoch == 3 and state.batch_in_epoch == 0     # exactly 3 × 6 updates
    assert state.stop_reason == "max_epochs 3"
    assert task.collated[:7] == [(0, i) for i in range(6)] + [(1, 0)]
    recs = read_metrics(tmp_path / "metrics.jsonl")
    dev = [r for r in recs if r["kind"] == "dev"]
    assert [r["step"] for r in dev] == [6, 12, 18]                # once per epoch, none extra at the end
    assert dev[-1]["mse"] < dev[0]["mse"] < 5.0                   # it learns
    lrs = [r["lr"] for r in recs if r["kind"] == "train"]
    assert lrs[0] == lrs[11] == 0.05 and lrs[12] == pytest.approx(0.025)   # decay from the 3rd epoch
    ck = torch.load(tmp_path / "best.pt", weights_only=True)
    assert ck["kind"] == "toy" and ck["note"] == "toy" and ck["state"]["best_step"] == ck["state"]["step"]
    assert (tmp_path / "learning_curves.png").stat().st_size > 5000
    events = list((tmp_path / "tensorboard").glob("events.out.tfevents.*"))
    assert events and events[0].stat().st_size > 100


@pytest.mark.parametrize("optimizer", ["adam", "adadelta"])
def test_resume_mid_epoch_is_exact(tmp_path: Path, optimizer: str):
    opt = {"optimizer": optimizer, **({"lr": 1.0} if optimizer == "adadelta" else {})}
    full = Trainer(RegressionTask(), _cfg(max_steps=15, save_every_epochs=0, **opt), tmp_path / "a", torch.device("cpu"))
    full.fit()
    part = Trainer(RegressionTask(), _cfg(max_steps=8, save_every_epochs=0, **opt), tmp_path / "b", torch.device("cpu"))
    part.fit()                                                     # writes last.pt at update 8 (epoch 1, batch 2)
    assert type(part.opt.opts[0]).__name__.lower() == optimizer
    again = Trainer(RegressionTask(), _cfg(max_steps=15, save_every_epochs=0, **opt), tmp_path / "b", torch.device("cpu"))
    again.restore(torch.load(tmp_path / "b" / "last.pt", weights_only=True))
    assert (again.state.epoch, again.state.batch_in_epoch) == (1, 2)
    again.fit()
    loss = lambda d: [(r["step"], r["loss_nats"]) for r in read_metrics(d / "metrics.jsonl") if r["kind"] == "train"]
    assert loss(tmp_path / "a") == loss(tmp_path / "b")           # identical, not just close
    assert torch.equal(full.task.model.weight, again.task.model.weight)


def test_schedules_and_bad_values(tmp_path: Path):
    t = TrainConfig(lr=1.0, warmup=4)
    assert learning_rate(t, 2, 0) == 0.5 and learning_rate(t, 16, 9) == 0.5       # warm-up, then sqrt(4/16)
    assert epoch_decay_lr(0, 1.0, 0.5, 1) == 1.0 and epoch_decay_lr(2, 1.0, 0.5, 1) == 0.25
    assert epoch_decay_lr(3, 1.0, 0.5, 5) == 1.0
    fixed = replace(t, lr_schedule="fixed")                                        # warm-up, then held
    assert [learning_rate(fixed, s, 0) for s in (1, 2, 4, 16, 10_000)] == [0.25, 0.5, 1.0, 1.0, 1.0]
    assert learning_rate(replace(fixed, warmup=0), 1, 0) == 1.0
    with pytest.raises(ValueError, match="lr_schedule"):
        learning_rate(replace(t, lr_schedule="cosine"), 1, 0)
    with pytest.raises(ValueError, match="lr_decay"):
        learning_rate(replace(t, lr_schedule="epoch_decay", lr_decay=1.5), 1, 0)
    with pytest.raises(ValueError, match="optimizer"):
        Trainer(RegressionTask(), _cfg(optimizer="sgd"), tmp_path, torch.device("cpu"))
    assert resolve_device("cpu").type == "cpu"
    assert resolve_device("auto").type == ("cuda" if torch.cuda.is_available() else "cpu")
    with pytest.raises(ValueError, match="device"):
        resolve_device("tpu")


def test_unknown_metric_is_reported(tmp_path: Path):
    with pytest.raises(ValueError, match="bleu"):
        Trainer(RegressionTask(), _cfg(max_steps=2, metric="bleu"), tmp_path, torch.device("cpu")).fit()


class _RecordingTask(RegressionTask):
    """Records, at each evaluation, the update and whether ``last.pt`` exists and at which update."""

    def __init__(self, run_dir: Path):
        super().__init__()
        self.run_dir, self.evals = run_dir, []

    def evaluate(self) -> dict[str, float]:
        last = self.run_dir / "last.pt"
        step = torch.load(last, weights_only=True)["state"]["step"] if last.exists() else None
        self.evals.append(step)
        return super().evaluate()


def test_last_checkpoint_is_written_before_the_final_evaluation(tmp_path: Path):
    task = _RecordingTask(tmp_path)
    state = Trainer(task, _cfg(max_steps=4, eval_every_epochs=0, save_every_epochs=0), tmp_path,
                    torch.device("cpu")).fit()
    assert state.step == 4 and task.evals == [4]               # last.pt of update 4 existed when it ran
    ck = torch.load(tmp_path / "last.pt", weights_only=True)
    assert ck["state"]["best_step"] == 4                       # re-saved with the evaluation's result
    assert (tmp_path / "best.pt").exists()


def test_spent_time_budget_skips_the_final_evaluation(tmp_path: Path, caplog):
    task = _RecordingTask(tmp_path)
    tr = Trainer(task, _cfg(max_steps=50, max_time_min=0.5, eval_every_epochs=0, save_every_epochs=0), tmp_path,
                 torch.device("cpu"))
    tr.state.wall_time_s = 31.0                                # as a resumed run whose budget is spent
    with caplog.at_level("WARNING", logger="doctrans.training.trainer"):
        state = tr.fit()
    assert state.stop_reason == "max_time_min 0.5" and state.step == 0
    assert task.evals == []                                    # no evaluation past the cap
    assert torch.load(tmp_path / "last.pt", weights_only=True)["state"]["step"] == 0
    best = torch.load(tmp_path / "best.pt", weights_only=True)      # for what expects one: not evaluated
    assert best["state"]["best_metric"] is None and best["state"]["step"] == 0
    msg = " ".join(r.getMessage() for r in caplog.records)
    assert "final dev evaluation skipped" in msg and "last.pt" in msg and "best.pt is a copy of last.pt" in msg


def test_cpu_time_is_counted_and_budgets_the_run(tmp_path: Path):
    """train.max_cpu_min stops on the process's CPU time (summed over resumed runs, as
    wall_time_s); every train/dev record carries it."""
    tr = Trainer(RegressionTask(), _cfg(max_epochs=2, max_cpu_min=600), tmp_path, torch.device("cpu"))
    state = tr.fit()
    assert state.stop_reason == "max_epochs 2" and 0 < state.cpu_time_s
    recs = read_metrics(tmp_path / "metrics.jsonl")
    assert all("cpu_time_s" in r for r in recs) and any(r["kind"] == "dev" for r in recs)
    spent = torch.load(tmp_path / "last.pt", weights_only=True)["state"]["cpu_time_s"]
    assert spent == pytest.approx(state.cpu_time_s)
    tr = Trainer(RegressionTask(), _cfg(max_epochs=9, max_cpu_min=1.0), tmp_path / "b", torch.device("cpu"))
    tr.state.cpu_time_s = 61.0                                 # as a resumed run whose CPU budget is spent
    assert tr.fit().stop_reason == "max_cpu_min 1.0" and tr.state.step == 0


def test_keep_every_keeps_interval_checkpoints_for_good(tmp_path: Path):
    """train.keep_every: checkpoint{STEP}.pt at multiples of N survive keep_last's pruning (a
    learning curve); without keep_last only those are written."""
    cfg = _cfg(max_steps=12, eval_every_epochs=0, save_every_epochs=0, save_every=2, keep_last=2, keep_every=4)
    Trainer(RegressionTask(), cfg, tmp_path / "a", torch.device("cpu")).fit()
    assert sorted(p.name for p in (tmp_path / "a").glob("checkpoint*.pt")) == [
        "checkpoint10.pt", "checkpoint12.pt", "checkpoint4.pt", "checkpoint8.pt"]
    cfg = replace(cfg, keep_last=0)
    Trainer(RegressionTask(), cfg, tmp_path / "b", torch.device("cpu")).fit()
    assert sorted(p.name for p in (tmp_path / "b").glob("checkpoint*.pt")) == [
        "checkpoint12.pt", "checkpoint4.pt", "checkpoint8.pt"]
    with pytest.raises(ValueError, match="multiple of train.save_every"):
        Trainer(RegressionTask(), replace(cfg, keep_every=3), tmp_path / "c", torch.device("cpu"))


def test_evaluation_longer_than_the_time_left_is_skipped(tmp_path: Path, caplog):
    task = _RecordingTask(tmp_path)
    tr = Trainer(task, _cfg(max_steps=3, max_time_min=600, eval_every_epochs=0, save_every_epochs=0), tmp_path,
                 torch.device("cpu"))
    tr._last_eval_s = 10 * 3600.0                              # the previous evaluation took longer than is left
    with caplog.at_level("WARNING", logger="doctrans.training.trainer"):
        state = tr.fit()
    assert state.step == 3 and task.evals == []
    assert (tmp_path / "last.pt").exists()
    assert "the previous evaluation took" in caplog.text
