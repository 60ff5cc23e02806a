"""The content digest checkpoints carry (runtime/checkpoint.py ``content_digest``, issue 73 item 3):
the same after ``torch.save``/``torch.load`` for every kind of tensor a checkpoint holds, and
changed by any change of a value — a tensor's element, a token, a setting."""
from __future__ import annotations

import pytest
import torch

from doctrans.runtime.checkpoint import DamagedCheckpoint, load_torch_file
from doctrans.runtime.checkpoint_digest import DIGEST_KEY, content_digest, with_digest


def _checkpoint() -> dict:
    torch.manual_seed(0)
    emb = torch.randn(7, 4)
    base = torch.randn(6, 5)
    return {
        "model": {"tgt_embed.weight": emb, "out_proj.weight": emb,                     # tied: one tensor
                  "half": torch.randn(3, 2).half(), "bf16": torch.randn(5).bfloat16(),
                  "mask": torch.tensor([True, False, True]), "count": torch.tensor(3),   # 0-dim
                  "empty": torch.zeros(0, 4), "also_empty": torch.zeros(0, 4),
                  "view": base[1:4, ::2], "ids": torch.arange(5)},                     # a strided view
        "optimizer": [{"state": {0: {"step": torch.tensor(2.0), "exp_avg": torch.randn(7, 4)}},
                       "param_groups": [{"lr": 1e-3, "betas": (0.9, 0.98), "params": [0]}]}],
        "rng": torch.get_rng_state(),
        "vocab": {"src": ["<pad>", "你", "好"], "tgt": ["<pad>", "hi"]},
        "config": {"model": {"d_model": 4, "dropout": 0.1}, "train": {"best": float("inf")}},
        "state": {"step": 2},
    }


def test_the_digest_survives_saving_and_loading(tmp_path):
    ck = _checkpoint()
    path = tmp_path / "c.pt"
    torch.save(with_digest(ck), path)
    loaded = torch.load(path, weights_only=True)
    assert loaded[DIGEST_KEY]["sha256"] == content_digest(ck) == content_digest(loaded)
    assert DIGEST_KEY not in load_torch_file(path)                   # checked, then removed


@pytest.mark.parametrize("change", [
    lambda ck: ck["model"]["tgt_embed.weight"].view(-1)[5].add_(1e-3),
    lambda ck: ck["model"]["half"].view(-1)[0].add_(1),
    lambda ck: ck["model"]["mask"].logical_not_(),
    lambda ck: ck["optimizer"][0]["state"][0]["exp_avg"].view(-1)[0].mul_(2),
    lambda ck: ck["optimizer"][0]["param_groups"][0].update(lr=2e-3),
    lambda ck: ck["vocab"]["src"].__setitem__(1, "他"),
    lambda ck: ck["config"]["model"].update(d_model=5),
    lambda ck: ck["model"].update({"out_proj.weight": ck["model"]["tgt_embed.weight"].clone()}),   # untied
], ids=["weight", "fp16", "bool", "optimizer", "lr", "token", "config", "untied"])
def test_any_change_changes_the_digest(change, tmp_path):
    ck = _checkpoint()
    path = tmp_path / "c.pt"
    torch.save(with_digest(ck), path)
    changed = torch.load(path, weights_only=True)
    change(changed)
    assert content_digest(changed) != content_digest(ck)
    torch.save(changed, path)                                         # the old digest kept: refused
    with pytest.raises(DamagedCheckpoint, match=f"checkpoint {path} is damaged"):
        load_torch_file(path)


def test_a_digest_of_an_unknown_scheme_is_refused(tmp_path):
    ck = with_digest(_checkpoint())
    ck[DIGEST_KEY] = {**ck[DIGEST_KEY], "scheme": "doctrans-9"}
    torch.save(ck, tmp_path / "c.pt")
    with pytest.raises(DamagedCheckpoint, match="not one this doctrans reads"):
        load_torch_file(tmp_path / "c.pt")


def test_content_the_digest_cannot_walk_is_refused_not_crashed(tmp_path):
    """A hostile file with a digest entry and content JSON cannot walk (a tuple key, a list that
    holds itself) is refused as damaged, not a TypeError/ValueError traceback."""
    loop: list = []
    loop.append(loop)
    for odd in ({(1, 2): "tuple key"}, loop):
        ck = {**with_digest(_checkpoint()), "odd": odd}
        torch.save(ck, tmp_path / "c.pt")
        with pytest.raises(DamagedCheckpoint, match="is damaged"):
            load_torch_file(tmp_path / "c.pt")
