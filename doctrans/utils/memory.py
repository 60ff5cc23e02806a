"""Giving freed memory back to the operating system between translation batches.

PyTorch's CPU tensors come from the C library's ``malloc``. glibc serves an allocation above its
mmap threshold (128 KiB at start) with its own ``mmap`` and returns it on ``free`` — but each such
``free`` raises the threshold to the freed size (up to 32 MiB), so after the first large batch the
tensors of later batches come from the heap, and a heap whose free space lies between blocks still
in use is not returned: the resident size of a process translating batches of varying shapes
keeps rising although what it holds does not (pytorch/pytorch#27971; glibc manual, "Memory
Allocation Tunables"). ``malloc_trim(0)`` returns every free heap page (since glibc 2.8, pages in
the middle of the heap too).

Measured (issue 50 item 11; docs/journal/2026-11-28-long-line-memory-trim.md): 200 long fuzzed
lines through the HAN encoder, a per-batch trace — the inference caches full at 256 MiB from batch
≈ 160 of 571, the resident size after each batch still rose 830 → 1,160 MB and the peak reached
1,330 MB; with ``malloc_trim(0)`` after each batch the peak was 947 MB, translations identical.

``HeapTrimmer`` calls it after a batch only when the resident size has grown by ``grow_bytes``
since the last call (reading /proc/self/statm, ≈ 20 µs): a trim costs 2–3 ms and the pages it
returns are faulted in again by the next batch, so ordinary batches of short sentences, which do
not grow the process, never pay for it. A no-op where the C library has no ``malloc_trim``
(macOS, musl) or /proc/self/statm cannot be read.
"""
from __future__ import annotations

import ctypes
import ctypes.util
import os
from collections.abc import Callable

GROW_BYTES = 64 * 2**20        # growth of the resident size since the last trim that triggers one


def _malloc_trim() -> Callable[[], object] | None:
    """glibc's ``malloc_trim(0)`` as a callable, or None where the C library lacks it."""
    name = ctypes.util.find_library("c")
    if not name:
        return None
    try:
        libc = ctypes.CDLL(name)
        fn = libc.malloc_trim
    except (OSError, AttributeError):
        return None
    fn.argtypes, fn.restype = [ctypes.c_size_t], ctypes.c_int
    return lambda: fn(0)


_PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096


def resident_bytes() -> int | None:
    """This process's resident set size now (bytes; /proc/self/statm), None where unreadable."""
    try:
        with open("/proc/self/statm", "rb") as f:
            return int(f.read().split()[1]) * _PAGE
    except (OSError, ValueError, IndexError):
        return None


class HeapTrimmer:
    """Call after each translation batch: returns the C heap's free pages to the system
    (``malloc_trim(0)``) when the resident size has grown by at least ``grow_bytes`` since the
    last trim (or since construction). ``trim``/``rss``: the trim call and the resident-size
    reader (injectable for tests); ``trim`` None → a no-op (no ``malloc_trim`` here).
    ``trims``: how many trims it made. Raises ValueError for ``grow_bytes`` < 0."""

    def __init__(self, grow_bytes: int = GROW_BYTES, trim: Callable[[], object] | None | str = "libc",
                 rss: Callable[[], int | None] = resident_bytes):
        if grow_bytes < 0:
            raise ValueError(f"grow_bytes must be ≥ 0, got {grow_bytes}")
        self.grow_bytes, self.rss = grow_bytes, rss
        self.trim = _malloc_trim() if trim == "libc" else trim
        self.trims = 0
        self.base = rss() if self.trim is not None else None

    def __call__(self) -> bool:
        """After a batch: trims if the process grew by ``grow_bytes``; True when it trimmed."""
        if self.trim is None:
            return False
        now = self.rss()
        if now is None or (self.base is not None and now - self.base < self.grow_bytes):
            return False
        self.trim()
        self.trims += 1
        self.base = self.rss()
        return True
