"""A Django model field whose value, on insert, is the next value of a keysmith sequence.

settings.py::

    KEYSMITH = {"default": {"urls": ["http://10.0.0.1:7878", "http://10.0.0.2:7878"], "token": "..."}}

models.py::

    from keysmith_client.django_field import KeysmithKeyField

    class Order(models.Model):
        id = KeysmithKeyField(primary_key=True, sequence="orders")

A row saved without a value gets the sequence's next value (from the local
block of this process: a forked worker leases its own, see ``_fork``); a
value set by hand is kept. ``client=`` names another entry of ``KEYSMITH``
(``urls``; optional ``token``, ``ca_file``, ``cert_file``, ``key_file``,
``deadline``). Needs Django (``pip install django``).
"""

from __future__ import annotations

import threading
from typing import Any, Dict, Tuple

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.db import models

from ._sync import Client
from .orm import KeyDefault

_sources: Dict[Tuple[str, str], KeyDefault] = {}
_clients: Dict[str, Client] = {}
_lock = threading.Lock()


def _client(alias: str) -> Client:
    with _lock:
        c = _clients.get(alias)
        if c is None:
            conf = getattr(settings, "KEYSMITH", {}).get(alias)
            if not isinstance(conf, dict) or not conf.get("urls"):
                raise ImproperlyConfigured(
                    f"keysmith: settings.KEYSMITH[{alias!r}] must be a dict with 'urls' (the keysmith servers)"
                )
            opts = {k: conf[k] for k in ("token", "ca_file", "cert_file", "key_file", "deadline") if k in conf}
            c = _clients[alias] = Client(conf["urls"], **opts)
        return c


def key_source(sequence: str, client: str = "default") -> KeyDefault:
    """The per-process :class:`KeyDefault` of ``sequence`` on the servers of ``settings.KEYSMITH[client]``."""
    with _lock:
        src = _sources.get((client, sequence))
        if src is None:
            src = _sources[(client, sequence)] = KeyDefault(lambda: _client(client), sequence)
        return src


class KeysmithKeyField(models.BigIntegerField):  # type: ignore[misc]
    """A ``BigIntegerField`` filled on insert from the keysmith sequence ``sequence``."""

    description = "A 64-bit key from a keysmith sequence"

    def __init__(self, *args: Any, sequence: str, client: str = "default", **kwargs: Any) -> None:
        self.keysmith_sequence = sequence
        self.keysmith_client = client
        super().__init__(*args, **kwargs)

    def deconstruct(self) -> Any:
        name, path, args, kwargs = super().deconstruct()
        kwargs["sequence"] = self.keysmith_sequence
        if self.keysmith_client != "default":
            kwargs["client"] = self.keysmith_client
        return name, path, args, kwargs

    def pre_save(self, model_instance: Any, add: bool) -> Any:
        value = getattr(model_instance, self.attname)
        if add and value is None:
            value = key_source(self.keysmith_sequence, self.keysmith_client)()
            setattr(model_instance, self.attname, value)
        return value
