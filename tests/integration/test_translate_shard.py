"""Sharded translation of a document collection (issue 18): ``--workers 2`` (a spawn Pool) and
``torchrun --nproc_per_node=2`` write byte for byte the files one process writes; --resume and
bad files with workers.

One tiny Transformer trained 30 updates on the reversal task of conftest for the whole module;
``group_lines=4`` so the 7 small documents make several groups to share out."""
from __future__ import annotations

import logging
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from doctrans.inference.collection import CollectionError, plan_groups
from doctrans.inference.translate import TranslateConfig, process_threads, translate_input as translate_run

from conftest import REPO, train_tiny


@pytest.fixture(scope="module")
def trained(tmp_path_factory) -> Path:
    return train_tiny(tmp_path_factory.mktemp("shard"), 40, "train.max_steps=30", "train.max_tokens=256",
                      "train.eval_every=0")


@pytest.fixture
def docs(tmp_path) -> Path:
    """7 documents of 0–3 lines (one empty, one in a subdirectory, one with an empty line)."""
    d = tmp_path / "docs"
    (d / "sub").mkdir(parents=True)
    texts = {"a.zh": "w1 w2 w3\nw4\n", "b.zh": "w5 w6\n\nw7 w8 w9\n", "c.zh": "", "d.zh": "w10 w11\n",
             "sub/e.zh": "w12 w13 w14\nw15 w16\nw17\n", "sub/f.zh": "w18\n", "g.zh": "w19 w20 w21 w22\nw23\n"}
    for name, text in texts.items():
        (d / name).write_text(text, encoding="utf-8")
    return d


def _cfg(ckpt, inp, out, **kw) -> TranslateConfig:
    kw.setdefault("threads", 1)
    return TranslateConfig(checkpoint=str(ckpt), input=str(inp), output=str(out), beam=2, max_len_extra=5,
                           group_lines=4, **kw)


def _tree(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def test_plan_groups_and_threads_rule(docs):
    from doctrans.inference.collection import document_files

    groups = plan_groups(document_files(docs), 4)
    assert [[p.name for p in g] for g in groups] == [["a.zh"], ["b.zh", "c.zh", "d.zh"], ["g.zh"], ["e.zh", "f.zh"]]
    assert process_threads(8, 3) == 2 and process_threads(1, 4) == 1


def test_workers_output_equals_one_process_bad_file_reported(trained, docs, tmp_path, caplog):
    (docs / "bad.zh").write_bytes(b"w1\n\xfe\xff\n")
    with pytest.raises(CollectionError, match=r"1 of 8 documents failed.*bad\.zh:2"):
        translate_run(_cfg(trained, docs, tmp_path / "one"))
    with caplog.at_level(logging.INFO), pytest.raises(CollectionError, match=r"1 of 8 documents failed.*bad\.zh:2"):
        translate_run(_cfg(trained, docs, tmp_path / "two", workers=2, threads=2))
    one, two = _tree(tmp_path / "one"), _tree(tmp_path / "two")
    assert len(one) == 7 and one == two and "bad.en" not in two and "a.en" in two
    assert "7 translated, 0 skipped" in caplog.text and "1 failed; 12 lines (11 sentences)" in caplog.text


def test_workers_resume(trained, docs, tmp_path, caplog):
    out = tmp_path / "out"
    translate_run(_cfg(trained, docs, out))
    full = (out / "a.en").read_bytes()
    (out / "a.en").write_text("only one line\n", encoding="utf-8")      # incomplete: translated again
    mtime = (out / "sub" / "e.en").stat().st_mtime_ns
    with caplog.at_level(logging.INFO):
        translate_run(_cfg(trained, docs, out, workers=2, threads=2, resume=True))
    assert (out / "a.en").read_bytes() == full and (out / "sub" / "e.en").stat().st_mtime_ns == mtime
    assert "1 translated, 6 skipped" in caplog.text and "0 failed" in caplog.text


@pytest.mark.skipif(not torch.distributed.is_available(), reason="this torch build has no torch.distributed (gloo)")
def test_torchrun_ranks_output_equals_one_process(trained, docs, tmp_path):
    translate_run(_cfg(trained, docs, tmp_path / "one"))
    (docs / "bad.zh").write_bytes(b"\xff\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]),
           "OMP_NUM_THREADS": "1"}
    r = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2",
                        "-m", "doctrans.cli", "translate", "-c", str(trained), "-i", str(docs), "-o",
                        str(tmp_path / "ranks"), "--beam", "2", "--threads", "2", "--max-len-extra", "5",
                        "--group-lines", "4"], env=env, capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert r.returncode != 0, r.stderr[-3000:]                  # bad.zh: rank 0 exits 1
    assert "error: 1 of 8 documents failed" in r.stderr and "7 translated, 0 skipped" in r.stderr, r.stderr[-3000:]
    assert _tree(tmp_path / "ranks") == _tree(tmp_path / "one")
