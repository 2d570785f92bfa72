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
issuing ids when the lease is lost; :meth:`WorkerLease.next_id` does both.

One worker id per process: a WorkerLease takes its lease on first use, in
the process that uses it. A child forked from a process holding one (gunicorn,
uWSGI, Celery prefork, multiprocessing) takes a worker id of its own on first
use; it never makes ids with its parent's (see ``_fork``).
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Dict, List, Optional

from ._api import Req
from . import _fork
from ._errors import Closed, Conflict, KeysmithError, LeaseLost, Unavailable
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
    #: A credential: never in a repr (nor is ``raw``, which holds it too).
    token: str = field(repr=False)
    raw: Json = field(repr=False)

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
    # the token in the body, never in the URL (proxies and access logs keep URLs)
    return Req(
        "POST", f"/v1/workers/{seg(group)}/lease/renew", WorkerLeaseInfo.from_json, params=params, json={"token": token}
    )


def _released(j: Any) -> bool:
    return bool(j["released"])


def release_req(group: str, token: str) -> Req[bool]:
    return Req("POST", f"/v1/workers/{seg(group)}/lease/release", _released, json={"token": token})


def _workers(j: Any) -> List[WorkerInfo]:
    return [WorkerInfo.from_json(w) for w in j["workers"]]


def list_req(group: str) -> Req[List[WorkerInfo]]:
    return Req("GET", f"/v1/workers/{seg(group)}", _workers)


def _now_ms() -> int:
    return int(time.time() * 1000)


#: The epoch of :meth:`WorkerLease.next_id`'s ids: 2024-01-01T00:00:00Z, ms since 1970.
ID_EPOCH_MS = 1_704_067_200_000
_WORKER_BITS = 10
_SEQUENCE_BITS = 12


class WorkerLease:
    """A worker id of ``group``, taken on first use and renewed in the background.

    Make it with :meth:`Client.worker_lease`; nothing is sent until a
    property (``info``, ``worker``, ``fence``, ...), :meth:`renew` or
    :meth:`next_id` needs the lease, and then it is taken in the process that
    asks. ``worker``, ``not_before_ms`` and ``until_ms`` follow the renewals;
    ``lost`` turns true (and ``on_lost(error)`` is called once, from the
    renewal thread) when a renewal is refused or the lease expired without
    one. ``close()`` releases it. A context manager.

    A forked child never uses its parent's lease: it takes its own on first
    use (``os.register_at_fork``), and closing it there releases only its own.
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
        _check_int("ttl_ms", ttl_ms)
        _check_int("max", max)
        self._client = client
        self._group = group
        self._ttl_ms = ttl_ms
        self._max = max
        self._on_lost = on_lost
        self._reset()
        _fork.track(self)

    def _reset(self) -> None:
        self._lock = threading.Lock()
        # held while the lease is taken, so that two threads take one lease
        self._taking = threading.Lock()
        self._info: Optional[WorkerLeaseInfo] = None
        self._lost: Optional[KeysmithError] = None
        self._closed = threading.Event()
        self._thread: Optional[threading.Thread] = None
        self.renewals = 0
        self._id_lock = threading.Lock()
        self._last_ms = -1
        self._seq = 0

    def _after_fork_in_child(self) -> None:
        """In a forked child: forget the parent's lease (the parent keeps and renews it).
        A lease the parent had closed stays closed."""
        closed = self._closed.is_set()
        self._reset()
        if closed:
            self._closed.set()

    @property
    def info(self) -> WorkerLeaseInfo:
        """The lease as last taken or renewed; takes it first on first use.

        Raises the lease's error (:class:`Conflict` when every worker id of the
        group is held) or :class:`Closed` after :meth:`close`."""
        with self._lock:
            info = self._info
        if info is not None:
            return info
        with self._taking:
            with self._lock:
                if self._info is not None:
                    return self._info
                if self._closed.is_set():
                    raise Closed(f"worker lease of group {self._group!r}: closed")
            info = self._client.lease_worker(self._group, ttl_ms=self._ttl_ms, max=self._max)
            with self._lock:
                self._info = info
            self._thread = threading.Thread(
                target=self._run, name=f"keysmith-worker-lease-{self._group}", daemon=True
            )
            self._thread.start()
            return info

    @property
    def taken(self) -> bool:
        """Whether this process has taken its lease yet."""
        with self._lock:
            return self._info is not None

    @property
    def group(self) -> str:
        return self._group

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
        the lease is taken, held (not lost, closed or past its expiry without a
        renewal) and the time lies in ``not_before_ms..until_ms``. Takes nothing."""
        now = _now_ms()
        t = now if time_ms is None else time_ms
        with self._lock:
            return self._usable(t, now)

    def _usable(self, t: int, now: int) -> bool:
        i = self._info
        return (
            i is not None
            and self._lost is None
            and not self._closed.is_set()
            and now < i.expires_ms
            and i.not_before_ms <= t < i.until_ms
        )

    def next_id(self) -> int:
        """A time-ordered 64-bit id made with this lease's worker id, in the
        server's ``snowflake`` layout (``time << 22 | worker << 12 | sequence``,
        ms since :data:`ID_EPOCH_MS`); increasing within one WorkerLease.

        Takes the lease on first use. Refuses at once with :class:`LeaseLost`
        once the lease is lost or its expiry passed without a renewal (before
        the renewal thread notices), :class:`Closed` after :meth:`close`, and
        :class:`Unavailable` when the clock lies outside ``not_before_ms..until_ms``.
        Needs ``max`` <= 1024 (10 worker bits)."""
        if self._max > 1 << _WORKER_BITS:
            raise ValueError(f"next_id needs max <= {1 << _WORKER_BITS} (10 worker bits), this lease has max={self._max}")
        self.info  # noqa: B018 - takes the lease on first use
        with self._id_lock:
            while True:
                now = _now_ms()
                t = max(now, self._last_ms)  # a clock that went back stays on the last ms
                seq = 0
                if t == self._last_ms:
                    seq = self._seq + 1
                    if seq >= 1 << _SEQUENCE_BITS:
                        time.sleep(0.0002)  # this ms is used up: the next one
                        continue
                with self._lock:
                    i = self._info
                    assert i is not None
                    if not self._usable(t, now):
                        if self._closed.is_set():
                            raise Closed(f"worker lease of group {self._group!r}: closed")
                        if self._lost is not None:
                            raise LeaseLost(f"worker lease lost, issue no more ids with worker {i.worker}: {self._lost}")
                        if now >= i.expires_ms:
                            raise LeaseLost(
                                f"worker {i.worker} of group {self._group!r}: the lease expired at {i.expires_ms} ms "
                                "without a renewal: issue no more ids with it"
                            )
                        raise Unavailable(
                            f"worker {i.worker} of group {self._group!r} may make ids with times in "
                            f"{i.not_before_ms}..{i.until_ms} ms, not {t}"
                        )
                    worker = i.worker
                self._last_ms, self._seq = t, seq
                return (t - ID_EPOCH_MS) << (_WORKER_BITS + _SEQUENCE_BITS) | worker << _SEQUENCE_BITS | seq

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
            if self._info is not info:
                return new  # forked or closed meanwhile
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
        closed = self._closed
        wait = self.info.ttl_ms / 3000
        while not closed.wait(wait):
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
        """Stops renewing and releases the worker id (its time floor stays).
        Idempotent; a lease never taken (in this process) sends nothing."""
        if self._closed.is_set():
            return
        self._closed.set()
        with self._taking:
            pass  # a lease being taken is now in self._info
        if self._thread is not None:
            self._thread.join()
        with self._lock:
            info = self._info
        if info is not None and not self.lost:
            try:
                self._client._call(release_req(info.group, info.token))
            except KeysmithError:
                pass  # it expires after its TTL

    def __enter__(self) -> WorkerLease:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
