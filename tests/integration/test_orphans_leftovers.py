"""Nothing outlives a killed run (issue 50, items 5 and 6): child processes — a spawn pool's
workers and its resource tracker (``translate --workers N``), a subprocess a library starts
(eflomal's binary in ``annotate-dp``) — die with their parent when it is killed with SIGKILL;
temporary files a killed writer left are removed by the next run, and only those."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from dataclasses import replace
from pathlib import Path

import pytest
import torch

from doctrans.config import TrainConfig
from doctrans.utils.io import remove_stale_temps, temp_file_next_to

PARENT = textwrap.dedent("""
    import os, subprocess, sys, time
    from concurrent.futures import ProcessPoolExecutor
    import multiprocessing
    from doctrans.utils.children import children_die_with_us, die_with_parent

    if __name__ == "__main__":
        with children_die_with_us():                      # as eflomal's wrapper starts its binary
            sleeper = subprocess.Popen(["sleep", "300"])
        pool = ProcessPoolExecutor(2, mp_context=multiprocessing.get_context("spawn"),
                                   initializer=die_with_parent, initargs=(os.getpid(),))   # as translate --workers 2
        pids = [pool.submit(os.getpid).result() for _ in range(4)]
        print(sleeper.pid, *sorted(set(pids)), flush=True)
        time.sleep(300)
""")


def _children(pid: int) -> set[int]:
    """Descendants of ``pid`` (from /proc)."""
    parents = {}
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                parents[int(d.name)] = int((d / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, ValueError, IndexError):
                pass
    out, todo = set(), [pid]
    while todo:
        p = todo.pop()
        kids = {c for c, pp in parents.items() if pp == p}
        out |= kids
        todo += list(kids)
    return out


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux's")
def test_children_die_with_a_killed_parent(tmp_path):
    script = tmp_path / "parent.py"
    script.write_text(PARENT, encoding="utf-8")
    parent = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, text=True, cwd=tmp_path,
                              start_new_session=True)
    try:
        listed = {int(x) for x in parent.stdout.readline().split()}
        children = _children(parent.pid)
        cmdlines = [Path(f"/proc/{p}/cmdline").read_bytes() for p in children]
        assert listed <= children and any(b"resource_tracker" in c for c in cmdlines)   # sleep, worker(s), tracker
        parent.kill()                                                 # SIGKILL: no handler, no finally
        parent.wait()
        deadline = time.time() + 20
        while time.time() < deadline and any(_alive(p) for p in children):
            time.sleep(0.05)
        assert not [p for p in children if _alive(p)]
    finally:
        if parent.poll() is None:
            parent.kill()
        for p in _children(parent.pid):
            os.kill(p, signal.SIGKILL)


def _dead_pid() -> int:
    p = subprocess.Popen(["true"])
    p.wait()
    return p.pid


def test_only_a_dead_writers_temporary_files_are_removed(tmp_path):
    dead = _dead_pid()
    stale = tmp_path / f".last.pt.{dead}.abcd_123.tmp"
    live = tmp_path / f".last.pt.{os.getpid()}.abcd_123.tmp"
    other = [tmp_path / ".notes.tmp", tmp_path / f"last.pt.{dead}.abcd_123.tmp", tmp_path / "last.pt"]
    stale_dir = tmp_path / "sub" / f".eflomal.{dead}.zzzzzzzz.tmp"
    stale_dir.mkdir(parents=True)
    (stale_dir / "tmpabc").write_text("x")
    for p in [stale, live, *other]:
        p.write_text("x")
    assert remove_stale_temps(tmp_path) == [stale]
    assert remove_stale_temps(tmp_path, recursive=True) == [stale_dir]
    assert all(p.exists() for p in [live, *other])
    fd, name = temp_file_next_to(tmp_path / "out.txt")                  # our own names carry our pid
    os.close(fd)
    assert Path(name).name.startswith(f".out.txt.{os.getpid()}.") and name.endswith(".tmp")


def test_training_and_directory_translation_remove_a_killed_runs_leftovers(tmp_path):
    from doctrans.training.trainer import Trainer

    class Task:
        kind, model, config = "toy", torch.nn.Linear(2, 1), TrainConfig()

    dead = _dead_pid()
    left = tmp_path / f".last.pt.{dead}.qwertyui.tmp"
    left.write_bytes(b"PK\x03\x04partial")
    Trainer(Task(), replace(TrainConfig(), tensorboard=False), tmp_path, torch.device("cpu"))
    assert not left.exists()

    from doctrans.inference.collection import translate_collection

    class Echo:
        def translate(self, lines, **kw):
            return list(lines)

    inp, out = tmp_path / "in", tmp_path / "out"
    (inp / "a").mkdir(parents=True)
    (inp / "a" / "1.zh").write_text("x\n", encoding="utf-8")
    (out / "a").mkdir(parents=True)
    leftover = out / "a" / f".1.zh.{dead}.asdfghjk.tmp"
    leftover.write_text("half")
    translate_collection(Echo, inp, out, progress=False)
    assert not leftover.exists() and (out / "a" / "1.zh").read_text(encoding="utf-8") == "x\n"


def test_eflomal_temporary_files_stay_beside_the_outputs_and_are_removed(tmp_path, monkeypatch):
    eflomal = pytest.importorskip("eflomal")
    import tempfile

    from doctrans.dp.align import eflomal_align

    seen = []
    real = eflomal.Aligner.prepare_files

    def spy(self, src_input, srcf, *a, **kw):
        seen.append(Path(srcf.name))
        return real(self, src_input, srcf, *a, **kw)

    monkeypatch.setattr(eflomal.Aligner, "prepare_files", spy)
    src, tgt = tmp_path / "s", tmp_path / "t"
    src.write_text("a b\nc d\n", encoding="utf-8")
    tgt.write_text("x y\nz w\n", encoding="utf-8")
    dp = tmp_path / "dp"
    dp.mkdir()
    eflomal_align(src, tgt, dp / ".align.fwd", dp / ".align.rev", n_samplers=1, rel_iterations=0.1)
    assert seen and all(p.parent.parent == dp for p in seen)             # not in /tmp
    assert sorted(p.name for p in dp.iterdir()) == [".align.fwd", ".align.rev"]
    assert tempfile.gettempdir() != str(seen[0].parent)
