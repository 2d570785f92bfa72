"""Opaque and encoded sequences, decode and the JavaScript-safe bound, against a real server."""

from __future__ import annotations

import asyncio
from typing import Iterator

import pytest

from keysmith_client import AsyncClient, BadRequest, Client, DecodedValue, NotFound

from .conftest import Server


@pytest.fixture
def client(server: Server) -> Iterator[Client]:
    with Client(server.url) as c:
        yield c


def test_opaque_encoded_values_decode_to_their_counters(client: Client, name: str) -> None:
    info = client.create_sequence(name, opaque=True, encoding="base62", prefix="ord", js_safe=True)
    assert info.numbering is not None
    got = client.next_numbers(name, 10)
    assert len(set(got)) == 10
    for s in got:
        assert s.startswith("ord_") and len(s) == len("ord_") + 9 + 1
    decoded = [client.decode(name, s) for s in got]
    assert [d.counter for d in decoded] == list(range(1, 11))
    # the integer form decodes alike
    assert client.decode(name, decoded[3].value) == DecodedValue(decoded[3].value, 4)


def test_bad_values_and_options_are_refused(client: Client, name: str) -> None:
    client.create_sequence(name, encoding="base32", prefix="inv")
    good = client.next_numbers(name, 1)[0]
    assert client.decode(name, good).counter == 1
    for bad, says in ((good.replace("inv_", "ord_"), "prefix inv_"), (good + "0", "wrong width")):
        with pytest.raises(BadRequest) as e:
            client.decode(name, bad)
        assert says in str(e.value)
    with pytest.raises(BadRequest) as e:
        client.create_sequence(name + "-js", js_safe=True, max=2**53)
    assert "2^53 - 1" in str(e.value)
    with pytest.raises(NotFound):
        client.get_sequence(name + "-js")
    with pytest.raises(TypeError):
        client.decode(name, 1.5)  # type: ignore[arg-type]


def test_async_decode(server: Server, name: str) -> None:
    async def main() -> None:
        async with AsyncClient(server.url) as c:
            await c.create_sequence(name, opaque=True)
            v = (await c.next(name, 1))[0]
            assert (await c.decode(name, v)).counter == 1

    asyncio.run(main())
