"""Keys in the ORM: a SQLAlchemy column default and a Django field, inserting
rows with a primary key into a real PostgreSQL from many forked processes."""

from __future__ import annotations

import glob
import json
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import uuid
from typing import Any, Callable, Dict, Iterator, List, Optional

import pytest
from sqlalchemy import BigInteger, String, create_engine, func, select
from sqlalchemy.orm import DeclarativeBase, Mapped, Session, mapped_column

from keysmith_client import Client
from keysmith_client.orm import KeyDefault

from .conftest import Server

PROCESSES = 4
ROWS = 150


def _pg_bin() -> Optional[str]:
    found = shutil.which("initdb")
    if found:
        return os.path.dirname(found)
    dirs = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"))
    return os.path.dirname(dirs[-1]) if dirs else None


class Postgres:
    """A throwaway PostgreSQL on 127.0.0.1 (initdb, pg_ctl), stopped by the fixture.

    PostgreSQL refuses to run as root: then it runs as the ``postgres``
    account (the postgresql package makes it), else ``nobody``."""

    def __init__(self, bindir: str) -> None:
        self.bindir = bindir
        self.dir = tempfile.mkdtemp(prefix="keysmith-orm-pg-")
        self.data = os.path.join(self.dir, "data")
        self.user: Optional[str] = None
        if os.geteuid() == 0:
            for name in ("postgres", "nobody"):
                try:
                    pw = pwd.getpwnam(name)
                except KeyError:
                    continue
                self.user = name
                os.chown(self.dir, pw.pw_uid, pw.pw_gid)
                break
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = s.getsockname()[1]
        self.url = f"postgresql://postgres@127.0.0.1:{self.port}/postgres"

    def _run(self, *args: str) -> None:
        out = subprocess.run(
            [os.path.join(self.bindir, args[0]), *args[1:]],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            user=self.user,
            extra_groups=[] if self.user else None,
            cwd=self.dir,
        )
        assert out.returncode == 0, f"{' '.join(args)}: {out.stdout.decode()}"

    def start(self) -> None:
        self._run("initdb", "-D", self.data, "-U", "postgres", "--auth=trust", "--no-sync", "-E", "UTF8")
        opts = f"-h 127.0.0.1 -p {self.port} -k {self.dir} -c fsync=off -c max_connections=50"
        # -w: pg_ctl waits until the server accepts connections
        self._run("pg_ctl", "-D", self.data, "-w", "-l", os.path.join(self.dir, "log"), "-o", opts, "start")

    def stop(self) -> None:
        try:
            self._run("pg_ctl", "-D", self.data, "-w", "-m", "fast", "stop")
        finally:
            shutil.rmtree(self.dir, ignore_errors=True)


@pytest.fixture(scope="module")
def postgres() -> Iterator[Postgres]:
    bindir = _pg_bin()
    if bindir is None:
        if os.environ.get("KEYSMITH_REQUIRE_BACKENDS") == "1":
            pytest.fail("initdb not found (install postgresql) and KEYSMITH_REQUIRE_BACKENDS=1")
        pytest.skip("initdb not found: install postgresql")
    pg = Postgres(bindir)
    pg.start()
    try:
        yield pg
    finally:
        pg.stop()


def _in_children(work: Callable[[int], List[int]]) -> List[List[int]]:
    """Forks PROCESSES children running ``work(i)``; answers what each returned (keys inserted)."""
    pids = []
    for i in range(PROCESSES):
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:
            os.close(r)
            out: Dict[str, Any] = {}
            try:
                out["keys"] = work(i)
            except BaseException as e:  # noqa: BLE001 - reported to the parent
                out["error"] = f"{type(e).__name__}: {e}"
            os.write(w, json.dumps(out).encode())
            os._exit(0)
        os.close(w)
        pids.append((pid, r))
    results: List[List[int]] = []
    errors: List[str] = []
    for pid, r in pids:
        with os.fdopen(r, "rb") as f:
            got = json.loads(f.read())
        os.waitpid(pid, 0)
        if "error" in got:
            errors.append(got["error"])
        else:
            results.append(got["keys"])
    assert not errors, errors
    return results


@pytest.mark.filterwarnings("ignore:This process .* is multi-threaded:DeprecationWarning")
def test_sqlalchemy_column_default_from_many_processes(server: Server, postgres: Postgres) -> None:
    name = f"orm/{uuid.uuid4().hex[:12]}"
    with Client(server.url) as admin:
        admin.create_sequence(name, block=50)
    key = KeyDefault(lambda: Client(server.url), name)

    class Base(DeclarativeBase):
        pass

    class Order(Base):
        __tablename__ = "orders_sqlalchemy"
        id: Mapped[int] = mapped_column(BigInteger, primary_key=True, default=key)
        note: Mapped[str] = mapped_column(String(40))

    url = postgres.url.replace("postgresql://", "postgresql+psycopg://")
    engine = create_engine(url)
    Base.metadata.create_all(engine)
    with Session(engine) as s:  # the parent inserts first: its block is warm when it forks
        s.add(Order(note="parent"))
        s.commit()
    engine.dispose()

    def work(i: int) -> List[int]:
        eng = create_engine(url)
        keys = []
        with Session(eng) as s:
            for k in range(ROWS):
                o = Order(note=f"child {i} row {k}")
                s.add(o)
                s.commit()  # one insert each: a duplicate key fails here
                keys.append(o.id)
        eng.dispose()
        return keys

    keys = [k for ks in _in_children(work) for k in ks]
    assert len(keys) == PROCESSES * ROWS and len(set(keys)) == len(keys)
    engine = create_engine(url)
    with Session(engine) as s:
        assert s.scalar(select(func.count()).select_from(Order)) == PROCESSES * ROWS + 1
        assert s.scalar(select(func.count(func.distinct(Order.id)))) == PROCESSES * ROWS + 1
    engine.dispose()


@pytest.mark.filterwarnings("ignore:This process .* is multi-threaded:DeprecationWarning")
def test_django_field_from_many_processes(server: Server, postgres: Postgres) -> None:
    import django
    from django.conf import settings

    name = f"orm/{uuid.uuid4().hex[:12]}"
    with Client(server.url) as admin:
        admin.create_sequence(name, block=50)
    if not settings.configured:
        settings.configure(
            DATABASES={
                "default": {
                    "ENGINE": "django.db.backends.postgresql",
                    "NAME": "postgres",
                    "USER": "postgres",
                    "HOST": "127.0.0.1",
                    "PORT": str(postgres.port),
                }
            },
            INSTALLED_APPS=[],
            KEYSMITH={"default": {"urls": [server.url]}},
            USE_TZ=True,
        )
        django.setup()
    from django.db import connection, connections, models

    from keysmith_client.django_field import KeysmithKeyField

    class Invoice(models.Model):  # type: ignore[misc]
        id = KeysmithKeyField(primary_key=True, sequence=name)
        note = models.CharField(max_length=40)

        class Meta:
            app_label = "keysmith_orm_test"
            db_table = "invoices_django"

    with connection.schema_editor() as editor:
        editor.create_model(Invoice)
    first = Invoice.objects.create(note="parent")  # the parent's block is warm when it forks
    assert first.pk is not None
    kept = Invoice.objects.create(id=10**15, note="a key given by hand is kept")
    assert Invoice.objects.get(pk=10**15).note == kept.note
    connections.close_all()  # the children open their own

    def work(i: int) -> List[int]:
        keys = [Invoice.objects.create(note=f"child {i} row {k}").pk for k in range(ROWS)]
        connections.close_all()
        return keys

    keys = [k for ks in _in_children(work) for k in ks]
    assert len(keys) == PROCESSES * ROWS and len(set(keys)) == len(keys)
    assert first.pk not in keys
    assert Invoice.objects.count() == PROCESSES * ROWS + 2
    name_, path, args, kwargs = Invoice._meta.get_field("id").deconstruct()
    assert kwargs["sequence"] == name and path.endswith("KeysmithKeyField")
    connections.close_all()
