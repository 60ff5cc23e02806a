"""``Batcher``: the one worker thread of ``doctrans serve`` that owns the models.

Each request's lines are queued with its *job*: the function that translates a list of lines
(with their ``doc_ids``) and a key naming what that function does (the model, n-best size);
the worker takes the oldest request waiting and every other waiting request of the same key (up
to ``max_batch_lines`` lines) and makes one call for them, each request its own documents (its
``doc_ids`` prefixed by the request), so concurrent requests fill the beam-search batches
together and each gets exactly its own results. Requests of another key wait, in order, for the
next call. A call that failed is retried request by request, so an error reaches only its own
request. ``Progress`` records what the worker does with one request (queued, translating, done)
for a client polling it (``/progress``); ``rate`` is the lines per second of the recent calls.
"""
from __future__ import annotations

import collections
import queue
import threading
import time
from collections.abc import Callable, Hashable
from concurrent.futures import Future
from dataclasses import dataclass, field

from doctrans.serve.limits import Limits

UNAVAILABLE = "the server is shutting down: not translated, retry later"

Run = Callable[[list[str], list[str]], list]     # (lines, doc_ids) -> one result per line


class Unavailable(Exception):
    """The request was not translated because the server is shutting down (a 503)."""


@dataclass
class Progress:
    """What became of one request: ``state`` queued → translating → done | failed; ``lines``
    (its own), ``started`` / ``finished`` (time.time(), 0 until then)."""

    lines: int
    state: str = "queued"
    submitted: float = field(default_factory=time.time)
    started: float = 0.0
    finished: float = 0.0


@dataclass
class _Item:
    key: Hashable
    run: Run
    lines: list[str]
    doc_ids: list[str]
    fut: Future
    progress: Progress


class Batcher:
    """The models' one worker thread (module doc). ``submit(lines, doc_ids)`` queues a request
    and waits for its results (default job: ``translator.translate``); ``drain(timeout)`` starts
    the shutdown: new requests are refused (``Unavailable``), the queued ones are still
    translated, and those not answered ``timeout`` seconds later get ``Unavailable``;
    ``close()`` stops the worker after the queued requests, waiting for it until the drain
    deadline (60 s without a drain); a translation still running then is abandoned (its thread
    is a daemon, its results are dropped)."""

    def __init__(self, translator=None, max_batch_lines: int = Limits.max_batch_lines):
        self.translator, self.max_batch_lines = translator, max_batch_lines
        self.calls = 0                              # translate calls made (batches)
        self.draining = False                       # drain() was called: new requests are refused
        self._queue: queue.Queue = queue.Queue()
        self._held: collections.deque[_Item] = collections.deque()   # taken from the queue, another key
        self._pending: dict[Future, _Item] = {}     # submitted, not answered (queued or translating), in order
        self._lock = threading.Lock()               # guards _pending, draining, _expired and answering
        self._expired = False                       # the drain time has passed
        self._timer: threading.Timer | None = None
        self._deadline: float | None = None         # time.monotonic() at which drain() refuses the rest
        self._recent: collections.deque[tuple[int, float]] = collections.deque(maxlen=20)  # (lines, s) per call
        self._thread = threading.Thread(target=self._work, name="doctrans-translate", daemon=True)
        self._thread.start()

    @property
    def translating(self) -> bool:
        """The worker thread still runs (after ``close``: a translation it could not finish)."""
        return self._thread.is_alive()

    @property
    def queued_requests(self) -> int:
        """Requests submitted and not answered yet (waiting or being translated)."""
        return len(self._pending)

    def lines_ahead(self, progress: Progress) -> int:
        """Lines of the requests submitted before the one ``progress`` records and not answered."""
        with self._lock:
            ahead = 0
            for item in self._pending.values():
                if item.progress is progress:
                    return ahead
                ahead += len(item.lines)
            return 0

    @property
    def rate(self) -> float:
        """Lines per second of the recent translate calls (0 before the first)."""
        recent = list(self._recent)
        seconds = sum(s for _, s in recent)
        return sum(n for n, _ in recent) / seconds if seconds > 0 else 0.0

    def submit(self, lines: list[str], doc_ids: list[str], run: Run | None = None, key: Hashable = None,
               progress: Progress | None = None) -> list:
        """The results of ``run(lines, doc_ids)`` (one per line; default ``translator.translate``),
        made in one call with the waiting requests of the same ``key``; raises what ``run``
        raised, or Unavailable when the server is draining (at once, or at the drain deadline).
        ``progress``: updated as the request is queued, translated and answered."""
        fut: Future = Future()
        if run is None:
            run = lambda xs, ids: self.translator.translate(xs, doc_ids=ids)   # noqa: E731
        item = _Item(key, run, lines, doc_ids, fut, progress or Progress(len(lines)))
        with self._lock:
            if self.draining:
                raise Unavailable(UNAVAILABLE)
            self._pending[fut] = item
            self._queue.put(item)
        try:
            return fut.result()
        finally:
            item.progress.finished = time.time()
            item.progress.state = "done" if fut.exception() is None else "failed"

    def drain(self, timeout: float) -> None:
        """Refuse new requests; answer those not answered within ``timeout`` seconds with
        Unavailable. The worker stops once the queue is empty."""
        with self._lock:
            if self.draining:
                return
            self.draining = True
            self._queue.put(None)
            self._deadline = time.monotonic() + max(0.0, timeout)
        self._timer = threading.Timer(max(0.0, timeout), self._expire)
        self._timer.daemon = True
        self._timer.start()

    def close(self, timeout: float | None = None) -> None:
        """Stop the worker after the queued requests; wait for it at most ``timeout`` seconds
        (default: until the drain deadline, 60 s without a drain)."""
        with self._lock:
            if not self.draining:
                self.draining = True
                self._queue.put(None)
        if timeout is None:
            timeout = 60.0 if self._deadline is None else max(0.0, self._deadline - time.monotonic())
        self._thread.join(timeout=timeout)
        if self._timer is not None and not self._pending:
            self._timer.cancel()

    def _expire(self) -> None:
        with self._lock:
            self._expired = True
            for fut in self._pending:
                fut.set_exception(Unavailable(UNAVAILABLE))
            self._pending.clear()

    def _answer(self, fut: Future, result=None, error: BaseException | None = None) -> None:
        with self._lock:
            if fut not in self._pending:                # refused at the drain deadline meanwhile
                return
            del self._pending[fut]
            if error is not None:
                fut.set_exception(error)
            else:
                fut.set_result(result)

    def _translate(self, batch: list[_Item]) -> None:
        lines = [x for b in batch for x in b.lines]
        ids = [f"{k}:{d}" for k, b in enumerate(batch) for d in b.doc_ids]
        t0 = time.time()
        for b in batch:
            b.progress.state, b.progress.started = "translating", t0
        try:
            self.calls += 1
            out = iter(batch[0].run(lines, ids))
        except Exception as e:                      # noqa: BLE001 — handed to the requests
            if len(batch) > 1:
                for b in batch:
                    self._translate([b])
            else:
                self._answer(batch[0].fut, error=e)
            return
        self._recent.append((len(lines), time.time() - t0))
        for b in batch:
            self._answer(b.fut, [next(out) for _ in b.lines])

    def _next(self, block: bool) -> _Item | None | bool:
        """The next item: a held one first, else from the queue (None: the stop sentinel; False:
        nothing waiting when not ``block``)."""
        if self._held:
            return self._held.popleft()
        try:
            return self._queue.get(block=block)
        except queue.Empty:
            return False

    def _work(self) -> None:
        stop = False
        while True:
            if stop and not self._held:
                return
            item = self._next(block=not stop)
            if item is None:
                stop = True
                continue
            if item is False:
                return
            batch, size, others = [item], len(item.lines), []
            while size < self.max_batch_lines:
                nxt = self._next(block=False)
                if nxt is False:
                    break
                if nxt is None:
                    stop = True
                    continue
                if nxt.key == item.key:
                    batch.append(nxt)
                    size += len(nxt.lines)
                else:
                    others.append(nxt)
            self._held.extendleft(reversed(others))
            with self._lock:
                batch = [b for b in batch if b.fut in self._pending]     # not refused at the deadline
            if batch and not self._expired:
                self._translate(batch)
