"""``doctrans translate -i DIR -o OUT``: a collection of document files, mirrored file by file.

Every file under DIR (recursively; hidden ``.name`` files skipped) gives OUT/<same relative
path> with one line per input line, written atomically. A file that cannot be read (unreadable,
not UTF-8 without ``--encoding-errors replace``) or translated is reported and skipped; the
others are still translated, and ``run`` raises ``CollectionError`` at the end listing the
failures (exit code 1). An empty file gives an empty output file (not an error). With
``resume`` a document whose output exists with as many lines as its input is skipped: outputs
are written atomically, so an existing output is a complete one of *some* run (re-translate
after changing the model by removing OUT). A progress bar counts documents (and sentences in
its postfix); a summary is logged at the end.
"""
from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from pathlib import Path

from tqdm import tqdm

from doctrans.utils.io import atomic_write_lines, read_lines

log = logging.getLogger(__name__)


class CollectionError(RuntimeError):
    """Some documents of a collection failed; the others were translated and written."""


@dataclass
class CollectionSummary:
    translated: int = 0
    resumed: int = 0                                          # skipped: complete output exists
    failed: list[tuple[str, str]] = field(default_factory=list)   # (file, reason)
    lines: int = 0
    sentences: int = 0                                        # non-empty lines translated
    seconds: float = 0.0

    def log(self) -> None:
        rate = self.sentences / max(self.seconds, 1e-9)
        log.info("documents: %d translated, %d skipped (complete output exists, --resume), %d failed; "
                 "%d lines (%d sentences) in %.1f s, %.1f sentences/s", self.translated, self.resumed,
                 len(self.failed), self.lines, self.sentences, self.seconds, rate)


def _line_count(path: Path) -> int:
    with open(path, "rb") as f:
        return f.read().count(b"\n")


def document_files(inp: Path) -> list[Path]:
    """Files under ``inp`` (recursively, sorted), hidden files and directories excluded."""
    return sorted(p for p in inp.rglob("*")
                  if p.is_file() and not any(part.startswith(".") for part in p.relative_to(inp).parts))


def _one(translator, src: Path, dest: Path, resume: bool, errors: str, s: CollectionSummary) -> None:
    """Translate one document into ``s``; raises ValueError/OSError for a bad one."""
    lines = read_lines(src, errors=errors)
    if resume and dest.is_file() and _line_count(dest) == len(lines):
        s.resumed += 1
        return
    if resume and dest.is_file():
        log.info("%s: existing output has a different line count: translating again", dest)
    atomic_write_lines(dest, translator.translate(lines, name=str(src)))
    s.translated += 1
    s.lines += len(lines)
    s.sentences += sum(1 for x in lines if x.strip())


def translate_collection(translator, inp: Path, out: Path, resume: bool = False,
                         errors: str = "strict", progress: bool = True) -> CollectionSummary:
    """Translate every document file of ``inp`` into ``out`` (see module docstring) with
    ``translator.translate(lines, name=…)``. Returns the summary (also logged); raises
    CollectionError (after all other documents are written) when some failed, ValueError when
    ``out`` lies inside ``inp``."""
    if out.resolve().is_relative_to(inp.resolve()):
        raise ValueError(f"output directory {out} is inside the input directory {inp}: choose another")
    files = document_files(inp)
    s, t0 = CollectionSummary(), time.time()
    bar = tqdm(files, unit="doc", desc="documents", disable=not progress)
    for src in bar:
        try:
            _one(translator, src, out / src.relative_to(inp), resume, errors, s)
        except (ValueError, OSError) as e:
            log.error("skipped %s: %s", src, e)
            s.failed.append((str(src), str(e)))
        s.seconds = time.time() - t0
        bar.set_postfix(sent=s.sentences, sent_s=f"{s.sentences / max(s.seconds, 1e-9):.1f}", failed=len(s.failed))
    bar.close()
    s.log()
    if s.failed:
        detail = "; ".join(f"{f}: {r}" for f, r in s.failed[:5]) + (" …" if len(s.failed) > 5 else "")
        raise CollectionError(f"{len(s.failed)} of {len(files)} documents failed and were skipped (the other "
                              f"outputs are written under {out}): {detail}")
    return s
