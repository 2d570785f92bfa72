"""The routes, once: what to send and how to read the answer (the clients only send)."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any, Callable, Dict, Generic, Iterable, List, Optional, TypeVar, Union

from ._errors import WrongKind
from ._failover import seg
from ._models import (
    CounterNames,
    DecodedId,
    DecodedValue,
    Json,
    Lease,
    Number,
    NumberParts,
    PoolInfo,
    Range,
    SequenceInfo,
    ShardKeyView,
    Ticket,
    _int,
    _number,
)

T = TypeVar("T")

# Values always travel as strings: exact in every language, whatever the i64.
AS_STRING = {"as": "string"}


@dataclass(frozen=True)
class Req(Generic[T]):
    method: str
    path: str
    parse: Callable[[Any], T]
    params: Optional[Dict[str, str]] = None
    json: Optional[Json] = None
    # may be sent again after it may have reached a server (see Attempt)
    safe: bool = True


def _values(j: Any) -> List[int]:
    return [_int(v) for v in j["values"]]


def _none(_: Any) -> None:
    return None


def _count(count: int) -> Dict[str, str]:
    if isinstance(count, bool) or not isinstance(count, int):
        raise TypeError(f"count must be an int, got {count!r}")
    return {"count": str(count), **AS_STRING}


def _texts(j: Any) -> List[str]:
    return [str(v) for v in j["values"]]


def _whole(what: str, v: Any) -> int:
    if isinstance(v, bool) or not isinstance(v, int):
        raise TypeError(f"{what} must be an int, got {v!r}")
    return v


def create_sequence(
    name: str,
    start: Optional[int],
    max: Optional[int],
    block: Optional[int],
    gapless: bool = False,
    period: Optional[str] = None,
    format: Optional[str] = None,
    increment: Optional[int] = None,
    offset: Optional[int] = None,
    opaque: bool = False,
    encoding: Optional[str] = None,
    prefix: Optional[str] = None,
    js_safe: bool = False,
    order: Optional[str] = None,
) -> Req[SequenceInfo]:
    body: Json = {"name": name}
    if order is not None:
        body["order"] = order
    for k, v in (("start", start), ("max", max), ("block", block)):
        if v is not None:
            body[k] = v
    # the server checks the class (2 <= increment, 0 <= offset < increment; no offset alone)
    for k, v in (("increment", increment), ("offset", offset)):
        if v is not None:
            body[k] = _whole(k, v)
    if gapless:
        body["gapless"] = True
    if period is not None:
        body["period"] = period
    if format is not None:
        body["format"] = format
    if opaque:
        body["opaque"] = True
    if js_safe:
        body["js_safe"] = True
    # the server checks the encoding and prefix (base32 or base62; prefix with an encoding)
    for k, t in (("encoding", encoding), ("prefix", prefix)):
        if t is not None:
            body[k] = t
    return Req("POST", "/v1/sequences", SequenceInfo.from_json, json=body, safe=False)


def decode(name: str, value: Union[int, str]) -> Req[DecodedValue]:
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        raise TypeError(f"value must be an int or a str, got {value!r}")
    return Req("POST", f"/v1/sequences/{seg(name)}/decode", DecodedValue.from_json, json={"value": value})


def alter(name: str, next: Optional[int], max: Optional[int], block: Optional[int]) -> Req[SequenceInfo]:
    body: Json = {}
    for k, v in (("next", next), ("max", max), ("block", block)):
        if v is not None:
            body[k] = _whole(k, v)
    # not sent again: a second `next` may be refused once values were reserved in between
    return Req("PATCH", f"/v1/sequences/{seg(name)}", SequenceInfo.from_json, json=body, safe=False)


def get_sequence(name: str) -> Req[SequenceInfo]:
    return Req("GET", f"/v1/sequences/{seg(name)}", SequenceInfo.from_json)


def list_sequences() -> Req[List[SequenceInfo]]:
    return Req("GET", "/v1/sequences", lambda j: [SequenceInfo.from_json(s) for s in j["sequences"]])


def drop_sequence(name: str) -> Req[None]:
    return Req("DELETE", f"/v1/sequences/{seg(name)}", _none, safe=False)


def next_values(name: str, count: int) -> Req[List[int]]:
    def ints(j: Any) -> List[int]:
        try:
            return _values(j)
        except ValueError:
            raise WrongKind(
                f"sequence {name!r} answered printed numbers ({j['values'][:1]!r}...), not integers: "
                "it is periodic or formatted; read them with next_numbers (these were taken)",
                status=200,
                code="wrong_kind",
            ) from None

    return Req("POST", f"/v1/sequences/{seg(name)}/next", ints, params=_count(count))


def next_numbers(name: str, count: int) -> Req[List[str]]:
    return Req("POST", f"/v1/sequences/{seg(name)}/next", _texts, params=_count(count))


def take_ticket(name: str, ttl: Optional[int]) -> Req[Ticket]:
    params = None if ttl is None else {"ttl": str(_whole("ttl", ttl))}
    # A ticket whose answer was lost holds its number only until its ttl: no gap.
    return Req("POST", f"/v1/sequences/{seg(name)}/tickets", lambda j: Ticket.from_json(name, j), params=params)


def _settle(name: str, ticket: str, action: str) -> Req[Number]:
    key = "committed" if action == "commit" else "released"
    # not sent again: a repeat would be refused (the first one settled the ticket)
    return Req(
        "POST",
        f"/v1/sequences/{seg(name)}/tickets/{action}",
        lambda j: _number(j[key]),
        json={"ticket": ticket},  # in the body, never in the URL
        safe=False,
    )


def commit_ticket(name: str, ticket: str) -> Req[Number]:
    return _settle(name, ticket, "commit")


def release_ticket(name: str, ticket: str) -> Req[Number]:
    return _settle(name, ticket, "release")


def parse(name: str, text: str) -> Req[NumberParts]:
    return Req("POST", f"/v1/sequences/{seg(name)}/parse", NumberParts.from_json, json={"value": text})


def reserve(name: str, count: int) -> Req[Lease]:
    return Req(
        "POST",
        f"/v1/sequences/{seg(name)}/reserve",
        lambda j: Lease.from_json(name, j),
        params=_count(count),
    )


def release(name: str, lease: str, from_: int, step: int = 1) -> Req[Optional[Range]]:
    """``from_`` must be a value of the lease (``start + i*step``); the range that
    went back holds the lease's values from it, every ``step``."""

    def released(j: Any) -> Optional[Range]:
        r = j.get("released")
        return None if r is None else Range.from_json(r, step)

    return Req(
        "POST",
        f"/v1/sequences/{seg(name)}/release",
        released,
        json={"lease": lease, "from": from_},
        safe=False,
    )


def create_pool(
    name: str,
    size: int,
    start: Optional[int],
    increment: Optional[int] = None,
    offset: Optional[int] = None,
) -> Req[PoolInfo]:
    body: Json = {"name": name, "size": size}
    if start is not None:
        body["start"] = start
    # the server checks the class (2 <= increment, 0 <= offset < increment; no offset alone)
    for k, v in (("increment", increment), ("offset", offset)):
        if v is not None:
            body[k] = _whole(k, v)
    return Req("POST", "/v1/pools", PoolInfo.from_json, json=body, safe=False)


def get_pool(name: str) -> Req[PoolInfo]:
    return Req("GET", f"/v1/pools/{seg(name)}", PoolInfo.from_json)


def list_pools() -> Req[List[PoolInfo]]:
    return Req("GET", "/v1/pools", lambda j: [PoolInfo.from_json(p) for p in j["pools"]])


def drop_pool(name: str) -> Req[None]:
    return Req("DELETE", f"/v1/pools/{seg(name)}", _none, safe=False)


def pool_next(name: str, count: int) -> Req[List[int]]:
    return Req("POST", f"/v1/pools/{seg(name)}/next", _values, params=_count(count))


def counter_next(count: int) -> Req[CounterNames]:
    return Req("POST", "/v1/counters/next", CounterNames.from_json, params=_count(count))


ShardId = Union[int, str, Dict[str, Any]]


def shard_key_encode(origin: str, shard: int, record: ShardId, children: Iterable[ShardId]) -> Req[ShardKeyView]:
    body: Json = {"origin": origin, "shard": shard, "record": record, "children": list(children)}
    return Req("POST", "/v1/shard-keys/encode", ShardKeyView.from_json, json=body)


def shard_key_decode(
    external: str, origin: Optional[str], record_type: Optional[str], child_types: Iterable[str]
) -> Req[ShardKeyView]:
    body: Json = {"external": external}
    if origin is not None:
        body["origin"] = origin
    if record_type is not None:
        body["record_type"] = record_type
    types = list(child_types)
    if types:
        body["child_types"] = types
    return Req("POST", "/v1/shard-keys/decode", ShardKeyView.from_json, json=body)


def next_ids(count: int) -> Req[List[int]]:
    return Req("POST", "/v1/ids/next", lambda j: [_int(v) for v in j["ids"]], params=_count(count))


def next_uuids(count: int) -> Req[List[uuid.UUID]]:
    return Req(
        "POST",
        "/v1/ids/next",
        lambda j: [uuid.UUID(str(v)) for v in j["ids"]],
        params={**_count(count), "format": "uuidv7"},
    )


def decode_id(id: Union[int, str]) -> Req[DecodedId]:
    if isinstance(id, bool) or not isinstance(id, (int, str)):
        raise TypeError(f"id must be an int or its decimal string, got {id!r}")
    return Req("GET", f"/v1/ids/{seg(str(id))}", DecodedId.from_json)


def health() -> Req[Json]:
    return Req("GET", "/healthz", lambda j: dict(j))


def status() -> Req[Json]:
    return Req("GET", "/v1/status", lambda j: dict(j))
