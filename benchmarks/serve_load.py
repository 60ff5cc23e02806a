"""Load test of ``doctrans serve`` on localhost (issue 51): N concurrent clients, a bounded
number of requests and time, latency percentiles, failed and lost requests.

Usage: python benchmarks/serve_load.py -c CKPT [--clients 1,4,16] [--requests 200] [--seconds 60]
       [--lines 2] [--endpoint document|libre|onmt] [--threads 1] [--url URL] [-- SERVE OPTIONS]

Starts ``doctrans serve -c CKPT --port P`` (a free local port; ``--url`` uses a running server
instead), waits for ``GET /health``, then for each client count N runs N threads, each sending
requests one after the other (``urllib``, a new connection per request, 60 s timeout) until
``--requests`` requests in all were sent or ``--seconds`` passed. A request is ``--lines`` lines
drawn in turn from ``--input`` (default: toy 'w<i>' lines, BPE input: give ``--input-format bpe``
after ``--`` for the toy models); it fails when its status is not 200 or its body does not have
one translation per line, and is lost when no response came (an exception). Reports per client
count: requests, failed, lost, requests/s, lines/s and latency p50 / p90 / p99 / max (ms), as a
Markdown table. The server is stopped with SIGTERM at the end (its exit code is printed).
"""
from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def body(endpoint: str, lines: list[str]) -> tuple[str, dict | list]:
    if endpoint == "document":
        return "/translate/document", {"lines": lines}
    if endpoint == "libre":
        return "/translate", {"q": lines, "source": "zh", "target": "en"}
    return "/translator/translate", [{"src": x, "id": 100} for x in lines]


def answers(endpoint: str, data) -> int:
    if endpoint == "document":
        return len(data["lines"])
    if endpoint == "libre":
        return len(data["translatedText"])
    return len(data[0])


def run(url: str, endpoint: str, clients: int, total: int, seconds: float, lines: list[str], per: int) -> dict:
    lat: list[float] = []
    failed, lost, sent = [0], [0], [0]
    lock = threading.Lock()
    stop = time.time() + seconds

    def client(k: int) -> None:
        while True:
            with lock:
                if sent[0] >= total or time.time() > stop:
                    return
                n = sent[0]
                sent[0] += 1
            batch = [lines[(n * per + j) % len(lines)] for j in range(per)]
            path, payload = body(endpoint, batch)
            req = urllib.request.Request(url + path, json.dumps(payload).encode(), {"content-type": "application/json"})
            t0 = time.perf_counter()
            try:
                with urllib.request.urlopen(req, timeout=60) as r:
                    ok = r.status == 200 and answers(endpoint, json.loads(r.read())) == per
            except urllib.error.HTTPError:
                ok = False
            except Exception:                       # no response: lost
                with lock:
                    lost[0] += 1
                continue
            dt = time.perf_counter() - t0
            with lock:
                lat.append(dt)
                failed[0] += 0 if ok else 1

    t0 = time.time()
    threads = [threading.Thread(target=client, args=(k,)) for k in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.time() - t0
    lat.sort()
    q = lambda p: 1000 * lat[min(len(lat) - 1, int(round(p * (len(lat) - 1))))] if lat else float("nan")
    return dict(clients=clients, requests=sent[0], failed=failed[0], lost=lost[0], rps=len(lat) / wall,
                lps=len(lat) * per / wall, p50=q(0.5), p90=q(0.9), p99=q(0.99), max=q(1.0), wall=wall)


def main() -> None:
    argv = sys.argv[1:]
    extra = argv[argv.index("--") + 1:] if "--" in argv else []
    argv = argv[:argv.index("--")] if "--" in argv else argv
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("-c", "--checkpoint", default="")
    ap.add_argument("--url", default="")
    ap.add_argument("--clients", default="1,4,16")
    ap.add_argument("--requests", type=int, default=200)
    ap.add_argument("--seconds", type=float, default=60)
    ap.add_argument("--lines", type=int, default=2, help="lines per request")
    ap.add_argument("--input", default="", help="lines to send (default: toy 'w<i>' lines)")
    ap.add_argument("--endpoint", choices=["document", "libre", "onmt"], default="document")
    ap.add_argument("--threads", type=int, default=1, help="the server's torch threads")
    a = ap.parse_args(argv)
    if a.input:
        lines = [x for x in Path(a.input).read_text(encoding="utf-8").splitlines() if x.strip()]
    else:
        sys.path.insert(0, str(REPO / "tests"))
        from conftest import reversal_pairs

        lines = reversal_pairs(500, seed=3)[0]
    proc = None
    url = a.url
    if not url:
        if not a.checkpoint:
            ap.error("give -c CKPT (a server is started) or --url")
        port = free_port()
        url = f"http://127.0.0.1:{port}"
        cmd = [sys.executable, "-m", "doctrans.cli", "-q", "serve", "-c", a.checkpoint, "--port", str(port),
               "--threads", str(a.threads), *extra]
        proc = subprocess.Popen(cmd, cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)})
        t0 = time.time()
        while True:
            try:
                with urllib.request.urlopen(url + "/health", timeout=5) as r:
                    if r.status == 200:
                        break
            except (urllib.error.URLError, ConnectionError):
                if proc.poll() is not None or time.time() - t0 > 120:
                    sys.exit(f"the server did not start: {' '.join(cmd)}")
                time.sleep(0.2)
        print(f"server up in {time.time() - t0:.1f} s: {' '.join(cmd[2:])}")
    print(f"endpoint {a.endpoint}, {a.lines} lines per request, at most {a.requests} requests and {a.seconds:.0f} s "
          f"per client count")
    print("| clients | requests | failed | lost | req/s | lines/s | p50 ms | p90 ms | p99 ms | max ms |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    try:
        for n in (int(x) for x in a.clients.split(",")):
            r = run(url, a.endpoint, n, a.requests, a.seconds, lines, a.lines)
            print(f"| {r['clients']} | {r['requests']} | {r['failed']} | {r['lost']} | {r['rps']:.1f} | "
                  f"{r['lps']:.1f} | {r['p50']:.0f} | {r['p90']:.0f} | {r['p99']:.0f} | {r['max']:.0f} |", flush=True)
    finally:
        if proc is not None:
            proc.send_signal(signal.SIGTERM)
            print(f"server stopped by SIGTERM: exit code {proc.wait(timeout=60)}")


if __name__ == "__main__":
    main()
