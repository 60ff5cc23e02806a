"""serve.app.Batcher with a stand-in translator: concurrent requests are translated together in
fewer calls, each request gets exactly its own lines back with its documents kept apart, and a
failing request's error reaches it alone."""
from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

pytest.importorskip("fastapi")
from doctrans.serve.app import Batcher, Unavailable  # noqa: E402


class Slow:
    reads_documents = False

    def __init__(self):
        self.calls = []
        self.lock = threading.Lock()

    def translate(self, lines, doc_ids=None):
        with self.lock:
            self.calls.append((list(lines), list(doc_ids)))
        if any(x == "bad" for x in lines):
            raise ValueError("bad line")
        time.sleep(0.05)
        return [x.upper() for x in lines]


def test_waiting_requests_are_batched_and_answered_each_their_own():
    tr = Slow()
    b = Batcher(tr, max_batch_lines=64)
    reqs = [[f"r{k} a", f"r{k} b"] for k in range(12)]
    with ThreadPoolExecutor(12) as pool:
        outs = list(pool.map(lambda r: b.submit(r, ["d", "d"]), reqs))
    b.close()
    assert outs == [[x.upper() for x in r] for r in reqs]
    assert len(tr.calls) < len(reqs)                        # some requests shared a call
    for lines, ids in tr.calls:                             # each request its own document
        assert len({i for i in ids}) == len(lines) // 2


def test_an_error_reaches_only_its_request():
    tr = Slow()
    b = Batcher(tr)
    with ThreadPoolExecutor(4) as pool:
        futs = [pool.submit(b.submit, r, ["d"]) for r in (["ok1"], ["bad"], ["ok2"], ["ok3"])]
        results = []
        for f in futs:
            try:
                results.append(f.result())
            except ValueError as e:
                results.append(str(e))
    b.close()
    assert results == [["OK1"], "bad line", ["OK2"], ["OK3"]]


class Held:
    """Translates once ``release`` is set (a batch still running when the server drains)."""
    reads_documents = False

    def __init__(self):
        self.release, self.started = threading.Event(), threading.Event()

    def translate(self, lines, doc_ids=None):
        self.started.set()
        self.release.wait(10)
        return [x.upper() for x in lines]


def _outcome(fut):
    try:
        return fut.result(timeout=10)
    except Unavailable as e:
        return f"503: {e}"


def test_draining_refuses_new_requests_and_at_its_deadline_what_is_not_done():
    tr = Held()
    b = Batcher(tr, max_batch_lines=1)
    with ThreadPoolExecutor(4) as pool:
        running = pool.submit(b.submit, ["a"], ["d"])
        tr.started.wait(10)
        queued = [pool.submit(b.submit, [x], ["d"]) for x in ("b", "c")]
        while b.queued_requests < 3:
            time.sleep(0.01)
        b.drain(0.2)
        with pytest.raises(Unavailable, match="shutting down"):
            b.submit(["new"], ["d"])                   # refused at once, not queued
        outcomes = [_outcome(f) for f in (running, *queued)]   # the deadline passes, the batch still runs
        tr.release.set()
    b.close(timeout=10)
    assert outcomes == ["503: the server is shutting down: not translated, retry later"] * 3
    assert not b.translating and b.queued_requests == 0     # the late batch's result was dropped


def test_draining_finishes_what_is_queued_within_its_time():
    tr = Slow()
    b = Batcher(tr, max_batch_lines=2)
    reqs = [[f"r{k}"] for k in range(6)]
    with ThreadPoolExecutor(6) as pool:
        futs = [pool.submit(b.submit, r, ["d"]) for r in reqs]
        while b.queued_requests < 6 and not futs[-1].done():
            time.sleep(0.01)
        b.drain(30)
        outs = [_outcome(f) for f in futs]
    b.close(timeout=30)
    assert outs == [[x.upper() for x in r] for r in reqs]


def test_requests_of_another_job_wait_their_turn_in_order():
    """Requests name their job (model, n-best): one call takes the oldest request and the waiting
    ones of its key; the others keep their order for the next calls."""
    tr = Held()
    b = Batcher(tr, max_batch_lines=64)
    calls = []

    def job(tag):
        def run(lines, ids):
            calls.append((tag, list(lines)))
            return [f"{tag}:{x}" for x in lines]
        return run

    with ThreadPoolExecutor(6) as pool:
        first = pool.submit(b.submit, ["0"], ["d"])                 # holds the worker
        tr.started.wait(10)
        futs = []
        for k, tag in enumerate("ABABA"):
            futs.append(pool.submit(b.submit, [str(k)], ["d"], job(tag), tag))
            while b.queued_requests < k + 2:
                time.sleep(0.005)
        tr.release.set()
        outs = [f.result(timeout=10) for f in futs]
        assert first.result(timeout=10) == ["0"]
    b.close()
    assert outs == [["A:0"], ["B:1"], ["A:2"], ["B:3"], ["A:4"]]
    assert calls == [("A", ["0", "2", "4"]), ("B", ["1", "3"])]
