"""keysmith-client: unique keys from a keysmith service, served from leased blocks.

    from keysmith_client import Client

    with Client("http://127.0.0.1:7878") as client:
        orders = client.sequence("orders")
        key = orders.next()
"""

from __future__ import annotations

from ._async import AsyncClient, AsyncSequence
from ._errors import (
    AlreadyExists,
    BadRequest,
    Closed,
    Conflict,
    Exhausted,
    Forbidden,
    Gone,
    KeysmithError,
    LeaseLost,
    NotFound,
    NotImplementedByServer,
    RateLimited,
    ServerError,
    SetupError,
    TicketRefused,
    TooLarge,
    Unauthorized,
    Unavailable,
    WrongKind,
)
from ._models import (
    CounterNames,
    DecodedId,
    DecodedValue,
    Lease,
    Number,
    Numbering,
    NumberParts,
    PoolInfo,
    Range,
    SequenceInfo,
    ShardKeyView,
    Ticket,
)
from ._sync import DEFAULT_DEADLINE, DEFAULT_TIMEOUT, Client, Sequence
from ._workers import WorkerInfo, WorkerLease, WorkerLeaseInfo

__version__ = "0.1.0"

__all__ = [
    "AlreadyExists",
    "AsyncClient",
    "AsyncSequence",
    "BadRequest",
    "Client",
    "Closed",
    "Conflict",
    "CounterNames",
    "DecodedId",
    "DEFAULT_DEADLINE",
    "DEFAULT_TIMEOUT",
    "Exhausted",
    "Forbidden",
    "Gone",
    "KeysmithError",
    "Lease",
    "LeaseLost",
    "NotFound",
    "NotImplementedByServer",
    "Number",
    "Numbering",
    "NumberParts",
    "DecodedValue",
    "PoolInfo",
    "Range",
    "RateLimited",
    "Sequence",
    "SequenceInfo",
    "ServerError",
    "SetupError",
    "ShardKeyView",
    "Ticket",
    "TicketRefused",
    "TooLarge",
    "Unauthorized",
    "Unavailable",
    "WrongKind",
    "WorkerInfo",
    "WorkerLease",
    "WorkerLeaseInfo",
]
