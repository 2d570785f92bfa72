#!/usr/bin/env python3
"""Python client: cached ``Sequence.next()`` against one HTTP request per value.

Runs both for the same number of seconds against one local server, and
prints a markdown table of values per second. Starts its own
``keysmith serve`` on a temporary SQLite store (``$KEYSMITH_BIN``, else
``target/release/keysmith``, else ``cargo build --release -p keysmith-cli``)
unless ``--url`` names a running one.

    python bench.py [--seconds 3] [--url http://127.0.0.1:7878] [--token T]
"""

from __future__ import annotations

import argparse
import itertools
import os
import platform
import re
import signal
import subprocess
import tempfile
import threading
import time
import uuid
from pathlib import Path
from typing import Callable, List, Optional, Tuple

import httpx

from keysmith_client import Client

REPO = Path(__file__).resolve().parents[2]


def binary() -> str:
    env = os.environ.get("KEYSMITH_BIN")
    if env:
        return env
    built = REPO / "target" / "release" / "keysmith"
    if not built.exists():
        subprocess.run(["cargo", "build", "--release", "-p", "keysmith-cli"], cwd=REPO, check=True)
    return str(built)


class LocalServer:
    def __init__(self, bin_path: str, store: Path) -> None:
        env = {k: v for k, v in os.environ.items() if not k.startswith("KEYSMITH_")}
        self.proc = subprocess.Popen(
            [bin_path, "--store", f"sqlite://{store}", "serve", "--listen", "127.0.0.1:0"],
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        assert self.proc.stderr is not None
        first = self.proc.stderr.readline().decode()
        m = re.search(r"http://127\.0\.0\.1:\d+", first)
        if m is None:
            self.stop()
            raise SystemExit(f"keysmith serve did not start: {first}")
        self.url = m.group(0)
        threading.Thread(target=self.proc.stderr.read, daemon=True).start()

    def stop(self) -> None:
        os.kill(self.proc.pid, signal.SIGTERM)
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.kill(self.proc.pid, signal.SIGKILL)
            self.proc.wait()


def measure(seconds: float, take: Callable[[], object], batch: int) -> Tuple[int, float]:
    """Calls ``take`` in batches of ``batch`` until ``seconds`` have passed; (calls, elapsed)."""
    n = 0
    t0 = time.perf_counter()
    end = t0 + seconds
    while True:
        for _ in range(batch):
            take()
        n += batch
        now = time.perf_counter()
        if now >= end:
            return n, now - t0


def run(url: str, token: Optional[str], seconds: float) -> List[Tuple[str, float, str]]:
    name = f"bench/{uuid.uuid4().hex[:8]}"
    rows: List[Tuple[str, float, str]] = []
    with Client(url, token=token) as c:
        c.create_sequence(name, block=1000)
        # cached: one Sequence, values from the local block, leases prefetched in the background
        seq = c.sequence(name)
        seq.next()  # the first lease
        leases0 = seq.leases
        n, dt = measure(seconds, seq.next, 10_000)
        rows.append(
            ("`Sequence.next()` (local block, prefetch, adaptive)", n / dt, f"{n} values, {seq.leases - leases0} leases, final block {seq.block}")
        )
        seq.close()
        # one request per value, straight over httpx with keep-alive (no client layer in between)
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        path = f"{url}/v1/sequences/{name.replace('/', '%2F')}/next"
        with httpx.Client(headers=headers) as h:
            def one() -> object:
                r = h.post(path, params={"count": "1", "as": "string"})
                r.raise_for_status()
                return r
            n, dt = measure(seconds, one, 50)
        rows.append(("`POST /next?count=1` per value (httpx, keep-alive)", n / dt, f"{n} requests"))
        # the same through the client's plain call (failover layer included)
        n, dt = measure(seconds, lambda: c.next(name, 1), 50)
        rows.append(("`client.next(name, 1)` per value (client, failover layer)", n / dt, f"{n} requests"))
        c.drop_sequence(name)
        # over a worker lease: time-ordered ids made locally under a leased worker id
        lease = c.worker_lease(f"bench-{uuid.uuid4().hex[:8]}")
        lease.next_id()  # takes the lease
        n, dt = measure(seconds, lease.next_id, 10_000)
        rows.append(("`WorkerLease.next_id()` (local ids over a worker lease)", n / dt, f"{n} ids"))
        lease.close()
    # the language's own floor: a bare counter, no client at all
    counter = itertools.count()
    n, dt = measure(seconds, counter.__next__, 10_000)
    rows.append(("bare loop: `next(itertools.count())`", n / dt, f"{n} values"))
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seconds", type=float, default=3.0, help="per measurement (default 3)")
    ap.add_argument("--url", help="a running server (default: start one on a temporary store)")
    ap.add_argument("--token", default=os.environ.get("KEYSMITH_TOKEN"))
    a = ap.parse_args()
    server: Optional[LocalServer] = None
    tmp: Optional[tempfile.TemporaryDirectory[str]] = None
    bin_path = ""
    if a.url:
        url = a.url
    else:
        tmp = tempfile.TemporaryDirectory()
        bin_path = binary()
        server = LocalServer(bin_path, Path(tmp.name) / "bench.db")
        url = server.url
    try:
        rows = run(url, a.token, a.seconds)
    finally:
        if server is not None:
            server.stop()
        if tmp is not None:
            tmp.cleanup()
    base = rows[1][1]
    print(
        f"Python {platform.python_version()}, httpx {httpx.__version__}, {os.cpu_count()} cores, "
        f"{a.seconds:g} s each, server {bin_path or url} (SQLite store)\n"
    )
    print("| Python client | values/s | vs one request per value | run |")
    print("| --- | ---: | ---: | --- |")
    for label, rate, note in rows:
        print(f"| {label} | {rate:,.0f} | {rate / base:,.1f}x | {note} |")


if __name__ == "__main__":
    main()
