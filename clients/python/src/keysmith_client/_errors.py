"""One exception hierarchy, built from the server's ``{"error": {"code", "message"}}`` bodies."""

from __future__ import annotations

from typing import Any, Dict, Optional, Sequence, Type


class KeysmithError(Exception):
    """Any error of the keysmith client.

    ``status`` is the HTTP status (``None`` when no server answered), ``code``
    the server's stable error code (``not_found``, ``exhausted``...), and
    ``similar`` the existing names that look like an unknown one (404s).
    """

    def __init__(
        self,
        message: str,
        *,
        status: Optional[int] = None,
        code: Optional[str] = None,
        similar: Sequence[str] = (),
        url: Optional[str] = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.status = status
        self.code = code
        self.similar = tuple(similar)
        self.url = url

    def __str__(self) -> str:
        head = f"{self.status} {self.code}: " if self.status is not None else ""
        tail = f" (similar: {', '.join(self.similar)})" if self.similar else ""
        return f"{head}{self.message}{tail}"


class BadRequest(KeysmithError):
    """400: the request was malformed (bad name, bad count, bad body...)."""


class TooLarge(BadRequest):
    """413: the body or the count is over the server's limit."""


class Unauthorized(KeysmithError):
    """401: no token, or the wrong one. Raised at once, never retried."""


class Forbidden(KeysmithError):
    """403: the token is known but lacks the grant the call needs (or is over a
    quota, ``quota_exceeded``). Raised at once, never retried."""


class Gone(KeysmithError):
    """410: the sequence was dropped while this server had it open."""


class RateLimited(KeysmithError):
    """429: over the principal's rate. The client waits out ``Retry-After`` and sends
    the call again when that fits in the call's deadline; otherwise this is raised,
    with :attr:`retry_after` (seconds, ``None`` when the server sent none)."""

    retry_after: Optional[float] = None


class SetupError(KeysmithError):
    """A local mistake in how the client was set up, found on the first call: the
    server's certificate is refused by ``ca_file`` (or the server refused the
    client certificate), or the connection cannot be made secure. Raised at once,
    never retried: retrying cannot fix it."""


class NotFound(KeysmithError):
    """404: no sequence or pool of that name (or no such route on that server)."""


class Conflict(KeysmithError):
    """409: the request conflicts with what the store holds."""


class AlreadyExists(Conflict):
    """409: a sequence or pool of that name exists already."""


class Exhausted(Conflict):
    """409: the sequence or pool has no value left below its maximum."""


class TicketRefused(Conflict):
    """409 ``ticket_refused``: the ticket no longer holds its number (committed or
    released already, or expired and taken by another holder). Nothing changed."""


class WrongKind(Conflict):
    """409 ``wrong_kind``: the call does not fit the sequence's kind (``next`` or
    ``alter`` on a gap-free or numbered sequence, tickets on an ordinary one...)."""


class Unavailable(KeysmithError):
    """503 from every server (contention, store down, timeout), or no server reachable,
    until the client's deadline ran out."""


class ServerError(KeysmithError):
    """500 or another status the client does not know."""


class NotImplementedByServer(KeysmithError):
    """501: the server cannot do this as configured (e.g. no shard key secret)."""


class Closed(KeysmithError):
    """The Sequence or client was closed."""


class LeaseLost(KeysmithError):
    """The worker lease was lost (a renewal refused, or none before it expired):
    its worker id must make no more ids. Take a new :class:`WorkerLease`."""


_BY_CODE: Dict[str, Type[KeysmithError]] = {
    "bad_request": BadRequest,
    "invalid_name": BadRequest,
    "invalid_argument": BadRequest,
    "too_large": TooLarge,
    "unauthorized": Unauthorized,
    "forbidden": Forbidden,
    "quota_exceeded": Forbidden,
    "rate_limited": RateLimited,
    "dropped": Gone,
    "not_found": NotFound,
    "no_route": NotFound,
    "already_exists": AlreadyExists,
    "exhausted": Exhausted,
    "ticket_refused": TicketRefused,
    "wrong_kind": WrongKind,
    "ids_unavailable": Unavailable,
    "contention": Unavailable,
    "unavailable": Unavailable,
    "timeout": Unavailable,
    "closed": Unavailable,
    "no_counter": Unavailable,
    "no_secret": NotImplementedByServer,
}

_BY_STATUS: Dict[int, Type[KeysmithError]] = {
    400: BadRequest,
    401: Unauthorized,
    403: Forbidden,
    404: NotFound,
    409: Conflict,
    410: Gone,
    413: TooLarge,
    429: RateLimited,
    501: NotImplementedByServer,
    503: Unavailable,
}


def error_from_response(status: int, body: Any, url: Optional[str] = None) -> KeysmithError:
    """The exception for an error response: by the body's code, else by the status."""
    code: Optional[str] = None
    message = f"HTTP {status}"
    similar: Sequence[str] = ()
    err = body.get("error") if isinstance(body, dict) else None
    if isinstance(err, dict):
        if isinstance(err.get("code"), str):
            code = err["code"]
        if isinstance(err.get("message"), str):
            message = err["message"]
        s = err.get("similar")
        if isinstance(s, list):
            similar = [str(x) for x in s]
    cls = _BY_CODE.get(code or "") or _BY_STATUS.get(status) or ServerError
    return cls(message, status=status, code=code, similar=similar, url=url)
