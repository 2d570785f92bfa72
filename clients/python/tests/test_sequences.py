"""Sequence handles against a real server: threads, several handles and clients, restarts, close()."""

from __future__ import annotations

import threading
from typing import Callable, Dict, List

import pytest

from keysmith_client import Client, Closed, Exhausted, Sequence

from .conftest import Server


def run_threads(n: int, work: Callable[[int], List[int]]) -> Dict[int, List[int]]:
    """Runs ``work(i)`` in ``n`` threads started together; their values by thread; re-raises failures."""
    out: Dict[int, List[int]] = {}
    errors: List[BaseException] = []
    start = threading.Barrier(n)

    def body(i: int) -> None:
        try:
            start.wait()
            out[i] = work(i)
        except BaseException as e:
            errors.append(e)

    threads = [threading.Thread(target=body, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]
    return out


def assert_unique_and_increasing(per_thread: Dict[int, List[int]]) -> List[int]:
    every: List[int] = []
    for vs in per_thread.values():
        assert vs == sorted(vs) and len(set(vs)) == len(vs), "a thread's values must increase"
        every.extend(vs)
    assert len(set(every)) == len(every), "a value was handed out twice"
    return every


def test_many_threads_share_one_sequence(server: Server, name: str) -> None:
    with Client(server.url) as c:
        c.create_sequence(name, block=10)
        seq = c.sequence(name)
        every = assert_unique_and_increasing(run_threads(8, lambda i: [seq.next() for _ in range(1500)]))
        assert len(every) == 8 * 1500
        assert seq.leases > 1
        seq.close()


def test_several_sequence_objects_threads_and_next_n(server: Server, name: str) -> None:
    with Client(server.url) as c:
        c.create_sequence(name, block=5)
        seqs = [c.sequence(name, min_block=1, max_block=50) for _ in range(3)]

        def work(i: int) -> List[int]:
            seq = seqs[i % 3]
            got: List[int] = []
            for k in range(300):
                if k % 10 == 0:
                    batch = list(seq.next_n(7))
                    assert batch == sorted(batch) and len(batch) == 7
                    got.extend(batch)
                else:
                    got.append(seq.next())
            return got

        every = assert_unique_and_increasing(run_threads(9, work))
        assert len(every) == 9 * (270 + 30 * 7)


def test_two_clients_at_once_with_plain_calls_between(server: Server, name: str) -> None:
    with Client(server.url) as a, Client([server.url]) as b:
        a.create_sequence(name, block=20)
        sa, sb = a.sequence(name), b.sequence(name, block=3)

        def work(i: int) -> List[int]:
            client, seq = (a, sa) if i % 2 == 0 else (b, sb)
            got: List[int] = []
            for k in range(400):
                if i >= 4 and k % 50 == 0:
                    got.extend(client.next(name, 2))  # the server's own cache, one request
                else:
                    got.append(seq.next())
            return got

        per_thread = run_threads(6, work)
        every = assert_unique_and_increasing({i: vs for i, vs in per_thread.items() if i < 4})
        plain_and_cached = every + [v for i, vs in per_thread.items() if i >= 4 for v in vs]
        assert len(set(plain_and_cached)) == len(plain_and_cached)


def test_a_server_killed_and_restarted_mid_run_repeats_no_value(own_server: Server, name: str) -> None:
    """SIGKILL the server while threads take values, start it again on the same store and port."""
    with Client(own_server.url) as c:
        c.create_sequence(name, block=5)
        seqs = [c.sequence(name, max_block=5), c.sequence(name, max_block=5)]
        lock = threading.Condition()
        counts = [0] * 5  # calls per worker
        done = threading.Event()

        def work(i: int) -> List[int]:
            got: List[int] = []
            try:
                while not done.is_set() and len(got) < 100_000:
                    if i == 4:
                        got.extend(c.next(name, 3))
                    else:
                        got.append(seqs[i % 2].next())
                    with lock:
                        counts[i] += 1
                        lock.notify_all()
            except BaseException as e:
                with lock:
                    errors.append(e)
                    lock.notify_all()
            return got

        def until_each(n: int) -> None:
            """Waits until every worker has made ``n`` more calls than now."""
            with lock:
                goal = [k + n for k in counts]
                ok = lock.wait_for(lambda: all(k >= g for k, g in zip(counts, goal)) or bool(errors), timeout=60)
                if errors:
                    raise errors[0]
                assert ok, f"a worker is stuck: {counts} < {goal}"

        errors: List[BaseException] = []
        result: Dict[int, List[int]] = {}
        runner = threading.Thread(target=lambda: result.update(run_threads(5, work)))
        runner.start()
        try:
            until_each(50)
            own_server.restart()  # SIGKILL, then a new process: requests in flight fail, then reconnect
            until_each(50)  # every worker goes on through the new process
            own_server.restart()
            until_each(50)
        finally:
            done.set()
            runner.join()
        assert len(result) == 5, "a worker failed"
        every = assert_unique_and_increasing({i: vs for i, vs in result.items() if i < 4})
        every += result[4]
        assert len(set(every)) == len(every)
        for s in seqs:
            s.close()
    assert "listening" in "".join(own_server.log)


def test_close_hands_the_unused_tail_back(server: Server, name: str) -> None:
    with Client(server.url) as c:
        c.create_sequence(name, block=10)
        with c.sequence(name) as seq:
            assert [seq.next(), seq.next(), seq.next()] == [1, 2, 3]
        assert seq.released is not None and (seq.released.start, seq.released.end) == (4, 11)
        # the next reservation starts where the first one stopped being used
        lease = c.reserve(name, 5)
        assert lease.ranges[0].start == 4
        with pytest.raises(Closed):
            seq.next()
        seq.close()  # idempotent


def test_close_after_a_prefetch_hands_back_the_prefetched_lease(server: Server, name: str) -> None:
    with Client(server.url) as c:
        c.create_sequence(name, block=10)
        seq = c.sequence(name, min_block=10, max_block=10)
        assert list(seq.next_n(9)) == list(range(1, 10))  # 1 of 10 left: the next lease is on its way
        seq.close()  # waits for it, then hands the newer lease back whole
        assert seq.released is not None and seq.released.start == 11
        assert c.reserve(name, 1).ranges[0].start == 11  # 10 stays a gap: someone reserved after its lease


def test_a_tail_stays_a_gap_when_someone_reserved_since(server: Server, name: str) -> None:
    with Client(server.url) as c:
        c.create_sequence(name, block=10)
        seq = c.sequence(name)
        assert seq.next() == 1
        other = c.reserve(name, 10)
        seq.close()
        assert seq.released is None
        assert c.reserve(name, 1).ranges[0].start == other.ranges[-1].end


def test_client_close_closes_its_sequences(server: Server, name: str) -> None:
    c = Client(server.url)
    c.create_sequence(name, block=10)
    seq: Sequence = c.sequence(name)
    assert seq.next() == 1
    c.close()
    assert seq.released is not None and seq.released.start == 2
    with pytest.raises(Closed):
        seq.next()


def test_a_sequence_serves_exact_values_up_to_the_i64_maximum(server: Server, name: str) -> None:
    top = 2**63 - 2
    with Client(server.url) as c:
        c.create_sequence(name, start=top - 9, max=top, block=4)
        with c.sequence(name) as seq:
            assert list(seq.next_n(9)) == list(range(top - 9, top))
            assert seq.next() == top
            with pytest.raises(Exhausted):
                seq.next()


def test_the_locked_path_of_free_threaded_builds_keeps_the_guarantees(server: Server, name: str) -> None:
    """A free-threaded build (3.13t) takes every value under the lock: the same threads,
    mixing it with next_n, get unique values that increase per thread."""
    with Client(server.url) as c:
        c.create_sequence(name, block=10)
        seq = c.sequence(name, max_block=40)

        def work(i: int) -> List[int]:
            got: List[int] = []
            for k in range(800):
                if k % 50 == 0:
                    got.extend(seq.next_n(3))
                else:
                    got.append(seq._next_locked())
            return got

        every = assert_unique_and_increasing(run_threads(6, work))
        assert len(every) == 6 * (784 + 16 * 3)
        seq.close()
