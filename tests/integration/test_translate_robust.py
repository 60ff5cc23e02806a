"""`doctrans translate` with the inputs of issue 18: over-long lines, a checkpoint moved away from
its dataset, non-UTF-8 input, collections of documents with bad files, --resume.

One tiny Transformer (model.max_positions=64, so "over-long" is cheap to reach) is trained on the
reversal task of conftest for the whole module."""
from __future__ import annotations

import logging
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from doctrans.inference.collection import CollectionError
from doctrans.inference.translate import TranslateConfig
from doctrans.stages import translate as translate_run

from conftest import REPO, train_tiny

MAX_POSITIONS = 64


@pytest.fixture(scope="module")
def trained(tmp_path_factory) -> Path:
    """last.pt of a tiny model trained 40 updates; its prepared dataset is in ../prep."""
    return train_tiny(tmp_path_factory.mktemp("robust"), 60, f"model.max_positions={MAX_POSITIONS}",
                      "train.max_steps=40", "train.max_tokens=256", "train.eval_every=0")


def _cfg(ckpt, inp, out, **kw) -> TranslateConfig:
    kw.setdefault("beam", 2)
    return TranslateConfig(checkpoint=str(ckpt), input=str(inp), output=str(out), threads=1, **kw)


def _lines(path: Path) -> list[str]:
    text = path.read_text(encoding="utf-8")
    assert text.endswith("\n") or text == ""
    return text.split("\n")[:-1]


def test_checkpoint_carries_bpe_codes_and_text_settings(trained):
    ck = torch.load(trained, weights_only=True)
    assert ck["text"]["src"]["lang"] == "zh" and ck["text"]["tgt"]["lang"] == "en"
    assert ck["text"]["src"]["bpe_codes"].startswith("#version") and ck["text"]["src"]["lowercase"] is True


@pytest.mark.parametrize("line", ["今天天气很好。" * 300,                                  # 1,501 tokens
                                  " ".join(f"w{i % 30}" for i in range(12_500))[:50_000]])  # 50,000 chars
def test_over_long_line_is_split_translated_and_joined(trained, tmp_path, caplog, line):
    inp = tmp_path / "in.zh"
    inp.write_text(f"w1 w2 w3\n{line}\n\nw4 w5\n", encoding="utf-8")
    out = tmp_path / "out.en"
    with caplog.at_level(logging.WARNING):
        translate_run(_cfg(trained, inp, out, beam=1))
    got = _lines(out)
    assert len(got) == 4 and got[2] == ""
    assert got[1].strip() and len(got[1].split()) > 20           # translated, not empty nor one piece
    assert f"{inp}:2: " in caplog.text and "split into" in caplog.text


def test_checkpoint_translates_from_elsewhere_without_its_dataset(trained, tmp_path):
    moved = tmp_path / "models" / "m.pt"
    moved.parent.mkdir()
    shutil.copy(trained, moved)
    prep = trained.parent.parent / "prep"
    backup = tmp_path / "prep_backup"
    shutil.move(prep, backup)                                    # the dataset is gone
    try:
        cwd = tmp_path / "elsewhere"
        cwd.mkdir()
        r = subprocess.run([sys.executable, "-m", "doctrans.cli", "translate", "-c", str(moved), "--beam", "1",
                            "--threads", "1"], input="w1 w2 w3\n\nw4\n", capture_output=True, text=True, cwd=cwd,
                           env={**os.environ, "PYTHONPATH": str(REPO)})
    finally:
        shutil.move(backup, prep)
    assert r.returncode == 0, r.stderr
    out = r.stdout.split("\n")[:-1]
    assert len(out) == 3 and out[0].strip() and out[1] == ""


def test_old_checkpoint_without_text_settings_names_what_is_missing(trained, tmp_path):
    ck = torch.load(trained, weights_only=True)
    del ck["text"], ck["digest"]                           # as checkpoints were before both
    ck["prepared"] = str(tmp_path / "gone")
    old = tmp_path / "old.pt"
    torch.save(ck, old)
    inp = tmp_path / "in.zh"
    inp.write_text("w1\n", encoding="utf-8")
    with pytest.raises(FileNotFoundError, match=r"old\.pt carries no BPE codes.*gone.*--prepared"):
        translate_run(_cfg(old, inp, tmp_path / "o"))
    translate_run(_cfg(old, inp, tmp_path / "o", prepared=str(trained.parent.parent / "prep")))
    assert len(_lines(tmp_path / "o")) == 1


def test_non_utf8_input_error_or_replace(trained, tmp_path, caplog):
    inp = tmp_path / "in.zh"
    inp.write_bytes(b"w1 w2\n\xffw3 w4\n")
    with pytest.raises(ValueError, match=r"in\.zh:2: not valid UTF-8 \(byte 0xff at byte 0 of the line"):
        translate_run(_cfg(trained, inp, tmp_path / "out"))
    with caplog.at_level(logging.WARNING):
        translate_run(_cfg(trained, inp, tmp_path / "out", encoding_errors="replace"))
    assert len(_lines(tmp_path / "out")) == 2 and "1 undecodable byte sequence" in caplog.text


def test_non_utf8_stdin_names_stdin(trained, tmp_path):
    r = subprocess.run([sys.executable, "-m", "doctrans.cli", "translate", "-c", str(trained), "--beam", "1"],
                       input=b"w1\n\xff\n", capture_output=True, cwd=REPO)
    assert r.returncode == 1 and b"error: <stdin>:2: not valid UTF-8" in r.stderr and b"Traceback" not in r.stderr


def test_collection_skips_bad_files_translates_the_rest_and_resumes(trained, tmp_path, caplog):
    docs, out = tmp_path / "docs", tmp_path / "out"
    (docs / "sub").mkdir(parents=True)
    (docs / "a.zh").write_text("w1 w2\n\nw3\n", encoding="utf-8")
    (docs / "sub" / "b.zh").write_text("w4\n", encoding="utf-8")
    (docs / "empty.zh").write_text("", encoding="utf-8")
    (docs / "bad.zh").write_bytes(b"w1\n\xfe\xff\n")
    with caplog.at_level(logging.INFO), pytest.raises(CollectionError, match=r"1 of 4 documents failed.*bad\.zh:2"):
        translate_run(_cfg(trained, docs, out))
    assert len(_lines(out / "a.en")) == 3 and len(_lines(out / "sub" / "b.en")) == 1
    assert _lines(out / "empty.en") == [] and not (out / "bad.en").exists()
    assert "3 translated, 0 skipped" in caplog.text and "1 failed" in caplog.text and "sentences/s" in caplog.text

    (docs / "bad.zh").write_bytes(b"w1\nw2\n")                   # fixed; a.zh's output made incomplete
    (out / "a.en").write_text("only one line\n", encoding="utf-8")
    mtime_b = (out / "sub" / "b.en").stat().st_mtime_ns
    caplog.clear()
    with caplog.at_level(logging.INFO):
        translate_run(_cfg(trained, docs, out, resume=True))
    assert len(_lines(out / "a.en")) == 3 and len(_lines(out / "bad.en")) == 2
    assert (out / "sub" / "b.en").stat().st_mtime_ns == mtime_b
    assert "2 translated, 2 skipped" in caplog.text and "0 failed" in caplog.text


def test_cli_collection_with_failures_exits_1_after_writing_the_rest(trained, tmp_path):
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "a.zh").write_text("w1\n", encoding="utf-8")
    (docs / "b.zh").write_bytes(b"\xff\n")
    r = subprocess.run([sys.executable, "-m", "doctrans.cli", "translate", "-c", str(trained), "-i", str(docs),
                        "-o", str(tmp_path / "out"), "--beam", "1"], capture_output=True, text=True, cwd=REPO)
    assert r.returncode == 1 and "error: 1 of 2 documents failed" in r.stderr and "Traceback" not in r.stderr
    assert len(_lines(tmp_path / "out" / "a.en")) == 1


def _dp_prepared(root: Path) -> Path:
    """A tiny DP-annotated prepared dir: 我 is dropped before 去 (as tests/integration/test_dp_generator.py)."""
    import random

    rng, words = random.Random(0), ["吃", "饭", "学校", "今天", "去", "很", "好"]
    prep = root / "prep"
    (prep / "dp").mkdir(parents=True)
    for split, n in (("train", 60), ("dev", 20)):
        sents = [[rng.choice(words) for _ in range(rng.randint(2, 6))] for _ in range(n)]
        (prep / f"{split}.tok.zh").write_text("".join(" ".join(s) + "\n" for s in sents), encoding="utf-8")
        (prep / "dp" / f"{split}.dplabel").write_text(
            "".join(" ".join(["我" if w == "去" else "N" for w in s] + ["N"]) + "\n" for s in sents), encoding="utf-8")
        (prep / f"{split}.docs").write_text("".join(f"d0\t{k}\n" for k in range(n)), encoding="utf-8")
    return prep


def test_over_long_line_with_a_dp_generator_is_translated_without_dp(trained, tmp_path, caplog):
    from doctrans.dp.config import load_dp_config
    from doctrans.dp.train import train_generator as dp_run

    gen = dp_run(load_dp_config(REPO / "pipelines" / "dp" / "tiny.yaml", [
        f"data.prepared={_dp_prepared(tmp_path)}", f"run_dir={tmp_path / 'gen'}", "data.min_freq=1",
        "train.max_epochs=1"])) / "best.pt"
    inp = tmp_path / "in.zh"
    inp.write_text("今天 去 学校\n" + " ".join(["w1 w2 去 。"] * 25) + "\n", encoding="utf-8")
    out = tmp_path / "out.en"
    with caplog.at_level(logging.WARNING):
        translate_run(_cfg(trained, inp, out, input_format="tok", dp_generator=str(gen), dp_nbest=2))
    got = _lines(out)
    assert len(got) == 2 and got[1].strip()
    assert f"{inp}:2: too long for DP completion" in caplog.text and f"{inp}:2: 100 source tokens" in caplog.text
    assert f"{inp}:1:" not in caplog.text


def test_collection_reports_an_unreadable_file(trained, tmp_path, monkeypatch):
    import doctrans.inference.collection as collection

    docs = tmp_path / "docs"
    docs.mkdir()
    for name in ("a.zh", "locked.zh"):
        (docs / name).write_text("w1 w2\n", encoding="utf-8")
    real = collection.read_lines

    def read_lines(path, errors="strict"):                 # root can read a chmod 000 file: simulate
        if Path(path).name == "locked.zh":
            raise PermissionError(13, "Permission denied", str(path))
        return real(path, errors=errors)

    monkeypatch.setattr(collection, "read_lines", read_lines)
    with pytest.raises(CollectionError, match=r"1 of 2 documents failed.*locked\.zh.*Permission denied"):
        translate_run(_cfg(trained, docs, tmp_path / "out"))
    assert len(_lines(tmp_path / "out" / "a.en")) == 1 and not (tmp_path / "out" / "locked.en").exists()
