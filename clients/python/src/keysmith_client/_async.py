"""The asyncio client and its Sequence: the same surface as the blocking one, awaited."""

from __future__ import annotations

import asyncio
import time
import uuid
import weakref
from types import TracebackType
from typing import Iterable, List, Optional, Type, TypeVar, Union

import httpx

from . import _api, _workers
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
from ._workers import WorkerInfo, WorkerLeaseInfo
from ._sync import DEFAULT_DEADLINE, DEFAULT_TIMEOUT, PathLike, Urls, _headers, _log, _urls, _verify

T = TypeVar("T")


class AsyncClient:
    """The asyncio twin of :class:`~keysmith_client.Client` (same failover, same calls, same TLS options, awaited)."""

    def __init__(
        self,
        url_or_urls: Urls,
        token: Optional[str] = None,
        *,
        timeout: Union[float, httpx.Timeout] = DEFAULT_TIMEOUT,
        deadline: float = DEFAULT_DEADLINE,
        transport: Optional[httpx.AsyncBaseTransport] = None,
        ca_file: Optional[PathLike] = None,
        cert_file: Optional[PathLike] = None,
        key_file: Optional[PathLike] = None,
        token_file: Optional[PathLike] = None,
    ) -> None:
        token = bearer_token(token, token_file)
        self._servers = Servers(_urls(url_or_urls))
        self._deadline = deadline
        self._http = httpx.AsyncClient(
            headers=_headers(token),
            timeout=timeout,
            transport=transport,
            verify=_verify(ca_file, cert_file, key_file),
        )
        self._sequences: weakref.WeakSet[AsyncSequence] = weakref.WeakSet()

    @property
    def urls(self) -> List[str]:
        return list(self._servers.urls)

    async def _call(self, req: Req[T]) -> T:
        attempt = Attempt(self._servers, self._deadline, req.safe)
        while True:
            step = attempt.step()
            if isinstance(step, float):
                await asyncio.sleep(step)
                continue
            try:
                resp = await self._http.request(
                    req.method, self._servers.urls[step] + req.path, params=req.params, json=req.json
                )
                # A leader-ordered sequence that another server leads: follow, once.
                leader = leader_of(resp, self._servers.urls[step])
                if leader is not None:
                    resp = await self._http.request(req.method, leader + req.path, params=req.params, json=req.json)
            except httpx.TransportError as e:
                attempt.transport_error(step, e)
                continue
            body = attempt.response(step, resp)
            if body is not None:
                return req.parse(body)

    def sequence(
        self,
        name: str,
        block: Optional[int] = None,
        *,
        min_block: int = 1,
        max_block: int = 100_000,
        target_interval: float = 1.0,
    ) -> AsyncSequence:
        """As :meth:`Client.sequence`; the prefetch runs as an asyncio task."""
        seq = AsyncSequence(self, name, block, Adaptive(min_block, max_block, target_interval))
        self._sequences.add(seq)
        return seq

    async def create_sequence(
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
        return await self._call(
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

    async def alter(
        self, name: str, next: Optional[int] = None, max: Optional[int] = None, block: Optional[int] = None
    ) -> SequenceInfo:
        """Changes a sequence safely while it is in use: ``next`` only forward (the
        values skipped are never handed out), ``max`` never below what was reserved,
        ``block`` for handles opened from now on. A change the sequence does not
        allow raises :class:`BadRequest` and changes nothing; a numbered sequence
        raises :class:`WrongKind`."""
        return await self._call(_api.alter(name, next, max, block))

    async def get_sequence(self, name: str) -> SequenceInfo:
        return await self._call(_api.get_sequence(name))

    async def list_sequences(self) -> List[SequenceInfo]:
        return await self._call(_api.list_sequences())

    async def drop_sequence(self, name: str) -> None:
        await self._call(_api.drop_sequence(name))

    async def next(self, name: str, count: int = 1) -> List[int]:
        return await self._call(_api.next_values(name, count))

    async def reserve(self, name: str, count: int) -> Lease:
        return await self._call(_api.reserve(name, count))

    async def release(self, lease: Lease, from_: int) -> Optional[Range]:
        return await self._call(_api.release(lease.sequence, lease.token, from_, lease.step))

    async def next_numbers(self, name: str, count: int = 1) -> List[str]:
        """``count`` numbers as text: a periodic or formatted sequence's printed numbers
        (``"INV-20261123-0042"``), an ordinary one's values in decimal."""
        return await self._call(_api.next_numbers(name, count))

    async def take_ticket(self, name: str, ttl: Optional[int] = None) -> Ticket:
        """The lowest free number of a gap-free sequence, held by a ticket for ``ttl``
        seconds (1 to 86400; the server's default when ``None``). Commit it or
        release it; a holder that does neither loses it when the ticket expires."""
        return await self._call(_api.take_ticket(name, ttl))

    async def commit_ticket(self, name: str, ticket: Union[str, Ticket]) -> Number:
        """Makes the ticket's number final; answers the number. :class:`TicketRefused`,
        changing nothing, when the ticket no longer holds it."""
        return await self._call(_api.commit_ticket(name, str(ticket)))

    async def release_ticket(self, name: str, ticket: Union[str, Ticket]) -> Number:
        """Frees the ticket's number: it is the next one taken. Answers the number;
        :class:`TicketRefused`, changing nothing, when the ticket no longer holds it."""
        return await self._call(_api.release_ticket(name, str(ticket)))

    async def decode(self, name: str, value: Union[int, str]) -> DecodedValue:
        """The counter behind a value an opaque, encoded or bit-reversed sequence
        handed out (an int, or an encoded string). :class:`BadRequest` naming what
        is wrong for a value it never hands out (prefix, character, width, check
        character, range); needs the ``use`` grant."""
        return await self._call(_api.decode(name, value))

    async def parse(self, name: str, text: str) -> NumberParts:
        """Takes a number the sequence printed apart: its period key and counter.
        :class:`BadRequest` for text that is not one of its numbers."""
        return await self._call(_api.parse(name, text))

    async def create_pool(
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
        return await self._call(_api.create_pool(name, size, start, increment, offset))

    async def get_pool(self, name: str) -> PoolInfo:
        return await self._call(_api.get_pool(name))

    async def list_pools(self) -> List[PoolInfo]:
        return await self._call(_api.list_pools())

    async def drop_pool(self, name: str) -> None:
        await self._call(_api.drop_pool(name))

    async def pool_next(self, name: str, count: int = 1) -> List[int]:
        """Numbers taken from the pool ``name``: ``count``, or fewer when the server's
        answer is partial (it ran out of time or of numbers after taking some)."""
        return await self._call(_api.pool_next(name, count))

    async def counter_next(self, count: int = 1) -> CounterNames:
        return await self._call(_api.counter_next(count))

    async def shard_key_encode(
        self, origin: str, shard: int, record: ShardId, children: Iterable[ShardId] = ()
    ) -> ShardKeyView:
        return await self._call(_api.shard_key_encode(origin, shard, record, children))

    async def shard_key_decode(
        self,
        external: str,
        *,
        origin: Optional[str] = None,
        record_type: Optional[str] = None,
        child_types: Iterable[str] = (),
    ) -> ShardKeyView:
        return await self._call(_api.shard_key_decode(external, origin, record_type, child_types))

    async def next_ids(self, count: int = 1) -> List[int]:
        """``count`` time-ordered 64-bit ids (time, worker and sequence bits), increasing."""
        return await self._call(_api.next_ids(count))

    async def next_uuids(self, count: int = 1) -> List[uuid.UUID]:
        """``count`` RFC 9562 version-7 UUIDs (``format=uuidv7``) over the same time,
        worker id and sequence as :meth:`next_ids`: unique by construction across the
        servers of a store, increasing per server. Bits: 48 of unix_ts_ms, version 7,
        a 12-bit counter (rand_a), variant 10, a 22-bit worker id, 40 random bits."""
        return await self._call(_api.next_uuids(count))

    async def decode_id(self, id: Union[int, str]) -> DecodedId:
        """An id taken apart by the server's layout; :class:`BadRequest` for one that
        is not an id of it."""
        return await self._call(_api.decode_id(id))

    async def health(self) -> Json:
        return await self._call(_api.health())

    async def status(self) -> Json:
        """``GET /v1/status``: what the status page shows, as JSON."""
        return await self._call(_api.status())

    # -- worker-id leases (for other generators) ------------------------------

    async def lease_worker(
        self, group: str, *, ttl_ms: Optional[int] = None, max: Optional[int] = None
    ) -> WorkerLeaseInfo:
        """As :meth:`Client.lease_worker`."""
        return await self._call(_workers.lease_req(group, ttl_ms, max))

    async def renew_worker(self, group: str, token: str, *, ttl_ms: Optional[int] = None) -> WorkerLeaseInfo:
        """As :meth:`Client.renew_worker`."""
        return await self._call(_workers.renew_req(group, token, ttl_ms))

    async def release_worker(self, group: str, token: str) -> bool:
        """As :meth:`Client.release_worker`."""
        return await self._call(_workers.release_req(group, token))

    async def list_workers(self, group: str) -> List[WorkerInfo]:
        """As :meth:`Client.list_workers`."""
        return await self._call(_workers.list_req(group))

    async def close(self) -> None:
        """Closes every AsyncSequence of this client (handing tails back), then the connections."""
        for seq in list(self._sequences):
            await seq.close()
        await self._http.aclose()

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(
        self, t: Optional[Type[BaseException]], v: Optional[BaseException], tb: Optional[TracebackType]
    ) -> None:
        await self.close()


class AsyncSequence:
    """As :class:`~keysmith_client.Sequence`, for asyncio: ``await seq.next()``.

    Shared by any number of tasks of one event loop; values from one
    AsyncSequence increase. Make it with :meth:`AsyncClient.sequence`.
    """

    def __init__(self, client: AsyncClient, name: str, block: Optional[int], adaptive: Adaptive) -> None:
        self.name = name
        self._client = client
        self._buf = Buffer(block, adaptive)
        self._closed = False
        self._task: Optional[asyncio.Task[Optional[BaseException]]] = None
        #: What ``close()`` handed back to the server (``None``: nothing, the values stay a gap).
        self.released: Optional[Range] = None

    @property
    def block(self) -> Optional[int]:
        return self._buf.block

    @property
    def leases(self) -> int:
        return self._buf.leases

    async def next(self) -> int:
        while True:
            v = self._buf.take()
            if v is not None:
                if self._buf.wants_prefetch() and not self._closed:
                    self._start_fetch(0)
                return v
            await self._wait_for_values(1)

    async def next_n(self, n: int) -> Union[range, List[int]]:
        """``n`` increasing values: a ``range`` (made in O(1)) when they lie in one run
        of the block, else a list; on failure none is taken."""
        if n < 0:
            raise ValueError(f"n must not be negative, got {n}")
        if n == 0:
            return []
        while True:
            vs = self._buf.take_n(n)
            if vs is not None:
                if self._buf.wants_prefetch() and not self._closed:
                    self._start_fetch(0)
                return vs
            await self._wait_for_values(n)

    async def _wait_for_values(self, need: int) -> None:
        if self._closed:
            raise Closed(f"sequence {self.name!r}: this AsyncSequence is closed")
        if self._task is None:
            self._start_fetch(need)
        assert self._task is not None
        # shield: a waiter that is cancelled does not cancel the lease others wait for
        err = await asyncio.shield(self._task)
        if err is not None:
            raise err

    def _start_fetch(self, need: int) -> None:
        self._buf.begin_fetch()
        self._task = asyncio.get_running_loop().create_task(self._fetch(need))

    async def _fetch(self, need: int) -> Optional[BaseException]:
        """Reserves the next lease; returns its error (if any) to the waiters instead of raising."""
        lease: Optional[Lease] = None
        try:
            if self._buf.block is None:
                info = await self._client.get_sequence(self.name)
                if self._buf.block is None:
                    self._buf.block = self._buf.adaptive.clamp(info.block)
            lease = await self._client.reserve(self.name, self._buf.count(need, time.monotonic()))
            return None
        except Exception as e:
            return e
        finally:
            self._buf.end_fetch(lease)
            self._task = None

    async def close(self) -> None:
        """Stops serving; hands the unused tail back (see :meth:`Sequence.close`)."""
        if self._closed:
            return
        self._closed = True
        if self._task is not None:
            await asyncio.shield(self._task)
        tails = self._buf.tails()
        if tails:
            lease, from_ = tails[0]
            try:
                self.released = await self._client._call(_api.release(self.name, lease, from_, self._buf.step))
            except KeysmithError as e:
                _log.warning("sequence %r: the unused tail from %d stays a gap: %s", self.name, from_, e)

    async def __aenter__(self) -> AsyncSequence:
        return self

    async def __aexit__(
        self, t: Optional[Type[BaseException]], v: Optional[BaseException], tb: Optional[TracebackType]
    ) -> None:
        await self.close()

    def __repr__(self) -> str:
        return f"<AsyncSequence {self.name!r} block={self._buf.block} available={self._buf.available}>"
