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
    """``trained`` changed by ``change`` and saved with a new digest (as a tool that writes a
    wrong checkpoint would): the checks behind the digest's catch it."""
    from doctrans.runtime.checkpoint_digest import with_digest

    ck = torch.load(trained, weights_only=True)
    change(ck)
    out = tmp_path / "tampered.pt"
    torch.save(with_digest(ck), out)
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


# --- damaged bytes (issue 73, item 3): a digest written with every checkpoint, checked at load --

NO_VERIFY = "DOCTRANS_NO_VERIFY_CHECKPOINT"


def _flip_bytes(path: Path, tensor: torch.Tensor) -> int:
    """XOR the low bit of 4 bytes in the middle of ``tensor``'s stored bytes inside the checkpoint
    file ``path`` (a torch zip archive stores tensors uncompressed: their bytes are found verbatim).
    Returns the file offset changed. The values stay finite (a mantissa or low exponent bit)."""
    data = bytearray(path.read_bytes())
    raw = tensor.detach().cpu().contiguous().reshape(-1).view(torch.uint8).numpy().tobytes()
    start = data.find(raw)
    assert start >= 0 and data.find(raw, start + 1) < 0, "the tensor's bytes are not found once in the file"
    at = start + len(raw) // 2 // 4 * 4
    for i in range(4):
        data[at + i] ^= 0x01
    path.write_bytes(bytes(data))
    return at


def _damaged_copy(src: Path, dst: Path, pick) -> Path:
    """``src`` copied to ``dst`` with 4 bytes flipped inside the tensor ``pick(checkpoint)``."""
    import shutil

    shutil.copyfile(src, dst)
    _flip_bytes(dst, pick(torch.load(src, map_location="cpu", weights_only=True)))
    return dst


def _src_embed(ck: dict) -> torch.Tensor:
    return ck["model"]["src_embed.weight"]


def test_flipped_bytes_in_the_weights_are_refused_naming_the_file(trained, tmp_path, monkeypatch):
    from click.testing import CliRunner

    from doctrans.cli import cli

    monkeypatch.delenv(NO_VERIFY, raising=False)
    bad = _damaged_copy(trained, tmp_path / "damaged.pt", _src_embed)
    with pytest.raises(ValueError, match="is damaged") as e:
        _translate(bad, tmp_path)
    assert str(bad) in str(e.value) and NO_VERIFY in str(e.value) and "\n" not in str(e.value)
    assert not (tmp_path / "out.txt").exists()
    res = CliRunner().invoke(cli, ["translate", "-c", str(bad), "-i", str(tmp_path / "in.txt"),
                                   "-o", str(tmp_path / "out.txt"), "--input-format", "bpe"])
    assert res.exit_code != 0 and str(bad) in res.output + str(res.exception)
    assert not (tmp_path / "out.txt").exists()


def test_the_forensics_option_loads_a_damaged_checkpoint_with_a_warning(trained, tmp_path, monkeypatch, caplog):
    bad = _damaged_copy(trained, tmp_path / "damaged.pt", _src_embed)
    monkeypatch.setenv(NO_VERIFY, "1")
    with caplog.at_level("WARNING"):
        _translate(bad, tmp_path)
    assert len((tmp_path / "out.txt").read_text(encoding="utf-8").splitlines()) == 1
    assert str(bad) in caplog.text and "damaged" in caplog.text


def test_flipped_bytes_in_the_optimizer_state_refuse_resume(trained, tmp_path, monkeypatch):
    import shutil

    from conftest import QUIET_TRAIN, REPO
    from doctrans import stages
    from doctrans.config import load_experiment

    monkeypatch.delenv(NO_VERIFY, raising=False)
    run_dir = tmp_path / "run"
    shutil.copytree(trained.parent, run_dir)
    last = run_dir / "last.pt"

    def exp_avg(ck):
        return next(s["exp_avg"] for opt in ck["optimizer"] for s in opt["state"].values()   # one per optimizer
                    if s["exp_avg"].numel() > 64)

    _damaged_copy(trained, last, exp_avg)
    cfg = load_experiment(REPO / "pipelines" / "transformer" / "tiny.yaml",
                          [f"data.prepared={trained.parent.parent / 'prep'}", f"run_dir={run_dir}", *QUIET_TRAIN,
                           "train.max_steps=2"])
    with pytest.raises(ValueError, match="is damaged") as e:
        stages.train(cfg, resume=True)
    assert str(last) in str(e.value)
    assert torch.load(last, weights_only=True)["state"]["step"] == 1          # nothing overwritten
    monkeypatch.setenv(NO_VERIFY, "1")                                       # forensics: it resumes
    stages.train(cfg, resume=True)
    assert torch.load(last, weights_only=True)["state"]["step"] == 2


def test_every_checkpoint_a_stage_writes_carries_a_digest(trained, tmp_path, monkeypatch):
    """``last.pt`` (training), ``doctrans average``, ``doctrans models add`` (shipping): a flipped
    byte in each is refused at load."""
    from click.testing import CliRunner

    from doctrans.cli import cli
    from doctrans.runtime import shipped
    from doctrans.runtime.checkpoint import load_checkpoint

    monkeypatch.delenv(NO_VERIFY, raising=False)
    monkeypatch.setenv("DOCTRANS_SHIPPED_DIR", str(tmp_path / "shipped"))
    avg = tmp_path / "avg.pt"
    res = CliRunner().invoke(cli, ["average", str(trained), str(trained), "-o", str(avg)])
    assert res.exit_code == 0, res.output
    (tmp_path / "card.md").write_text("# tiny\n", encoding="utf-8")
    res = CliRunner().invoke(cli, ["models", "add", str(trained), "--name", "tiny", "--kind", "sentence",
                                   "--card", str(tmp_path / "card.md"), "--summary", "s"])
    assert res.exit_code == 0, res.output
    for written in (trained, avg, shipped.find("tiny").path):
        load_checkpoint(written)                                              # undamaged: loads
        bad = _damaged_copy(written, tmp_path / f"damaged-{written.name}", _src_embed)
        with pytest.raises(ValueError, match="is damaged") as e:
            load_checkpoint(bad)
        assert str(bad) in str(e.value)


# --- shipped models: checked against the index by content, however named ---------------------

def test_a_copied_shipped_model_is_checked_wherever_it_lies(tmp_path, monkeypatch):
    """The shipped files predate digests: a copy of one is recognised as shipped by its content
    (``shipped``) and must be a file the index describes (SHA-256)."""
    import shutil

    from doctrans.api import Translator
    from doctrans.runtime import shipped

    monkeypatch.delenv(NO_VERIFY, raising=False)
    monkeypatch.delenv("DOCTRANS_SHIPPED_DIR", raising=False)
    model = shipped.default_model("sentence")
    good = tmp_path / "my-model.pt"
    shutil.copyfile(model.verify(), good)
    assert Translator.load(str(good)).translate_sentences(["谢谢。"])[0]
    bad = _damaged_copy(model.path, tmp_path / "copy.pt", _src_embed)
    with pytest.raises(ValueError, match="damaged") as e:
        Translator.load(str(bad))
    assert str(bad) in str(e.value) and NO_VERIFY in str(e.value)


def test_a_shipped_file_named_by_its_path_is_checked_against_the_index(trained, tmp_path, monkeypatch):
    """``-c doctrans/shipped/NAME.pt`` is the model NAME: another checkpoint put in its place (a
    valid one, its own digest intact) is refused as ``-c NAME`` refuses it."""
    from doctrans.runtime import shipping
    from doctrans.runtime.checkpoint import load_checkpoint
    from doctrans.runtime.checkpoint_digest import with_digest

    monkeypatch.delenv(NO_VERIFY, raising=False)
    root = tmp_path / "shipped"
    monkeypatch.setenv("DOCTRANS_SHIPPED_DIR", str(root))
    model = shipping.ship(trained, "tiny", "sentence", "# tiny\n", "s")
    load_checkpoint(model.path)
    other = tmp_path / "other.pt"
    shipping.make_shippable(trained, other)
    ck = torch.load(other, weights_only=True)
    ck["state"]["step"] += 1                                  # another model: same shape, other content
    torch.save(with_digest(ck), model.path)
    load_checkpoint(other)                                    # valid where it is not a shipped model's file
    with pytest.raises(ValueError, match="tiny.*SHA-256.*different or damaged") as e:
        load_checkpoint(model.path)
    assert str(model.path) in str(e.value)
