"""Fail fast, typed errors, and no secret in any message (issue #49, item 4).

Against a real ``keysmith serve`` over TLS with an access file of two
principals: setup mistakes raise at once (one request sent, or none), each
status has its own exception, 429's Retry-After is honoured within the
deadline, and no message, repr or log line the client produced holds a token
or a lease token.
"""

from __future__ import annotations

import hashlib
import logging
import ssl
import uuid
from pathlib import Path
from typing import Any, Iterator, List

import httpx
import pytest

from keysmith_client import (
    AlreadyExists,
    Client,
    Forbidden,
    Gone,
    KeysmithError,
    NotFound,
    RateLimited,
    SetupError,
    Unauthorized,
    Unavailable,
)
from keysmith_client._errors import error_from_response

from .conftest import Certs, Server

TOKEN = f"team-{uuid.uuid4().hex}"
SLOW_TOKEN = f"slow-{uuid.uuid4().hex}"
WRONG_TOKEN = f"wrong-{uuid.uuid4().hex}"


def _digest(t: str) -> str:
    return hashlib.sha256(t.encode()).hexdigest()


@pytest.fixture
def secured(keysmith_bin: str, tmp_path: Path, certs: Certs) -> Iterator[Server]:
    """TLS, and two principals: ``team`` (TOKEN) and ``slow`` (SLOW_TOKEN, one request a second)."""
    access = tmp_path / "access.toml"
    access.write_text(
        f"""
[[principal]]
name = "team"
token_sha256 = "{_digest(TOKEN)}"
grants = [ {{ names = "team/*", actions = ["use", "read", "admin"] }} ]

[[principal]]
name = "slow"
token_sha256 = "{_digest(SLOW_TOKEN)}"
grants = [ {{ names = "team/*", actions = ["use", "read", "admin"] }} ]
rate = 1
burst = 1
"""
    )
    args = [
        "--tls-cert",
        str(certs.server_cert),
        "--tls-key",
        str(certs.server_key),
        "--access-file",
        str(access),
        "--auth-failures-per-ip",
        "0",
    ]
    s = Server(keysmith_bin, tmp_path / "k.db", args=args).start()
    try:
        yield s
    finally:
        s.stop()


class Counting(httpx.HTTPTransport):
    """httpx's own transport, counting the requests it sends."""

    def __init__(self, **kw: Any) -> None:
        super().__init__(**kw)
        self.sent = 0

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        self.sent += 1
        return super().handle_request(request)


def _texts(e: BaseException) -> List[str]:
    """Every text an exception shows: str, repr and args, down its cause chain."""
    out: List[str] = []
    seen = 0
    cur: BaseException | None = e
    while cur is not None and seen < 10:
        out += [str(cur), repr(cur), *map(repr, cur.args)]
        cur = cur.__cause__ or cur.__context__
        seen += 1
    return out


def test_a_token_from_a_file_or_the_environment_loses_its_trailing_newline(
    secured: Server, certs: Certs, tmp_path: Path
) -> None:
    f = tmp_path / "token"
    f.write_text(TOKEN + "\n")
    with Client(secured.url, token_file=f, ca_file=certs.ca) as c:
        c.create_sequence("team/file")
        assert c.next("team/file", 2) == [1, 2]
    # as `KEYSMITH_TOKEN=$(cat file)` or an env file with CRLF leaves it
    with Client(secured.url, token=TOKEN + "\r\n", ca_file=certs.ca) as c:
        assert c.next("team/file", 1) == [3]


@pytest.mark.parametrize(
    "bad", [TOKEN + " x", TOKEN + "\x00", "t\u00f6" + TOKEN, TOKEN + "\n\n", "in" + "\n" + TOKEN, "", "\n"]
)
def test_a_token_with_an_illegal_character_is_refused_when_the_client_is_made(bad: str, tmp_path: Path) -> None:
    with pytest.raises(ValueError) as e:
        Client("http://127.0.0.1:9", token=bad)
    assert all(TOKEN not in t for t in _texts(e.value)), _texts(e.value)
    assert "token" in str(e.value)
    f = tmp_path / "token"
    f.write_text(bad)
    with pytest.raises(ValueError) as e2:
        Client("http://127.0.0.1:9", token_file=f)
    assert all(TOKEN not in t for t in _texts(e2.value))
    assert str(f) in str(e2.value)


def test_setup_errors_raise_at_once_and_are_never_retried(secured: Server, certs: Certs, tmp_path: Path) -> None:
    # CA files: when the client is made, naming the file
    with pytest.raises(OSError, match="ca_file=.*missing.pem"):
        Client(secured.url, ca_file=tmp_path / "missing.pem")
    garbage = tmp_path / "garbage.pem"
    garbage.write_text("not a certificate\n")
    with pytest.raises(ssl.SSLError, match="ca_file=.*garbage.pem"):
        Client(secured.url, ca_file=garbage)
    # a server certificate the CA file refuses: one request, a SetupError, however long the deadline
    refused = Counting(verify=ssl.create_default_context(cafile=str(certs.other_ca)))
    with Client(secured.url, token=TOKEN, transport=refused, deadline=60) as c:
        with pytest.raises(SetupError, match="CERTIFICATE_VERIFY_FAILED") as e:
            c.health()
    assert refused.sent == 1
    assert all(TOKEN not in t for t in _texts(e.value))
    # a wrong token: 401, once
    ok_tls = ssl.create_default_context(cafile=str(certs.ca))
    wrong = Counting(verify=ok_tls)
    with Client(secured.url, token=WRONG_TOKEN, transport=wrong, deadline=60) as c:
        with pytest.raises(Unauthorized):
            c.get_sequence("team/x")
    assert wrong.sent == 1
    # no grant on the name: 403, once
    forbidden = Counting(verify=ok_tls)
    with Client(secured.url, token=TOKEN, transport=forbidden, deadline=60) as c:
        with pytest.raises(Forbidden):
            c.create_sequence("other/x")
    assert forbidden.sent == 1


def test_each_status_has_its_exception_and_no_message_holds_a_secret(
    secured: Server, certs: Certs, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    errors: List[BaseException] = []
    shown: List[str] = []
    secrets = [TOKEN, SLOW_TOKEN, WRONG_TOKEN]

    def expect(cls: type, f: Any) -> BaseException:
        with pytest.raises(cls) as e:
            f()
        errors.append(e.value)
        return e.value

    name = f"team/{uuid.uuid4().hex[:8]}"
    with Client(secured.url, token=TOKEN, ca_file=certs.ca) as c:
        shown.append(repr(c))
        c.create_sequence(name)
        expect(AlreadyExists, lambda: c.create_sequence(name))
        expect(NotFound, lambda: c.get_sequence("team/none"))
        expect(Forbidden, lambda: c.next("other/x", 1))
        lease = c.reserve(name, 5)
        secrets.append(lease.token)
        shown += [repr(lease), str(lease)]
        seq = c.sequence(name)
        shown.append(repr(seq))
        assert seq.next() > 0
        seq.close()
        c.drop_sequence(name)
        expect(KeysmithError, lambda: c.release(lease, lease.ranges[0].start))
        info = c.lease_worker("team/w")
        secrets.append(info.token)
        shown += [repr(info), str(info)]
        assert c.release_worker("team/w", info.token)
        forged = info.token[::-1]  # a lease token that is not one: refused without being shown
        secrets.append(forged)
        expect(KeysmithError, lambda: c.renew_worker("team/w", forged))
        wl = c.worker_lease("team/w2")
        wl.next_id()
        shown.append(repr(wl))
        wl.close()
    with Client(secured.url, token=WRONG_TOKEN, ca_file=certs.ca) as c:
        expect(Unauthorized, lambda: c.list_sequences())
    # 429: Retry-After past the deadline raises at once; within it, it is waited out
    with Client(secured.url, token=SLOW_TOKEN, ca_file=certs.ca, deadline=0.2) as c:
        c.create_sequence(f"team/slow-{uuid.uuid4().hex[:8]}")
        limited = expect(RateLimited, lambda: c.list_sequences())
        assert isinstance(limited, RateLimited) and limited.status == 429
        assert limited.retry_after is not None and limited.retry_after > 0
    with Client(secured.url, token=SLOW_TOKEN, ca_file=certs.ca, deadline=30) as c:
        c.list_sequences()
        c.list_sequences()  # over the rate: waits for Retry-After, then answered
    # no server: Unavailable once the deadline is over
    port = secured.port
    secured.stop()
    with Client(f"https://127.0.0.1:{port}", token=TOKEN, ca_file=certs.ca, deadline=0.3) as c:
        expect(Unavailable, lambda: c.list_sequences())
    for e in errors:
        shown += _texts(e)
    shown += [r.getMessage() for r in caplog.records]
    shown += [str(r.args) for r in caplog.records]
    for s in secrets:
        leaks = [t for t in shown if s in t]
        assert not leaks, leaks
    assert len(errors) >= 8


def test_410_and_429_map_to_their_exceptions() -> None:
    gone = error_from_response(410, {"error": {"code": "dropped", "message": "sequence x was dropped"}})
    assert isinstance(gone, Gone) and gone.status == 410
    assert isinstance(error_from_response(403, {}), Forbidden)
    assert isinstance(error_from_response(429, None), RateLimited)
