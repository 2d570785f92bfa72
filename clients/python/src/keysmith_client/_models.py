"""What the routes answer, as small typed records (each keeps the raw JSON too)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Tuple, Union

Json = Dict[str, Any]

#: A number of a numbered sequence: an ``int``, or its text for a formatted one (``"INV-2026-0042"``).
Number = Union[int, str]


def _int(v: Any) -> int:
    """A JSON integer, sent as a number or (with ``as=string``) as a string."""
    if isinstance(v, bool) or not isinstance(v, (int, str)):
        raise ValueError(f"not an integer: {v!r}")
    return int(v)


def _opt_int(v: Any) -> Optional[int]:
    return None if v is None else _int(v)


def _opt_float(v: Any) -> Optional[float]:
    if v is None:
        return None
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise ValueError(f"not a number: {v!r}")
    return float(v)


def _number(v: Any) -> Number:
    """A number as a numbered sequence sends it: an integer, or the text of a formatted one."""
    if isinstance(v, str):
        return v
    return _int(v)


def _step(v: Any) -> int:
    """A lease's step: a whole number >= 1 (1 when the server sent none: one from before steps)."""
    step = 1 if v is None else _int(v)
    if step < 1:
        raise ValueError(f"not a step: {v!r}")
    return step


@dataclass(frozen=True)
class Range:
    """The values ``start, start + step, start + 2*step, ...`` strictly below ``end``.

    ``step`` is 1 (every integer of ``start..end``) but in a residue class,
    where it is the sequence's ``increment``.
    """

    start: int
    end: int
    step: int = 1

    def __len__(self) -> int:
        return max(0, -(-(self.end - self.start) // self.step))

    def values(self) -> range:
        return range(self.start, self.end, self.step)

    @classmethod
    def from_json(cls, j: Json, step: int = 1) -> Range:
        return cls(_int(j["start"]), _int(j["end"]), step)


@dataclass(frozen=True)
class Lease:
    """Values reserved durably for this caller only (``POST .../reserve``).

    Each range holds ``start, start + step, ...`` below its ``end``; ``step``
    is 1 but for a residue class (its ``increment``).
    """

    sequence: str
    ranges: Tuple[Range, ...]
    #: The lease token that hands an unused tail back: a credential, never in a repr.
    token: str = field(repr=False)
    step: int = 1

    def __len__(self) -> int:
        return sum(len(r) for r in self.ranges)

    def values(self) -> List[int]:
        return [v for r in self.ranges for v in r.values()]

    @classmethod
    def from_json(cls, sequence: str, j: Json) -> Lease:
        step = _step(j.get("step"))
        return cls(sequence, tuple(Range.from_json(r, step) for r in j["ranges"]), str(j["lease"]), step)


@dataclass(frozen=True)
class Numbering:
    """How a numbered sequence hands out its numbers (``None`` on an ordinary one).

    ``gapless``: numbers are taken with tickets; ``period``: ``"day"``,
    ``"month"`` or ``"year"`` (numbers restart every period); ``template``:
    how numbers are printed, e.g. ``"INV-{period}-{n:04}"``.
    """

    gapless: bool
    period: Optional[str]
    template: Optional[str]

    @classmethod
    def from_json(cls, j: Json) -> Numbering:
        p, t = j.get("period"), j.get("template")
        return cls(bool(j.get("gapless", False)), None if p is None else str(p), None if t is None else str(t))


@dataclass(frozen=True)
class SequenceInfo:
    """A sequence as ``GET /v1/sequences/{name}`` shows it.

    ``numbering`` is set for a gap-free, periodic, formatted or residue-class
    sequence (from ``create_sequence`` and ``get_sequence``); ``unaccounted``
    and ``runway_seconds`` only from ``get_sequence``. ``increment`` and
    ``offset`` are set for a residue class (every value is ``offset`` modulo
    ``increment``; ``next``, ``start`` and ``max`` are values of it), ``None``
    for any other sequence.
    """

    name: str
    next: int
    start: int
    max: int
    block: int
    version: Optional[int]
    remaining: Optional[int]
    server: Optional[Json]
    numbering: Optional[Numbering]
    unaccounted: Optional[int]
    runway_seconds: Optional[float]
    increment: Optional[int]
    offset: Optional[int]
    raw: Json = field(repr=False, compare=False)

    @classmethod
    def from_json(cls, j: Json) -> SequenceInfo:
        return cls(
            name=str(j["name"]),
            next=_int(j["next"]),
            start=_int(j["start"]),
            max=_int(j["max"]),
            block=_int(j["block"]),
            version=_opt_int(j.get("version")),
            remaining=_opt_int(j.get("remaining")),
            server=j.get("server"),
            numbering=None if j.get("numbering") is None else Numbering.from_json(j["numbering"]),
            unaccounted=_opt_int(j.get("unaccounted")),
            runway_seconds=_opt_float(j.get("runway_seconds")),
            increment=_opt_int(j.get("increment")),
            offset=_opt_int(j.get("offset")),
            raw=j,
        )


@dataclass(frozen=True)
class PoolInfo:
    """A value pool; ``lowest``, ``highest``, ``taken`` and ``max_value`` only from
    ``get_pool``. ``increment`` and ``offset`` are set for a pool in a residue class
    (every number is ``offset`` modulo ``increment``; ``start``, ``lowest``,
    ``highest`` and ``max_value`` are values of it), ``None`` for any other pool.
    """

    name: str
    start: int
    size: int
    lowest: Optional[int]
    highest: Optional[int]
    taken: Optional[int]
    server: Optional[Json]
    raw: Json = field(repr=False, compare=False)
    max_value: Optional[int] = None
    increment: Optional[int] = None
    offset: Optional[int] = None

    @classmethod
    def from_json(cls, j: Json) -> PoolInfo:
        return cls(
            name=str(j["name"]),
            start=_int(j["start"]),
            size=_int(j["size"]),
            lowest=_opt_int(j.get("lowest")),
            highest=_opt_int(j.get("highest")),
            taken=_opt_int(j.get("taken")),
            server=j.get("server"),
            raw=j,
            max_value=_opt_int(j.get("max_value")),
            increment=_opt_int(j.get("increment")),
            offset=_opt_int(j.get("offset")),
        )


@dataclass(frozen=True)
class CounterNames:
    """``<host>/<n>`` names from the server's host counter."""

    host: str
    first: int
    last: int
    names: List[str]

    @classmethod
    def from_json(cls, j: Json) -> CounterNames:
        return cls(str(j["host"]), _int(j["first"]), _int(j["last"]), [str(n) for n in j["names"]])


@dataclass(frozen=True)
class ShardKeyView:
    """A shard key: its signed URL-safe ``external`` string, its description and its JSON list."""

    external: str
    key: Any
    list: Any

    @classmethod
    def from_json(cls, j: Json) -> ShardKeyView:
        return cls(str(j["external"]), j["key"], j["list"])


@dataclass(frozen=True)
class Ticket:
    """A gap-free number taken with a ticket (``take_ticket``): commit it or release it.

    ``value`` is the number (its text for a formatted sequence), ``period``
    the period key (``20261123``) or ``None``, ``n`` the counter within it.
    ``str(ticket)`` is the ticket string.
    """

    sequence: str
    value: Number
    ticket: str
    period: Optional[int]
    n: int

    def __str__(self) -> str:
        return self.ticket

    @classmethod
    def from_json(cls, sequence: str, j: Json) -> Ticket:
        return cls(sequence, _number(j["value"]), str(j["ticket"]), _opt_int(j.get("period")), _int(j["n"]))


@dataclass(frozen=True)
class NumberParts:
    """A printed number taken apart (``parse``): its period key (or ``None``) and its counter."""

    period: Optional[int]
    n: int

    @classmethod
    def from_json(cls, j: Json) -> NumberParts:
        return cls(_opt_int(j.get("period")), _int(j["n"]))


@dataclass(frozen=True)
class DecodedValue:
    """A value an opaque, encoded or bit-reversed sequence handed out, mapped back
    (``decode``): the value as an integer and the plain counter it was made from."""

    value: int
    counter: int

    @classmethod
    def from_json(cls, j: Json) -> DecodedValue:
        return cls(_int(j["value"]), _int(j["counter"]))


@dataclass(frozen=True)
class DecodedId:
    """A time-ordered id taken apart by the server's layout (``decode_id``)."""

    id: int
    #: The start of its time unit, ms since the Unix epoch.
    time_ms: int
    #: The same, RFC 3339.
    time: str
    worker: int
    sequence: int

    @classmethod
    def from_json(cls, j: Json) -> DecodedId:
        return cls(_int(j["id"]), _int(j["time_ms"]), str(j["time"]), _int(j["worker"]), _int(j["sequence"]))
