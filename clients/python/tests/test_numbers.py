"""Gap-free tickets, parse, time-ordered ids and alter, against a real server."""

from __future__ import annotations

import asyncio
import time
import uuid
from typing import Iterator

import pytest

from keysmith_client import (
    AsyncClient,
    BadRequest,
    Client,
    Conflict,
    NotFound,
    NumberParts,
    TicketRefused,
    WrongKind,
)

from .conftest import Server


@pytest.fixture
def client(server: Server) -> Iterator[Client]:
    with Client(server.url) as c:
        yield c


def test_gapless_take_commit_release(client: Client, name: str) -> None:
    info = client.create_sequence(name, gapless=True)
    assert info.numbering is not None and info.numbering.gapless
    assert client.get_sequence(name).numbering == info.numbering

    t1 = client.take_ticket(name)
    t2 = client.take_ticket(name, ttl=60)
    assert (t1.sequence, t1.value, t1.n, t1.period) == (name, 1, 1, None)
    assert (t2.value, t2.n) == (2, 2) and t1.ticket != t2.ticket and str(t2) == t2.ticket

    # a released number is the next one taken: no gap
    assert client.release_ticket(name, t1) == 1
    t3 = client.take_ticket(name)
    assert t3.value == 1 and t3.ticket != t1.ticket
    assert client.commit_ticket(name, t2.ticket) == 2
    assert client.commit_ticket(name, t3) == 1
    assert client.take_ticket(name).value == 3


def test_a_wrong_ticket_is_refused_and_changes_nothing(client: Client, name: str) -> None:
    client.create_sequence(name, gapless=True)
    held = client.take_ticket(name)
    assert held.value == 1
    # the same number, a token it was never given
    forged = f"0-{held.value}-{'0' * 32}"
    for settle in (client.commit_ticket, client.release_ticket):
        with pytest.raises(TicketRefused) as e:
            settle(name, forged)
        assert e.value.status == 409 and e.value.code == "ticket_refused"
        assert isinstance(e.value, Conflict)
    with pytest.raises(BadRequest) as bad:
        client.commit_ticket(name, "not a ticket/at all")
    assert bad.value.status == 400 and bad.value.code == "invalid_argument"

    # nothing changed: the number is still held (not freed, not committed) and the next one follows it
    assert client.take_ticket(name).value == 2
    assert client.commit_ticket(name, held) == 1
    # a settled ticket is refused from then on
    with pytest.raises(TicketRefused):
        client.commit_ticket(name, held)
    with pytest.raises(TicketRefused):
        client.release_ticket(name, held)
    assert client.take_ticket(name).value == 3


def test_tickets_and_next_refuse_the_wrong_kind(client: Client, name: str) -> None:
    client.create_sequence(name)
    with pytest.raises(WrongKind) as e:
        client.take_ticket(name)
    assert e.value.status == 409 and e.value.code == "wrong_kind"
    gapless = name + "-gapless"
    client.create_sequence(gapless, gapless=True)
    with pytest.raises(WrongKind):
        client.next(gapless)
    with pytest.raises(WrongKind):
        client.sequence(gapless).next()
    with pytest.raises(NotFound):
        client.take_ticket(name + "-missing")
    with pytest.raises(BadRequest):
        client.take_ticket(gapless, ttl=0)


def test_parse_formatted_numbers_and_garbage(client: Client, name: str) -> None:
    client.create_sequence(name, gapless=True, period="day", format="INV-{period}-{n:04}")
    t = client.take_ticket(name)
    assert t.period is not None and t.value == f"INV-{t.period}-0001"
    assert client.parse(name, str(t.value)) == NumberParts(t.period, 1)
    assert client.commit_ticket(name, t) == t.value
    with pytest.raises(BadRequest) as e:
        client.parse(name, "garbage")
    assert e.value.status == 400 and e.value.code == "invalid_argument" and "garbage" in e.value.message

    # a formatted sequence without tickets: next_numbers answers its printed numbers
    ords = name + "-ord"
    client.create_sequence(ords, format="ORD-{n:06}")
    assert client.next_numbers(ords, 2) == ["ORD-000001", "ORD-000002"]
    assert client.parse(ords, "ORD-000042") == NumberParts(None, 42)
    with pytest.raises(WrongKind) as wk:
        client.next(ords)  # printed numbers are not integers
    assert wk.value.status == 200 and wk.value.code == "wrong_kind" and "next_numbers" in wk.value.message

    # a plain gap-free sequence prints plain integers
    plain = name + "-plain"
    client.create_sequence(plain, gapless=True)
    assert client.parse(plain, "7") == NumberParts(None, 7)
    with pytest.raises(BadRequest):
        client.parse(plain, "x7")
    # an ordinary sequence prints nothing to parse
    client.create_sequence(name + "-ordinary")
    with pytest.raises(WrongKind):
        client.parse(name + "-ordinary", "7")
    assert client.next_numbers(name + "-ordinary", 2) == ["1", "2"]


def test_ids_next_and_decode_round_trip(client: Client) -> None:
    ids = client.next_ids(5) + client.next_ids()
    assert len(ids) == 6 and ids == sorted(set(ids))
    now_ms = time.time() * 1000
    parts = [client.decode_id(i) for i in ids]
    for i, d in zip(ids, parts):
        assert d.id == i
        assert abs(d.time_ms - now_ms) < 60_000, d
        assert d.time.startswith(time.strftime("%Y-", time.gmtime(d.time_ms / 1000)))
    assert len({d.worker for d in parts}) == 1
    assert [(d.time_ms, d.sequence) for d in parts] == sorted((d.time_ms, d.sequence) for d in parts)
    assert client.decode_id(str(ids[0])) == parts[0]
    for bad in ("abc", -1, "99999999999999999999"):
        with pytest.raises(BadRequest) as e:
            client.decode_id(bad)
        assert e.value.status == 400
    with pytest.raises(BadRequest):
        client.next_ids(0)


def test_uuidv7_ids_increase_and_carry_version_and_worker(client: Client) -> None:
    before = client.next_ids()
    uuids = client.next_uuids(300) + client.next_uuids()
    assert len(uuids) == 301 and len(set(uuids)) == 301
    assert [str(u) for u in uuids] == sorted(str(u) for u in uuids)
    assert [u.bytes for u in uuids] == sorted(u.bytes for u in uuids)
    last = client.decode_id(before[0])
    for u in uuids:
        assert u.version == 7 and u.variant == uuid.RFC_4122, u
        n = u.int
        ms, counter, worker = n >> 80, (n >> 64) & 0xFFF, (n >> 40) & 0x3FFFFF
        assert worker == last.worker
        assert (ms, counter) > (last.time_ms, last.sequence)
    with pytest.raises(BadRequest):
        client.next_uuids(0)


def test_alter_forward_and_a_refused_alter_backwards(client: Client, name: str) -> None:
    client.create_sequence(name, block=5)
    assert client.reserve(name, 10).values() == list(range(1, 11))
    info = client.alter(name, next=100)
    assert (info.name, info.next, info.block) == (name, 100, 5)
    assert client.reserve(name, 3).values() == [100, 101, 102]

    with pytest.raises(BadRequest) as e:
        client.alter(name, next=50)
    assert e.value.status == 400 and "forward" in e.value.message
    with pytest.raises(BadRequest):
        client.alter(name, max=50)  # below what was reserved
    with pytest.raises(BadRequest):
        client.alter(name)  # nothing to change
    got = client.get_sequence(name)
    assert (got.next, got.block) == (103, 5)  # the refused changes changed nothing
    assert got.raw["skipped"] == 89 and got.unaccounted is not None

    info = client.alter(name, max=1000, block=7)
    assert (info.next, info.max, info.block) == (103, 1000, 7)
    with pytest.raises(NotFound):
        client.alter(name + "-missing", next=5)
    client.create_sequence(name + "-gapless", gapless=True)
    with pytest.raises(WrongKind):
        client.alter(name + "-gapless", next=5)


def test_async_tickets_parse_ids_alter(server: Server, name: str) -> None:
    async def main() -> None:
        async with AsyncClient(server.url) as c:
            await c.create_sequence(name, gapless=True, format="N{n:03}")
            t = await c.take_ticket(name, ttl=30)
            assert t.value == "N001"
            with pytest.raises(TicketRefused):
                await c.release_ticket(name, f"0-1-{'f' * 32}")
            assert await c.release_ticket(name, t) == "N001"
            t2 = await c.take_ticket(name)
            assert t2.value == "N001"
            assert await c.commit_ticket(name, t2) == "N001"
            assert await c.parse(name, "N001") == NumberParts(None, 1)
            with pytest.raises(BadRequest):
                await c.parse(name, "N1")

            ids = await c.next_ids(3)
            assert ids == sorted(set(ids))
            assert (await c.decode_id(ids[-1])).id == ids[-1]

            plain = name + "-plain"
            await c.create_sequence(plain)
            assert (await c.alter(plain, next=10)).next == 10
            with pytest.raises(BadRequest):
                await c.alter(plain, next=9)
            assert (await c.reserve(plain, 2)).values() == [10, 11]
            assert (await c.status())["sequences"]

    asyncio.run(main())
