"""Word alignment with eflomal and symmetrisation (for DP annotation, thesis §4.3.1).

The thesis aligns the parallel corpus in both directions with GIZA++ and keeps the
**intersection** of the two directions: few links, but precise ones, which is what the DP
search needs (an English pronoun with *no* Chinese link is the signal). We use eflomal
(Östling & Tiedemann 2016), a fast Bayesian IBM-model aligner, which writes both directions in
one run. Symmetrisation is ours (a few lines, standard definitions):

* ``intersect`` (default, the thesis' choice): links in both directions;
* ``grow-diag-final-and`` (Koehn et al. 2003, as in Moses): start from the intersection, add
  union links that neighbour (incl. diagonally) an existing link and cover a still unaligned
  word, then union links whose source *and* target words are both unaligned;
* ``union``, ``forward``, ``reverse``.

Links are ``(source index, target index)``, 0-based, written in Pharaoh ``i-j`` format.
eflomal samples (Gibbs) and takes no seed: two runs give slightly different alignments.
"""
from __future__ import annotations

import logging
import os
from collections.abc import Iterable, Sequence
from pathlib import Path

from doctrans.dp.annotate import Link, parse_alignment

logger = logging.getLogger(__name__)

SYMMETRIZATIONS: tuple[str, ...] = ("intersect", "grow-diag-final-and", "union", "forward", "reverse")

_NEIGHBOURS = ((-1, 0), (0, -1), (1, 0), (0, 1), (-1, -1), (-1, 1), (1, -1), (1, 1))


def format_alignment(links: Iterable[Link]) -> str:
    """Pharaoh text ``"0-0 1-2"`` of ``links``, sorted by source then target index."""
    return " ".join(f"{i}-{j}" for i, j in sorted(links))


def grow_diag_final_and(fwd: set[Link], rev: set[Link]) -> set[Link]:
    """Moses' grow-diag-final-and of two directional alignments (both as (src, tgt) links).

    Grow: repeat until nothing changes: for every current link (in sorted order) and each of
    its 8 neighbours that is in the union, add it if its source or its target word is still
    unaligned. Final-and: then for each link of the forward, then the reverse direction, add it
    if both its words are unaligned.
    """
    union = fwd | rev
    links = fwd & rev
    src_done = {i for i, _ in links}
    tgt_done = {j for _, j in links}
    added = True
    while added:
        added = False
        for i, j in sorted(links):
            for di, dj in _NEIGHBOURS:
                cand = (i + di, j + dj)
                if cand in union and cand not in links and (cand[0] not in src_done or cand[1] not in tgt_done):
                    links.add(cand)
                    src_done.add(cand[0])
                    tgt_done.add(cand[1])
                    added = True
    for direction in (fwd, rev):
        for i, j in sorted(direction):
            if i not in src_done and j not in tgt_done:
                links.add((i, j))
                src_done.add(i)
                tgt_done.add(j)
    return links


def symmetrize(fwd: set[Link], rev: set[Link], method: str = "intersect") -> set[Link]:
    """Combine forward and reverse links (both (src, tgt)) by ``method`` (``SYMMETRIZATIONS``).

    Raises ``ValueError`` for an unknown method.
    """
    if method == "intersect":
        return fwd & rev
    if method == "grow-diag-final-and":
        return grow_diag_final_and(fwd, rev)
    if method == "union":
        return fwd | rev
    if method == "forward":
        return set(fwd)
    if method == "reverse":
        return set(rev)
    raise ValueError(f"unknown symmetrization {method!r}; expected one of {SYMMETRIZATIONS}")


def eflomal_align(src_path: str | Path, tgt_path: str | Path, fwd_path: str | Path,
                  rev_path: str | Path, n_samplers: int = 2, model: int = 3,
                  rel_iterations: float = 1.0, quiet: bool = True) -> None:
    """Align two line-aligned tokenized files with eflomal; write both directions.

    ``fwd_path`` / ``rev_path`` receive one Pharaoh line per sentence pair (source-target order
    in both files; an empty sentence gives an empty line). ``n_samplers``: parallel Gibbs
    samplers (threads); ``model``: 1 = IBM1, 2 = + HMM distortion, 3 = + fertility;
    ``rel_iterations`` scales eflomal's corpus-size-based iteration counts. Outputs are written
    to temporary files and renamed, so an interrupted run leaves no partial file; eflomal's own
    temporary files go to a directory beside them (not /tmp), removed at the end, and its
    binary dies with this process (``utils.children``); what a killed run left is removed first
    (``remove_stale_temps``).
    Raises ``ImportError`` if eflomal is not installed, ``ValueError`` if the line counts differ.
    """
    import eflomal   # imported here: only annotate-dp needs it

    import shutil
    import tempfile

    from doctrans.utils.children import children_die_with_us
    from doctrans.utils.io import remove_stale_temps, temp_name_prefix

    fwd_path, rev_path = Path(fwd_path), Path(rev_path)
    for d in {fwd_path.parent, rev_path.parent}:
        remove_stale_temps(d)
    aligner = eflomal.Aligner(model=model, n_samplers=n_samplers, rel_iterations=rel_iterations)
    tmp_f = _tmp_next_to(fwd_path)
    tmp_r = _tmp_next_to(rev_path)
    work = tempfile.mkdtemp(dir=fwd_path.parent, prefix=temp_name_prefix("eflomal"), suffix=".tmp")
    old_tempdir = tempfile.tempdir
    try:
        tempfile.tempdir = work                 # eflomal's NamedTemporaryFiles (its input, priors)
        with open(src_path, encoding="utf-8") as s, open(tgt_path, encoding="utf-8") as t, \
                children_die_with_us():
            aligner.align(s, t, links_filename_fwd=tmp_f, links_filename_rev=tmp_r, quiet=quiet)
        os.replace(tmp_f, fwd_path)
        os.replace(tmp_r, rev_path)
    finally:
        tempfile.tempdir = old_tempdir
        shutil.rmtree(work, ignore_errors=True)
        for p in (tmp_f, tmp_r):
            if os.path.exists(p):
                os.unlink(p)


def _tmp_next_to(path: Path) -> str:
    from doctrans.utils.io import temp_file_next_to   # mkstemp, with the umask's mode (not 0600)

    fd, name = temp_file_next_to(path)
    os.close(fd)
    return name


def symmetrize_lines(fwd_lines: Sequence[str], rev_lines: Sequence[str], method: str) -> list[str]:
    """Symmetrise two lists of Pharaoh lines pairwise; returns Pharaoh lines."""
    if len(fwd_lines) != len(rev_lines):
        raise ValueError(f"{len(fwd_lines)} forward but {len(rev_lines)} reverse alignment lines")
    return [format_alignment(symmetrize(parse_alignment(f), parse_alignment(r), method))
            for f, r in zip(fwd_lines, rev_lines)]
