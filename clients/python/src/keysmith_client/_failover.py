"""Which server to send a request to next, and when to give up.

No I/O here: the sync and the async client drive an :class:`Attempt` with
their own HTTP client and their own sleep, so both fail over the same way.

Rules: a request goes to the server that answered last (or the first URL).
A connection error or a 503 sends it to the next server at once; a server
that failed is not tried again before its ``Retry-After`` (503) or a short
backoff (connection errors, doubling up to :data:`MAX_BACKOFF`) is over; that
pause is shared by every call of the client. When no server is ready, the
attempt sleeps until one is, as long as that is before its deadline; past the
deadline the last error is raised.
"""

from __future__ import annotations

import email.utils
import ssl
import threading
import time
from typing import Any, List, Optional, Union
from urllib.parse import quote

import httpx

from ._errors import KeysmithError, RateLimited, SetupError, Unavailable, error_from_response

#: The first pause after a connection error, in seconds.
MIN_BACKOFF = 0.05
#: The longest pause after connection errors, in seconds.
MAX_BACKOFF = 2.0
#: The longest Retry-After honoured at once, in seconds.
MAX_RETRY_AFTER = 30.0

#: Errors after which the request certainly never reached the server.
NOT_SENT = (httpx.ConnectError, httpx.ConnectTimeout, httpx.PoolTimeout)


def seg(name: str) -> str:
    """A name as one path segment (``/`` becomes ``%2F``)."""
    return quote(name, safe="")


#: What OpenSSL says when the TLS setup itself is wrong (not a server going away mid-handshake).
_TLS_REFUSALS = (
    "CERTIFICATE_VERIFY_FAILED",
    "CERTIFICATE_REQUIRED",
    "certificate required",
    "BAD_CERTIFICATE",
    "UNKNOWN_CA",
    "WRONG_VERSION_NUMBER",
    "CERTIFICATE_UNKNOWN",
)


def _is_tls_refusal(exc: BaseException) -> bool:
    """Whether a failed connection is a TLS refusal (the server's certificate not
    trusted, a client certificate refused, TLS to a plain port): a setup mistake
    that retrying cannot fix. A connection that breaks off is not one."""
    seen = 0
    e: Optional[BaseException] = exc
    while e is not None and seen < 8:
        if isinstance(e, ssl.SSLCertVerificationError):
            return True
        text = str(e)
        if any(t in text for t in _TLS_REFUSALS):
            return True
        e = e.__cause__ or e.__context__
        seen += 1
    return False


def retry_after(resp: httpx.Response) -> Optional[float]:
    """The response's Retry-After in seconds (delta-seconds or an HTTP date), if any."""
    raw = resp.headers.get("retry-after")
    if raw is None:
        return None
    raw = raw.strip()
    if raw.isdigit():
        return float(raw)
    try:
        when = email.utils.parsedate_to_datetime(raw)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())


def decode(resp: httpx.Response) -> Any:
    """The JSON body of a response, or ``None`` when it has none."""
    if not resp.content:
        return None
    try:
        return resp.json()
    except ValueError:
        return None


def leader_of(resp: httpx.Response, base: str) -> Optional[str]:
    """The leader's address of a 421 ``not_leader`` answer, else ``None``.

    ``None`` too when ``base`` (where the request went) is ``https`` and the
    leader is ``http``: the token is never sent in clear text; the 421 goes
    to the caller as an error naming the leader.

    A server that does not lead a leader-ordered sequence answers ``next``
    with its leader's address (header ``Keysmith-Leader``, and
    ``error.leader`` in the body): the client sends the same request there,
    once, with its own token and TLS settings.
    """
    if resp.status_code != 421:
        return None
    url = resp.headers.get("keysmith-leader")
    if not url:
        body = decode(resp)
        err = body.get("error") if isinstance(body, dict) else None
        url = err.get("leader") if isinstance(err, dict) else None
    if not isinstance(url, str) or not url.startswith(("http://", "https://")):
        return None
    if base.startswith("https://") and not url.startswith("https://"):
        return None
    return url.rstrip("/")


class Servers:
    """The base URLs of a client and, per server, when it may be tried again."""

    def __init__(self, urls: List[str]) -> None:
        if not urls:
            raise ValueError("give at least one server URL")
        self.urls = [u.rstrip("/") for u in urls]
        self._lock = threading.Lock()
        self._preferred = 0
        self._not_before = [0.0] * len(urls)
        self._backoff = [0.0] * len(urls)

    def pick(self, now: float, tried: List[bool]) -> Union[int, float]:
        """A ready server not yet tried in this round (its index), or the seconds until one is ready."""
        with self._lock:
            n = len(self.urls)
            order = [(self._preferred + k) % n for k in range(n)]
            for i in order:
                if not tried[i] and self._not_before[i] <= now:
                    return i
            for i in order:
                if self._not_before[i] <= now:
                    # Every ready server failed in this round already: start a new one.
                    for j in range(n):
                        tried[j] = False
                    return i
            return max(0.0, min(self._not_before) - now)

    def succeeded(self, i: int) -> None:
        with self._lock:
            self._preferred = i
            self._backoff[i] = 0.0
            self._not_before[i] = 0.0

    def failed(self, i: int, wait: Optional[float]) -> None:
        """Server ``i`` failed: not again before ``wait`` seconds (Retry-After) or a backoff."""
        with self._lock:
            if wait is None:
                self._backoff[i] = min(MAX_BACKOFF, max(MIN_BACKOFF, self._backoff[i] * 2))
                wait = self._backoff[i]
            wait = min(MAX_RETRY_AFTER, max(MIN_BACKOFF, wait))
            self._not_before[i] = time.monotonic() + wait
            if self._preferred == i:
                self._preferred = (i + 1) % len(self.urls)


class Attempt:
    """One call: tries servers in turn until one answers, or the deadline passes.

    ``safe`` says whether the request may be sent again after it may have
    reached a server (a lost answer to ``next`` or ``reserve`` only leaves a
    gap); requests that are not safe fail over only when they surely were not
    sent (connection refused) or the server answered a 503 that changed
    nothing (any but ``timeout``, after which a create or drop may still
    take effect).
    """

    def __init__(self, servers: Servers, deadline: float, safe: bool) -> None:
        self.servers = servers
        self.deadline = time.monotonic() + deadline
        self.safe = safe
        self.tried = [False] * len(servers.urls)
        self.last: Optional[KeysmithError] = None

    def step(self) -> Union[int, float]:
        """The index of the server to send to now, or seconds to sleep first.

        Raises the last error (or :class:`Unavailable`) when no server will be
        ready before the deadline.
        """
        now = time.monotonic()
        got = self.servers.pick(now, self.tried)
        if isinstance(got, int):
            if now >= self.deadline and self.last is not None:
                raise self.last
            self.tried[got] = True
            return got
        if now + got > self.deadline:
            raise self.last or Unavailable(
                f"no keysmith server is ready before the deadline ({', '.join(self.servers.urls)})"
            )
        return got

    def transport_error(self, i: int, exc: httpx.TransportError) -> None:
        """A request to server ``i`` failed without an answer: fail over, or raise."""
        url = self.servers.urls[i]
        if _is_tls_refusal(exc):
            # a setup mistake (ca_file, client certificate): no other try can succeed
            tls = SetupError(
                f"{url}: the TLS connection was refused ({type(exc).__name__}: {exc}); "
                "check ca_file (the CA that signed the server's certificate) and cert_file/key_file",
                url=url,
            )
            tls.__cause__ = exc
            raise tls
        self.servers.failed(i, None)
        err = Unavailable(f"{url}: {type(exc).__name__}: {exc}", url=url)
        err.__cause__ = exc
        if not self.safe and not isinstance(exc, NOT_SENT):
            err.message = (
                f"{url}: {type(exc).__name__}: {exc}; the request may or may not have taken "
                "effect, so it was not sent again"
            )
            err.args = (err.message,)
            raise err
        self.last = err

    def response(self, i: int, resp: httpx.Response) -> Optional[Any]:
        """The decoded body of a success; ``None`` after a 503 (fail over); raises other errors."""
        url = self.servers.urls[i]
        if resp.status_code == 503:
            self.servers.failed(i, retry_after(resp))
            err = error_from_response(503, decode(resp), url)
            if not self.safe and err.code == "timeout":
                # the server gave up waiting, but the store may still carry the change out
                err.message += "; the request may still take effect, so it was not sent again"
                err.args = (err.message,)
                raise err
            self.last = err
            return None
        if resp.status_code == 429:
            # not taken: sent again after Retry-After when that fits in the deadline
            wait = retry_after(resp)
            limited = error_from_response(429, decode(resp), url)
            if isinstance(limited, RateLimited):
                limited.retry_after = wait
            if wait is None or time.monotonic() + wait > self.deadline:
                raise limited
            self.servers.failed(i, wait)
            self.last = limited
            return None
        self.servers.succeeded(i)
        if resp.is_error:
            raise error_from_response(resp.status_code, decode(resp), url)
        body = decode(resp)
        return {} if body is None else body
