"""Real `keysmith serve` processes for the tests, started and stopped by PID."""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import threading
import uuid
from pathlib import Path
from typing import Dict, Iterator, List, Optional

import pytest

REPO = Path(__file__).resolve().parents[3]
SHARD_SECRET = "a test secret of more than sixteen bytes"
LEASE_SECRET = "another test secret, for lease tokens"


def _build() -> str:
    """`cargo build -p keysmith-cli` at the repository root; the binary's path."""
    out = subprocess.run(
        ["cargo", "build", "-p", "keysmith-cli", "--message-format=json-render-diagnostics"],
        cwd=REPO,
        stdout=subprocess.PIPE,
        check=True,
    ).stdout.decode()
    for line in out.splitlines():
        msg = json.loads(line)
        if msg.get("reason") == "compiler-artifact" and msg.get("executable"):
            if msg["target"]["name"] == "keysmith":
                return str(msg["executable"])
    raise RuntimeError("cargo build -p keysmith-cli made no `keysmith` binary")


@pytest.fixture(scope="session")
def keysmith_bin() -> str:
    return os.environ.get("KEYSMITH_BIN") or _build()


def free_port() -> int:
    """A port on 127.0.0.1 that nothing listens on (bound, then closed)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


class Server:
    """One `keysmith --store sqlite://DB serve` process on 127.0.0.1."""

    def __init__(
        self, binary: str, store: Path, *, token: Optional[str] = None, args: Optional[List[str]] = None
    ) -> None:
        self.binary = binary
        self.store = store
        self.token = token
        self.args = args or []
        self.proc: Optional[subprocess.Popen[bytes]] = None
        self.url = ""
        self.port = 0
        self.log: List[str] = []

    def start(self, port: int = 0) -> Server:
        assert self.proc is None, "already running"
        env: Dict[str, str] = {k: v for k, v in os.environ.items() if not k.startswith("KEYSMITH_")}
        env["KEYSMITH_SHARD_KEY_SECRET"] = SHARD_SECRET
        env["KEYSMITH_LEASE_SECRET"] = LEASE_SECRET  # lease tokens outlive a restart
        if self.token is not None:
            env["KEYSMITH_TOKEN"] = self.token
        counters = self.store.parent / "counters"
        counters.mkdir(exist_ok=True)
        cmd = [
            self.binary,
            "--store",
            f"sqlite://{self.store}",
            "serve",
            "--listen",
            f"127.0.0.1:{port}",
            "--counter-dir",
            str(counters),
            "--counter-host",
            "testhost",
            *self.args,
        ]
        self.proc = subprocess.Popen(cmd, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        assert self.proc.stderr is not None
        first = self.proc.stderr.readline().decode()
        self.log.append(first)
        m = re.search(r"(https?)://127\.0\.0\.1:(\d+)", first)
        if m is None:
            rest = self.proc.stderr.read().decode()
            self.proc.wait()
            self.proc = None
            raise RuntimeError(f"keysmith serve did not start: {first}{rest}")
        self.port = int(m.group(2))
        self.url = f"{m.group(1)}://127.0.0.1:{self.port}"
        # drain stderr so that the server never blocks on a full pipe
        threading.Thread(target=self._drain, args=(self.proc,), daemon=True).start()
        return self

    def _drain(self, proc: subprocess.Popen[bytes]) -> None:
        assert proc.stderr is not None
        for line in proc.stderr:
            self.log.append(line.decode())

    def kill(self) -> None:
        """SIGKILL: no graceful shutdown, no tail handed back."""
        if self.proc is not None:
            os.kill(self.proc.pid, signal.SIGKILL)
            self.proc.wait()
            self.proc = None

    def restart(self) -> None:
        """SIGKILL, then a new process on the same store and the same port."""
        self.kill()
        self.start(self.port)

    def stop(self) -> None:
        """SIGTERM (graceful), SIGKILL if it does not exit within 10 s."""
        if self.proc is not None:
            os.kill(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.kill(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
            self.proc = None


@pytest.fixture(scope="session")
def server(keysmith_bin: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """One server shared by the tests that do not stop it (each uses its own names)."""
    s = Server(keysmith_bin, tmp_path_factory.mktemp("shared") / "k.db").start()
    try:
        yield s
    finally:
        s.stop()


@pytest.fixture
def own_server(keysmith_bin: str, tmp_path: Path) -> Iterator[Server]:
    """A server of this test alone (to kill and restart)."""
    s = Server(keysmith_bin, tmp_path / "k.db").start()
    try:
        yield s
    finally:
        s.stop()


class Certs:
    """PEM files from clients/tls-test-certs.sh: a CA, a server certificate for
    127.0.0.1, a client certificate (CN=team-a) it signed, and an unrelated CA."""

    def __init__(self, dir: Path) -> None:
        subprocess.run(["bash", str(REPO / "clients" / "tls-test-certs.sh"), str(dir)], check=True)
        self.ca = dir / "ca.pem"
        self.server_cert = dir / "server.pem"
        self.server_key = dir / "server-key.pem"
        self.client_cert = dir / "client.pem"
        self.client_key = dir / "client-key.pem"
        self.other_ca = dir / "other-ca.pem"


@pytest.fixture(scope="session")
def certs(tmp_path_factory: pytest.TempPathFactory) -> Certs:
    return Certs(tmp_path_factory.mktemp("certs"))


@pytest.fixture
def name() -> str:
    """A sequence or pool name no other test uses (with a `/`, which paths encode as %2F)."""
    return f"test/{uuid.uuid4().hex[:12]}"
