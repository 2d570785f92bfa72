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
    assert list(b.take_n(4) or ()) == [1, 2, 3, 10]
    assert b.take() == 11 and b.take() is None


def test_values_at_or_below_any_received_are_dropped_so_values_increase() -> None:
    b = Buffer(5, Adaptive())
    b.end_fetch(lease("a", (100, 105)))
    b.end_fetch(lease("b", (50, 60), (103, 108)))  # e.g. another server's older block
    assert list(b.take_n(8) or ()) == [100, 101, 102, 103, 104, 105, 106, 107]
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
    assert list(b.take_n(2) or ()) == [1, 2]
    assert b.tails() == [("b", 20), ("a", 3)]
    assert b.available == 0 and b.take() is None
    b.end_fetch(lease("c", (30, 33)))
    assert list(b.take_n(3) or ()) == [30, 31, 32]
    assert b.tails() == []  # used up: nothing to hand back


def stepped(token: str, step: int, *ranges: tuple[int, int]) -> Lease:
    return Lease("s", tuple(Range(a, b, step) for a, b in ranges), token, step)


def test_a_stepped_lease_hands_out_every_step_th_value_and_counts_them() -> None:
    b = Buffer(4, Adaptive())
    lease = stepped("a", 3, (2, 12))  # 2, 5, 8, 11: the values 2 mod 3 of a 4-slot lease
    assert len(lease) == 4 and lease.values() == [2, 5, 8, 11]
    b.end_fetch(lease)
    assert b.available == 4 and b.lease_size == 4
    assert b.take() == 2
    assert b.take_n(4) is None and b.available == 3  # all or nothing
    assert list(b.take_n(2) or ()) == [5, 8]
    assert b.available == 1 and not b.wants_prefetch()  # a fifth of 4 values: none left
    assert b.take() == 11 and b.wants_prefetch()
    assert b.take() is None and b.available == 0


def test_a_stepped_tail_goes_back_from_the_next_value_of_the_lease() -> None:
    b = Buffer(5, Adaptive())
    b.end_fetch(stepped("a", 4, (1, 18)))  # 1, 5, 9, 13, 17
    assert list(b.take_n(2) or ()) == [1, 5]
    assert b.tails() == [("a", 9)]
    b.end_fetch(stepped("b", 4, (21, 38)))  # 21, 25, 29, 33, 37
    assert list(b.take_n(5) or ()) == [21, 25, 29, 33, 37]
    assert b.tails() == []  # used up, although 38 < end is never reached exactly


def test_values_at_or_below_any_received_are_dropped_on_the_step() -> None:
    b = Buffer(5, Adaptive())
    b.end_fetch(stepped("a", 3, (32, 45)))  # 32, 35, 38, 41, 44
    b.end_fetch(stepped("b", 3, (20, 30), (41, 54)))  # an older block, then one overlapping: 41..53
    assert b.available == 5 + 3  # 47, 50, 53: clipped above 44 onto the class
    got = b.take_n(8)
    assert got == [32, 35, 38, 41, 44, 47, 50, 53] and all(v % 3 == 2 for v in got)
    b.end_fetch(stepped("c", 3, (53, 60)))  # 53 was received: 56, 59
    assert list(b.take_n(2) or ()) == [56, 59]
    b.end_fetch(stepped("d", 3, (62, 72)))
    assert b.take() == 62
    assert b.tails() == [("d", 65)]


def test_a_lease_without_a_step_is_of_step_one() -> None:
    old = Lease.from_json("s", {"ranges": [{"start": "7", "end": "10"}], "lease": "t"})
    assert old.step == 1 and old.values() == [7, 8, 9] and len(old) == 3
    new = Lease.from_json("s", {"ranges": [{"start": "7", "end": "17"}], "step": 3, "lease": "t"})
    assert new.step == 3 and new.ranges[0].step == 3 and new.values() == [7, 10, 13, 16] and len(new) == 4
    with pytest.raises(ValueError):
        Lease.from_json("s", {"ranges": [{"start": 1, "end": 2}], "step": 0, "lease": "t"})


def test_segments_stop_where_the_prefetch_starts_and_unused_values_go_back() -> None:
    b = Buffer(10, Adaptive())
    b.end_fetch(lease("a", (1, 11)))
    seg = b.take_segment()
    # up to the last fifth: the caller that uses it up starts the prefetch
    assert seg is not None and seg[0] == range(1, 9) and b.available == 2 and b.wants_prefetch()
    b.begin_fetch()
    seg2 = b.take_segment()
    assert seg2 is not None and seg2[0] == range(9, 11) and seg2[1:] == ("a", True) and b.available == 0
    it = iter(seg2[0])
    assert next(it) == 9
    b.untake(list(it), *seg2)  # 10 was not handed out: it goes back, and the tail is from 10
    assert b.available == 1 and b.tails() == [("a", 10)]


def test_unused_values_of_a_segment_rejoin_their_run() -> None:
    b = Buffer(10, Adaptive())
    b.end_fetch(lease("a", (1, 11)))
    seg = b.take_segment()
    assert seg is not None
    it = iter(seg[0])
    assert [next(it), next(it)] == [1, 2]
    b.untake(list(it), *seg)
    assert b.available == 8 and list(b.take_n(8) or ()) == list(range(3, 11))


def test_take_n_is_a_range_within_one_run() -> None:
    b = Buffer(10, Adaptive())
    b.end_fetch(lease("a", (1, 1_000_001)))
    assert b.take_n(500_000) == range(1, 500_001)
