"""The docs stay readable and connected (issue 49): each reference in docs/ is read in one sitting
(≤ 400 lines; the dated measurements live in docs/journal/, which has no limit), README is a
newcomer's page (≤ 220 lines), and every relative link of README, docs/ (journal included) and
benchmarks/RESULTS.md (the journal's index) points to a file that exists — and, for a link into a
Markdown file with ``#anchor``, to a heading of that file (GitHub's anchor rules); their fenced
code blocks close and are not empty (a doubled fence turns the block into prose)."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from conftest import REPO

DOCS = REPO / "docs"
REFERENCE_MAX_LINES = 400
README_MAX_LINES = 220
LINKED = [REPO / "README.md", REPO / "benchmarks" / "RESULTS.md", *sorted(DOCS.rglob("*.md"))]

FENCE = re.compile(r"^(```|~~~).*?^\1[^\n]*$", re.S | re.M)
CODE_SPAN = re.compile(r"`[^`\n]*`")
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")


def _lines(path: Path) -> int:
    return len(path.read_text(encoding="utf-8").splitlines())


def _prose(text: str) -> str:
    """``text`` without fenced code blocks and code spans (their brackets are not links)."""
    return CODE_SPAN.sub("", FENCE.sub("", text))


def anchors(path: Path) -> set[str]:
    """The heading anchors GitHub gives a Markdown file: lower case, punctuation other than ``-``
    and ``_`` dropped, spaces → ``-``; a repeated heading gets ``-1``, ``-2`` …"""
    seen: dict[str, int] = {}
    out = set()
    for line in FENCE.sub("", path.read_text(encoding="utf-8")).splitlines():
        m = re.match(r"^#{1,6}\s+(.*?)\s*#*\s*$", line)
        if not m:
            continue
        slug = re.sub(r"[^\w\- ]", "", m.group(1).lower()).replace(" ", "-")
        n = seen.get(slug, 0)
        seen[slug] = n + 1
        out.add(slug if n == 0 else f"{slug}-{n}")
    return out


def broken_links(path: Path) -> list[str]:
    """The relative links of ``path`` whose file (or ``#anchor`` in a .md file) does not exist."""
    bad = []
    for target in LINK.findall(_prose(path.read_text(encoding="utf-8"))):
        if re.match(r"^[a-z][a-z0-9+.-]*:", target):          # http:, https:, mailto: …
            continue
        file, _, anchor = target.partition("#")
        dest = (path.parent / file).resolve() if file else path
        if not dest.exists():
            bad.append(f"{target} (no such file)")
        elif anchor and dest.suffix == ".md" and anchor not in anchors(dest):
            bad.append(f"{target} (no heading #{anchor})")
    return bad


def fence_faults(path: Path) -> list[str]:
    """Fenced code blocks that do not render as meant: an empty one (a doubled fence, which leaves
    the block it was to open as prose and the block's closing fence opening another) and one that
    never closes. Each as ``line N: what``."""
    faults, open_at = [], None
    lines = path.read_text(encoding="utf-8").splitlines()
    for i, line in enumerate(lines, 1):
        if not re.match(r"^\s{0,3}(```|~~~)", line):
            continue
        if open_at is None:
            open_at = i
        else:
            if open_at == i - 1:
                faults.append(f"line {open_at}: an empty code block (a doubled fence?)")
            open_at = None
    if open_at is not None:
        faults.append(f"line {open_at}: a code block that never closes")
    return faults


@pytest.mark.parametrize("path", sorted(DOCS.glob("*.md")), ids=lambda p: p.name)
def test_a_reference_is_read_in_one_sitting(path):
    n = _lines(path)
    assert n <= REFERENCE_MAX_LINES, (f"{path.relative_to(REPO)} has {n} lines (> {REFERENCE_MAX_LINES}): "
                                      "move dated measurements to docs/journal/ or split the reference")


def test_readme_is_a_newcomers_page():
    n = _lines(REPO / "README.md")
    assert n <= README_MAX_LINES, f"README.md has {n} lines (> {README_MAX_LINES}): move details to docs/"


@pytest.mark.parametrize("path", LINKED, ids=lambda p: str(p.relative_to(REPO)))
def test_every_relative_link_resolves(path):
    assert not broken_links(path), f"{path.relative_to(REPO)}: {broken_links(path)}"


def test_the_link_check_sees_a_broken_file_and_a_broken_anchor(tmp_path):
    (tmp_path / "b.md").write_text("# Where it stands (issue 29)\n\n## What they show\n", encoding="utf-8")
    a = tmp_path / "a.md"
    a.write_text("[ok](b.md#where-it-stands-issue-29) [ok](b.md#what-they-show) `[code](nowhere.md)`\n"
                 "[x](missing.md) [y](b.md#nowhere) [web](https://example.org/x.md)\n"
                 "```\n[fenced](also_missing.md)\n```\n", encoding="utf-8")
    assert broken_links(a) == ["missing.md (no such file)", "b.md#nowhere (no heading #nowhere)"]


@pytest.mark.parametrize("path", LINKED, ids=lambda p: str(p.relative_to(REPO)))
def test_every_code_block_renders(path):
    assert not fence_faults(path), f"{path.relative_to(REPO)}: {fence_faults(path)}"


def test_the_fence_check_sees_a_doubled_and_an_unclosed_fence(tmp_path):
    a = tmp_path / "a.md"
    a.write_text("```\nok\n```\n\n```\n```\ntree/\n```\n```\n", encoding="utf-8")
    assert fence_faults(a) == ["line 5: an empty code block (a doubled fence?)",
                               "line 8: an empty code block (a doubled fence?)"]
    a.write_text("```python\nx = 1\n```\n```\nopen\n", encoding="utf-8")
    assert fence_faults(a) == ["line 4: a code block that never closes"]
