"""``doctrans translate -i DIR -o OUT``: a collection of document files, mirrored file by file.

Which files. The files under DIR, recursively, hidden ``.name`` files and directories skipped,
that match the include pattern (``--glob``; ``fnmatch``, matched against each file's path
relative to DIR, where ``*`` also crosses ``/``, and against its name, so ``*.zh`` takes
``a.zh`` and ``sub/b.zh``; ``'*'`` takes every file). The default pattern is ``*SUFFIX`` for the
most common suffix among DIR's top-level files (among all its files when it has none at the
top level; a tie goes to the suffix of more files in the whole tree, then to the alphabetically
first; files without a suffix count as ``''``, and then only files without a suffix are
taken): so a folder of ``*.zh`` documents with a ``readme.txt`` beside them translates the
documents only. Files left out are counted in one log line (``default_pattern``,
``document_files``).

Which outputs. Each file gives OUT/<same relative path> with the model's source-language suffix
replaced by its target language's (``a.zh`` → ``a.en``; other names kept), or with an output
suffix (``--out-suffix .en``) its last suffix replaced (a file without suffix gets it appended;
``--out-suffix ''`` keeps every name); two sources that would share an output are an error.
Each output has one line per input line and is written atomically.

A file that cannot be read (unreadable, not UTF-8 nor wholly GB18030 / Big5 without
``--encoding-errors replace``) or
translated is reported and skipped; the others are still translated, and ``translate_collection`` raises ``CollectionError`` at the end listing the
failures (exit code 1). An empty file gives an empty output file (not an error). With
``resume`` a document whose output exists with as many lines as its input is skipped: outputs
are written atomically, so an existing output is a complete one of *some* run (re-translate
after changing the model by removing OUT). A progress bar counts documents (and sentences in
its postfix); a summary is logged at the end.

Batching and sharding. Consecutive documents (sorted paths) are grouped up to ``GROUP_LINES``
lines and each group is translated with one call, so many small files still fill the
beam-search batches (``plan_groups``). Groups are the unit of sharding, and the plan does not
depend on how many processes translate, so sharded output equals unsharded output:

* ``workers = N`` (``--workers``): a spawn ``ProcessPoolExecutor`` of N processes, each loading
  the model once; the groups are handed out largest first and each worker
  writes the outputs of the groups it translates. The parent aggregates the summary.
* torchrun (``shard = (RANK, WORLD_SIZE)``): rank r translates the groups k ≡ r (mod world);
  the summaries are gathered (gloo) and rank 0 logs the total and raises for failures.
* threads: ``--threads T`` (0 = the usable cores) is the budget of the whole machine; each of
  the P = LOCAL_WORLD_SIZE × N translating processes gets max(1, T // P) torch threads
  (``translate.process_threads``), so P × threads ≤ cores whenever P ≤ cores.
"""
from __future__ import annotations

import fnmatch
import logging
import multiprocessing
import os
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from concurrent.futures import ProcessPoolExecutor, as_completed
from pathlib import Path

import torch
from tqdm import tqdm

from doctrans.inference.config import GROUP_LINES   # documents translated together up to this many lines
from doctrans.utils import bars_off
from doctrans.utils.children import die_with_parent
from doctrans.utils.io import TextDecodeError, atomic_write_lines, read_lines, remove_stale_temps

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class TextReading:
    """How a document file is read (``data.encoding.text_lines``): ``encoding`` "" UTF-8 (a file
    that is not UTF-8 but wholly GB18030 or Big5: that, logged) with ``errors`` for undecodable
    UTF-8 (``utils.io.decode_lines``), or auto | a codec (``data.encoding.decode_text``);
    ``script``: Traditional text converted to Simplified (``data.encoding.to_simplified``: auto |
    simplified | traditional)."""

    errors: str = "strict"
    encoding: str = ""
    script: str = "simplified"

    def read(self, path: Path) -> list[str]:
        from doctrans.data.encoding import text_lines

        if self.encoding:
            lines = text_lines(Path(path).read_bytes(), str(path), self.errors, self.encoding)
        else:
            try:
                lines = read_lines(path)                # UTF-8, the default
            except TextDecodeError:                     # wholly GB18030 / Big5, else as errors says
                lines = text_lines(Path(path).read_bytes(), str(path), self.errors)
        if self.script != "simplified":
            from doctrans.data.encoding import to_simplified

            lines = to_simplified(lines, str(path), self.script)[0]
        return lines


def _reading(errors: "str | TextReading") -> TextReading:
    return errors if isinstance(errors, TextReading) else TextReading(errors)


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

    def add(self, other: "CollectionSummary") -> None:
        """Count ``other``'s documents, lines and failures in this summary (not its seconds)."""
        self.translated += other.translated
        self.resumed += other.resumed
        self.failed += other.failed
        self.lines += other.lines
        self.sentences += other.sentences

    @property
    def documents(self) -> int:
        return self.translated + self.resumed + len(self.failed)

    def finish(self, n_files: int, out, what: str) -> None:
        """Sort the failures, log the summary, and raise CollectionError naming the first five
        failed files (of ``n_files`` ``what``) when any failed; the others are written under ``out``."""
        self.failed.sort()
        self.log()
        if self.failed:
            detail = "; ".join(f"{f}: {r}" for f, r in self.failed[:5]) + (" …" if len(self.failed) > 5 else "")
            raise CollectionError(f"{len(self.failed)} of {n_files} {what} failed and were skipped (the other "
                                  f"outputs are written under {out}): {detail}")

    def log(self) -> None:
        rate = self.sentences / max(self.seconds, 1e-9)
        log.info("documents: %d translated, %d skipped (complete output exists, --resume), %d failed; "
                 "%d lines (%d sentences) in %.1f s, %.1f sentences/s", self.translated, self.resumed,
                 len(self.failed), self.lines, self.sentences, self.seconds, rate)




def _line_count(path: Path) -> int:
    with open(path, "rb") as f:
        return f.read().count(b"\n")


def _visible_files(inp: Path) -> list[Path]:
    return sorted(p for p in inp.rglob("*")
                  if p.is_file() and not any(part.startswith(".") for part in p.relative_to(inp).parts))


def default_pattern(inp: Path) -> str:
    """``*SUFFIX`` for the most common suffix of the non-hidden files at the top of ``inp``
    (of all its files when it has none there; ties: the suffix of more files in the whole
    tree, then the alphabetically first), ``*`` for an empty
    directory. A suffix-less majority gives ``''``: only files without a suffix (``document_files``)."""
    files = _visible_files(inp)
    top = [p for p in files if p.parent == inp] or files
    if not top:
        return "*"
    counts: dict[str, int] = {}
    for p in top:
        counts[p.suffix] = counts.get(p.suffix, 0) + 1
    overall: dict[str, int] = {}
    for p in files:
        overall[p.suffix] = overall.get(p.suffix, 0) + 1
    suffix = min(counts, key=lambda x: (-counts[x], -overall[x], x))
    return f"*{suffix}" if suffix else ""


def _matches(rel: Path, pattern: str) -> bool:
    if pattern == "":                                  # the default for documents without a suffix
        return rel.suffix == ""
    return fnmatch.fnmatchcase(rel.as_posix(), pattern) or fnmatch.fnmatchcase(rel.name, pattern)


def document_files(inp: Path, pattern: str | None = "*") -> list[Path]:
    """Files under ``inp`` (recursively, sorted), hidden files and directories excluded, that
    match ``pattern`` (see the module doc; None: ``default_pattern(inp)``). Logs how many were
    left out by the pattern."""
    if pattern is None:
        pattern = default_pattern(inp)
    files = _visible_files(inp)
    kept = [p for p in files if _matches(p.relative_to(inp), pattern)]
    if len(kept) < len(files):
        shown = repr(pattern) if pattern else "files without a suffix"
        log.info("%s: translating the %d files matching %s; %d other files left out (--glob PATTERN chooses)",
                 inp, len(kept), shown, len(files) - len(kept))
    return kept


def output_path(src: Path, inp: Path, out: Path, suffix: str | tuple[str, str] = "") -> Path:
    """Where the translation of ``src`` (a file under ``inp``) goes: its path relative to
    ``inp`` under ``out``, its last suffix replaced by ``suffix`` when given (appended when it
    has none); ``suffix = (".zh", ".en")`` (the model's languages, ``options.directory_out_suffix``):
    a ``.zh`` suffix becomes ``.en``, other names are kept."""
    dest = out / src.relative_to(inp)
    if isinstance(suffix, tuple):
        old, new = suffix
        return dest.with_name(dest.stem + new) if dest.suffix == old else dest
    if not suffix:
        return dest
    return dest.with_name(dest.stem + suffix) if dest.suffix else dest.with_name(dest.name + suffix)


def _check_outputs(files: list[Path], inp: Path, out: Path, suffix: str | tuple[str, str]) -> None:
    seen: dict[Path, Path] = {}
    for f in files:
        dest = output_path(f, inp, out, suffix)
        if dest in seen:
            raise ValueError(f"{seen[dest]} and {f} would both be translated to {dest}: choose another "
                             f"--out-suffix or a --glob that takes one of them")
        seen[dest] = f


def plan_groups(files: list[Path], max_lines: int = GROUP_LINES) -> list[list[Path]]:
    """Consecutive runs of ``files`` (in their sorted order) of at most ``max_lines`` lines
    together (a larger file is a group alone): the unit of translation and of sharding. Small
    documents translated together fill the beam-search batches (sentences of several files are
    sorted by length and batched jointly; a context model still keeps each document's own
    context). The plan depends on the files only, never on the number of workers or ranks, so
    sharded output equals unsharded output. An unreadable file counts 0 lines here (its error
    is reported when its group is translated)."""
    groups: list[list[Path]] = []
    size = 0
    for f in files:
        try:
            n = _line_count(f)
        except OSError:
            n = 0
        if not groups or (size + n > max_lines and groups[-1]):
            groups.append([])
            size = 0
        groups[-1].append(f)
        size += n
    return groups


def _read(src: Path, dest: Path, resume: bool, errors: "str | TextReading", s: CollectionSummary) -> list[str] | None:
    """The lines of ``src`` to translate (read by ``errors``: the ``--encoding-errors`` mode, or a
    ``TextReading``), or None when it failed (recorded in ``s``) or its output is complete under
    ``resume``."""
    try:
        lines = _reading(errors).read(src)
        if resume and dest.is_file() and _line_count(dest) == len(lines):
            s.resumed += 1
            return None
    except (ValueError, OSError) as e:
        _fail(s, src, e)
        return None
    if resume and dest.is_file():
        log.info("%s: existing output has a different line count: translating again", dest)
    return lines


def _fail(s: CollectionSummary, src: Path, e: Exception) -> None:
    log.error("skipped %s: %s", src, e)
    s.failed.append((str(src), str(e)))


def _write(docs: list[tuple[Path, Path, list[str]]], outs: list[list[str]], s: CollectionSummary) -> None:
    for (src, dest, lines), hyp in zip(docs, outs):
        try:
            atomic_write_lines(dest, hyp)
        except OSError as e:
            _fail(s, src, e)
            continue
        s.translated += 1
        s.lines += len(lines)
        s.sentences += sum(1 for x in lines if x.strip())


def translate_group(translator, inp: Path, out: Path, group: list[Path], resume: bool = False,
                    errors: "str | TextReading" = "strict",
                    out_suffix: str | tuple[str, str] = "") -> CollectionSummary:
    """Translate the documents ``group`` (files under ``inp``) into their mirrors under ``out``
    with one ``translator.translate`` call (``doc_ids``: one document per file; warnings name
    each file and line). Bad files are recorded in the returned summary, never raised; if the
    joint call raises ValueError, each document is translated alone so the failure is
    attributed to its file."""
    s, t0 = CollectionSummary(), time.time()
    docs = []
    for src in group:
        dest = output_path(src, inp, out, out_suffix)
        lines = _read(src, dest, resume, errors, s)
        if lines is not None:
            docs.append((src, dest, lines))
    if docs:
        lines = [x for _, _, ls in docs for x in ls]
        doc_ids = [str(src) for src, _, ls in docs for _ in ls]
        where = [f"{src}:{k + 1}" for src, _, ls in docs for k in range(len(ls))]
        try:
            hyp = iter(translator.translate(lines, name=str(docs[0][0]), doc_ids=doc_ids, where=where))
            _write(docs, [[next(hyp) for _ in ls] for _, _, ls in docs], s)
        except ValueError as e:
            if len(docs) == 1:
                _fail(s, docs[0][0], e)
            for src, dest, ls in docs if len(docs) > 1 else []:
                try:
                    _write([(src, dest, ls)], [translator.translate(ls, name=str(src))], s)
                except ValueError as e:
                    _fail(s, src, e)
    s.seconds = time.time() - t0
    return s


# --- workers (multiprocessing spawn Pool) and torchrun ranks ---------------------------------

_worker_translator = None


def _init_worker(make_translator, threads: int, level: int, parent: int | None = None) -> None:
    """Pool initializer: dies with the parent ``parent`` (a killed ``translate --workers N`` leaves
    no worker: ``utils.children``), ``threads`` torch threads, logging like the parent, the model
    loaded once."""
    global _worker_translator
    if parent is not None:
        die_with_parent(parent)
    torch.set_num_threads(threads)
    logging.basicConfig(level=level, format="%(asctime)s %(levelname)s %(name)s: %(message)s", datefmt="%H:%M:%S")
    _worker_translator = make_translator()


def _work(inp: Path, out: Path, resume: bool, errors: "str | TextReading", out_suffix: str | tuple[str, str],
          group: list[Path]) -> CollectionSummary:
    return translate_group(_worker_translator, inp, out, group, resume, errors, out_suffix)


def _size(group: list[Path]) -> int:
    total = 0
    for f in group:
        try:
            total += f.stat().st_size
        except OSError:
            pass
    return total


def _summaries(make_translator, inp: Path, out: Path, groups: list[list[Path]], resume: bool,
               errors: "str | TextReading", workers: int, threads: int,
               out_suffix: str | tuple[str, str] = "") -> Iterator[CollectionSummary]:
    """Each group's summary as it is translated: in this process (``workers`` ≤ 1: the
    translator built once, groups in order), or by a spawn Pool of ``workers`` processes, each
    building its translator once with ``threads`` torch threads (``ProcessPoolExecutor``: a
    worker that dies raises BrokenProcessPool, a RuntimeError, instead of hanging); the groups
    are handed out largest first, one at a time, and whoever translates a group writes its
    outputs. Raises what a worker raised beyond the bad files recorded in the summaries."""
    if workers <= 1 or not groups:
        translator = make_translator()
        for g in groups:
            yield translate_group(translator, inp, out, g, resume, errors, out_suffix)
        return
    order = sorted(groups, key=_size, reverse=True)
    with ProcessPoolExecutor(min(workers, len(groups)), mp_context=multiprocessing.get_context("spawn"),
                             initializer=_init_worker,
                             initargs=(make_translator, threads, logging.getLogger().getEffectiveLevel(),
                                       os.getpid())) as pool:
        futures = [pool.submit(_work, inp, out, resume, errors, out_suffix, g) for g in order]
        try:
            for done in as_completed(futures):
                yield done.result()
        except BaseException:                 # a worker's error (or the caller gave up): stop the rest
            pool.shutdown(cancel_futures=True)
            raise


@dataclass(frozen=True)
class Sharing:
    """How a collection's translation is shared out: ``workers`` processes on this machine, each
    with ``threads`` torch threads; ``shard`` = (rank, world) under torchrun; ``gather(summary)``
    → all ranks' summary on the reporting rank, None on the others (None: this process alone)."""

    workers: int
    threads: int
    shard: tuple[int, int]
    gather: Callable[[CollectionSummary], CollectionSummary | None] | None = None


ALONE = Sharing(workers=1, threads=1, shard=(0, 1))      # one process translating everything


def translate_collection(make_translator, inp: Path, out: Path, resume: bool = False,
                         errors: "str | TextReading" = "strict", progress: bool = True, sharing: Sharing = ALONE,
                         group_lines: int = GROUP_LINES, pattern: str | None = "*",
                         out_suffix: str | tuple[str, str] = "") -> CollectionSummary:
    """Translate every document file of ``inp`` into ``out`` (see module docstring).

    ``make_translator``: a picklable zero-argument callable returning an object with
    ``translate(lines, name=…, doc_ids=…, where=…)``, called once per process. The documents
    are planned into groups (``plan_groups``); this process takes the groups k ≡ rank (mod
    world) of ``sharing.shard = (rank, world)`` and translates them itself or with
    ``sharing.workers`` processes of ``sharing.threads`` threads (``_summaries``).
    ``sharing.gather(summary)`` (torchrun) returns the summary of all ranks on the reporting rank
    and None on the others, which then return their own summary without logging or raising. ``errors``: how files are read (the
    ``--encoding-errors`` mode of UTF-8 files, or a ``TextReading``: encoding and script too). ``pattern``: the files taken (``document_files``;
    None: ``default_pattern``); ``out_suffix``: the outputs' suffix (``output_path``). Returns
    the summary (also logged); raises CollectionError (after all other documents are written)
    when some failed, ValueError when ``out`` lies inside ``inp`` or two files would share an output."""
    if out.resolve().is_relative_to(inp.resolve()):
        raise ValueError(f"output directory {out} is inside the input directory {inp}: choose another")
    files = document_files(inp, pattern)
    if out.is_dir() and sharing.shard[0] == 0:
        remove_stale_temps(out, recursive=True)          # outputs a killed run was writing
    _check_outputs(files, inp, out, out_suffix)
    rank, world = sharing.shard
    mine = plan_groups(files, group_lines)[rank::world]
    s, t0 = CollectionSummary(), time.time()
    bar = tqdm(total=sum(len(g) for g in mine), unit="doc", desc="documents", disable=not progress or bars_off())
    for part in _summaries(make_translator, inp, out, mine, resume, errors, sharing.workers, sharing.threads,
                           out_suffix):
        s.add(part)
        s.seconds = time.time() - t0
        bar.update(part.documents)
        bar.set_postfix(sent=s.sentences, sent_s=f"{s.sentences / max(s.seconds, 1e-9):.1f}", failed=len(s.failed))
    bar.close()
    total = sharing.gather(s) if sharing.gather is not None else s
    if total is None:
        return s
    total.finish(len(files), out, "documents")
    return total
