"""The plain calls, error mapping, auth and failover, against a real server."""

from __future__ import annotations

import json
import threading
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Iterator, List

import pytest

from keysmith_client import (
    AlreadyExists,
    BadRequest,
    Client,
    Exhausted,
    KeysmithError,
    NotFound,
    TooLarge,
    Unauthorized,
    Unavailable,
)

from .conftest import Server, free_port


@pytest.fixture
def client(server: Server) -> Iterator[Client]:
    with Client(server.url) as c:
        yield c


def test_sequence_routes(client: Client, name: str) -> None:
    info = client.create_sequence(name, start=10, block=7)
    assert (info.name, info.next, info.start, info.block) == (name, 10, 10, 7)
    assert client.next(name, 3) == [10, 11, 12]
    assert client.next(name) == [13]
    got = client.get_sequence(name)
    assert got.name == name and got.next > 13
    assert name in [s.name for s in client.list_sequences()]
    client.drop_sequence(name)
    with pytest.raises(NotFound):
        client.get_sequence(name)


def test_values_near_the_i64_maximum_are_exact(client: Client, name: str) -> None:
    top = 2**63 - 2
    client.create_sequence(name, start=top - 4, max=top, block=1)
    assert client.next(name, 5) == [top - 4, top - 3, top - 2, top - 1, top]
    with pytest.raises(Exhausted) as e:
        client.next(name)
    assert e.value.status == 409 and e.value.code == "exhausted"


def test_pool_routes(client: Client, name: str) -> None:
    p = client.create_pool(name, 5, start=100)
    assert (p.name, p.start, p.size) == (name, 100, 5)
    taken = client.pool_next(name, 3) + client.pool_next(name)
    assert len(set(taken)) == 4 and all(v >= 100 for v in taken)
    d = client.get_pool(name)
    assert d.taken == 4
    assert name in [q.name for q in client.list_pools()]
    client.drop_pool(name)
    with pytest.raises(NotFound):
        client.pool_next(name)


def test_counter_shard_keys_health(client: Client) -> None:
    names = client.counter_next(3)
    assert names.host == "testhost" and len(names.names) == 3
    assert names.names[0] == f"testhost/{names.first}" and names.last == names.first + 2
    k = client.shard_key_encode("c", 7, 42, [3])
    back = client.shard_key_decode(k.external)
    assert back.external == k.external and back.list == k.list
    with pytest.raises(BadRequest):
        client.shard_key_decode(k.external[:-2] + ("AA" if not k.external.endswith("AA") else "BB"))
    assert client.health()["status"] == "ok"


def test_errors_are_mapped(client: Client, name: str) -> None:
    with pytest.raises(NotFound) as nf:
        client.next(name)
    assert nf.value.status == 404 and nf.value.code == "not_found" and name in nf.value.message
    client.create_sequence(name, max=3)
    with pytest.raises(AlreadyExists) as ae:
        client.create_sequence(name)
    assert ae.value.status == 409
    with pytest.raises(BadRequest):
        client.next(name, 0)
    with pytest.raises(TooLarge):
        client.next(name, 10**9)
    assert client.next(name, 3) == [1, 2, 3]
    with pytest.raises(Exhausted):
        client.next(name)
    with pytest.raises(BadRequest):
        client.create_sequence("bad name with spaces")
    # Sequence handles map the same errors
    with pytest.raises(NotFound):
        client.sequence(name + "-missing").next()
    with pytest.raises(Exhausted):
        client.sequence(name).next()


def test_a_token_protected_server(keysmith_bin: str, tmp_path: Path, name: str) -> None:
    s = Server(keysmith_bin, tmp_path / "k.db", token="s3cret").start()
    try:
        with Client(s.url) as anon, Client(s.url, token="wrong") as wrong, Client(s.url, token="s3cret") as ok:
            # /healthz pings the store: a principal only, on a server with tokens.
            assert ok.health()["status"] == "ok"
            with pytest.raises(Unauthorized):
                anon.health()
            for c in (anon, wrong):
                with pytest.raises(Unauthorized) as e:
                    c.create_sequence(name)
                assert e.value.status == 401
                with pytest.raises(Unauthorized):
                    c.sequence(name, block=5).next()
            ok.create_sequence(name)
            with ok.sequence(name, block=5) as seq:
                assert list(seq.next_n(3)) == [1, 2, 3]
    finally:
        s.stop()


def test_failover_from_a_dead_url(server: Server, name: str) -> None:
    dead = f"http://127.0.0.1:{free_port()}"
    with Client([dead, server.url]) as c:
        c.create_sequence(name, block=5)
        assert c.next(name, 2) == [1, 2]
        with c.sequence(name) as seq:
            got = [seq.next() for _ in range(20)]
        assert got == sorted(set(got)) and got[0] > 2


def test_no_live_server_is_unavailable_after_the_deadline() -> None:
    with Client([f"http://127.0.0.1:{free_port()}", f"http://127.0.0.1:{free_port()}"], deadline=0.3) as c:
        with pytest.raises(Unavailable) as e:
            c.next("anything")
        assert e.value.status is None and "ConnectError" in e.value.message


class _Busy(BaseHTTPRequestHandler):
    """A server that is always busy: 503, Retry-After, keysmith's error body."""

    hits: List[str] = []

    def do_POST(self) -> None:
        type(self).hits.append(self.path)
        body = json.dumps({"error": {"code": "contention", "message": "busy"}}).encode()
        self.send_response(503)
        self.send_header("Retry-After", "5")
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture
def busy() -> Iterator[str]:
    _Busy.hits = []
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Busy)
    t = threading.Thread(target=httpd.serve_forever, daemon=True)
    t.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}"
    finally:
        httpd.shutdown()
        httpd.server_close()


def test_a_503_fails_over_and_retry_after_is_honoured(busy: str, server: Server, name: str) -> None:
    with Client([busy, server.url]) as c:
        c.create_sequence(name)
        assert c.next(name, 2) == [1, 2]
        assert len(_Busy.hits) == 1  # tried once, then the live server
        assert c.next(name) == [3]
        assert len(_Busy.hits) == 1  # within its Retry-After the busy server is not asked again
    # only the busy server: its Retry-After (5 s) is past the deadline, so the 503 is raised at once
    with Client(busy, deadline=1.0) as c:
        with pytest.raises(Unavailable) as e:
            c.next(name)
        assert e.value.status == 503 and e.value.code == "contention" and e.value.message == "busy"
    assert isinstance(e.value, KeysmithError)


def test_a_name_with_a_slash_is_one_path_segment_in_every_route(client: Client) -> None:
    """Issue #49 item 5: `/` goes as `%2F`, so `a/b` is never the route of `a` (or a 404)."""
    base = f"slash{uuid.uuid4().hex[:6]}"
    name = f"{base}/x/y"
    client.create_sequence(base)  # a sequence named like the first segment: must stay untouched
    client.create_sequence(name, start=100)
    assert client.get_sequence(name).name == name
    assert client.next(name, 2) == [100, 101]
    lease = client.reserve(name, 3)
    v = lease.values()
    assert v == list(range(v[0], v[0] + 3)) and v[0] >= 102
    back = client.release(lease, v[1])
    assert back is not None and back.start == v[1]
    with client.sequence(name) as seq:
        assert seq.next() == v[1]  # the tail that went back is the next reserved
    assert client.next_numbers(name, 1)
    assert client.get_sequence(base).next == 1  # nothing above was taken from `base`
    client.drop_sequence(name)
    with pytest.raises(NotFound):
        client.get_sequence(name)
    pool = f"{base}/pool/z"
    client.create_pool(pool, 5)
    got = client.pool_next(pool, 2)
    # a pool of 5 holds 1..5; taking v puts v + 5 in its place, which the second take may draw
    assert len(set(got)) == 2 and all(1 <= g <= 5 or g - 5 in got for g in got)
    assert client.get_pool(pool).name == pool
    client.drop_pool(pool)
    info = client.lease_worker(name)
    assert info.group == name and [w.worker for w in client.list_workers(name)] == [info.worker]
    assert client.release_worker(name, info.token)
