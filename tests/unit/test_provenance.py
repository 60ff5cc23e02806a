"""The commit / date / machine line of the experiment tables (utils/provenance.py, issue 31 item 10)."""
from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

from doctrans.experiments import context_table
from doctrans.utils import provenance
from doctrans.utils.provenance import git_commit, provenance_line


def _git(repo: Path, *args: str) -> str:
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@t"}
    return subprocess.run(["git", *args], cwd=repo, env=env, check=True, capture_output=True, text=True).stdout


def test_git_commit_clean_modified_and_outside_git(tmp_path, monkeypatch):
    repo = tmp_path / "repo"
    repo.mkdir()
    _git(repo, "init", "-q")
    (repo / "a.txt").write_text("a\n")
    _git(repo, "add", "a.txt")
    _git(repo, "commit", "-q", "-m", "one")
    head = _git(repo, "rev-parse", "--short", "HEAD").strip()
    assert git_commit(repo) == head
    assert git_commit(repo / "a.txt") == head                       # a file: its directory's repository
    (repo / "a.txt").write_text("b\n")
    assert git_commit(repo) == f"{head} (modified)"
    outside = tmp_path / "plain"
    outside.mkdir()
    monkeypatch.setenv("GIT_CEILING_DIRECTORIES", str(tmp_path))   # do not find a repository above tmp
    assert git_commit(outside) == "unknown"
    monkeypatch.setenv("PATH", str(outside))                       # no git at all: never fails
    assert git_commit(repo) == "unknown"
    assert "commit unknown" in provenance_line(repo)


def test_provenance_line_names_commit_date_and_machine(tmp_path):
    line = provenance_line(tmp_path)
    assert re.match(r"Made by doctrans at commit \S+.* on \d{4}-\d\d-\d\d \d\d:\d\d:\d\d.* on .+ \(\d+ CPUs\)\.$",
                    line), line
    assert "\n" not in line


def test_context_table_ends_with_the_provenance_line(tmp_path, monkeypatch):
    row = {"system": "S", "updates": 3, "bleu": 1.0, "sacrebleu": 1.0, "pronouns": 2, "params_m": 0.1,
           "train_tok_s": 10.0, "decode_sent_s": 1.0, "ref_pronouns": [1, 1, 1]}
    monkeypatch.setattr(context_table, "_system_row",
                        lambda name, run, args, base, opts: ({**row, "system": name}, tmp_path / f"{name}.hyp"))
    monkeypatch.setattr(provenance.time, "strftime", lambda fmt: "2030-01-02 03:04:05 UTC")
    cfg = context_table.ContextTableConfig(out=str(tmp_path / "t.md"), work=str(tmp_path / "w"))
    out = context_table.build_context_table([("A", tmp_path), ("B", tmp_path)], cfg)
    last = out.read_text(encoding="utf-8").rstrip("\n").split("\n")[-1]
    assert last.startswith(f"Made by doctrans at commit {git_commit()} on 2030-01-02 03:04:05 UTC on ")
    assert "| B |" in out.read_text(encoding="utf-8")
    monkeypatch.setattr(context_table, "_significance", lambda *a: {})
    out = context_table.build_context_table([("A", tmp_path), ("B", tmp_path)], cfg, tables=[("one", ["A"]), ("two", ["B", "A"])])
    text = out.read_text(encoding="utf-8")
    assert text.count("Made by doctrans at commit") == 1 and text.rstrip("\n").split("\n")[-1].startswith("Made by")
