"""serve.app.Batcher with a stand-in translator: concurrent requests are translated together in
fewer calls, each request gets exactly its own lines back with its documents kept apart, and a
failing request's error reaches it alone."""
from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

pytest.importorskip("fastapi")
from doctrans.serve.app import Batcher  # noqa: E402


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
