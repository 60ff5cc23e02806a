"""Data-parallel training under torchrun (``doctrans.runtime.distributed``): two CPU processes
(gloo) make the updates of one process over the same combined batches (``train.accum=2``), and
a ``--resume`` of the distributed run continues them exactly."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
import torch
from click.testing import CliRunner

from doctrans.cli import cli

from conftest import REPO

pytestmark = pytest.mark.skipif(not torch.distributed.is_available(),
                                reason="this torch build has no torch.distributed (gloo)")

TINY = str(REPO / "pipelines" / "transformer" / "tiny.yaml")
# 20 pairs in batches of ≤ 64 tokens: an odd number of batches per epoch, so the two-batch
# updates cross epoch boundaries; model.dropout is 0 in tiny.yaml (no per-rank RNG in the maths)
COMMON = ["train.threads=1", "train.max_tokens=64", "train.eval_every=2", "train.save_every=2",
          "train.log_every=1", "train.eval_bleu=false", "train.metric=xent_nats", "train.metric_mode=min",
          "train.tensorboard=false", "train.plot=false"]


def _torchrun(*args: str) -> None:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]),
           "OMP_NUM_THREADS": "1"}
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2",
           "-m", "doctrans.cli", "train", TINY, *args]
    r = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=180)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    # only rank 0 logs INFO and prints the run directory
    assert r.stderr.count("INFO doctrans.training.trainer: stopping after") == 1, r.stderr[-3000:]
    assert r.stdout.count("run directory:") == 1, r.stdout


def _single(*args: str) -> None:
    r = CliRunner().invoke(cli, ["train", TINY, *args], catch_exceptions=False)
    assert r.exit_code == 0, r.output


def _ckpt(run_dir):
    return torch.load(run_dir / "last.pt", map_location="cpu", weights_only=True)


def _same_parameters(a: dict, b: dict) -> None:
    assert a["model"].keys() == b["model"].keys()
    for k in a["model"]:
        assert torch.allclose(a["model"][k], b["model"][k], atol=1e-5), k


def _state(ck: dict) -> tuple:
    s = ck["state"]
    return s["step"], s["epoch"], s["batch_in_epoch"], s["tgt_tokens"]


def _train_records(run_dir) -> list[dict]:
    recs = [json.loads(x) for x in (run_dir / "metrics.jsonl").read_text().splitlines()]
    return [r for r in recs if r["kind"] == "train"]


def test_two_processes_equal_one_over_the_combined_batches_and_resume(reversal_prepared, tmp_path):
    ddp, one = tmp_path / "ddp", tmp_path / "one"
    data = [f"data.prepared={reversal_prepared}"]
    _torchrun(*data, f"run_dir={ddp}", "train.max_steps=3", *COMMON)
    _single(*data, f"run_dir={one}", "train.max_steps=3", "train.accum=2", *COMMON)
    a, b = _ckpt(ddp), _ckpt(one)
    assert a["world"] == 2 and len(a["rng_ranks"]) == 2
    assert _state(a) == _state(b) and a["state"]["step"] == 3
    _same_parameters(a, b)

    _torchrun(*data, f"run_dir={ddp}", "train.max_steps=7", *COMMON, "--resume")
    _single(*data, f"run_dir={one}", "train.max_steps=7", "train.accum=2", *COMMON, "--resume")
    a, b = _ckpt(ddp), _ckpt(one)
    assert _state(a) == _state(b) and a["state"]["step"] == 7 and a["state"]["epoch"] >= 1
    _same_parameters(a, b)
    # rank 0 alone logs: one train record per update, with the same losses and token counts
    ra, rb = _train_records(ddp), _train_records(one)
    assert [r["step"] for r in ra] == list(range(1, 8))
    for x, y in zip(ra, rb):
        assert x["loss_nats"] == pytest.approx(y["loss_nats"], rel=1e-5)
    assert (ddp / "best.pt").is_file() and (ddp / "config.yaml").is_file()
