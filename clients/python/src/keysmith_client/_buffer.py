"""The local block cache of a Sequence: leased ranges, the adaptive block size, what to hand back.

No I/O and no locking here: :class:`~keysmith_client.Sequence` (threads) and
:class:`~keysmith_client.AsyncSequence` (asyncio) wrap one :class:`Buffer` each.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from typing import Deque, List, Optional, Tuple, Union

from ._models import Lease

#: Prefetch when this fraction of the last lease is left.
PREFETCH_AT = 0.2


@dataclass
class _Run:
    """The unused part of one leased range: ``next, next + step, ...`` below ``end``."""

    next: int
    end: int
    step: int
    lease: str
    # the range is the last of its lease: only there can a tail go back
    last_of_lease: bool

    def left(self) -> int:
        """How many values are left."""
        return max(0, -(-(self.end - self.next) // self.step))


@dataclass(frozen=True)
class Adaptive:
    """How a Sequence sizes its leases.

    The block doubles when leases are used up faster than half ``target``
    seconds apart and halves when slower than twice ``target``, within
    ``min_block..=max_block``.
    """

    min_block: int = 1
    max_block: int = 100_000
    target: float = 1.0

    def __post_init__(self) -> None:
        if not 1 <= self.min_block <= self.max_block:
            raise ValueError(f"need 1 <= min_block <= max_block, got {self.min_block}..{self.max_block}")
        if not self.target > 0:
            raise ValueError(f"target must be positive, got {self.target}")

    def clamp(self, block: int) -> int:
        return max(self.min_block, min(self.max_block, block))


class Buffer:
    """Values leased and not yet handed out, in increasing order.

    A lease's values are ``start, start + step, ...`` below ``end`` (``step``
    is 1 but for a residue class); every ``next`` of a run is one of them, so
    what :meth:`tails` hands back starts on a value of its lease.
    """

    def __init__(self, block: Optional[int], adaptive: Adaptive) -> None:
        self.adaptive = adaptive
        self.block: Optional[int] = None if block is None else adaptive.clamp(block)
        self.runs: Deque[_Run] = deque()
        self.available = 0
        # the largest value received: values of later leases at or below it are
        # dropped (they stay gaps), so that values handed out always increase
        self.high: Optional[int] = None
        #: The step of the newest lease (1 until one came; a residue class's increment).
        self.step = 1
        self.lease_size = 0
        self.fetching = False
        self.last_fetch: Optional[float] = None
        self.leases = 0

    def take(self) -> Optional[int]:
        runs = self.runs
        while runs:
            r = runs[0]
            if r.next < r.end:
                v = r.next
                r.next = v + r.step
                self.available -= 1
                return v
            runs.popleft()
        return None

    def take_n(self, n: int) -> Optional[Union[range, List[int]]]:
        """``n`` values, or ``None`` (taking nothing) when fewer are here.

        A ``range`` (made in O(1)) when the first run holds them all, else a list."""
        if self.available < n:
            return None
        runs = self.runs
        while runs and runs[0].next >= runs[0].end:
            runs.popleft()
        head = runs[0]
        if head.left() >= n:
            first = head.next
            head.next = first + n * head.step
            self.available -= n
            if head.next >= head.end:
                runs.popleft()
            return range(first, first + n * head.step, head.step)
        out: List[int] = []
        while len(out) < n:
            r = runs[0]
            k = min(n - len(out), r.left())
            out.extend(range(r.next, r.next + k * r.step, r.step))
            r.next += k * r.step
            self.available -= k
            if r.next >= r.end:
                runs.popleft()
        return out

    def take_segment(self) -> Optional[Tuple[range, str, bool]]:
        """The next values to hand out lock-free, as a ``range`` taken off the buffer:
        up to where the next lease should be prefetched (or the rest of the run once
        it is on its way). With the lease it belongs to, and whether it ends the last
        run of that lease (for :meth:`untake`). ``None`` when nothing is here."""
        runs = self.runs
        while runs:
            r = runs[0]
            left = r.left()
            if left <= 0:
                runs.popleft()
                continue
            k = left
            if not self.fetching:
                above = self.available - int(self.lease_size * PREFETCH_AT)
                if above > 0:
                    k = min(k, above)
            first = r.next
            r.next = first + k * r.step
            self.available -= k
            ends = r.next >= r.end
            if ends:
                runs.popleft()
            return range(first, r.next, r.step), r.lease, ends and r.last_of_lease
        return None

    def untake(self, rest: List[int], seg: range, lease: str, last_of_lease: bool) -> None:
        """Puts the values of a segment not handed out (``rest``, its tail) back in front."""
        if not rest:
            return
        first = rest[0]
        head = self.runs[0] if self.runs else None
        if head is not None and head.lease == lease and head.next == seg.stop:
            head.next = first
        else:
            self.runs.appendleft(_Run(first, seg.stop, seg.step, lease, last_of_lease))
        self.available += len(rest)

    def wants_prefetch(self) -> bool:
        return not self.fetching and self.available <= self.lease_size * PREFETCH_AT

    def begin_fetch(self) -> None:
        self.fetching = True

    def count(self, need: int, now: float) -> int:
        """How many values to reserve now (``block`` must be known): adapts the block to the rate."""
        assert self.block is not None
        a = self.adaptive
        if self.last_fetch is not None:
            dt = now - self.last_fetch
            if dt < a.target / 2:
                self.block = a.clamp(self.block * 2)
            elif dt > a.target * 2:
                self.block = a.clamp(self.block // 2)
        self.last_fetch = now
        return max(self.block, min(a.max_block, need - self.available))

    def end_fetch(self, lease: Optional[Lease]) -> None:
        self.fetching = False
        if lease is None:
            return
        self.leases += 1
        self.lease_size = len(lease)
        step = self.step = lease.step
        ranges = [r for r in lease.ranges if r.end > r.start]
        for k, r in enumerate(ranges):
            start = r.start
            if self.high is not None and start <= self.high:
                # the first value of the range above high (values are r.start + i*step)
                start += (self.high - r.start) // step * step + step
            last = k == len(ranges) - 1
            if start < r.end:
                run = _Run(start, r.end, step, lease.token, last)
                n = run.left()
                self.runs.append(run)
                self.available += n
                self.high = start + (n - 1) * step

    def tails(self) -> List[Tuple[str, int]]:
        """``(lease, from)`` of every lease whose last range has values left, newest first; empties the buffer.

        ``from`` is the run's next value: a value of the lease, as the release route needs."""
        out = [(r.lease, r.next) for r in self.runs if r.last_of_lease and r.next < r.end]
        self.runs.clear()
        self.available = 0
        out.reverse()
        return out
