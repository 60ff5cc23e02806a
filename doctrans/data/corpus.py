"""Readers for document-level parallel corpora.

Two layouts, both yielding ``Sentence`` records that know their document and position:

* a directory of per-document pairs ``N.zh``/``N.en`` (TVsub ``train/``): the document id is
  the file stem ``N``; only integer stems count (a clone of the public TVsub repository keeps
  other files such as ``0.np.tk.qb.es.zh`` next to them), sorted numerically;
* line-aligned ``X.zh``/``X.en`` plus an SGML file whose ``<DOC>`` blocks give the document
  boundaries (TVsub ``dev``/``test``).

Lines are split on ``\\n`` only (as ``wc -l`` counts them), never on other Unicode line
separators, so line numbers agree with the files.
"""
from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from doctrans.data.sgml import read_doc_ids
from doctrans.utils.io import read_lines  # noqa: F401  (re-exported for callers)

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Sentence:
    """One sentence pair; ``position`` is 0-based within document ``doc_id``."""

    doc_id: str
    position: int
    src: str
    tgt: str


def list_documents(doc_dir: str | Path, src: str, tgt: str) -> list[str]:
    """Ids of the documents in ``doc_dir`` (integer stems of ``*.{src}``), numerically sorted.

    Raises FileNotFoundError if the directory is missing, has no documents, or a ``N.{src}``
    has no ``N.{tgt}``.
    """
    doc_dir = Path(doc_dir)
    if not doc_dir.is_dir():
        raise FileNotFoundError(f"document directory {doc_dir} not found")
    ids = sorted((p.stem for p in doc_dir.glob(f"*.{src}") if p.stem.isdigit()), key=int)
    if not ids:
        raise FileNotFoundError(f"no documents N.{src} in {doc_dir}")
    for doc_id in ids:
        if not (doc_dir / f"{doc_id}.{tgt}").is_file():
            raise FileNotFoundError(f"{doc_dir / f'{doc_id}.{src}'} has no {doc_id}.{tgt} next to it")
    return ids


def select_documents(doc_ids: Sequence[str], selection: str | int) -> list[str]:
    """Pick documents from the sorted id list.

    ``selection``: ``"all"``; a count ``N`` (``300`` or ``"300"``: the first N); or a Python
    slice over the sorted list, ``"0:300"``, ``"100:"``, ``"::10"``. Raises ValueError on
    anything else or when the selection is empty.
    """
    text = str(selection).strip()
    if text in ("all", ":"):
        chosen = list(doc_ids)
    elif text.isdigit():
        chosen = list(doc_ids[: int(text)])
    else:
        parts = text.split(":")
        try:
            if not 2 <= len(parts) <= 3:
                raise ValueError
            bounds = [int(p) if p.strip() else None for p in parts]
        except ValueError:
            raise ValueError(f"bad document selection {selection!r}: use 'all', N or 'A:B[:STEP]'") from None
        chosen = list(doc_ids[slice(*bounds)])
    if not chosen:
        raise ValueError(f"document selection {selection!r} is empty ({len(doc_ids)} documents)")
    return chosen


def read_doc_dir(
    doc_dir: str | Path, src: str = "zh", tgt: str = "en", docs: str | int = "all"
) -> Iterator[Sentence]:
    """Sentences of the selected documents of a per-document directory, document by document.

    Raises ValueError naming the file when ``N.{src}`` and ``N.{tgt}`` differ in line count
    (raised when that document is reached).
    """
    doc_dir = Path(doc_dir)
    for doc_id in select_documents(list_documents(doc_dir, src, tgt), docs):
        src_path, tgt_path = doc_dir / f"{doc_id}.{src}", doc_dir / f"{doc_id}.{tgt}"
        src_lines, tgt_lines = read_lines(src_path), read_lines(tgt_path)
        if len(src_lines) != len(tgt_lines):
            raise ValueError(
                f"{src_path} has {len(src_lines)} lines but {tgt_path} has {len(tgt_lines)}"
            )
        for pos, (s, t) in enumerate(zip(src_lines, tgt_lines)):
            yield Sentence(doc_id, pos, s, t)


def read_sgml_aligned(
    prefix: str | Path, sgm: str | Path, src: str = "zh", tgt: str = "en"
) -> Iterator[Sentence]:
    """Sentences of ``{prefix}.{src}``/``{prefix}.{tgt}`` with documents from SGML ``sgm``.

    Positions restart at 0 whenever the document id changes from one segment to the next.
    Raises FileNotFoundError for a missing
    file and ValueError naming both files when a text file's line count differs from the
    number of ``<seg>`` entries.
    """
    paths = {lang: Path(f"{prefix}.{lang}") for lang in (src, tgt)}
    for path in (*paths.values(), Path(sgm)):
        if not path.is_file():
            raise FileNotFoundError(f"{path} not found")
    doc_ids = read_doc_ids(sgm)
    lines = {lang: read_lines(path) for lang, path in paths.items()}
    for lang, path in paths.items():
        if len(lines[lang]) != len(doc_ids):
            raise ValueError(
                f"{path} has {len(lines[lang])} lines but {sgm} has {len(doc_ids)} segments"
            )
    pos = 0
    for i, doc_id in enumerate(doc_ids):
        pos = pos + 1 if i and doc_id == doc_ids[i - 1] else 0
        yield Sentence(doc_id, pos, lines[src][i], lines[tgt][i])
