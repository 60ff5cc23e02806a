"""The docs stay readable and connected (issue 49): each reference in docs/ is read in one sitting
(≤ 400 lines; the dated measurements live in docs/journal/, which has no limit), README is a
newcomer's page (≤ 220 lines), and every relative link of README, docs/ (journal included) and
benchmarks/RESULTS.md (the journal's index) points to a file that exists — and, for a link into a
Markdown file with ``#anchor``, to a heading of that file (GitHub's anchor rules); their fenced
code blocks close and are not empty (a doubled fence turns the block into prose). Issue 71: README's
first screen translates with the shipped model (a ``doctrans translate`` command without ``-c`` in its
first 40 lines), and every piece of code docs/extending.md names — a backticked identifier, dotted
name or call, a module path, a Python block's imports and definitions — exists in the package."""
from __future__ import annotations

import io
import re
import tokenize
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


# ---- README's first screen (issue 71 item 5) ----

FIRST_SCREEN = 40
CHECKPOINT_OPTION = re.compile(r"(?:^|\s)(?:-c|--checkpoint)(?:\s|=|$)")


def shipped_model_commands(text: str, first: int = FIRST_SCREEN) -> list[str]:
    """The ``doctrans translate`` commands in the fenced code blocks of ``text``'s first ``first``
    lines that name no checkpoint (no ``-c`` / ``--checkpoint``): they run the shipped model. Each
    command is cut at a pipe or a ``#`` comment."""
    found, fenced = [], False
    for line in text.splitlines()[:first]:
        if re.match(r"^\s{0,3}(```|~~~)", line):
            fenced = not fenced
            continue
        if not fenced:
            continue
        for m in re.finditer(r"\bdoctrans translate\b([^|#]*)", line):
            if not CHECKPOINT_OPTION.search(m.group(1)):
                found.append(m.group(0).strip())
    return found


def test_readme_first_screen_translates_with_the_shipped_model():
    text = (REPO / "README.md").read_text(encoding="utf-8")
    assert shipped_model_commands(text), (
        f"README.md's first {FIRST_SCREEN} lines have no `doctrans translate` command without -c "
        "(the shipped model, no training) in a code block")


def test_the_first_screen_check_tells_the_shipped_model_from_a_checkpoint():
    text = ("# x\n\n```bash\nprintf '他来了。' | doctrans translate --sentence   # -c is not needed\n"
            "doctrans translate -c runs/x/best.pt -i a.zh\ndoctrans translate --checkpoint=m.pt\n```\n"
            "doctrans translate outside a code block\n")
    assert shipped_model_commands(text) == ["doctrans translate --sentence"]
    assert shipped_model_commands(text, first=3) == []
    assert shipped_model_commands(text.replace("--sentence   #", "-c tvsub-transformer-3x3 #")) == []


# ---- docs/extending.md names code that exists (issue 71 item 6) ----

PACKAGE = REPO / "doctrans"
IDENTIFIER = r"[A-Za-z_]\w*"
DOTTED = re.compile(rf"^\.?({IDENTIFIER}(?:\.{IDENTIFIER})*)(?:\(.*\))?$", re.S)
PATH_AND_NAME = re.compile(rf"^([\w./-]+\.(?:py|md|yaml|json|sh))(?::\s*({IDENTIFIER}))?$")
PY_DEFINITION = re.compile(rf"^\s*(?:class|def)\s+({IDENTIFIER})|^({IDENTIFIER})\s*=", re.M)
PY_IMPORT = re.compile(rf"^\s*from\s+([\w.]+)\s+import\s+([\w, ]+)$", re.M)


def _is_placeholder(name: str) -> bool:
    """The page's metavariables: NAME (NAME_usage, models/NAME.py …) and single capitals (N, K)."""
    return "NAME" in name or re.fullmatch(r"[A-Z]", name) is not None


def file_identifiers(path: Path) -> set[str]:
    """The names a Python file uses in code (NAME tokens) and the identifier-shaped string
    constants it holds (``"dp_discourse"``, a YAML key); comments and prose in docstrings do not
    count, so a name only a docstring still mentions is gone."""
    names = set()
    for tok in tokenize.generate_tokens(io.StringIO(path.read_text(encoding="utf-8")).readline):
        if tok.type == tokenize.NAME:
            names.add(tok.string)
        elif tok.type == tokenize.STRING:
            m = re.fullmatch(r"[rbuRBU]?(['\"])(\w+)\1", tok.string)
            if m:
                names.add(m.group(2))
    return names


def package_identifiers() -> set[str]:
    return set().union(*(file_identifiers(p) for p in PACKAGE.rglob("*.py")))


def _resolve(path: str) -> Path | None:
    """A path as the page writes it: from the repository root, from ``doctrans/``, or the tail of
    a file's path in the package or the tests (``metrics/cxmi.py``, ``test_config.py``)."""
    path = path.rstrip("/")
    for base in (REPO, PACKAGE):
        if (base / path).exists():
            return base / path
    for root in (PACKAGE, REPO / "tests"):
        for p in root.rglob(Path(path).name):
            if p.as_posix().endswith("/" + path):
                return p
    return None


def missing_code_names(text: str, identifiers: set[str] | None = None) -> list[str]:
    """What ``text`` (a Markdown page) names as code that the package does not have: a backticked
    identifier or dotted name (each part; ``f(args)`` is ``f``), a path (``models/build.py``, with
    ``: name`` a name in that file), in a ``python`` code block each ``from M import A, B`` (M a
    module of the package holding A and B) and each class, def and assigned name, and in another
    code block (the layout tree) each ``.py`` file. Metavariables
    (NAME, N, K) and spans with other characters (commands, options, YAML) are not code names."""
    identifiers = package_identifiers() if identifiers is None else identifiers
    missing = []

    def check_name(dotted: str, where: str):
        for part in dotted.split("."):
            if not _is_placeholder(part) and part not in identifiers:
                missing.append(f"{where}: {part}")

    for span in re.findall(r"`([^`]+)`", FENCE.sub("", text)):      # a span may wrap a line
        span = " ".join(span.split())
        if any(c in span for c in "<>*{}") or "NAME" in span:
            continue
        if m := PATH_AND_NAME.match(span):
            target = _resolve(m.group(1))
            if target is None:
                missing.append(f"`{span}`: no such file")
            elif m.group(2) and (target.suffix != ".py" or m.group(2) not in file_identifiers(target)):
                missing.append(f"`{span}`: {m.group(2)} not in {m.group(1)}")
        elif re.fullmatch(r"[\w./]+/", span):
            if _resolve(span) is None:
                missing.append(f"`{span}`: no such directory")
        elif m := DOTTED.match(span):
            check_name(m.group(1), f"`{span}`")
    for block in (m.group(0) for m in FENCE.finditer(text)):
        if not re.match(r"^(```|~~~)python", block):                # the layout tree: its modules
            for path in re.findall(r"(?<![\w<>/.])([\w/]+\.py)\b", block):
                if _resolve(path) is None:
                    missing.append(f"code block: {path}: no such file")
            continue
        for module, names in PY_IMPORT.findall(block):
            file = _resolve(module.replace(".", "/") + ".py")
            if file is None:
                missing.append(f"from {module} import: no such module")
                continue
            for name in (n.strip() for n in names.split(",")):
                if name and name not in file_identifiers(file):
                    missing.append(f"from {module} import {name}: not in {file.relative_to(REPO)}")
        for cls_or_def, assigned in PY_DEFINITION.findall(block):
            check_name(cls_or_def or assigned, "code block")
    return missing



def test_extending_md_names_only_code_that_exists():
    text = (DOCS / "extending.md").read_text(encoding="utf-8")
    assert missing_code_names(text) == [], "docs/extending.md names code the package does not have"


def test_the_code_name_check_sees_a_gone_name_a_gone_file_and_a_bad_import():
    text = ("`build_model` and `models/build.py: CONTEXT_MODELS`, `metrics/cxmi.py`, `NAME_usage`, "
            "`doctrans score --help`, `compute(inputs: ScoreInputs)`, `inputs.cfg.NAME`\n"
            "gone: `NULL_HISTORY`, `models/nowhere.py`, `models/build.py: NOT_A_TABLE`, `batch.no_such_field`\n"
            "```python\nfrom doctrans.models.build import CONTEXT_MODELS, GONE\nclass ConcatConfig:\n"
            "    x = 1\ndef vanished_helper(): ...\n```\n```\nmodels/\n  build.py   tables\n  gone.py\n```\n")
    assert missing_code_names(text) == [
        "`NULL_HISTORY`: NULL_HISTORY", "`models/nowhere.py`: no such file",
        "`models/build.py: NOT_A_TABLE`: NOT_A_TABLE not in models/build.py",
        "`batch.no_such_field`: no_such_field",
        "from doctrans.models.build import GONE: not in doctrans/models/build.py",
        "code block: vanished_helper", "code block: gone.py: no such file"]
