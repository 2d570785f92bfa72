"""Worker-id leases for other generators, against real servers."""

from __future__ import annotations

import asyncio
import threading
import time
import uuid
from pathlib import Path
from typing import Iterator, List

import pytest

from keysmith_client import (
    AsyncClient,
    BadRequest,
    Client,
    Conflict,
    KeysmithError,
    WorkerInfo,
    WorkerLease,
    WorkerLeaseInfo,
)

from .conftest import Server


@pytest.fixture
def client(server: Server) -> Iterator[Client]:
    with Client(server.url) as c:
        yield c


@pytest.fixture
def group() -> str:
    return f"workers/{uuid.uuid4().hex[:12]}"


def wait_for(cond: object, what: str, timeout: float = 30.0) -> None:
    """Polls ``cond()`` until it is true (a bound on a hang, not a timing)."""
    until = time.monotonic() + timeout
    while not cond():  # type: ignore[operator]
        assert time.monotonic() < until, f"never: {what}"
        time.sleep(0.01)


def test_lease_renew_release_and_exhaustion(client: Client, group: str) -> None:
    a = client.lease_worker(group, ttl_ms=60_000, max=2)
    b = client.lease_worker(group, ttl_ms=60_000, max=2)
    assert {a.worker, b.worker} == {0, 1}
    assert a.not_before_ms < a.until_ms
    with pytest.raises(Conflict) as e:
        client.lease_worker(group, max=2)
    assert f'all 2 worker ids of group "{group}"' in str(e.value)
    r = client.renew_worker(group, a.token)
    assert (r.worker, r.fence, r.not_before_ms) == (a.worker, a.fence, a.not_before_ms)
    assert r.until_ms >= a.until_ms
    assert client.release_worker(group, r.token)
    c = client.lease_worker(group, max=2)
    assert (c.worker, c.fence) == (a.worker, a.fence + 1)
    assert c.not_before_ms >= r.until_ms
    with pytest.raises(Conflict):
        client.renew_worker(group, r.token)
    assert not client.release_worker(group, r.token)
    with pytest.raises(BadRequest):
        client.renew_worker(group, "forged.token")
    with pytest.raises(BadRequest):
        client.lease_worker(group, ttl_ms=0)
    with pytest.raises(BadRequest):
        client.lease_worker(group, max=0)


def test_worker_leases_renew_in_the_background_and_never_share(client: Client, group: str) -> None:
    leases: List[WorkerLease] = []
    errors: List[BaseException] = []

    def take() -> None:
        try:
            # A TTL that a loaded machine's scheduling delays cannot outrun.
            leases.append(client.worker_lease(group, ttl_ms=1500, max=8))
        except BaseException as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=take) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    try:
        assert len({lease.worker for lease in leases}) == 6
        first = {lease.worker: lease.until_ms for lease in leases}
        # Renewed past the first TTL: the floors moved and nothing was lost.
        def renewed() -> bool:
            lost = [lease.lost_reason for lease in leases if lease.lost]
            assert not lost, lost
            return all(lease.renewals >= 3 for lease in leases)

        wait_for(renewed, "three renewals each")
        for lease in leases:
            assert not lease.lost, lease.lost_reason
            assert lease.until_ms > first[lease.worker]
            assert lease.usable()
    finally:
        for lease in leases:
            lease.close()
    assert not leases[0].usable()


def test_a_lease_lost_while_the_server_is_down_is_reported(
    keysmith_bin: str, tmp_path: Path, group: str
) -> None:
    s = Server(keysmith_bin, tmp_path / "k.db").start()
    try:
        lost: List[KeysmithError] = []
        with Client(s.url, deadline=2.0) as c:
            lease = c.worker_lease(group, ttl_ms=400, max=1, on_lost=lost.append)
            assert not lease.taken  # taken on first use
            assert lease.worker == 0
            assert lease.taken
            s.kill()
            wait_for(lambda: lease.lost, "the lease reported lost")
            assert lost and lost[0] is lease.lost_reason
            assert not lease.usable()
            s.start(s.port)
            # The worker id is free again once the lost lease expired; the
            # new holder starts at or above the lost one's floor.
            taken: List[WorkerLeaseInfo] = []

            def take() -> bool:
                try:
                    taken.append(c.lease_worker(group, max=1))
                    return True
                except Conflict:
                    return False  # the store's expiry may lag the client's by a moment

            wait_for(take, "the worker id free again")
            again = taken[0]
            assert (again.worker, again.fence) == (0, lease.fence + 1)
            assert again.not_before_ms >= lease.until_ms
            lease.close()
    finally:
        s.stop()


def test_async_client_leases_workers(server: Server, group: str) -> None:
    async def main() -> None:
        async with AsyncClient(server.url) as c:
            got = await asyncio.gather(*(c.lease_worker(group, ttl_ms=60_000, max=4) for _ in range(4)))
            assert sorted(g.worker for g in got) == [0, 1, 2, 3]
            with pytest.raises(Conflict):
                await c.lease_worker(group, max=4)
            r = await c.renew_worker(group, got[0].token)
            assert r.fence == got[0].fence
            assert await c.release_worker(group, r.token)

    asyncio.run(main())


def test_list_workers_shows_held_and_free_worker_ids_without_tokens(client: Client, group: str) -> None:
    assert client.list_workers(group) == []
    a = client.lease_worker(group, ttl_ms=60_000, max=4)
    b = client.lease_worker(group, ttl_ms=60_000, max=4)
    assert client.release_worker(group, a.token)
    listed = client.list_workers(group)
    assert [w.worker for w in listed] == [0, 1]
    free, held = listed
    assert isinstance(free, WorkerInfo)
    assert (free.held, free.holder, free.fence, free.until_ms) == (False, None, a.fence, a.until_ms)
    assert (free.expires_ms, free.expires_in_ms) == (None, None)
    assert (held.held, held.fence, held.until_ms) == (True, b.fence, b.until_ms)
    assert held.holder is not None and held.holder.startswith("lease/")
    assert held.expires_in_ms is not None and 0 < held.expires_in_ms <= 60_000
    assert held.expires_ms is not None
    for w in listed:
        assert a.token not in str(w.raw) and b.token not in str(w.raw)
    with pytest.raises(BadRequest):
        client.list_workers("a b")


def test_async_client_lists_workers(server: Server, group: str) -> None:
    async def main() -> None:
        async with AsyncClient(server.url) as c:
            assert await c.list_workers(group) == []
            got = await c.lease_worker(group, ttl_ms=60_000, max=4)
            listed = await c.list_workers(group)
            assert [(w.worker, w.held, w.fence) for w in listed] == [(got.worker, True, got.fence)]

    asyncio.run(main())
