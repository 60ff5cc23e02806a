"""N-gram language model with KenLM: estimate with ``lmplz``, query through the ``kenlm`` module.

Used by DP annotation (thesis §4.3.1): among all (gap × Chinese pronoun) insertions of a dropped
pronoun, the candidate sentence the Chinese LM scores best is kept. The thesis trains its LM
with SRILM on the Chinese side of the training corpus; we estimate a modified Kneser-Ney LM
with KenLM's ``lmplz`` (Heafield et al. 2013) on the same text and convert it to KenLM's binary
format with ``build_binary`` (loads in seconds, memory-mapped, so parallel workers share it).

``lmplz``/``build_binary`` are C++ programs that pip does not install: ``make kenlm`` builds them
from the ``kenlm`` source distribution with cmake (Boost dev packages needed) into the venv's
``bin/``. ``find_kenlm_tool`` looks for them in, in order: an explicit path, the directory in
``$DOCTRANS_KENLM_BIN``, the directory of the running Python (the venv), ``$PATH``.
"""
from __future__ import annotations

import logging
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

logger = logging.getLogger(__name__)


class KenLMToolNotFound(FileNotFoundError):
    """``lmplz`` or ``build_binary`` is not installed where doctrans looks for it."""


def find_kenlm_tool(name: str, explicit: str | Path | None = None) -> Path:
    """Path of the KenLM program ``name`` (``lmplz`` or ``build_binary``).

    Raises ``KenLMToolNotFound`` with the places searched and how to build it.
    """
    searched = []
    if explicit:
        p = Path(explicit)
        if p.is_file() and os.access(p, os.X_OK):
            return p
        searched.append(str(p))
    dirs = [os.environ.get("DOCTRANS_KENLM_BIN"), str(Path(sys.executable).parent)]
    for d in dirs:
        if d:
            p = Path(d) / name
            if p.is_file() and os.access(p, os.X_OK):
                return p
            searched.append(str(p))
    found = shutil.which(name)
    if found:
        return Path(found)
    searched.append("$PATH")
    raise KenLMToolNotFound(
        f"KenLM's {name} not found (looked in: {', '.join(searched)}). Build it with `make kenlm` "
        "(compiles KenLM from its PyPI source with cmake; needs the Boost dev packages "
        "libboost-program-options-dev libboost-system-dev libboost-thread-dev libboost-test-dev), "
        "or point DOCTRANS_KENLM_BIN at a directory holding lmplz and build_binary.")


def estimate_lm(text_path: str | Path, out_path: str | Path, order: int = 5, memory: str = "2G",
                lmplz: str | Path | None = None, build_binary: str | Path | None = None,
                prune: Sequence[int] = (), extra_args: Sequence[str] = ()) -> Path:
    """Estimate a modified-Kneser-Ney ``order``-gram LM on the tokenized text (one sentence per
    line) and write it in KenLM binary format (probing hash) to ``out_path``.

    ``memory``: lmplz's sorting memory (``-S``, e.g. ``2G`` or ``20%``); it spills to a temporary
    directory beside ``out_path`` beyond that. ``prune``: lmplz ``--prune`` thresholds per order.
    ``--discount_fallback`` is always passed, so tiny corpora (tests) get a fallback discount
    instead of an error. The ARPA file is removed after conversion; the output appears
    atomically. Raises ``KenLMToolNotFound``, or ``RuntimeError`` with lmplz's stderr if it fails.
    """
    out_path = Path(out_path)
    out_path.parent.mkdir(parents=True, exist_ok=True)
    lmplz_bin = find_kenlm_tool("lmplz", lmplz)
    bb_bin = find_kenlm_tool("build_binary", build_binary)
    from doctrans.utils.io import remove_stale_temps, temp_name_prefix

    remove_stale_temps(out_path.parent)                   # what a killed run left
    with tempfile.TemporaryDirectory(prefix=temp_name_prefix("lm"), suffix=".tmp", dir=out_path.parent) as tmp:
        arpa = Path(tmp) / "lm.arpa"
        cmd = [str(lmplz_bin), "-o", str(order), "-S", memory, "-T", tmp, "--text", str(text_path),
               "--arpa", str(arpa), "--discount_fallback", *extra_args]
        if prune:
            cmd += ["--prune", *map(str, prune)]
        _run(cmd, "lmplz")
        binary = Path(tmp) / "lm.bin"
        _run([str(bb_bin), "-S", memory, "-T", tmp, "probing", str(arpa), str(binary)], "build_binary")
        os.replace(binary, out_path)
    return out_path


def _run(cmd: list[str], what: str) -> None:
    logger.info("running %s", " ".join(cmd))
    from doctrans.utils.children import preexec

    proc = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                          preexec_fn=preexec)                       # dies with us
    if proc.returncode != 0:
        raise RuntimeError(f"{what} failed (exit {proc.returncode}): {' '.join(cmd)}\n{proc.stderr[-3000:]}")


class KenLMScorer:
    """``lm_score`` for ``annotate.find_dps``: log10 P(sentence) with ``<s>``/``</s>``.

    ``tokens`` is a list of words (no spaces inside a word). The model is opened in the
    constructor (binary: memory-mapped, so worker processes share its pages; or ARPA).
    Raises ``OSError`` if the file does not exist or cannot be read.
    """

    def __init__(self, path: str | Path):
        import kenlm   # the Python module (pip package kenlm)

        self.path = Path(path)
        if not self.path.is_file():
            raise OSError(f"language model {self.path} does not exist")
        self.model = kenlm.Model(str(self.path))
        self.order = self.model.order

    def __call__(self, tokens: list[str]) -> float:
        return self.model.score(" ".join(tokens), bos=True, eos=True)
