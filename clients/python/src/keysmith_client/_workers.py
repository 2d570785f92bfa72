"""Worker-id leases for other generators (sonyflake, bwmarrin/snowflake).

``client.lease_worker(group)`` leases the lowest free worker id of a group;
``renew_worker`` and ``release_worker`` take its token; ``list_workers``
shows the group's worker ids (held or free, never a token). :class:`WorkerLease`
(``client.worker_lease(group)``) holds one: it renews in a background thread
every third of the TTL and tells its owner when the lease is lost (a
renewal refused, or no renewal succeeded before the lease expired): the
``lost`` property, and the ``on_lost`` callback, called once.

Use the worker id only for ids whose time lies in
``not_before_ms..until_ms`` (check :meth:`WorkerLease.usable`), and stop
issuing ids when the lease is lost.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Dict, List, Optional

from ._api import Req
from ._errors import Conflict, KeysmithError
from ._failover import seg
from ._models import Json, _int, _opt_int

if TYPE_CHECKING:
    from ._sync import Client

#: The TTL when none is given, ms.
DEFAULT_TTL_MS = 10_000
#: The group size when none is given.
DEFAULT_MAX = 1024


@dataclass(frozen=True)
class WorkerLeaseInfo:
    """A worker id held: what a lease or renewal answers."""

    group: str
    worker: int
    fence: int
    max: int
    not_before_ms: int
    until_ms: int
    expires_ms: int
    ttl_ms: int
    token: str
    raw: Json

    @classmethod
    def from_json(cls, j: Json) -> WorkerLeaseInfo:
        return cls(
            str(j["group"]),
            _int(j["worker"]),
            _int(j["fence"]),
            _int(j["max"]),
            _int(j["not_before_ms"]),
            _int(j["until_ms"]),
            _int(j["expires_ms"]),
            _int(j["ttl_ms"]),
            str(j["lease"]),
            dict(j),
        )


@dataclass(frozen=True)
class WorkerInfo:
    """One worker id of a group, as :meth:`Client.list_workers` lists it (no token).

    ``held``: a live lease holds it (by the store's clock). ``holder``,
    ``expires_ms`` (the server's clock) and ``expires_in_ms`` (the time left
    by the store's clock) are ``None`` unless held. ``until_ms`` is its time
    floor: ids made with it lie below, the next holder starts at or above.
    """

    worker: int
    held: bool
    holder: Optional[str]
    fence: int
    until_ms: int
    expires_ms: Optional[int]
    expires_in_ms: Optional[int]
    raw: Json

    @classmethod
    def from_json(cls, j: Json) -> WorkerInfo:
        holder = j["holder"]
        return cls(
            _int(j["worker"]),
            bool(j["held"]),
            None if holder is None else str(holder),
            _int(j["fence"]),
            _int(j["until_ms"]),
            _opt_int(j["expires_ms"]),
            _opt_int(j["expires_in_ms"]),
            dict(j),
        )


def _check_int(what: str, v: Optional[int]) -> None:
    if v is not None and (isinstance(v, bool) or not isinstance(v, int)):
        raise TypeError(f"{what} must be an int, got {v!r}")


def lease_req(group: str, ttl_ms: Optional[int], max: Optional[int]) -> Req[WorkerLeaseInfo]:
    _check_int("ttl_ms", ttl_ms)
    _check_int("max", max)
    params: Dict[str, str] = {}
    if ttl_ms is not None:
        params["ttl_ms"] = str(ttl_ms)
    if max is not None:
        params["max"] = str(max)
    # Not sent twice: a lease that reached a server and was lost on the way
    # back would hold a worker id until it expires.
    return Req("POST", f"/v1/workers/{seg(group)}/lease", WorkerLeaseInfo.from_json, params=params, safe=False)


def renew_req(group: str, token: str, ttl_ms: Optional[int]) -> Req[WorkerLeaseInfo]:
    _check_int("ttl_ms", ttl_ms)
    params = {} if ttl_ms is None else {"ttl_ms": str(ttl_ms)}
    return Req("POST", f"/v1/workers/{seg(group)}/lease/{seg(token)}/renew", WorkerLeaseInfo.from_json, params=params)


def _released(j: Any) -> bool:
    return bool(j["released"])


def release_req(group: str, token: str) -> Req[bool]:
    return Req("POST", f"/v1/workers/{seg(group)}/lease/{seg(token)}/release", _released)


def _workers(j: Any) -> List[WorkerInfo]:
    return [WorkerInfo.from_json(w) for w in j["workers"]]


def list_req(group: str) -> Req[List[WorkerInfo]]:
    return Req("GET", f"/v1/workers/{seg(group)}", _workers)


def _now_ms() -> int:
    return int(time.time() * 1000)


class WorkerLease:
    """A worker id of ``group`` held and renewed in the background.

    Make it with :meth:`Client.worker_lease`. ``worker``, ``not_before_ms``
    and ``until_ms`` follow the renewals; ``lost`` turns true (and
    ``on_lost(error)`` is called once, from the renewal thread) when a
    renewal is refused or the lease expired without one. ``close()``
    releases it. A context manager.
    """

    def __init__(
        self,
        client: Client,
        group: str,
        *,
        ttl_ms: int = DEFAULT_TTL_MS,
        max: int = DEFAULT_MAX,
        on_lost: Optional[Callable[[KeysmithError], None]] = None,
    ) -> None:
        self._client = client
        self._on_lost = on_lost
        self._lock = threading.Lock()
        self._info = client.lease_worker(group, ttl_ms=ttl_ms, max=max)
        self._lost: Optional[KeysmithError] = None
        self._closed = threading.Event()
        self.renewals = 0
        self._thread = threading.Thread(target=self._run, name=f"keysmith-worker-lease-{group}", daemon=True)
        self._thread.start()

    @property
    def info(self) -> WorkerLeaseInfo:
        with self._lock:
            return self._info

    @property
    def group(self) -> str:
        return self.info.group

    @property
    def worker(self) -> int:
        return self.info.worker

    @property
    def fence(self) -> int:
        return self.info.fence

    @property
    def not_before_ms(self) -> int:
        return self.info.not_before_ms

    @property
    def until_ms(self) -> int:
        return self.info.until_ms

    @property
    def lost(self) -> bool:
        """True once the lease is lost: issue no more ids with this worker id."""
        with self._lock:
            return self._lost is not None

    @property
    def lost_reason(self) -> Optional[KeysmithError]:
        with self._lock:
            return self._lost

    def usable(self, time_ms: Optional[int] = None) -> bool:
        """Whether an id with time ``time_ms`` (default: now) may use the worker id:
        the lease is held and the time lies in ``not_before_ms..until_ms``."""
        t = _now_ms() if time_ms is None else time_ms
        with self._lock:
            return self._lost is None and not self._closed.is_set() and self._info.not_before_ms <= t < self._info.until_ms

    def renew(self) -> WorkerLeaseInfo:
        """Renews now (the thread does this every third of the TTL).

        Raises :class:`Conflict` when refused (the lease is then lost)."""
        info = self.info
        left = max(0.05, (info.expires_ms - _now_ms()) / 1000)
        try:
            new = self._client._call(renew_req(info.group, info.token, None), deadline=left)
        except Conflict as e:
            self._lose(e)
            raise
        with self._lock:
            self._info = new
            self.renewals += 1
        return new

    def _lose(self, e: KeysmithError) -> None:
        with self._lock:
            if self._lost is not None:
                return
            self._lost = e
        if self._on_lost is not None:
            self._on_lost(e)

    def _run(self) -> None:
        wait = self.info.ttl_ms / 3000
        while not self._closed.wait(wait):
            try:
                self.renew()
                wait = self.info.ttl_ms / 3000
            except Conflict:
                return
            except KeysmithError as e:
                if _now_ms() >= self.info.expires_ms:
                    self._lose(e)
                    return
                # Try again soon: the lease expires unless a renewal succeeds.
                wait = self.info.ttl_ms / 10000

    def close(self) -> None:
        """Stops renewing and releases the worker id (its time floor stays)."""
        if self._closed.is_set():
            return
        self._closed.set()
        self._thread.join()
        if not self.lost:
            info = self.info
            try:
                self._client._call(release_req(info.group, info.token))
            except KeysmithError:
                pass  # it expires after its TTL

    def __enter__(self) -> WorkerLease:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
