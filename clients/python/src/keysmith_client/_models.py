"""What the routes answer, as small typed records (each keeps the raw JSON too)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Tuple

Json = Dict[str, Any]


def _int(v: Any) -> int:
    """A JSON integer, sent as a number or (with ``as=string``) as a string."""
    if isinstance(v, bool) or not isinstance(v, (int, str)):
        raise ValueError(f"not an integer: {v!r}")
    return int(v)


def _opt_int(v: Any) -> Optional[int]:
    return None if v is None else _int(v)


@dataclass(frozen=True)
class Range:
    """The half-open range ``start..end`` (``end`` excluded)."""

    start: int
    end: int

    def __len__(self) -> int:
        return max(0, self.end - self.start)

    @classmethod
    def from_json(cls, j: Json) -> Range:
        return cls(_int(j["start"]), _int(j["end"]))


@dataclass(frozen=True)
class Lease:
    """Values reserved durably for this caller only (``POST .../reserve``)."""

    sequence: str
    ranges: Tuple[Range, ...]
    token: str

    def __len__(self) -> int:
        return sum(len(r) for r in self.ranges)

    def values(self) -> List[int]:
        return [v for r in self.ranges for v in range(r.start, r.end)]

    @classmethod
    def from_json(cls, sequence: str, j: Json) -> Lease:
        return cls(sequence, tuple(Range.from_json(r) for r in j["ranges"]), str(j["lease"]))


@dataclass(frozen=True)
class SequenceInfo:
    """A sequence as ``GET /v1/sequences/{name}`` shows it."""

    name: str
    next: int
    start: int
    max: int
    block: int
    version: Optional[int]
    remaining: Optional[int]
    server: Optional[Json]
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
            raw=j,
        )


@dataclass(frozen=True)
class PoolInfo:
    """A value pool; ``lowest``, ``highest`` and ``taken`` only from ``get_pool``."""

    name: str
    start: int
    size: int
    lowest: Optional[int]
    highest: Optional[int]
    taken: Optional[int]
    server: Optional[Json]
    raw: Json = field(repr=False, compare=False)

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
