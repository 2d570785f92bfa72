"""One worker id per process: children forked from a process that holds a
worker lease and a local block never reuse either (os.fork, as gunicorn,
uWSGI and Celery's prefork pool do), against a real server."""

from __future__ import annotations

import json
import os
import uuid
import time
from pathlib import Path
from typing import Any, Dict, List

import pytest

from keysmith_client import Client, Closed, LeaseLost, Sequence, WorkerLease

from .conftest import Server

CHILDREN = 4
IDS_PER_CHILD = 3000
VALUES_PER_CHILD = 300


def _child(lease: WorkerLease, seq: Sequence, w: int, go: int) -> None:
    """Runs in a forked child: ids and values with the objects inherited from the parent.

    It holds its lease until the parent read every child's result (a byte on
    ``go``): the children's leases are held at once, as in a pre-fork server."""
    out: Dict[str, object] = {}
    try:
        out["taken_before_use"] = lease.taken
        out["ids"] = [lease.next_id() for _ in range(IDS_PER_CHILD)]
        out["worker"] = lease.worker
        out["values"] = list(seq.next_n(VALUES_PER_CHILD))
    except BaseException as e:  # noqa: BLE001 - reported to the parent
        out["error"] = f"{type(e).__name__}: {e}"
    os.write(w, json.dumps(out).encode())
    os.close(w)
    os.read(go, 1)
    lease.close()
    seq.close()


@pytest.mark.filterwarnings("ignore:This process .* is multi-threaded:DeprecationWarning")
def test_forked_children_never_reuse_the_parents_worker_id_or_values(server: Server) -> None:
    group = f"fork/{uuid.uuid4().hex[:12]}"
    name = f"fork/{uuid.uuid4().hex[:12]}"
    with Client(server.url) as client:
        client.create_sequence(name, block=1000)
        lease = client.worker_lease(group, ttl_ms=60_000, max=16)
        seq = client.sequence(name)
        # the parent holds a lease, has made ids with it, and holds a local block
        parent_ids = [lease.next_id() for _ in range(100)]
        parent_values = list(seq.next_n(10))
        assert seq.block is not None and seq.block > 10
        parent_worker = lease.worker

        pipes: List[int] = []
        pids: List[int] = []
        go_r, go_w = os.pipe()
        for _ in range(CHILDREN):
            r, w = os.pipe()
            pid = os.fork()
            if pid == 0:  # the child
                os.close(r)
                os.close(go_w)
                try:
                    _child(lease, seq, w, go_r)
                finally:
                    os._exit(0)
            os.close(w)
            pipes.append(r)
            pids.append(pid)
        os.close(go_r)

        results: List[Dict[str, Any]] = []
        for r in pipes:
            chunks = []
            while True:
                b = os.read(r, 1 << 16)
                if not b:
                    break
                chunks.append(b)
            os.close(r)
            results.append(json.loads(b"".join(chunks)))
        # every child held its lease until here: now they release and exit
        os.write(go_w, b"x" * CHILDREN)
        os.close(go_w)
        for pid in pids:
            _, status = os.waitpid(pid, 0)
            assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0

        # the parent goes on with its own lease and block, untouched by the children
        parent_ids += [lease.next_id() for _ in range(100)]
        parent_values += seq.next_n(10)
        assert lease.worker == parent_worker and not lease.lost

        for res in results:
            assert "error" not in res, res["error"]
            assert res["taken_before_use"] is False  # the child did not inherit the parent's lease
        workers = [parent_worker] + [int(res["worker"]) for res in results]
        assert len(set(workers)) == CHILDREN + 1, f"a worker id used by two processes: {workers}"
        all_ids = parent_ids + [i for res in results for i in res["ids"]]
        assert len(set(all_ids)) == len(all_ids), "an id was made twice"
        for res in results:
            assert all((i >> 12) & 1023 == res["worker"] for i in res["ids"])
        all_values = parent_values + [v for res in results for v in res["values"]]
        assert len(set(all_values)) == len(all_values), "a value was handed out twice"
        # what the parent decodes of a child's id names the child's worker
        assert client.decode_id(results[0]["ids"][0]).worker == results[0]["worker"]
        # each child released its own lease on close; the parent's is still held
        held = {w.worker for w in client.list_workers(group) if w.held}
        assert held == {parent_worker}
        lease.close()
        assert not lease.usable()
        with pytest.raises(Closed):
            lease.next_id()


def test_a_lease_past_its_expiry_refuses_ids_at_once(keysmith_bin: str, tmp_path: Path) -> None:
    s = Server(keysmith_bin, tmp_path / "k.db").start()
    try:
        with Client(s.url, deadline=1.0) as c:
            lease = c.worker_lease(f"exp/{uuid.uuid4().hex[:8]}", ttl_ms=500, max=1)
            lease.next_id()
            s.kill()
            # no renewal can succeed: once the expiry passed, next_id refuses
            # whether or not the renewal thread has noticed
            until = time.monotonic() + 30  # a bound on a hang, not a timing
            while True:
                assert time.monotonic() < until, "next_id never refused"
                try:
                    lease.next_id()
                except LeaseLost:
                    break
                time.sleep(0.001)
            assert not lease.usable()
    finally:
        s.stop()
