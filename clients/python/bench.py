#!/usr/bin/env python3
"""Python client benchmark, in the shape every client's benchmark has (issue #51).

Against a running ``keysmith serve`` without a token, where the sequence
``NAME`` exists, measures each case for ``--seconds`` and prints only lines
``<case>\\t<per_second>`` on stdout (``keysmith-bench clients`` reads them):

- ``bare``: the language's bare counter, ``next(itertools.count())``, one thread
- ``bare_8``: the same counter shared by ``--threads`` threads
- ``next``: cached ``Sequence.next()``, one thread
- ``next_8``: one ``Sequence`` shared by ``--threads`` threads
- ``next_n100``: values per second through ``Sequence.next_n(100)``
- ``worker_ids``: ``WorkerLease.next_id()`` (ids made locally over a worker lease)
- ``request``: one HTTP request per value, ``Client.next(name, 1)``
- ``livez``: a keep-alive loop of ``GET /livez`` over the same HTTP client (httpx)

    python bench.py --url http://127.0.0.1:7878 --sequence bench --seconds 3 --threads 8
"""

from __future__ import annotations

import argparse
import itertools
import os
import threading
import time
from typing import Callable, List

import httpx

from keysmith_client import Client

#: Calls between two looks at the clock.
BATCH = 2_000


def measure(seconds: float, take: Callable[[], object], batch: int = BATCH) -> float:
    """Calls ``take`` for ``seconds``; calls per second."""
    n = 0
    t0 = time.perf_counter()
    end = t0 + seconds
    r = range(batch)
    while True:
        for _ in r:
            take()
        n += batch
        now = time.perf_counter()
        if now >= end:
            return n / (now - t0)


def measure_threads(seconds: float, take: Callable[[], object], threads: int, batch: int = BATCH) -> float:
    """``threads`` threads calling ``take`` for ``seconds``; calls per second, all threads together."""
    counts: List[int] = [0] * threads
    start = threading.Barrier(threads + 1)

    def loop(k: int) -> None:
        r = range(batch)
        start.wait()
        end = time.perf_counter() + seconds
        n = 0
        while time.perf_counter() < end:
            for _ in r:
                take()
            n += batch
        counts[k] = n

    ts = [threading.Thread(target=loop, args=(k,), daemon=True) for k in range(threads)]
    for t in ts:
        t.start()
    start.wait()
    t0 = time.perf_counter()
    for t in ts:
        t.join()
    return sum(counts) / (time.perf_counter() - t0)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--url", required=True, help="a running keysmith serve without a token")
    ap.add_argument("--sequence", required=True, help="an existing sequence to take values from")
    ap.add_argument("--seconds", type=float, default=3.0, help="per case (default 3)")
    ap.add_argument("--threads", type=int, default=8, help="threads of bare_8 and next_8 (default 8)")
    a = ap.parse_args()
    if a.seconds <= 0 or a.threads < 1:
        ap.error("--seconds must be above 0 and --threads at least 1")

    def out(case: str, rate: float) -> None:
        print(f"{case}\t{rate:.0f}", flush=True)

    counter = itertools.count()
    out("bare", measure(a.seconds, counter.__next__))
    shared = itertools.count()
    out("bare_8", measure_threads(a.seconds, shared.__next__, a.threads))
    with Client(a.url) as c:
        seq = c.sequence(a.sequence, block=100_000)  # the largest lease the server gives by default
        seq.next()  # the first lease
        out("next", measure(a.seconds, seq.next))
        out("next_8", measure_threads(a.seconds, seq.next, a.threads))
        out("next_n100", 100 * measure(a.seconds, lambda: seq.next_n(100), 200))
        seq.close()
        lease = c.worker_lease(f"bench-python-{os.getpid()}")
        lease.next_id()  # takes the lease
        out("worker_ids", measure(a.seconds, lease.next_id))
        lease.close()
        out("request", measure(a.seconds, lambda: c.next(a.sequence, 1), 20))
    with httpx.Client() as h:
        livez = a.url.rstrip("/") + "/livez"

        def one() -> object:
            r = h.get(livez)
            r.raise_for_status()
            return r

        out("livez", measure(a.seconds, one, 20))


if __name__ == "__main__":
    main()
