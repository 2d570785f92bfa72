"""Residue classes (every value is offset modulo increment) against a real server."""

from __future__ import annotations

import asyncio
from typing import List

import pytest

from keysmith_client import AsyncClient, BadRequest, Client

from .conftest import Server


def assert_in_class(vs: List[int], increment: int, offset: int) -> None:
    assert vs == sorted(vs) and len(set(vs)) == len(vs), "values must increase, each once"
    bad = [v for v in vs if v % increment != offset]
    assert not bad, f"values not {offset} mod {increment}: {bad[:5]}"


def test_create_shows_the_class_and_an_ordinary_sequence_has_none(server: Server, name: str) -> None:
    with Client(server.url) as c:
        info = c.create_sequence(name, increment=3, offset=2, block=4)
        assert (info.increment, info.offset) == (3, 2)
        assert info.next == 2 and info.start == 2 and info.max % 3 == 2
        assert (c.get_sequence(name).increment, c.get_sequence(name).offset) == (3, 2)
        listed = {s.name: s for s in c.list_sequences()}
        assert listed[name].increment == 3 and listed[name].offset == 2
        plain = c.create_sequence(name + "-plain")
        assert plain.increment is None and plain.offset is None
        # offset defaults to 0
        zero = c.create_sequence(name + "-zero", increment=5, start=7)
        assert (zero.increment, zero.offset, zero.start) == (5, 0, 10)


def test_a_cached_sequence_hands_out_only_values_of_the_class(server: Server, name: str) -> None:
    with Client(server.url) as c:
        c.create_sequence(name, increment=3, offset=2, block=4)
        seq = c.sequence(name, min_block=4, max_block=4)
        got = [seq.next() for _ in range(5)] + list(seq.next_n(7)) + [seq.next() for _ in range(6)]
        assert got[:4] == [2, 5, 8, 11]
        assert len(got) == 18 and seq.leases >= 4  # a few refills
        assert_in_class(got, 3, 2)
        seq.close()
        # the tail went back from the next value not handed out, a value of the class
        assert seq.released is not None and seq.released.step == 3
        assert seq.released.start % 3 == 2 and seq.released.start > got[-1]
        lease = c.reserve(name, 2)
        assert lease.step == 3 and lease.ranges[0].start == seq.released.start
        assert lease.values() == [seq.released.start, seq.released.start + 3]
        # the plain routes agree
        more = c.next(name, 5)
        assert_in_class(got + lease.values() + more, 3, 2)


def test_close_right_after_the_first_value_hands_back_the_rest(server: Server, name: str) -> None:
    with Client(server.url) as c:
        c.create_sequence(name, increment=7, offset=4, block=10)
        with c.sequence(name, 10, min_block=10, max_block=10) as seq:
            assert seq.next() == 4
        assert seq.released is not None
        assert (seq.released.start, len(seq.released)) == (11, 9)
        assert seq.released.values()[-1] == 4 + 9 * 7
        assert c.get_sequence(name).next == 11


def test_release_of_a_reserved_lease_from_a_value_of_it(server: Server, name: str) -> None:
    with Client(server.url) as c:
        c.create_sequence(name, increment=4, offset=1)
        lease = c.reserve(name, 5)
        assert lease.step == 4 and len(lease) == 5 and lease.values() == [1, 5, 9, 13, 17]
        with pytest.raises(BadRequest):
            c.release(lease, 6)  # not a value of the lease
        back = c.release(lease, 9)
        assert back is not None and back.values() == range(9, 18, 4) and len(back) == 3
        assert c.next(name, 1) == [9]


def test_offset_at_or_above_the_increment_is_the_servers_400(server: Server, name: str) -> None:
    with Client(server.url) as c:
        with pytest.raises(BadRequest) as e:
            c.create_sequence(name, increment=3, offset=3)
        assert e.value.status == 400 and "offset" in str(e.value)
        with pytest.raises(BadRequest) as e:
            c.create_sequence(name, offset=1)  # an offset without an increment
        assert e.value.status == 400
        with pytest.raises(BadRequest):
            c.create_sequence(name, increment=1)
        with pytest.raises(TypeError):
            c.create_sequence(name, increment=2.5)  # type: ignore[arg-type]


def test_two_classes_of_increment_two_never_share_a_value(server: Server, name: str) -> None:
    """Two regions: evens and odds, each through its own cached handle and the plain route."""
    with Client(server.url) as c:
        c.create_sequence(name + "-even", increment=2, offset=0, block=3)
        c.create_sequence(name + "-odd", increment=2, offset=1, block=5)
        even, odd = c.sequence(name + "-even", max_block=8), c.sequence(name + "-odd", max_block=8)
        evens = [even.next() for _ in range(40)] + list(even.next_n(9)) + c.next(name + "-even", 3)
        odds = list(odd.next_n(11)) + [odd.next() for _ in range(40)] + c.next(name + "-odd", 3)
        even.close()
        odd.close()
        assert_in_class(evens[:49], 2, 0)
        assert_in_class(odds[:51], 2, 1)
        assert all(v % 2 == 0 for v in evens) and all(v % 2 == 1 for v in odds)
        assert not set(evens) & set(odds)
        assert len(set(evens)) == len(evens) and len(set(odds)) == len(odds)


def test_a_plain_sequence_still_steps_by_one(server: Server, name: str) -> None:
    with Client(server.url) as c:
        c.create_sequence(name, block=5)
        lease = c.reserve(name, 3)
        assert lease.step == 1 and lease.values() == [1, 2, 3]
        with c.sequence(name, 5, min_block=5, max_block=5) as seq:
            assert list(seq.next_n(7)) == list(range(4, 11))
        assert seq.released is not None and seq.released.step == 1 and seq.released.start == 11


def test_an_async_sequence_of_a_class(server: Server, name: str) -> None:
    async def main() -> None:
        async with AsyncClient(server.url) as c:
            info = await c.create_sequence(name, increment=5, offset=3, block=3)
            assert (info.increment, info.offset) == (5, 3)
            seq = c.sequence(name, min_block=3, max_block=3)
            got = [await seq.next() for _ in range(4)] + list(await seq.next_n(5))
            assert got[:3] == [3, 8, 13]
            assert_in_class(got, 5, 3)
            await seq.close()
            assert seq.released is not None and seq.released.start == got[-1] + 5
            assert (await c.reserve(name, 1)).ranges[0].start == got[-1] + 5

    asyncio.run(main())


def test_a_pool_in_a_class_hands_out_only_its_values(server: Server, name: str) -> None:
    with Client(server.url) as c:
        info = c.create_pool(name, 5, start=10, increment=4, offset=1)
        assert (info.start, info.size, info.increment, info.offset) == (13, 5, 4, 1)
        got = c.pool_next(name, 20) + c.pool_next(name, 7)
        assert len(got) == len(set(got)) == 27
        bad = [v for v in got if v % 4 != 1 or v < 13]
        assert not bad, f"numbers outside the class: {bad}"
        shown = c.get_pool(name)
        assert (shown.increment, shown.offset, shown.taken) == (4, 1, 27)
        assert shown.lowest is not None and shown.highest is not None and shown.max_value is not None
        assert all(v % 4 == 1 for v in (shown.start, shown.lowest, shown.highest, shown.max_value))
        listed = {p.name: p for p in c.list_pools()}
        assert (listed[name].increment, listed[name].offset) == (4, 1)
        plain = c.create_pool(name + "-plain", 3)
        assert plain.increment is None and plain.offset is None and plain.start == 1
        # offset defaults to 0
        zero = c.create_pool(name + "-zero", 2, start=7, increment=5)
        assert (zero.increment, zero.offset, zero.start) == (5, 0, 10)


def test_two_pools_of_increment_two_never_share_a_number(server: Server, name: str) -> None:
    with Client(server.url) as c:
        c.create_pool(name + "-even", 8, start=0, increment=2)
        c.create_pool(name + "-odd", 8, start=0, increment=2, offset=1)
        evens = [v for _ in range(5) for v in c.pool_next(name + "-even", 9)]
        odds = [v for _ in range(5) for v in c.pool_next(name + "-odd", 9)]
        assert all(v % 2 == 0 for v in evens) and all(v % 2 == 1 for v in odds)
        assert len(set(evens)) == len(evens) == 45 and len(set(odds)) == len(odds) == 45
        assert not set(evens) & set(odds)


def test_a_bad_pool_class_is_the_servers_400_and_creates_nothing(server: Server, name: str) -> None:
    with Client(server.url) as c:
        for kwargs in (
            {"increment": 3, "offset": 3},
            {"offset": 1},  # an offset without an increment
            {"increment": 1},
            {"increment": 0},
            # fits without a class, not in values of one
            {"start": 2**63 - 30, "increment": 2},
        ):
            with pytest.raises(BadRequest) as e:
                c.create_pool(name, 10, **kwargs)
            assert e.value.status == 400, kwargs
        with pytest.raises(TypeError):
            c.create_pool(name, 3, increment=2.5)  # type: ignore[arg-type]
        assert name not in {p.name for p in c.list_pools()}


def test_an_async_pool_in_a_class(server: Server, name: str) -> None:
    async def main() -> None:
        async with AsyncClient(server.url) as c:
            info = await c.create_pool(name, 4, increment=3, offset=2)
            assert (info.start, info.increment, info.offset) == (2, 3, 2)
            got = await c.pool_next(name, 12)
            assert len(set(got)) == 12 and all(v % 3 == 2 for v in got)
            assert (await c.get_pool(name)).increment == 3

    asyncio.run(main())
