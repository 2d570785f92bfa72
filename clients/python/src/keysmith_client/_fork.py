"""What a forked child must not inherit: its parent's worker leases, values and connections.

A process forked from one that uses a :class:`~keysmith_client.Client`
(gunicorn or uWSGI pre-fork workers, Celery's prefork pool,
``multiprocessing`` with the fork start method) gets copies of its parent's
objects. Used as they are, the child would make ids with its parent's
worker id and hand out values of its parent's local block: the same ids and
values twice. So after a fork, in the child only, every live object drops
what belongs to the parent (``os.register_at_fork``):

* a :class:`~keysmith_client.WorkerLease` forgets its parent's lease and
  takes a worker id of its own on first use in the child;
* a :class:`~keysmith_client.Sequence` drops its parent's local block (those
  values stay the parent's) and leases its own;
* a :class:`~keysmith_client.Client` opens connections of its own (the
  parent's sockets stay the parent's) and makes new locks (a lock another
  thread held at the fork would never be released in the child).

Nothing is sent to a server on the child's behalf until it uses the object.
"""

from __future__ import annotations

import os
import threading
import weakref
from typing import Any, Protocol


class _Forkable(Protocol):
    def _after_fork_in_child(self) -> None: ...


_live: "weakref.WeakSet[Any]" = weakref.WeakSet()
_guard = threading.Lock()


def track(obj: _Forkable) -> None:
    """Resets ``obj`` in every child forked from now on (while it lives)."""
    with _guard:
        _live.add(obj)


def _after_fork_in_child() -> None:
    global _guard
    _guard = threading.Lock()
    # clients first: the leases and sequences of the child send through them
    objs = sorted(list(_live), key=lambda o: 0 if hasattr(o, "_servers") else 1)
    for obj in objs:
        obj._after_fork_in_child()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)
