"""The local block cache, without a server: the clock is passed in, so nothing here is timed."""

from __future__ import annotations

import pytest

from keysmith_client._buffer import Adaptive, Buffer
from keysmith_client._models import Lease, Range


def lease(token: str, *ranges: tuple[int, int]) -> Lease:
    return Lease("s", tuple(Range(a, b) for a, b in ranges), token)


def test_values_come_in_order_and_prefetch_starts_at_a_fifth_left() -> None:
    b = Buffer(10, Adaptive())
    assert b.take() is None and b.wants_prefetch()
    b.begin_fetch()
    assert not b.wants_prefetch()  # one lease in flight at a time
    b.end_fetch(lease("a", (1, 11)))
    got = []
    while not b.wants_prefetch():
        v = b.take()
        assert v is not None
        got.append(v)
    assert got == list(range(1, 9)) and b.available == 2


def test_take_n_takes_all_or_nothing_across_ranges() -> None:
    b = Buffer(5, Adaptive())
    b.end_fetch(lease("a", (1, 4), (10, 12)))
    assert b.take_n(6) is None and b.available == 5
    assert b.take_n(4) == [1, 2, 3, 10]
    assert b.take() == 11 and b.take() is None


def test_values_at_or_below_any_received_are_dropped_so_values_increase() -> None:
    b = Buffer(5, Adaptive())
    b.end_fetch(lease("a", (100, 105)))
    b.end_fetch(lease("b", (50, 60), (103, 108)))  # e.g. another server's older block
    assert b.take_n(8) == [100, 101, 102, 103, 104, 105, 106, 107]
    assert b.take() is None


def test_block_doubles_when_fast_halves_when_slow_within_bounds() -> None:
    a = Adaptive(min_block=2, max_block=16, target=1.0)
    b = Buffer(4, a)
    assert b.count(0, now=100.0) == 4  # the first lease: the starting block
    assert b.count(0, now=100.4) == 8  # 0.4 s < target/2: double
    assert b.count(0, now=100.8) == 16
    assert b.count(0, now=101.0) == 16  # bounded above
    assert b.count(0, now=102.0) == 16  # 1 s: within target/2..2*target, unchanged
    assert b.count(0, now=104.5) == 8  # 2.5 s > 2*target: halve
    assert b.count(0, now=110.0) == 4
    assert b.count(0, now=120.0) == 2
    assert b.count(0, now=130.0) == 2  # bounded below
    assert b.count(50, now=131.0) == 16  # a big next_n asks for what it needs, up to max_block


def test_starting_block_is_clamped_and_bounds_are_checked() -> None:
    assert Buffer(10**9, Adaptive(max_block=1000)).block == 1000
    assert Buffer(None, Adaptive()).block is None
    with pytest.raises(ValueError):
        Adaptive(min_block=0)
    with pytest.raises(ValueError):
        Adaptive(min_block=10, max_block=5)


def test_tails_are_the_unused_ends_of_last_ranges_newest_first() -> None:
    b = Buffer(5, Adaptive())
    b.end_fetch(lease("a", (1, 6)))
    b.end_fetch(lease("b", (6, 9), (20, 25)))
    assert b.take_n(2) == [1, 2]
    assert b.tails() == [("b", 20), ("a", 3)]
    assert b.available == 0 and b.take() is None
    b.end_fetch(lease("c", (30, 33)))
    assert b.take_n(3) == [30, 31, 32]
    assert b.tails() == []  # used up: nothing to hand back
