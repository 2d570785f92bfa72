"""Leader-ordered sequences: a client of a follower follows its 421 to the leader."""

from __future__ import annotations

from pathlib import Path

import httpx

from keysmith_client import Client

from .conftest import Server


def test_a_client_of_a_follower_gets_values_from_the_leader(keysmith_bin: str, tmp_path: Path, name: str) -> None:
    store = tmp_path / "k.db"
    a = Server(keysmith_bin, store).start()
    b = Server(keysmith_bin, store).start()
    try:
        with Client(a.url) as ca, Client(b.url) as cb:
            ca.create_sequence(name, order="leader")
            first = ca.next(name, 2)  # a leads from here on
            assert first == [1, 2]
            # b itself answers 421 naming a ...
            r = httpx.post(f"{b.url}/v1/sequences/{name.replace('/', '%2F')}/next")
            assert r.status_code == 421
            assert r.headers["keysmith-leader"] == a.url
            assert r.json()["error"]["leader"] == a.url
            # ... and a client of b follows it: values in call order.
            got = [cb.next(name)[0] for _ in range(5)]
            assert got == sorted(got) and got[0] > first[-1]
            assert ca.next(name)[0] > got[-1]
    finally:
        a.stop()
        b.stop()


def test_a_421_over_https_is_never_followed_to_an_http_leader() -> None:
    """The token is never sent in clear text: an https request's 421 that
    names an http leader is not followed (it reaches the caller)."""
    from keysmith_client._failover import leader_of

    def resp(leader: str) -> httpx.Response:
        return httpx.Response(421, headers={"keysmith-leader": leader}, json={"error": {"code": "not_leader"}})

    assert leader_of(resp("http://a:1/"), "http://b:2") == "http://a:1"
    assert leader_of(resp("https://a:1"), "https://b:2") == "https://a:1"
    assert leader_of(resp("http://a:1"), "https://b:2") is None
    assert leader_of(resp("ftp://a"), "http://b:2") is None
