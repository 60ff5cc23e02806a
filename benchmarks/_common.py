"""What the benchmark scripts share: the torch thread count, timing, a prepared dataset's vocabularies.

Scripts run as ``python benchmarks/NAME.py``, so this module is imported as ``_common``.
"""
from __future__ import annotations

import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path


def set_threads(threads: int) -> None:
    """``torch.set_num_threads(threads)``; 0 leaves torch's default (all cores)."""
    import torch

    if threads:
        torch.set_num_threads(threads)


@dataclass
class Timing:
    """What ``timed`` measured: wall seconds (``time.perf_counter``) and this process's CPU seconds
    (``time.process_time``, all threads)."""

    wall: float = 0.0
    cpu: float = 0.0


@contextmanager
def timed():
    """``with timed() as t: …`` → ``t.wall``, ``t.cpu`` (seconds) of the block."""
    t = Timing()
    c0, w0 = time.process_time(), time.perf_counter()
    try:
        yield t
    finally:
        t.wall, t.cpu = time.perf_counter() - w0, time.process_time() - c0


def per_call_ms(fn, repeats: int, warmup: int = 1) -> float:
    """Mean wall milliseconds of ``fn()`` over ``repeats`` calls after ``warmup`` untimed ones."""
    for _ in range(warmup):
        fn()
    with timed() as t:
        for _ in range(repeats):
            fn()
    return t.wall / repeats * 1000


def prepared_vocabs(prepared):
    """(source, target) ``Vocab`` of a prepared dataset directory (``vocab.zh.txt``, ``vocab.en.txt``)."""
    from doctrans.data.vocab import Vocab

    prepared = Path(prepared)
    return Vocab.from_counts_file(prepared / "vocab.zh.txt"), Vocab.from_counts_file(prepared / "vocab.en.txt")
