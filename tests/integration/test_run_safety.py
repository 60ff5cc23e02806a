"""Training never loses or silently replaces work (issue 50, items 1, 3, 4, 9): a run directory
holding a model is refused without --resume/--overwrite; SIGTERM saves last.pt and the resumed
run equals an uninterrupted one; non-finite updates are skipped, a diverged run stops with an
error and non-finite weights are never saved nor translated; a full disk while saving names the
file and keeps the previous checkpoint."""
from __future__ import annotations

import errno
import os
import signal
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

import pytest
import torch

from conftest import QUIET_TRAIN, REPO, reversal_pairs, train_tiny, write_prepared
from doctrans import stages
from doctrans.config import TrainConfig, load_experiment
from doctrans.training.metrics import read_metrics
from doctrans.training.trainer import StepLoss, Trainer

TINY = REPO / "pipelines" / "transformer" / "tiny.yaml"


def _cfg(prep: Path, run_dir: Path, *extra: str):
    return load_experiment(TINY, [f"data.prepared={prep}", f"run_dir={run_dir}", *QUIET_TRAIN, *extra])


@pytest.fixture(scope="module")
def trained(tmp_path_factory) -> Path:
    """last.pt of a 3-update tiny run (root/run), its dataset at root/prep."""
    return train_tiny(tmp_path_factory.mktemp("safety"), 20, "train.max_steps=3")


def _weights(path: Path) -> dict:
    return torch.load(path, map_location="cpu", weights_only=True)["model"]


# --- 1. a finished model is never overwritten without being asked ---------------------------

def test_train_into_a_run_dir_holding_a_model_is_refused_then_overwritten_when_asked(tmp_path):
    prep = write_prepared(tmp_path / "prep", *[reversal_pairs(20)] * 2)
    run = tmp_path / "run"
    stages.train(_cfg(prep, run, "train.max_steps=4"))
    before = (run / "best.pt").read_bytes(), (run / "last.pt").read_bytes()
    with pytest.raises(ValueError, match=rf"{run}.*best\.pt, last\.pt.*--resume.*run_dir=.*--overwrite"):
        stages.train(_cfg(prep, run, "train.max_steps=2"))
    assert ((run / "best.pt").read_bytes(), (run / "last.pt").read_bytes()) == before     # untouched
    stages.train(_cfg(prep, run, "train.max_steps=2"), overwrite=True)
    assert torch.load(run / "last.pt", weights_only=True)["state"]["step"] == 2
    assert max(r["step"] for r in read_metrics(run / "metrics.jsonl")) == 2              # no mixed runs
    stages.train(_cfg(prep, run, "train.max_steps=3"), resume=True)                      # --resume still works
    with pytest.raises(ValueError, match="give one"):
        stages.train(_cfg(prep, run, "train.max_steps=3"), resume=True, overwrite=True)


def test_cli_train_overwrite_flag(tmp_path):
    from click.testing import CliRunner

    from doctrans.cli import cli

    prep = write_prepared(tmp_path / "prep", *[reversal_pairs(12)] * 2)
    args = ["train", str(TINY), f"data.prepared={prep}", f"run_dir={tmp_path / 'run'}", "train.max_steps=1",
            *QUIET_TRAIN]
    assert CliRunner().invoke(cli, args).exit_code == 0
    refused = CliRunner().invoke(cli, args)
    assert refused.exit_code != 0 and "--overwrite" in str(refused.exception)
    assert CliRunner().invoke(cli, args + ["--overwrite"]).exit_code == 0


# --- 3. SIGTERM: finish the update, save last.pt, exit 143, resume exactly --------------------

def test_sigterm_saves_last_pt_and_the_resumed_run_equals_an_uninterrupted_one(tmp_path):
    prep = write_prepared(tmp_path / "prep", *[reversal_pairs(40)] * 2)
    run = tmp_path / "run"
    common = ["train.log_every=1", "train.eval_every=0", "train.save_every=100000", "train.warmup=5"]
    cmd = [sys.executable, "-m", "doctrans.cli", "train", str(TINY), f"data.prepared={prep}", f"run_dir={run}",
           "train.max_steps=100000", *QUIET_TRAIN, *common]
    proc = subprocess.Popen(cmd, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "DOCTRANS_QUIET": "1"})
    deadline = time.time() + 120
    while time.time() < deadline and proc.poll() is None:
        metrics = run / "metrics.jsonl"
        if metrics.is_file() and sum(1 for _ in open(metrics)) >= 3:
            break
        time.sleep(0.05)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 128 + signal.SIGTERM, err
    assert "--resume" in err and str(run / "last.pt") in err
    step = torch.load(run / "last.pt", weights_only=True)["state"]["step"]
    assert step >= 3
    stages.train(_cfg(prep, run, f"train.max_steps={step + 3}", *common), resume=True)
    full = stages.train(_cfg(prep, tmp_path / "full", f"train.max_steps={step + 3}", *common))
    a, b = _weights(run / "last.pt"), _weights(full / "last.pt")
    assert all(torch.equal(a[k], b[k]) for k in a)


# --- 4. non-finite losses ------------------------------------------------------------------

class _NaNTask:
    """y = x·w; the loss of the batches in ``nan_at`` (epoch index) is NaN."""

    kind = "toy"

    def __init__(self, nan_at=frozenset()):
        torch.manual_seed(0)
        self.x = torch.randn(16, 3)
        self.y = self.x @ torch.tensor([1.0, -2.0, 0.5])
        self.model = torch.nn.Linear(3, 1)
        self.config = TrainConfig()
        self.nan_at = nan_at

    def epoch_batches(self, epoch):
        return [(epoch, i) for i in range(4)]

    def collate(self, key, epoch, index):
        rows = slice(4 * key[1], 4 * key[1] + 4)
        return type("B", (), {"x": self.x[rows], "y": self.y[rows], "n_targets": 4, "key": key})()

    def loss(self, batch):
        err = (self.model(batch.x).squeeze(1) - batch.y).pow(2).sum()
        if batch.key in self.nan_at:
            err = err * float("nan")
        return StepLoss(err, {"nll_nats": float(err.detach())}, batch.n_targets)

    def evaluate(self):
        return {}

    def checkpoint_extra(self):
        return {}


def _toy_cfg(**kw) -> TrainConfig:
    base = dict(lr=0.05, warmup=1, eval_every=0, save_every=0, log_every=1, eval_bleu=False, tensorboard=False,
                plot=False, metric="xent_nats", metric_mode="min")
    return replace(TrainConfig(), **{**base, **kw})


def test_a_non_finite_update_is_skipped_and_the_run_goes_on(tmp_path):
    task = _NaNTask(nan_at={(0, 1)})
    state = Trainer(task, _toy_cfg(max_steps=6), tmp_path, torch.device("cpu")).fit()
    assert state.step == 6 and state.epoch == 1 and state.batch_in_epoch == 3      # 7 batches for 6 updates
    assert all(torch.isfinite(v).all() for v in _weights(tmp_path / "last.pt").values())


def test_consecutive_non_finite_updates_stop_the_run_without_saving_them(tmp_path):
    task = _NaNTask(nan_at={(e, i) for e in range(9) for i in range(4) if (e, i) >= (0, 2)})
    trainer = Trainer(task, _toy_cfg(max_steps=100, max_nonfinite=5, save_every=1), tmp_path, torch.device("cpu"))
    with pytest.raises(FloatingPointError, match=r"diverged.*5 consecutive.*train\.max_nonfinite 5.*last\.pt"):
        trainer.fit()
    assert torch.load(tmp_path / "last.pt", weights_only=True)["state"]["step"] == 2
    assert all(torch.isfinite(v).all() for v in _weights(tmp_path / "last.pt").values())


def test_non_finite_weights_are_never_saved(tmp_path):
    task = _NaNTask()
    trainer = Trainer(task, _toy_cfg(max_steps=1), tmp_path, torch.device("cpu"))
    with torch.no_grad():
        task.model.weight[0, 0] = float("nan")
    with pytest.raises(FloatingPointError, match=rf"not saving {tmp_path / 'last.pt'}.*weight"):
        trainer.save("last.pt")
    assert not (tmp_path / "last.pt").exists()


def test_translating_non_finite_weights_is_refused_naming_the_file(trained, tmp_path):
    from doctrans.inference.translate import TranslateConfig
    from doctrans.inference.translate import translate_input as run
    from doctrans.runtime.checkpoint_digest import with_digest

    ck = torch.load(trained, weights_only=True)
    next(iter(ck["model"].values())).fill_(float("nan"))
    bad = tmp_path / "nan.pt"
    torch.save(with_digest(ck), bad)                       # its digest intact: the NaN check refuses it
    (tmp_path / "in.txt").write_text("w1 w2\n", encoding="utf-8")
    with pytest.raises(ValueError, match=rf"{bad}.*non-finite"):
        run(TranslateConfig(checkpoint=str(bad), input=str(tmp_path / "in.txt"), output=str(tmp_path / "out.txt"),
                            input_format="bpe", beam=1))


# --- 9. a full disk while saving -----------------------------------------------------------

@pytest.mark.parametrize("failure", ["torch", "oserror"])
def test_a_full_disk_names_the_checkpoint_and_keeps_the_previous_one(tmp_path, monkeypatch, failure):
    import doctrans.runtime.checkpoint_write as cw
    import doctrans.utils.io as io

    task = _NaNTask()
    trainer = Trainer(task, _toy_cfg(max_steps=1), tmp_path, torch.device("cpu"))
    trainer.save("last.pt")
    before = (tmp_path / "last.pt").read_bytes()
    real_save = torch.save

    def full_disk(obj, f):
        Path(f).write_bytes(b"PK\x03\x04partial")
        if failure == "torch":
            raise RuntimeError("[enforce fail at inline_container.cc:672] . PytorchStreamWriter failed writing "
                               "file data/3: file write failed")
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(io.torch, "save", full_disk)
    monkeypatch.setattr(cw.shutil, "disk_usage", lambda p: type("U", (), {"free": 0})())
    with pytest.raises(OSError, match=rf"{tmp_path / 'last.pt'}: no space left on device") as e:
        trainer.save("last.pt")
    assert e.value.errno == errno.ENOSPC
    monkeypatch.setattr(io.torch, "save", real_save)
    assert (tmp_path / "last.pt").read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["last.pt", "metrics.jsonl"] or \
        not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]


# --- issue 73 item 10: a file size limit (ulimit -f) while saving -----------------------------

def test_a_file_size_limit_names_the_checkpoint_and_the_limit(tmp_path):
    """torch reported a write past RLIMIT_FSIZE as 'enforce fail at inline_container.cc:672 …
    unexpected pos', naming neither the file nor the cause (CPython ignores SIGXFSZ, so the
    write fails with EFBIG instead of killing the process)."""
    import resource

    from doctrans.runtime.checkpoint_write import save_checkpoint

    path = tmp_path / "last.pt"
    save_checkpoint({"model": {"w": torch.ones(8)}}, path)
    before = path.read_bytes()
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    if hard != resource.RLIM_INFINITY and hard < 1 << 16:
        pytest.skip("the hard file size limit is below the test's")
    resource.setrlimit(resource.RLIMIT_FSIZE, (1 << 16, hard))
    try:
        with pytest.raises(OSError, match=rf"cannot write checkpoint {path}: file too large: the file size limit "
                                          r"\(ulimit -f\) is 65,536 bytes and the checkpoint holds 262,144 bytes "
                                          r"of tensors") as e:
            save_checkpoint({"model": {"w": torch.zeros(1 << 16)}}, path)
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
    assert e.value.errno == errno.EFBIG
    assert path.read_bytes() == before and sorted(p.name for p in tmp_path.iterdir()) == ["last.pt"]
