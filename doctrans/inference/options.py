"""Checks and defaults of a translation that come before any work (``doctrans translate``).

Outputs (issues 50, 73): no output may be one of the inputs — same path, or the same file
through a symbolic or hard link (``os.path.samefile``) —, nor, for ``-i -``, the file standard
input reads (``os.fstat``), so neither ``-i X -o X`` nor ``-o X < X`` replaces a source with its
translation; a file's output (``--output``, ``--nbest-out``, ``--dp-out``, ``--write-lattice``)
may not be an existing directory, nor a directory input's ``--output`` an existing file, nor
may an output lie under a file or an unwritable directory (the write would fail only after
everything was translated). ``check_outputs`` raises before the model is loaded.

Directory outputs are named after their sources with the model's source-language suffix
replaced by its target language's (``ep1.zh`` → ``ep1.en``; ``language_suffixes``,
``model_languages``); other names are kept. ``out_suffix`` overrides it (``""`` keeps every name).

Compute types: CTranslate2's ``--compute-type`` with the native engine (``native_compute_type``):
``int8`` / ``int8_float32`` mean int8 weights with activations quantized at run time, which is what
the native engine's ``--quantize int8`` does, so they are mapped onto it (with a logged note:
asking for int8 and getting it beats both silence and a refusal); ``float32`` / ``auto`` /
``default`` are native's float32; the others (float16, bfloat16, int16, int8_float16,
int8_bfloat16) have no native equivalent and are refused.
"""
from __future__ import annotations

import json
import logging
import os
import stat
import sys
from pathlib import Path

log = logging.getLogger(__name__)

NATIVE_INT8 = ("int8", "int8_float32")                    # → --quantize int8
NATIVE_FLOAT = ("default", "auto", "float32")              # native's own float32


def _is_file_path(p: str) -> bool:
    return bool(p) and p != "-"


def same_file(a: str | Path, b: str | Path) -> bool:
    """Whether ``a`` and ``b`` both exist and are the same file (path, symbolic or hard link)."""
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False


def stdin_file() -> os.stat_result | None:
    """The ``os.fstat`` of the regular file standard input reads (``< FILE``), None for a pipe,
    a terminal or a replaced ``sys.stdin`` without a file descriptor."""
    try:
        st = os.fstat(sys.stdin.fileno())
    except (AttributeError, ValueError, OSError):      # (io.UnsupportedOperation is both)
        return None
    return st if stat.S_ISREG(st.st_mode) else None


def check_outputs(inputs: dict[str, str], outputs: dict[str, str]) -> None:
    """ValueError when an output (``{option: path}``; ``""`` and ``-`` skipped) is one of the
    ``inputs`` (``{option: path}``) — same path or same file through links —, or the file
    standard input reads when ``inputs["--input"]`` is ``-`` (``stdin_file``), names an
    existing directory (``--output`` only when ``inputs["--input"]`` is not a directory) or,
    for a directory input, an existing file (``--output``), or lies under a file or an
    unwritable directory. Call it before any work."""
    src = inputs.get("--input", "")
    src_is_dir = _is_file_path(src) and Path(src).is_dir()
    stdin = stdin_file() if src == "-" else None
    for opt, out in outputs.items():
        if not _is_file_path(out):
            continue
        for iopt, inp in inputs.items():
            if _is_file_path(inp) and same_file(inp, out):
                same = "" if os.path.abspath(inp) == os.path.abspath(out) else f" (the same file as {inp})"
                raise ValueError(f"{opt} {out} is the {iopt}{same}: writing it would replace the input with its "
                                 f"translation; choose another {opt}")
        try:
            st = os.stat(out)
        except OSError:
            st = None
        if stdin is not None and st is not None and (st.st_dev, st.st_ino) == (stdin.st_dev, stdin.st_ino):
            raise ValueError(f"{opt} {out} is the file standard input reads (--input -): writing it would replace "
                             f"the input with its translation; choose another {opt}")
        if Path(out).is_dir() and not (opt == "--output" and src_is_dir):
            raise ValueError(f"{opt} {out} is an existing directory: give a file path (e.g. "
                             f"{Path(out) / 'translation.txt'})")
        if opt == "--output" and src_is_dir and Path(out).exists() and not Path(out).is_dir():
            raise ValueError(f"--output {out} is an existing file: the directory input {src} needs an output "
                             f"directory (a new path, or an existing directory)")
        parent = Path(out).absolute().parent
        while not parent.exists() and parent != parent.parent:
            parent = parent.parent
        if not parent.is_dir():
            raise ValueError(f"{opt} {out}: {parent} is a file, not a directory: the output cannot be written there")
        if not os.access(parent, os.W_OK | os.X_OK):
            raise ValueError(f"{opt} {out}: {parent} is not writable: the output cannot be written there")


def language_suffixes(src_lang: str, tgt_lang: str) -> tuple[str, str]:
    """``(".zh", ".en")`` for a zh→en model: the source suffix a directory translation replaces."""
    return f".{src_lang}", f".{tgt_lang}"


def model_languages(checkpoint: str) -> tuple[str, str] | None:
    """(source language, target language) of a checkpoint or exported directory, read without
    building the model (an export's ``doctrans.json``; a checkpoint's text settings or config,
    memory-mapped); None when they cannot be read (the model's loader reports why later)."""
    from doctrans.inference.ct2 import META, is_exported

    try:
        if is_exported(checkpoint):
            text = json.loads((Path(checkpoint) / META).read_text(encoding="utf-8"))["text"]
            return str(text["src"]["lang"]), str(text["tgt"]["lang"])
        import torch

        ckpt = torch.load(checkpoint, map_location="cpu", weights_only=True, mmap=True)
        text = ckpt.get("text")
        if isinstance(text, dict) and {"src", "tgt"} <= set(text):
            return str(text["src"]["lang"]), str(text["tgt"]["lang"])
        data = ckpt["config"]["data"]
        return str(data["src_suffix"]).split(".")[-1], str(data["tgt_suffix"]).split(".")[-1]
    except Exception:                 # noqa: BLE001 — any unreadable model: the loader's error comes later
        return None


def directory_out_suffix(out_suffix: str | None, checkpoint: str) -> str | tuple[str, str]:
    """What names a directory translation's outputs: ``out_suffix`` when given (a suffix
    replacing each source's last one; ``""`` keeps the names), else the model's language
    suffixes (``language_suffixes``: a source ending in the source language's suffix gets the
    target's, other names are kept), else ``""`` when the languages cannot be read."""
    if out_suffix is not None:
        return out_suffix
    langs = model_languages(checkpoint)
    return language_suffixes(*langs) if langs else ""


def native_compute_type(cfg):
    """``cfg`` (a ``TranslateConfig`` with engine native) with its ``compute_type`` applied:
    int8 / int8_float32 → ``quantize="int8"`` (a logged note), float32 / auto / default
    unchanged; ValueError for a type native decoding lacks. Other engines: ``cfg`` itself."""
    ct = cfg.model.compute_type
    if cfg.model.engine != "native" or ct in NATIVE_FLOAT:
        return cfg
    if ct in NATIVE_INT8:
        log.info("--compute-type %s with the native engine: decoding with --quantize int8 (int8 weights of the "
                 "output and feed-forward layers, activations quantized at run time; CPU)", ct)
        return cfg.replace(compute_type="default", quantize="int8")
    raise ValueError(f"--compute-type {ct} is CTranslate2's (--engine ctranslate2 -c EXPORT_DIR); the native engine "
                     f"decodes in float32, or int8 with --compute-type int8 / --quantize int8")
