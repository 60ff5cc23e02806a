"""``train.keep_last`` and ``doctrans average`` (fairseq's --keep-last-epochs / average_checkpoints)."""
from __future__ import annotations

import pytest
import torch
from click.testing import CliRunner

from conftest import train_tiny
from doctrans.cli import cli
from doctrans.training.checkpoint import average_checkpoints, step_checkpoints
from doctrans.runtime.checkpoint import load_checkpoint


def test_keep_last_keeps_k_weight_checkpoints_and_average_is_their_mean(tmp_path):
    last = train_tiny(tmp_path, 20, "train.max_steps=9", "train.save_every=3", "train.keep_last=2")
    run = last.parent
    kept = step_checkpoints(run)
    assert [p.name for p in kept] == ["checkpoint6.pt", "checkpoint9.pt"]      # checkpoint3 deleted
    a, b = load_checkpoint(kept[0]), load_checkpoint(kept[1])
    assert "optimizer" not in a and a["state"]["step"] == 6
    final = load_checkpoint(last)["model"]                                      # last.pt is step 9 too
    assert all(torch.equal(b["model"][k], final[k]) for k in final)

    avg = average_checkpoints(kept)
    for k, v in avg["model"].items():
        if v.is_floating_point():
            assert torch.allclose(v, (a["model"][k] + b["model"][k]) / 2, atol=1e-6), k
    assert not any(torch.equal(avg["model"][k], b["model"][k]) for k in b["model"]
                   if b["model"][k].is_floating_point() and b["model"][k].dim() == 2)

    out = tmp_path / "avg.pt"
    res = CliRunner().invoke(cli, ["average", "--run-dir", str(run), "--last", "2", "-o", str(out)])
    assert res.exit_code == 0, res.output
    src = tmp_path / "in.txt"
    src.write_text("a b c\n\nd e\n", encoding="utf-8")
    res = CliRunner().invoke(cli, ["translate", "-c", str(out), "-i", str(src), "-o", str(tmp_path / "o.txt"),
                                   "--input-format", "tok", "--beam", "2"])
    assert res.exit_code == 0, res.output
    assert (tmp_path / "o.txt").read_text(encoding="utf-8").split("\n")[1] == ""


def test_average_refuses_models_of_other_shapes_and_too_few_checkpoints(tmp_path):
    a = train_tiny(tmp_path / "a", 20, "train.max_steps=1")
    b = train_tiny(tmp_path / "b", 20, "train.max_steps=1", "model.d_ff=48")
    with pytest.raises(ValueError, match="shape"):
        average_checkpoints([a, b])
    res = CliRunner().invoke(cli, ["average", "--run-dir", str(a.parent), "--last", "3", "-o", str(tmp_path / "x.pt")])
    assert res.exit_code != 0 and "keep_last" in res.output


def test_average_keeps_tied_weights_one_tensor(tmp_path):
    """Tied weights (the decoder embedding and the output projection) stay one tensor in the
    average, as in each checkpoint: an averaged 12.6M-parameter model was 31.2 MB in fp16 instead
    of 25.9 MB, and `doctrans models add` refused it as over 30 MB."""
    a = train_tiny(tmp_path, 20, "train.max_steps=2", "train.save_every=1", "train.keep_last=2")
    kept = step_checkpoints(a.parent)
    ref = load_checkpoint(kept[-1])["model"]
    groups: dict[int, list[str]] = {}
    for k, v in ref.items():
        groups.setdefault(v.untyped_storage().data_ptr(), []).append(k)
    tied = [ks for ks in groups.values() if len(ks) > 1]
    assert tied, "the tiny model ties no weights: the test would not test anything"
    avg = average_checkpoints(kept)["model"]
    for ks in tied:
        assert len({avg[k].untyped_storage().data_ptr() for k in ks}) == 1, ks
    out = tmp_path / "avg.pt"
    torch.save(average_checkpoints(kept), out)
    saved = torch.load(out, weights_only=False)["model"]
    assert sum(v.numel() for v in {v.untyped_storage().data_ptr(): v for v in saved.values()}.values()) \
        == sum(v.numel() for v in {v.untyped_storage().data_ptr(): v for v in ref.values()}.values())
