"""Load test of ``doctrans serve`` on localhost (issue 51): N concurrent clients, a bounded
number of requests and time, latency percentiles, failed and lost requests.

Usage: python benchmarks/serve_load.py -c CKPT [--clients 1,4,16] [--requests 200] [--seconds 60]
       [--lines 2 | 1-5] [--endpoint document|libre|onmt] [--body json|form|json,form] [--cli]
       [--threads 1] [--input FILE] [--url URL] [-- SERVE OPTIONS]

Starts ``doctrans serve -c CKPT --port P`` (a free local port; ``--url`` uses a running server
instead), waits for ``GET /health``, then for each client count N runs N threads, each sending
requests one after the other (``urllib``, a new connection per request, 60 s timeout) until
``--requests`` requests in all were sent or ``--seconds`` passed. A request is ``--lines`` lines
drawn in turn from ``--input`` (default: toy 'w<i>' lines, BPE input: give ``--input-format bpe``
after ``--`` for the toy models); it fails when its status is not 200 or its body does not have
one translation per line, and is lost when no response came (an exception). Reports per client
count: requests, failed, lost, requests/s, lines/s and latency p50 / p90 / p99 / max (ms), as a
Markdown table. The server is stopped with SIGTERM at the end (its exit code is printed).

``--lines A-B``: request k has A + k mod (B − A + 1) lines (1-5: 1, 2, 3, 4, 5, 1, …). ``--body``:
the LibreTranslate endpoint's body, JSON or a urlencoded form (``q`` repeated, as HTML forms and
``libretranslatepy`` send it); ``json,form`` runs every client count with each (a row per body).
``--cli``: in the same sitting, ``doctrans translate`` (same checkpoint, ``--threads``, and the
SERVE OPTIONS it shares) translates the lines the requests sent as one file: its batch
throughput (lines/s, from its log line ``translated N lines in S s``: the translation without
start-up) is printed beside the server's, and each answered line is compared with the CLI's
translation of that line (for a sentence model the same; a context model reads other context in a
request than in the whole file).
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
import re
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def body(endpoint: str, lines: list[str], form: bool = False) -> tuple[str, bytes, str]:
    """(path, request body, content type) of a request for ``lines``."""
    if endpoint == "document":
        return "/translate/document", json.dumps({"lines": lines}).encode(), "application/json"
    if endpoint == "libre" and form:
        fields = [("q", x) for x in lines] + [("source", "zh"), ("target", "en")]
        return "/translate", urllib.parse.urlencode(fields).encode(), "application/x-www-form-urlencoded"
    if endpoint == "libre":
        return "/translate", json.dumps({"q": lines, "source": "zh", "target": "en"}).encode(), "application/json"
    return "/translator/translate", json.dumps([{"src": x, "id": 100} for x in lines]).encode(), "application/json"


def answers(endpoint: str, data) -> list[str]:
    """The translations in an answer, one per line sent."""
    if endpoint == "document":
        return data["lines"]
    if endpoint == "libre":
        t = data["translatedText"]
        return [t] if isinstance(t, str) else t
    return [x["tgt"] for x in data[0]]


def sizes(spec: str) -> tuple[int, int]:
    """``--lines``: "N" or "A-B" → (A, B)."""
    a, _, b = spec.partition("-")
    return int(a), int(b or a)


def run(url: str, endpoint: str, clients: int, total: int, seconds: float, lines: list[str], per: tuple[int, int],
        form: bool = False, outputs: dict | None = None) -> dict:
    """``outputs``: filled with line index (in ``lines``) → the translation answered."""
    lat: list[float] = []
    failed, lost, sent, done_lines = [0], [0], [0], [0]
    lock = threading.Lock()
    starts = [0]
    for k in range(total):
        starts.append(starts[-1] + per[0] + k % (per[1] - per[0] + 1))
    stop = time.time() + seconds

    def client(k: int) -> None:
        while True:
            with lock:
                if sent[0] >= total or time.time() > stop:
                    return
                n = sent[0]
                sent[0] += 1
            index = [k % len(lines) for k in range(starts[n], starts[n + 1])]
            batch = [lines[k] for k in index]
            path, payload, ctype = body(endpoint, batch, form)
            req = urllib.request.Request(url + path, payload, {"content-type": ctype})
            t0 = time.perf_counter()
            try:
                with urllib.request.urlopen(req, timeout=60) as r:
                    out = answers(endpoint, json.loads(r.read())) if r.status == 200 else []
                ok = len(out) == len(batch)
                if ok and outputs is not None:
                    with lock:
                        outputs.update(zip(index, out))
                        done_lines[0] += len(batch)
                elif ok:
                    with lock:
                        done_lines[0] += len(batch)
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
                lps=done_lines[0] / wall, p50=q(0.5), p90=q(0.9), p99=q(0.99), max=q(1.0), wall=wall)


CLI_SHARED = ("--input-format", "--tokenized", "--beam", "--lenpen", "--batch-sentences", "--engine", "--compute-type",
              "--quantize", "--device", "--recase")


def cli_batch(checkpoint: str, threads: int, lines: list[str], extra: list[str], workdir: Path) -> tuple[list[str], float]:
    """``doctrans translate`` of ``lines`` as one file → (its translations, lines/s of its translation)."""
    shared, k = [], 0
    while k < len(extra):
        if extra[k] in CLI_SHARED:
            takes = extra[k] != "--tokenized"
            shared += extra[k:k + 1 + takes]
            k += 1 + takes
        else:
            k += 1
    src, out = workdir / "cli_input.txt", workdir / "cli_output.txt"
    src.write_text("".join(x + "\n" for x in lines), encoding="utf-8")
    cmd = [sys.executable, "-m", "doctrans.cli", "translate", "-c", checkpoint, "--threads", str(threads), *shared,
           "-i", str(src), "-o", str(out)]
    log = subprocess.run(cmd, cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)}, capture_output=True, text=True)
    m = re.search(r"translated (\d+) lines in ([\d.]+) s", log.stderr + log.stdout)
    if log.returncode != 0 or not m:
        sys.exit(f"the CLI failed ({' '.join(cmd)}):\n{log.stderr[-2000:]}")
    return out.read_text(encoding="utf-8").splitlines(), int(m.group(1)) / float(m.group(2))


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
    ap.add_argument("--lines", default="2", help="lines per request: N, or A-B (varying)")
    ap.add_argument("--body", default="json", help="libre endpoint: json, form, or json,form (a row each)")
    ap.add_argument("--cli", action="store_true", help="also the CLI's batch throughput and outputs (same lines)")
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
    per = sizes(a.lines)
    bodies = a.body.split(",") if a.endpoint == "libre" else ["json"]
    print(f"endpoint {a.endpoint}, {a.lines} lines per request, at most {a.requests} requests and {a.seconds:.0f} s "
          f"per client count and body")
    print("| clients | body | requests | failed | lost | req/s | lines/s | p50 ms | p90 ms | p99 ms | max ms |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    outputs: dict[str, dict[int, str]] = {}
    try:
        for n in (int(x) for x in a.clients.split(",")):
            for b in bodies:
                got = outputs.setdefault(f"{n} {b}", {})
                r = run(url, a.endpoint, n, a.requests, a.seconds, lines, per, b == "form", got)
                print(f"| {r['clients']} | {b} | {r['requests']} | {r['failed']} | {r['lost']} | {r['rps']:.1f} | "
                      f"{r['lps']:.1f} | {r['p50']:.0f} | {r['p90']:.0f} | {r['p99']:.0f} | {r['max']:.0f} |", flush=True)
        if a.cli:
            import tempfile

            sent = sorted({k for got in outputs.values() for k in got})
            with tempfile.TemporaryDirectory() as tmp:
                cli_out, lps = cli_batch(a.checkpoint, a.threads, [lines[k] for k in sent], extra, Path(tmp))
            ref = dict(zip(sent, cli_out))
            print(f"CLI batch (doctrans translate, the {len(sent)} distinct lines sent, --threads {a.threads}): "
                  f"{lps:.1f} lines/s")
            for run_name, got in outputs.items():
                same = sum(ref[k] == t for k, t in got.items())
                print(f"answers identical to the CLI's ({run_name}): {same} / {len(got)} lines")
    finally:
        if proc is not None:
            proc.send_signal(signal.SIGTERM)
            print(f"server stopped by SIGTERM: exit code {proc.wait(timeout=60)}")


if __name__ == "__main__":
    main()
