"""README's quickstart figures say where they came from (issue 50 item 12): the commit they ran
on, which must exist in this repository's history, and the file they are copied from,
`runs/quickstart/quickstart_table.md`, in that table's number formats (`doctrans table context`:
BLEU and Δ to 2 decimals, Δ = the difference of the two BLEU figures, p-values to 3); and `make
help` gives the quickstart's time as README does (item 18)."""
from __future__ import annotations

import re
import shutil
import subprocess

import pytest

from conftest import REPO

README = REPO / "README.md"
MAKEFILE = REPO / "Makefile"
COMMIT = re.compile(r"\bat commit ([0-9a-f]{7,40})\b")
BLEU_ROW = re.compile(r"\*\*(\d+\.\d+) → (\d+\.\d+)\*\* \(([+-]\d+\.\d+), paired bootstrap p = (\d\.\d+)")
WHOLE = re.compile(r"\*\*whole `make quickstart`\*\* \| \*\*(\d+) min\*\*")


def _quickstart_section(text: str) -> str:
    start = text.index("What it gave")
    return text[start:text.index("\n## ", start)]


def _commit_exists(sha: str) -> bool | None:
    """None when this is not a git checkout (or git is missing): nothing to check against."""
    if not shutil.which("git") or not (REPO / ".git").exists():
        return None
    r = subprocess.run(["git", "cat-file", "-e", f"{sha}^{{commit}}"], cwd=REPO, capture_output=True)
    return r.returncode == 0


def provenance_problems(text: str, check_commit=_commit_exists) -> list[str]:
    """What is wrong with how README's quickstart figures state their provenance ([] = nothing)."""
    section = _quickstart_section(text)
    problems = []
    commits = COMMIT.findall(section)
    if not commits:
        problems.append("the quickstart figures name no commit ('at commit SHA')")
    for sha in commits:
        if check_commit(sha) is False:
            problems.append(f"commit {sha} is not in this repository's history")
    if "quickstart_table.md" not in text[:text.index("What it gave") + len(section)]:
        problems.append("the figures do not name the table they come from (runs/quickstart/quickstart_table.md)")
    rows = BLEU_ROW.findall(section)
    if not rows:
        problems.append("no test BLEU row 'A → B (+Δ, paired bootstrap p = P' in quickstart_table.md's formats")
    for a, b, d, p in rows:
        if any(len(x.split(".")[1]) != 2 for x in (a, b, d)) or len(p.split(".")[1]) != 3:
            problems.append(f"{a} → {b} ({d}, p = {p}): not quickstart_table.md's formats (BLEU and Δ .2f, p .3f)")
        if abs(float(b) - float(a) - float(d)) > 0.011:
            problems.append(f"Δ {d} is not {b} − {a} (within rounding)")
    return problems


def test_readme_quickstart_figures_carry_their_provenance():
    text = README.read_text(encoding="utf-8")
    if _commit_exists("HEAD") is None:
        pytest.skip("not a git checkout: the commit cannot be checked")
    assert provenance_problems(text) == []


def test_the_check_catches_a_wrong_commit_and_inconsistent_figures():
    text = README.read_text(encoding="utf-8")
    sha = COMMIT.search(_quickstart_section(text)).group(1)
    bad = text.replace(f"at commit {sha}", "at commit 0123abc")
    assert provenance_problems(bad, lambda s: s != "0123abc") == ["commit 0123abc is not in this repository's history"]
    a, b, d, p = BLEU_ROW.search(text).groups()
    wrong = text.replace(f"**{a} → {b}** ({d},", f"**{a} → {b}** (+9.99,")
    assert provenance_problems(wrong, lambda s: True) == [f"Δ +9.99 is not {b} − {a} (within rounding)"]
    assert "the quickstart figures name no commit" in provenance_problems(COMMIT.sub("at a commit", text))[0]


def test_make_help_gives_the_quickstart_time_readme_gives():
    readme_min = WHOLE.search(README.read_text(encoding="utf-8")).group(1)
    help_text = MAKEFILE.read_text(encoding="utf-8").split("\nPREP", 1)[0]
    quickstart = help_text.split("#   make quickstart", 1)[1].split("#   make test", 1)[0]
    assert re.findall(r"(\d+)(?:–\d+)? min", quickstart) == [readme_min]
