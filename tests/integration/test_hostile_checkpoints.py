"""Checkpoints that pass the ``weights_only`` check but are wrong (issue 50, item 8): each is
refused before a model is built, with a one-line error naming the file."""
from __future__ import annotations

from pathlib import Path

import pytest
import torch

from conftest import train_tiny
from doctrans.inference.translate import TranslateConfig
from doctrans.inference.translate import translate_input as run


@pytest.fixture(scope="module")
def trained(tmp_path_factory) -> Path:
    return train_tiny(tmp_path_factory.mktemp("hostile"), 12, "train.max_steps=1")


def _tampered(trained: Path, tmp_path: Path, change) -> Path:
    ck = torch.load(trained, weights_only=True)
    change(ck)
    out = tmp_path / "tampered.pt"
    torch.save(ck, out)
    return out


def _translate(ckpt: Path, tmp_path: Path):
    (tmp_path / "in.txt").write_text("w1 w2\n", encoding="utf-8")
    return run(TranslateConfig(checkpoint=str(ckpt), input=str(tmp_path / "in.txt"),
                               output=str(tmp_path / "out.txt"), input_format="bpe", beam=1))


def _set_d_ff(ck, value):
    ck["config"]["model"]["d_ff"] = value


@pytest.mark.parametrize("change, message", [
    (lambda ck: ck.update(text=None), "'text' must hold"),
    (lambda ck: ck.update(text={"src": None, "tgt": None}), "'text' must hold"),
    (lambda ck: _set_d_ff(ck, 1e8), r"model sizes must be integers: model\.d_ff=100000000\.0"),
    (lambda ck: _set_d_ff(ck, 100_000_000), r"do not match its config: .*shape .*100000000"),
    (lambda ck: ck.update(version="99.0.0"), "unknown checkpoint format version '99.0.0'"),
    (lambda ck: ck.update(version=None), "unknown checkpoint format version None"),
    (lambda ck: ck.update(vocab={"src": None, "tgt": []}), "'vocab' must hold"),
    (lambda ck: ck.update(kind="dp_generator"), "not a translation model"),
    (lambda ck: ck["model"].pop(next(iter(ck["model"]))), "do not match its config.*missing"),
    (lambda ck: ck["text"]["tgt"].update(version=9), "text settings version 9 is newer"),
    (lambda ck: ck["text"]["tgt"].update(recaser={"best": "I"}), "not a recaser table"),
], ids=["text-none", "text-fields-none", "d_ff-float", "d_ff-huge", "version-new", "version-none", "vocab",
        "kind", "missing-tensor", "text-version-new", "recaser"])
def test_a_tampered_checkpoint_is_refused_naming_the_file(trained, tmp_path, change, message):
    bad = _tampered(trained, tmp_path, change)
    with pytest.raises(ValueError, match=message) as e:
        _translate(bad, tmp_path)
    assert str(bad) in str(e.value) and "\n" not in str(e.value)
    assert not (tmp_path / "out.txt").exists()


def test_the_untampered_checkpoint_still_translates(trained, tmp_path):
    _translate(trained, tmp_path)
    assert len((tmp_path / "out.txt").read_text(encoding="utf-8").splitlines()) == 1


def test_the_size_check_does_not_import_the_compiler(trained):
    """The meta-device build of the size check ran ``normal_`` on meta tensors, whose Python
    decomposition imports ``torch._dynamo`` (and sympy): +70 MB resident and seconds of import on
    every ``translate``. A fresh interpreter checks the checkpoint without importing it."""
    import subprocess
    import sys
    code = ("import sys, torch\n"
            "from doctrans.runtime.checkpoint import load_checkpoint, check_translation_checkpoint\n"
            f"p = {str(trained)!r}\n"
            "check_translation_checkpoint(load_checkpoint(p), p)\n"
            "print('torch._dynamo' in sys.modules)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False", out.stdout + out.stderr


def test_loading_builds_the_model_once(trained, tmp_path, monkeypatch):
    """The size check builds the checkpoint's model; loading used to build it a second time
    (≈ 0.3 s and the model's memory again for the quickstart's HAN encoder): the checked model is
    the one loaded (a context option reaching it: test_isg.py)."""
    import doctrans.inference.loading as loading
    import doctrans.models.build as build

    built = []
    real = build.build_model

    def counting(*args, **kw):
        built.append(kw.get("context"))
        return real(*args, **kw)

    monkeypatch.setattr(build, "build_model", counting)
    monkeypatch.setattr(loading, "build_model", counting, raising=False)
    _translate(trained, tmp_path)
    assert len(built) == 1
    assert len((tmp_path / "out.txt").read_text(encoding="utf-8").splitlines()) == 1
