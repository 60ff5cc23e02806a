"""Soak test of ``doctrans serve`` on localhost (issue 73): concurrent clients send a mix of
requests — small and large documents on the three endpoints, chunked uploads, bodies over the
limits, malformed JSON — for a bounded time and count, then the server gets a SIGTERM while they
keep sending. Reports whether every request got an answer (no client hang), whether every answer
was the translation or a JSON error (``{"error", "status"}``, a 503 with ``Retry-After``), the
server's memory (VmRSS sampled from /proc/PID/status) and how it stopped.

Usage: python benchmarks/serve_soak.py [-c CKPT] [--threads 1] [--clients 8] [--seconds 60]
       [--requests 400] [--drain-timeout 8] [--input FILE] [--seed 0] [-- SERVE OPTIONS]

Starts ``doctrans -q serve -c CKPT --port P --threads T --drain-timeout D`` (``-c`` default: the
shipped sentence model ``tvsub-transformer-3x3``; a free local port; its output to a log file)
and waits for ``GET /health``. Each client thread then sends requests one after the other, each
on a new connection (raw sockets, so that a body can be sent chunked and the sending stops as soon
as the server answers), drawing each request's kind at random (``KINDS``: weight, what is sent,
the answers expected). After ``--seconds`` or ``--requests`` requests the server gets SIGTERM;
the clients keep sending until connections are refused, and the script waits for the server to
exit. A request hangs when it has no answer by ``--seconds + --drain-timeout + 30`` s after the
start (every request sent before the SIGTERM must be answered by the drain deadline).

Lines: ``--input`` (one sentence a line; default: a few built-in Chinese subtitle lines, for the
shipped models; the toy models need ``--input`` with their 'w<i>' lines and ``-- --input-format
bpe --tokenized``). Prints a Markdown table per kind — requests, answers by status, non-JSON
answers, connections refused (after the SIGTERM) or closed without an answer, hangs, latency p50 /
max — and the server's VmRSS (after start-up, the largest sample, at the SIGTERM), its exit code,
the seconds from SIGTERM to exit and the tracebacks in its log.
"""
from __future__ import annotations

import argparse
import http.client
import json
import os
import random
import select
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

LINES = ["手续办得还顺利吗？", "没问题，都办好了", "罗斯，谢谢", "要不要去看电影", "我去穿毛衣",
         "你昨天晚上去哪儿了？", "他说他明天不来了", "我们得谈谈", "这不是你的错", "快点，我们要迟到了",
         "她一直在等你的电话", "别担心，我会处理的"]

# kind: (weight, what is sent, the statuses expected)
KINDS = {
    "small": (40, "1-4 lines, LibreTranslate / OpenNMT-py / document endpoint in turn", {200}),
    "medium": (12, "16-64 lines, /translate/document", {200}),
    "large": (3, "256 lines (--max-lines), /translate/document", {200}),
    "chunked": (10, "1-16 lines, /translate/document, body chunked", {200}),
    "over_lines": (5, "300 lines: 413", {413}),
    "over_body": (5, "a 2 MB body with Content-Length: 413 before it is read", {413}),
    "over_chunked": (5, "a chunked body of 10 / 120 / 600 MB: 413 once past --max-body-bytes", {413}),
    "malformed": (5, "a body that is not JSON: 422", {422}),
}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def rss_kb(pid: int, field: str = "VmRSS") -> int | None:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith(field + ":"):
                return int(line.split()[1])
    except OSError:
        return None
    return None


def pieces(data: bytes, size: int = 65536):
    for i in range(0, len(data), size):
        yield data[i:i + size]


def filler(total: int, size: int = 65536):
    """``total`` bytes of a JSON document that never closes, in ``size`` pieces (not kept)."""
    yield b'{"lines": ["'
    block = b"x" * size
    for _ in range(total // size):
        yield block


def request(port: int, path: str, body, chunked: bool, deadline: float) -> dict:
    """One POST on a new connection; ``body``: bytes, or an iterable of pieces (sent chunked when
    ``chunked``); sending stops when the server answers. → {"status", "headers", "body", "error",
    "sent", "latency"}; error: refused (no connection), closed (no answer), hang (none by
    ``deadline``)."""
    t0 = time.time()
    out = {"status": None, "headers": {}, "body": b"", "error": None, "sent": 0, "latency": 0.0}
    try:
        s = socket.create_connection(("127.0.0.1", port), timeout=10)
    except OSError:
        out["error"] = "refused"
        return out
    try:
        if isinstance(body, bytes):
            length, body = f"Content-Length: {len(body)}", pieces(body)
        else:
            length = "Transfer-Encoding: chunked" if chunked else ""
        head = (f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                f"Connection: close\r\n{length}\r\n\r\n").encode()

        def frames():
            yield head
            for p in body:
                yield b"%x\r\n%s\r\n" % (len(p), p) if chunked else p
            if chunked:
                yield b"0\r\n\r\n"

        s.setblocking(False)
        pending, it = b"", frames()
        while True:
            if not pending:
                pending = next(it, None)
                if pending is None:
                    break
            readable, writable, _ = select.select([s], [s], [], max(0.0, deadline - time.time()))
            if readable:                                    # answered (or closed) before the body was sent
                break
            if not writable:
                out["error"] = "hang"
                return out
            try:
                n = s.send(pending)
            except (BrokenPipeError, ConnectionResetError):
                break
            pending = pending[n:]
            out["sent"] += n
        s.setblocking(True)
        s.settimeout(max(0.1, deadline - time.time()))
        try:
            r = http.client.HTTPResponse(s)
            r.begin()
            out["status"], out["headers"], out["body"] = r.status, {k.lower(): v for k, v in r.getheaders()}, r.read()
        except socket.timeout:
            out["error"] = "hang"
        except (OSError, http.client.HTTPException):
            out["error"] = "closed"
    finally:
        s.close()
        out["latency"] = time.time() - t0
    return out


def make(kind: str, rng: random.Random, lines: list[str], n: int):
    """(path, body, chunked, expected line count or None) of a request of ``kind``."""
    def pick(k):
        return [lines[(n * 7 + j) % len(lines)] for j in range(k)]

    if kind == "small":
        doc = pick(rng.randint(1, 4))
        endpoint = n % 3
        if endpoint == 0:
            return "/translate", json.dumps({"q": doc, "source": "zh", "target": "en"}).encode(), False, len(doc)
        if endpoint == 1:
            return "/translator/translate", json.dumps([{"src": x, "id": 100} for x in doc]).encode(), False, len(doc)
        return "/translate/document", json.dumps({"lines": doc}).encode(), False, len(doc)
    if kind in ("medium", "large", "over_lines"):
        doc = pick({"medium": rng.randint(16, 64), "large": 256, "over_lines": 300}[kind])
        return "/translate/document", json.dumps({"lines": doc}).encode(), False, len(doc)
    if kind == "chunked":
        doc = pick(rng.randint(1, 16))
        return "/translate/document", list(pieces(json.dumps({"lines": doc}).encode(), 100)), True, len(doc)
    if kind == "over_body":
        return "/translate/document", json.dumps({"lines": ["x" * 1000] * 2000}).encode(), False, None
    if kind == "over_chunked":
        return "/translate/document", filler(rng.choice([10, 120, 600]) << 20), True, None
    return "/translate/document", b'{"lines": ["unclosed', False, None


def judge(r: dict, expect_lines: int | None) -> str:
    """The answer's class: '200', '413', … for a translation or a well-formed JSON error;
    'non-JSON' for anything else; the request's error (refused / closed / hang) when no answer."""
    if r["error"]:
        return r["error"]
    try:
        data = json.loads(r["body"])
    except ValueError:
        return "non-JSON"
    if r["status"] == 200:
        if isinstance(data, dict) and "lines" in data:
            n = len(data["lines"])
        elif isinstance(data, dict) and "translatedText" in data:
            n = len(data["translatedText"])
        elif isinstance(data, list) and data:
            n = len(data[0])
        else:
            n = -1
        return "200" if n == expect_lines else "non-JSON"
    ok = (isinstance(data, dict) and data.get("status") == r["status"] and isinstance(data.get("error"), str)
          and r["headers"].get("content-type", "").startswith("application/json"))
    if r["status"] == 503 and not r["headers"].get("retry-after", "").isdigit():
        ok = False
    return str(r["status"]) if ok else "non-JSON"


def main() -> None:
    argv = sys.argv[1:]
    extra = argv[argv.index("--") + 1:] if "--" in argv else []
    argv = argv[:argv.index("--")] if "--" in argv else argv
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("-c", "--checkpoint", default="tvsub-transformer-3x3")
    ap.add_argument("--threads", type=int, default=1, help="the server's torch threads")
    ap.add_argument("--clients", type=int, default=8)
    ap.add_argument("--seconds", type=float, default=60, help="seconds of load before the SIGTERM")
    ap.add_argument("--requests", type=int, default=400, help="at most this many requests before the SIGTERM")
    ap.add_argument("--drain-timeout", type=float, default=8)
    ap.add_argument("--input", default="", help="lines to send (default: built-in Chinese lines)")
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args(argv)
    lines = ([x for x in Path(a.input).read_text(encoding="utf-8").splitlines() if x.strip()] if a.input
             else LINES)
    port = free_port()
    log_path = Path(tempfile.mkdtemp(prefix="serve_soak_")) / "server.log"
    cmd = [sys.executable, "-m", "doctrans.cli", "serve", "-c", a.checkpoint, "--port", str(port),
           "--threads", str(a.threads), "--drain-timeout", str(a.drain_timeout), *extra]
    log_file = open(log_path, "wb")
    proc = subprocess.Popen(cmd, cwd=REPO, stdout=log_file, stderr=subprocess.STDOUT,
                            env={**os.environ, "PYTHONPATH": str(REPO)})
    t0 = time.time()
    while True:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
                s.sendall(b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
                r = http.client.HTTPResponse(s)
                r.begin()
                if r.status == 200:
                    break
        except OSError:
            if proc.poll() is not None or time.time() - t0 > 180:
                sys.exit(f"the server did not start: {' '.join(cmd)} (log: {log_path})")
            time.sleep(0.2)
    print(f"server up in {time.time() - t0:.1f} s: {' '.join(cmd[2:])} (log: {log_path})")

    samples: list[tuple[float, int]] = []
    stop_sampling = threading.Event()

    def sample():
        while not stop_sampling.is_set():
            kb = rss_kb(proc.pid)
            if kb is not None:
                samples.append((time.time(), kb))
            stop_sampling.wait(0.1)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    rss_start = rss_kb(proc.pid)
    start = time.time()
    deadline = start + a.seconds + a.drain_timeout + 30
    sigterm_at = [None]
    sent = [0]
    lock = threading.Lock()
    results: list[tuple[str, str, float, int, float]] = []  # kind, class, latency, bytes sent, when it ended
    names = list(KINDS)
    weights = [KINDS[k][0] for k in names]

    def client(k: int) -> None:
        rng = random.Random(a.seed * 1000 + k)
        while time.time() < deadline:
            with lock:
                n = sent[0]
                sent[0] += 1
            kind = rng.choices(names, weights)[0]
            path, body, chunked, expect = make(kind, rng, lines, n)
            r = request(port, path, body, chunked, deadline)
            cls = judge(r, expect)
            with lock:
                results.append((kind, cls, r["latency"], r["sent"], time.time()))
            if cls == "refused" and sigterm_at[0] is not None:
                return                                      # the server stopped accepting

    threads = [threading.Thread(target=client, args=(k,)) for k in range(a.clients)]
    for t in threads:
        t.start()
    while time.time() - start < a.seconds and sent[0] < a.requests:
        time.sleep(0.1)
    rss_at_sigterm = rss_kb(proc.pid)
    hwm_at_sigterm = rss_kb(proc.pid, "VmHWM")
    sigterm_at[0] = time.time()
    before_sigterm = len(results)
    proc.send_signal(signal.SIGTERM)
    try:
        code = proc.wait(timeout=a.drain_timeout + 60)
    except subprocess.TimeoutExpired:
        proc.kill()
        code = f"killed (no exit {a.drain_timeout + 60:.0f} s after SIGTERM)"
    exit_s = time.time() - sigterm_at[0]
    for t in threads:
        t.join()
    stop_sampling.set()
    log_file.close()
    log = log_path.read_text(encoding="utf-8", errors="replace")

    classes = ["200", "413", "422", "503", "non-JSON", "refused", "closed", "hang"]
    print(f"{a.clients} clients, {a.seconds:.0f} s / at most {a.requests} requests before the SIGTERM "
          f"({before_sigterm} answered or failed by then), drain timeout {a.drain_timeout:g} s")
    print("| kind | requests | " + " | ".join(classes) + " | other | p50 s | max s | max MB sent |")
    print("|---|" + "---|" * (len(classes) + 5))
    for kind in names + ["all"]:
        rows = [r for r in results if kind in ("all", r[0])]
        if not rows:
            continue
        counts = [sum(1 for r in rows if r[1] == c) for c in classes]
        lat = sorted(r[2] for r in rows if r[1] not in ("refused", "hang"))
        p50 = lat[len(lat) // 2] if lat else float("nan")
        mx = lat[-1] if lat else float("nan")
        print(f"| {kind} | {len(rows)} | " + " | ".join(str(c) for c in counts) +
              f" | {len(rows) - sum(counts)} | {p50:.2f} | {mx:.2f} | {max(r[3] for r in rows) / 2**20:.1f} |")
    peak = max(samples, key=lambda x: x[1]) if samples else (start, 0)
    unexpected = [(kind, cls) for kind, cls, _, _, end in results
                  if cls not in {str(s) for s in KINDS[kind][2]} and not (cls in ("503", "refused") and end > sigterm_at[0])]
    print(f"server VmRSS: {rss_start / 1024:.0f} MB after start-up, at most {peak[1] / 1024:.0f} MB "
          f"(at +{peak[0] - start:.0f} s; {len(samples)} samples), {rss_at_sigterm / 1024:.0f} MB at the SIGTERM "
          f"(VmHWM {hwm_at_sigterm / 1024:.0f} MB)")
    print(f"SIGTERM at +{sigterm_at[0] - start:.0f} s: exit code {code} {exit_s:.1f} s later; "
          f"'Traceback' in its log: {log.count('Traceback')}")
    print(f"hangs: {sum(r[1] == 'hang' for r in results)}, non-JSON answers: "
          f"{sum(r[1] == 'non-JSON' for r in results)}, closed without an answer: "
          f"{sum(r[1] == 'closed' for r in results)}; answers not of their kind's (a 503 or a refused "
          f"connection after the SIGTERM aside): {len(unexpected)}")


if __name__ == "__main__":
    main()
