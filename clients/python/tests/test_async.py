"""AsyncClient and AsyncSequence against a real server: many tasks, several handles, errors, close()."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import List

import pytest

from keysmith_client import AsyncClient, Closed, Exhausted, NotFound, Unauthorized

from .conftest import Server, free_port


def test_many_tasks_share_async_sequences(server: Server, name: str) -> None:
    async def main() -> None:
        async with AsyncClient([f"http://127.0.0.1:{free_port()}", server.url]) as c:
            await c.create_sequence(name, block=10)
            seqs = [c.sequence(name), c.sequence(name, block=3)]

            async def task(i: int) -> List[int]:
                seq = seqs[i % 2]
                got: List[int] = []
                for k in range(200):
                    if k % 25 == 0:
                        got.extend(await seq.next_n(4))
                    elif i % 7 == 0 and k % 40 == 1:
                        got.extend(await c.next(name, 2))
                    else:
                        got.append(await seq.next())
                return got

            per_task = await asyncio.gather(*(task(i) for i in range(50)))
            every: List[int] = []
            for i, vs in enumerate(per_task):
                if i % 7 != 0:
                    assert vs == sorted(vs), "a task's values from one AsyncSequence increase"
                every.extend(vs)
            assert len(set(every)) == len(every), "a value was handed out twice"
            assert all(s.leases > 1 for s in seqs)

    asyncio.run(main())


def test_async_calls_errors_and_close(server: Server, name: str) -> None:
    async def main() -> None:
        async with AsyncClient(server.url) as c:
            with pytest.raises(NotFound):
                await c.sequence(name).next()
            await c.create_sequence(name, max=12, block=10)
            async with c.sequence(name) as seq:
                assert list(await seq.next_n(3)) == [1, 2, 3]
            assert seq.released is not None and seq.released.start == 4
            with pytest.raises(Closed):
                await seq.next()
            assert (await c.reserve(name, 5)).ranges[0].start == 4
            seq2 = c.sequence(name)
            assert list(await seq2.next_n(3)) == [9, 10, 11]
            assert await seq2.next() == 12
            with pytest.raises(Exhausted):
                await seq2.next()
            assert (await c.health())["status"] == "ok"
            info = await c.get_sequence(name)
            assert info.name == name
            await c.create_pool(name, 3)
            assert len(await c.pool_next(name, 3)) == 3
            await c.drop_pool(name)
            await c.drop_sequence(name)

    asyncio.run(main())


def test_async_token(keysmith_bin: str, tmp_path: Path, name: str) -> None:
    s = Server(keysmith_bin, tmp_path / "k.db", token="t0ken").start()

    async def main() -> None:
        async with AsyncClient(s.url) as anon, AsyncClient(s.url, token="t0ken") as ok:
            with pytest.raises(Unauthorized):
                await anon.list_sequences()
            await ok.create_sequence(name)
            assert await ok.sequence(name).next() == 1

    try:
        asyncio.run(main())
    finally:
        s.stop()
