"""https URLs, a CA file and client certificates, against a real `keysmith serve --tls-cert`."""

from __future__ import annotations

import asyncio
import re
import ssl
from pathlib import Path
from typing import Iterator, List

import pytest

from keysmith_client import AsyncClient, Client, SetupError

from .conftest import Certs, Server


def tls_server(binary: str, store: Path, certs: Certs, extra: List[str]) -> Server:
    args = ["--tls-cert", str(certs.server_cert), "--tls-key", str(certs.server_key), *extra]
    return Server(binary, store, args=args).start()


@pytest.fixture
def https(keysmith_bin: str, tmp_path: Path, certs: Certs) -> Iterator[Server]:
    s = tls_server(keysmith_bin, tmp_path / "k.db", certs, [])
    try:
        yield s
    finally:
        s.stop()


@pytest.fixture
def mtls(keysmith_bin: str, tmp_path: Path, certs: Certs) -> Iterator[Server]:
    s = tls_server(keysmith_bin, tmp_path / "k.db", certs, ["--client-ca", str(certs.ca)])
    try:
        yield s
    finally:
        s.stop()


def test_https_with_the_ca_file(https: Server, certs: Certs, name: str) -> None:
    assert https.url.startswith("https://127.0.0.1:")
    with Client(https.url, ca_file=certs.ca) as c:
        c.create_sequence(name, start=10)
        assert list(c.sequence(name).next_n(3)) == [10, 11, 12]


def test_a_server_whose_ca_is_not_trusted_is_refused(https: Server, certs: Certs) -> None:
    with Client(https.url, ca_file=certs.other_ca, deadline=1.0) as c:
        with pytest.raises(SetupError, match="CERTIFICATE_VERIFY_FAILED"):
            c.health()


def test_client_certificate_required_by_the_server(mtls: Server, certs: Certs, name: str) -> None:
    with Client(mtls.url, ca_file=certs.ca, deadline=1.0) as c:
        with pytest.raises(SetupError, match="(?i)certificate required"):
            c.create_sequence(name)
    with Client(mtls.url, ca_file=str(certs.ca), cert_file=str(certs.client_cert), key_file=str(certs.client_key)) as c:
        c.create_sequence(name)
        assert c.next(name, 2) == [1, 2]


async def _async_next(url: str, certs: Certs, name: str) -> List[int]:
    async with AsyncClient(url, ca_file=certs.ca, cert_file=certs.client_cert, key_file=certs.client_key) as c:
        await c.create_sequence(name)
        return list(await c.sequence(name).next_n(2))


def test_async_client_with_a_client_certificate(mtls: Server, certs: Certs, name: str) -> None:
    assert asyncio.run(_async_next(mtls.url, certs, name)) == [1, 2]


def test_bad_tls_arguments_say_which(certs: Certs, tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="key_file needs cert_file"):
        Client("https://127.0.0.1:1", key_file=certs.client_key)
    missing = tmp_path / "missing.pem"
    with pytest.raises(OSError, match=re.escape(f"ca_file={str(missing)!r}")):
        Client("https://127.0.0.1:1", ca_file=missing)
    with pytest.raises(ssl.SSLError, match="cert_file="):
        Client("https://127.0.0.1:1", cert_file=certs.client_cert, key_file=certs.server_cert)
