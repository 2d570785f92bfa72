"""Keys for ORM primary keys: a column default drawing values from a keysmith sequence.

SQLAlchemy::

    from sqlalchemy import BigInteger
    from sqlalchemy.orm import Mapped, mapped_column
    from keysmith_client.orm import KeyDefault

    order_key = KeyDefault(lambda: Client(["http://10.0.0.1:7878", "http://10.0.0.2:7878"]), "orders")

    class Order(Base):
        __tablename__ = "orders"
        id: Mapped[int] = mapped_column(BigInteger, primary_key=True, default=order_key)

Django: :class:`keysmith_client.django_field.KeysmithKeyField`.

The values come from a local block (:class:`~keysmith_client.Sequence`), so
a key costs no round trip most of the time; every process has its own block
(a forked worker leases its own: see ``_fork``), so no two processes insert
the same key. The sequence must exist (``keysmith create orders``, or
:meth:`Client.create_sequence`).
"""

from __future__ import annotations

import threading
from typing import Callable, Optional, Union

from ._sync import Client, Sequence


class KeyDefault:
    """A callable answering the next value of a sequence: a column default.

    ``client`` is a :class:`Client` or a function making one; the function is
    called on first use, so a module can define the default before any
    server is reachable. ``block``, ``min_block`` and ``max_block`` are
    :meth:`Client.sequence`'s. Safe for many threads; raises the client's
    errors (:class:`~keysmith_client.Exhausted`, ...) and inserts nothing then.
    """

    def __init__(
        self,
        client: Union[Client, Callable[[], Client]],
        sequence: str,
        *,
        block: Optional[int] = None,
        min_block: int = 1,
        max_block: int = 100_000,
    ) -> None:
        if not isinstance(sequence, str) or not sequence:
            raise ValueError(f"sequence must be a sequence name, got {sequence!r}")
        self._client = client
        self.sequence_name = sequence
        self._block = block
        self._min_block = min_block
        self._max_block = max_block
        self._lock = threading.Lock()
        self._seq: Optional[Sequence] = None

    @property
    def sequence(self) -> Sequence:
        """The Sequence the keys come from (made on first use)."""
        seq = self._seq
        if seq is None:
            with self._lock:
                if self._seq is None:
                    client = self._client if isinstance(self._client, Client) else self._client()
                    self._client = client
                    self._seq = client.sequence(
                        self.sequence_name, self._block, min_block=self._min_block, max_block=self._max_block
                    )
                seq = self._seq
        return seq

    def __call__(self) -> int:
        return self.sequence.next()

    def __repr__(self) -> str:
        return f"<KeyDefault {self.sequence_name!r}>"
