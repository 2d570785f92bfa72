"""The blocking client and its Sequence (threads)."""

from __future__ import annotations

import logging
import os
import ssl
import sys
import threading
import time
import uuid
import weakref
from types import TracebackType
from typing import Callable, Dict, Iterable, Iterator, List, Optional, Tuple, Type, TypeVar, Union

import httpx

from . import _api, _fork, _workers
from ._api import Req, ShardId
from ._buffer import Adaptive, Buffer
from ._errors import Closed, KeysmithError
from ._token import bearer_token
from ._failover import Attempt, Servers, leader_of
from ._models import (
    CounterNames,
    DecodedId,
    Json,
    Lease,
    Number,
    DecodedValue,
    NumberParts,
    PoolInfo,
    Range,
    SequenceInfo,
    ShardKeyView,
    Ticket,
)
from ._workers import WorkerInfo, WorkerLease, WorkerLeaseInfo

T = TypeVar("T")
#: Whether the GIL makes ``next()`` on a C iterator atomic (False on a free-threaded build).
_GIL: bool = getattr(sys, "_is_gil_enabled", lambda: True)()
_log = logging.getLogger("keysmith_client")

#: Per request: 3 s to connect, 15 s for the rest (above the server's 10 s request timeout).
DEFAULT_TIMEOUT = httpx.Timeout(15.0, connect=3.0)
#: Seconds one call may spend failing over and waiting for Retry-After.
DEFAULT_DEADLINE = 30.0

Urls = Union[str, Iterable[str]]


def _urls(url_or_urls: Urls) -> List[str]:
    return [url_or_urls] if isinstance(url_or_urls, str) else list(url_or_urls)


def _headers(token: Optional[str]) -> Dict[str, str]:
    return {"Authorization": f"Bearer {token}"} if token else {}


#: A file path, as ``ssl`` takes them.
PathLike = Union[str, "os.PathLike[str]"]


def _shown(path: Optional[PathLike]) -> str:
    return "None" if path is None else repr(os.fspath(path))


def _verify(
    ca_file: Optional[PathLike], cert_file: Optional[PathLike], key_file: Optional[PathLike]
) -> Union[bool, ssl.SSLContext]:
    """httpx's ``verify``: the default CAs, or an SSL context with ``ca_file`` and a client certificate.

    Raises ``ValueError`` for a key without its certificate, and ``OSError``
    or ``ssl.SSLError`` (naming the file) for a file that cannot be read.
    """
    if key_file is not None and cert_file is None:
        raise ValueError("keysmith: key_file needs cert_file (the client certificate the key belongs to)")
    if ca_file is None and cert_file is None:
        return True
    try:
        ctx = ssl.create_default_context(cafile=ca_file)
    except (OSError, ssl.SSLError) as e:
        raise type(e)(f"keysmith: cannot read the CA file ca_file={_shown(ca_file)}: {e}") from e
    if cert_file is not None:
        try:
            ctx.load_cert_chain(cert_file, key_file)
        except (OSError, ssl.SSLError) as e:
            raise type(e)(
                f"keysmith: cannot use the client certificate cert_file={_shown(cert_file)} "
                f"with key_file={_shown(key_file)}: {e}"
            ) from e
    return ctx


class Client:
    """A client of one keysmith service, or of several servers over one store.

    ``Client("http://127.0.0.1:7878")`` or ``Client([url1, url2], token=...)``.
    Every call goes to the server that answered last and fails over to the
    next one on connection errors and 503s, honouring ``Retry-After``, for at
    most ``deadline`` seconds. Safe to share between threads.

    For ``https://`` URLs, ``ca_file`` is the PEM file of the CA that signed
    the server's certificate (default: the CAs httpx trusts), and
    ``cert_file`` and ``key_file`` are a client certificate and its key (PEM)
    for a server that requires one (``keysmith serve --client-ca``);
    ``cert_file`` may hold the key too.

    ``token`` (or ``token_file``, a file holding it) is the server's bearer token:
    one trailing newline is stripped; any other character that is not printable
    ASCII raises ``ValueError`` here, without showing the token. Setup mistakes
    raise at once and are never retried: a CA or certificate file that cannot be
    read (here), a TLS refusal (:class:`SetupError`), a wrong token
    (:class:`Unauthorized`), a missing grant (:class:`Forbidden`). A 429
    (:class:`RateLimited`) is sent again after its ``Retry-After`` when that
    fits in ``deadline``. No message or repr of the client shows a token.
    """

    def __init__(
        self,
        url_or_urls: Urls,
        token: Optional[str] = None,
        *,
        timeout: Union[float, httpx.Timeout] = DEFAULT_TIMEOUT,
        deadline: float = DEFAULT_DEADLINE,
        transport: Optional[httpx.BaseTransport] = None,
        ca_file: Optional[PathLike] = None,
        cert_file: Optional[PathLike] = None,
        key_file: Optional[PathLike] = None,
        token_file: Optional[PathLike] = None,
    ) -> None:
        token = bearer_token(token, token_file)
        self._servers = Servers(_urls(url_or_urls))
        self._deadline = deadline
        verify = _verify(ca_file, cert_file, key_file)
        self._new_http: Callable[[], httpx.Client] = lambda: httpx.Client(
            headers=_headers(token), timeout=timeout, transport=transport, verify=verify
        )
        self._http = self._new_http()
        # a forked child's: the parent's connections, kept from the garbage
        # collector (closing them would close the parent's TLS sessions)
        self._parents_http: List[httpx.Client] = []
        self._sequences: weakref.WeakSet[Sequence] = weakref.WeakSet()
        self._leases: weakref.WeakSet[WorkerLease] = weakref.WeakSet()
        _fork.track(self)

    def _after_fork_in_child(self) -> None:
        """In a forked child: connections and locks of its own (see ``_fork``)."""
        self._servers._lock = threading.Lock()
        self._parents_http.append(self._http)
        self._http = self._new_http()

    @property
    def urls(self) -> List[str]:
        return list(self._servers.urls)

    def _call(self, req: Req[T], deadline: Optional[float] = None) -> T:
        attempt = Attempt(self._servers, self._deadline if deadline is None else deadline, req.safe)
        while True:
            step = attempt.step()
            if isinstance(step, float):
                time.sleep(step)
                continue
            try:
                resp = self._http.request(
                    req.method, self._servers.urls[step] + req.path, params=req.params, json=req.json
                )
                # A leader-ordered sequence that another server leads: follow, once.
                leader = leader_of(resp, self._servers.urls[step])
                if leader is not None:
                    resp = self._http.request(req.method, leader + req.path, params=req.params, json=req.json)
            except httpx.TransportError as e:
                attempt.transport_error(step, e)
                continue
            body = attempt.response(step, resp)
            if body is not None:
                return req.parse(body)

    # -- sequences ---------------------------------------------------------

    def sequence(
        self,
        name: str,
        block: Optional[int] = None,
        *,
        min_block: int = 1,
        max_block: int = 100_000,
        target_interval: float = 1.0,
    ) -> Sequence:
        """A handle that serves ``name``'s values from blocks leased from the server.

        The first block has ``block`` values (default: the sequence's own
        block size); later ones adapt to the rate, within
        ``min_block..=max_block``, so that a lease lasts about
        ``target_interval`` seconds. ``close()`` it to hand the unused tail back.
        """
        seq = Sequence(self, name, block, Adaptive(min_block, max_block, target_interval))
        self._sequences.add(seq)
        return seq

    def create_sequence(
        self,
        name: str,
        *,
        start: Optional[int] = None,
        max: Optional[int] = None,
        block: Optional[int] = None,
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
    ) -> SequenceInfo:
        """Creates a sequence. ``gapless=True``: gap-free numbers taken with tickets
        (:meth:`take_ticket`); ``period`` (``"day"``, ``"month"``, ``"year"``): numbers
        restart every period, by the store's clock; ``format``: how numbers are
        printed, e.g. ``"INV-{period}-{n:04}"``. Read a periodic or formatted
        sequence's numbers with :meth:`next_numbers`. ``increment`` (2 to
        1000000) and ``offset`` (0 to ``increment - 1``, default 0): a residue
        class, every value is ``offset`` modulo ``increment`` (one per region,
        each with its own store, never hand out the same value). ``opaque=True``:
        values are a keyed permutation of a plain counter (1 to ``max``; the key is
        secret and stays on the server); ``encoding`` (``"base32"``, ``"base62"``)
        with an optional ``prefix`` (``"ord"`` gives ``ord_...``): fixed-width
        strings that sort as the numbers, read with :meth:`next_numbers`;
        :meth:`decode` maps either back. ``js_safe=True``: max 2^53-1.
        ``order="leader"``: one leased leader hands values out in arrival order
        (take them with :meth:`next`, which follows a follower's 421 to the leader)."""
        return self._call(
            _api.create_sequence(
                name,
                start,
                max,
                block,
                gapless,
                period,
                format,
                increment,
                offset,
                opaque,
                encoding,
                prefix,
                js_safe,
                order,
            )
        )

    def alter(
        self, name: str, next: Optional[int] = None, max: Optional[int] = None, block: Optional[int] = None
    ) -> SequenceInfo:
        """Changes a sequence safely while it is in use: ``next`` only forward (the
        values skipped are never handed out), ``max`` never below what was reserved,
        ``block`` for handles opened from now on. A change the sequence does not
        allow raises :class:`BadRequest` and changes nothing; a numbered sequence
        raises :class:`WrongKind`."""
        return self._call(_api.alter(name, next, max, block))

    def get_sequence(self, name: str) -> SequenceInfo:
        return self._call(_api.get_sequence(name))

    def list_sequences(self) -> List[SequenceInfo]:
        return self._call(_api.list_sequences())

    def drop_sequence(self, name: str) -> None:
        self._call(_api.drop_sequence(name))

    def next(self, name: str, count: int = 1) -> List[int]:
        """``count`` values from the server's own cache (one request; no local block)."""
        return self._call(_api.next_values(name, count))

    def reserve(self, name: str, count: int) -> Lease:
        """A lease of ``count`` values reserved durably for this caller only."""
        return self._call(_api.reserve(name, count))

    def release(self, lease: Lease, from_: int) -> Optional[Range]:
        """Hands the lease's values from ``from_`` on back (``from_`` is one of its values,
        ``start + i * lease.step``); the range that went back, or ``None`` when someone
        reserved since (the values then stay a gap)."""
        return self._call(_api.release(lease.sequence, lease.token, from_, lease.step))

    def next_numbers(self, name: str, count: int = 1) -> List[str]:
        """``count`` numbers as text: a periodic or formatted sequence's printed numbers
        (``"INV-20261123-0042"``), an ordinary one's values in decimal."""
        return self._call(_api.next_numbers(name, count))

    # -- gap-free numbers: tickets -------------------------------------------

    def take_ticket(self, name: str, ttl: Optional[int] = None) -> Ticket:
        """The lowest free number of a gap-free sequence, held by a ticket for ``ttl``
        seconds (1 to 86400; the server's default when ``None``). Commit it or
        release it; a holder that does neither loses it when the ticket expires."""
        return self._call(_api.take_ticket(name, ttl))

    def commit_ticket(self, name: str, ticket: Union[str, Ticket]) -> Number:
        """Makes the ticket's number final; answers the number. :class:`TicketRefused`,
        changing nothing, when the ticket no longer holds it."""
        return self._call(_api.commit_ticket(name, str(ticket)))

    def release_ticket(self, name: str, ticket: Union[str, Ticket]) -> Number:
        """Frees the ticket's number: it is the next one taken. Answers the number;
        :class:`TicketRefused`, changing nothing, when the ticket no longer holds it."""
        return self._call(_api.release_ticket(name, str(ticket)))

    def decode(self, name: str, value: Union[int, str]) -> DecodedValue:
        """The counter behind a value an opaque, encoded or bit-reversed sequence
        handed out (an int, or an encoded string). :class:`BadRequest` naming what
        is wrong for a value it never hands out (prefix, character, width, check
        character, range); needs the ``use`` grant."""
        return self._call(_api.decode(name, value))

    def parse(self, name: str, text: str) -> NumberParts:
        """Takes a number the sequence printed apart: its period key and counter.
        :class:`BadRequest` for text that is not one of its numbers."""
        return self._call(_api.parse(name, text))

    # -- pools, counters, shard keys, health --------------------------------

    def create_pool(
        self,
        name: str,
        size: int,
        *,
        start: Optional[int] = None,
        increment: Optional[int] = None,
        offset: Optional[int] = None,
    ) -> PoolInfo:
        """Creates a value pool of ``size`` numbers from ``start`` (default 1).
        ``increment`` (2 to 1000000) and ``offset`` (0 to ``increment - 1``, default
        0): a residue class, every number the pool hands out is ``offset`` modulo
        ``increment`` (``start`` rounded up into it); the class is kept with the
        pool, so every server opening it hands out only numbers of the class."""
        return self._call(_api.create_pool(name, size, start, increment, offset))

    def get_pool(self, name: str) -> PoolInfo:
        return self._call(_api.get_pool(name))

    def list_pools(self) -> List[PoolInfo]:
        return self._call(_api.list_pools())

    def drop_pool(self, name: str) -> None:
        self._call(_api.drop_pool(name))

    def pool_next(self, name: str, count: int = 1) -> List[int]:
        """Numbers taken from the pool ``name``: ``count``, or fewer when the server's
        answer is partial (it ran out of time or of numbers after taking some)."""
        return self._call(_api.pool_next(name, count))

    def counter_next(self, count: int = 1) -> CounterNames:
        """``<host>/<n>`` names from the server's host counter."""
        return self._call(_api.counter_next(count))

    def shard_key_encode(
        self, origin: str, shard: int, record: ShardId, children: Iterable[ShardId] = ()
    ) -> ShardKeyView:
        return self._call(_api.shard_key_encode(origin, shard, record, children))

    def shard_key_decode(
        self,
        external: str,
        *,
        origin: Optional[str] = None,
        record_type: Optional[str] = None,
        child_types: Iterable[str] = (),
    ) -> ShardKeyView:
        return self._call(_api.shard_key_decode(external, origin, record_type, child_types))

    def next_ids(self, count: int = 1) -> List[int]:
        """``count`` time-ordered 64-bit ids (time, worker and sequence bits), increasing."""
        return self._call(_api.next_ids(count))

    def next_uuids(self, count: int = 1) -> List[uuid.UUID]:
        """``count`` RFC 9562 version-7 UUIDs (``format=uuidv7``) over the same time,
        worker id and sequence as :meth:`next_ids`: unique by construction across the
        servers of a store, increasing per server. Bits: 48 of unix_ts_ms, version 7,
        a 12-bit counter (rand_a), variant 10, a 22-bit worker id, 40 random bits."""
        return self._call(_api.next_uuids(count))

    def decode_id(self, id: Union[int, str]) -> DecodedId:
        """An id taken apart by the server's layout; :class:`BadRequest` for one that
        is not an id of it."""
        return self._call(_api.decode_id(id))

    def health(self) -> Json:
        """``GET /healthz`` (the store is reachable) from the first server that answers."""
        return self._call(_api.health())

    def status(self) -> Json:
        """``GET /v1/status``: what the status page shows, as JSON."""
        return self._call(_api.status())

    # -- worker-id leases (for other generators) ------------------------------

    def lease_worker(self, group: str, *, ttl_ms: Optional[int] = None, max: Optional[int] = None) -> WorkerLeaseInfo:
        """Leases the lowest free worker id of ``group`` in ``0..max`` (default 1024) for
        ``ttl_ms`` (default 10 s). Raises :class:`Conflict` when every one is held."""
        return self._call(_workers.lease_req(group, ttl_ms, max))

    def renew_worker(self, group: str, token: str, *, ttl_ms: Optional[int] = None) -> WorkerLeaseInfo:
        """Renews a worker lease (use the new token from now on). Raises
        :class:`Conflict` when it expired or another holder took the worker id."""
        return self._call(_workers.renew_req(group, token, ttl_ms))

    def release_worker(self, group: str, token: str) -> bool:
        """Releases a worker lease; ``False`` when it was lost already."""
        return self._call(_workers.release_req(group, token))

    def list_workers(self, group: str) -> List[WorkerInfo]:
        """The worker ids of ``group`` ever leased, by worker id: held or free,
        by whom, until when, fence and time floor (never a token). An unknown
        group is an empty list."""
        return self._call(_workers.list_req(group))

    def worker_lease(
        self,
        group: str,
        *,
        ttl_ms: int = _workers.DEFAULT_TTL_MS,
        max: int = _workers.DEFAULT_MAX,
        on_lost: Optional[Callable[[KeysmithError], None]] = None,
    ) -> WorkerLease:
        """A worker id of ``group``, taken on first use in the process that uses it and
        renewed in the background; a forked child takes its own (see :class:`WorkerLease`)."""
        lease = WorkerLease(self, group, ttl_ms=ttl_ms, max=max, on_lost=on_lost)
        self._leases.add(lease)
        return lease

    # -- lifecycle ------------------------------------------------------------

    def close(self) -> None:
        """Closes every Sequence of this client (handing tails back) and every
        WorkerLease (releasing its worker id), then the connections."""
        for seq in list(self._sequences):
            seq.close()
        for lease in list(self._leases):
            lease.close()
        self._http.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(
        self, t: Optional[Type[BaseException]], v: Optional[BaseException], tb: Optional[TracebackType]
    ) -> None:
        self.close()


class Sequence:
    """Values of one sequence, served from a local block leased from the server.

    ``next()`` takes from the current segment of the local block without a
    lock (a C-level ``range`` iterator; under the lock in a free-threaded
    build); only the caller that finds the segment used up takes the lock to
    take the next one. When a fifth of the last lease is left a background
    thread reserves the next lease, so it is usually here before it is needed. Values from one Sequence increase, across all threads using it.
    Make it with :meth:`Client.sequence`.
    """

    def __init__(self, client: Client, name: str, block: Optional[int], adaptive: Adaptive) -> None:
        self.name = name
        self._client = client
        self._cond = threading.Condition(threading.Lock())
        self._buf = Buffer(block, adaptive)
        # the segment handed out lock-free: its iterator, and (range, lease, last_of_lease)
        self._it: Iterator[int] = iter(())
        self._seg: Optional[Tuple[range, str, bool]] = None
        self._closed = False
        self._fetches = 0  # fetches started
        self._failed: Dict[int, BaseException] = {}  # fetch number -> its error, for those waiting on it
        #: What ``close()`` handed back to the server (``None``: nothing, the values stay a gap).
        self.released: Optional[Range] = None
        _fork.track(self)

    def _after_fork_in_child(self) -> None:
        """In a forked child: the parent's block stays the parent's (see ``_fork``).

        The child leases blocks of its own; the parent's values are never
        handed out here, and its lease in flight is the parent's."""
        self._cond = threading.Condition(threading.Lock())
        self._it = iter(())
        self._seg = None
        buf = self._buf
        buf.runs.clear()
        buf.available = 0
        buf.lease_size = 0
        buf.fetching = False
        self._failed.clear()

    @property
    def block(self) -> Optional[int]:
        """The current lease size (``None`` before the first lease)."""
        return self._buf.block

    @property
    def leases(self) -> int:
        """How many leases this Sequence has received."""
        return self._buf.leases

    def _next_lock_free(self) -> int:
        """The next value: from the current segment of the local block, lock-free
        (``next()`` on a C ``range`` iterator is atomic under the GIL); the lock is
        taken only at a segment's end, to take the next one."""
        v = next(self._it, None)
        if v is not None:
            return v
        with self._cond:
            return self._refill()

    def _next_locked(self) -> int:
        """The next value, under the lock (a free-threaded build: a ``range``
        iterator is not atomic there)."""
        with self._cond:
            v = next(self._it, None)
            if v is not None:
                return v
            return self._refill()

    #: The next value; values of one Sequence increase across all threads using it,
    #: and no value is handed out twice. Lock-free under the GIL (see the class).
    next = _next_lock_free if _GIL else _next_locked

    def _refill(self) -> int:
        """With the lock held: the next value, taking a new segment (and starting
        the prefetch when the block is down to its last fifth)."""
        while True:
            v = next(self._it, None)  # another thread may have taken a segment meanwhile
            if v is not None:
                return v
            if self._closed:
                raise Closed(f"sequence {self.name!r}: this Sequence is closed")
            buf = self._buf
            if buf.wants_prefetch():
                self._start_fetch(0)
            seg = buf.take_segment()
            if seg is not None:
                self._seg = seg
                it = iter(seg[0])
                v = next(it)
                self._it = it
                return v
            self._wait_for_values(1)

    def _drain_segment(self) -> None:
        """With the lock held: puts the current segment's unused values back in the block.

        ``list()`` of a ``range`` iterator runs in C without releasing the GIL, so no
        other thread takes a value of it meanwhile."""
        rest = list(self._it)
        self._it = iter(())
        if self._seg is not None:
            self._buf.untake(rest, *self._seg)
            self._seg = None

    def next_n(self, n: int) -> Union[range, List[int]]:
        """``n`` increasing values: a ``range`` (made in O(1)) when they lie in one run
        of the block, else a list. On failure none is taken (all stay in the local block)."""
        if n < 0:
            raise ValueError(f"n must not be negative, got {n}")
        if n == 0:
            return []
        with self._cond:
            while True:
                # again after every wait: another thread may have taken a segment meanwhile,
                # whose values come before the block's
                self._drain_segment()
                vs = self._buf.take_n(n)
                if vs is not None:
                    if self._buf.wants_prefetch() and not self._closed:
                        self._start_fetch(0)
                    return vs
                self._wait_for_values(n)

    def _wait_for_values(self, need: int) -> None:
        """With the lock held: waits for a fetch (starting one for ``need`` if none runs)."""
        if self._closed:
            raise Closed(f"sequence {self.name!r}: this Sequence is closed")
        if not self._buf.fetching:
            self._start_fetch(need)
        number = self._fetches
        while self._buf.fetching:
            self._cond.wait()
        err = self._failed.get(number)
        if err is not None:
            raise err

    def _start_fetch(self, need: int) -> None:
        self._buf.begin_fetch()
        self._fetches += 1
        self._failed.clear()  # errors nobody waited for
        threading.Thread(
            target=self._fetch, args=(self._fetches, need), name=f"keysmith-prefetch-{self.name}", daemon=True
        ).start()

    def _fetch(self, number: int, need: int) -> None:
        lease: Optional[Lease] = None
        err: Optional[BaseException] = None
        try:
            if self._buf.block is None:
                info = self._client.get_sequence(self.name)
                with self._cond:
                    if self._buf.block is None:
                        self._buf.block = self._buf.adaptive.clamp(info.block)
            with self._cond:
                count = self._buf.count(need, time.monotonic())
            lease = self._client.reserve(self.name, count)
        except BaseException as e:  # handed to the waiters; a prefetch nobody waits for just ends
            err = e
        with self._cond:
            self._buf.end_fetch(lease)
            if err is not None:
                self._failed[number] = err
            self._cond.notify_all()

    def close(self) -> None:
        """Stops serving; hands the unused tail of the newest lease back to the server.

        The tail goes back only when no one reserved since (the server's rule);
        otherwise, or when no server takes it back, it stays a gap: never
        handed out by anyone. :attr:`released` then tells what went back.
        Idempotent; waits for a lease in flight, so that it goes back too.
        """
        with self._cond:
            if self._closed:
                return
            self._closed = True
            self._drain_segment()
            while self._buf.fetching:
                self._cond.wait()
            tails = self._buf.tails()
        if tails:
            lease, from_ = tails[0]
            try:
                self.released = self._client._call(_api.release(self.name, lease, from_, self._buf.step))
            except KeysmithError as e:
                _log.warning("sequence %r: the unused tail from %d stays a gap: %s", self.name, from_, e)

    def __enter__(self) -> Sequence:
        return self

    def __exit__(
        self, t: Optional[Type[BaseException]], v: Optional[BaseException], tb: Optional[TracebackType]
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<Sequence {self.name!r} block={self._buf.block} available={self._buf.available}>"


__all__ = ["Client", "Sequence", "DEFAULT_TIMEOUT", "DEFAULT_DEADLINE"]
