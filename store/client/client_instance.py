"""Client identity and broker notifications shared by the consumers of one process.

- Client ids are RocketMQ's ``ip@instanceName``. RocketMQ turns the default instance
  name into ``pid#nanoTime``; we do the same plus a process-wide counter, so several
  consumers in one process (embedded mode) are distinct group members.
- A transport has one NOTIFY_CONSUMER_IDS_CHANGED handler, but several consumers may
  share a transport: :func:`watch` installs one fan-out handler per transport and
  calls every consumer registered for the notified group.
"""

from __future__ import annotations

import itertools
import os
import socket
import threading
import time
from collections.abc import Callable

from mqstore.client.transport import Transport

_counter = itertools.count()
_lock = threading.Lock()
_watchers: dict[int, dict[int, tuple[str, Callable[[], None]]]] = {}


def local_ip() -> str:
    """This host's address as peers see it (RocketMQ ``RemotingUtil.getLocalAddress``),
    falling back to loopback on hosts without a routable interface."""
    try:
        ip = socket.gethostbyname(socket.gethostname())
    except OSError:
        return "127.0.0.1"
    return ip or "127.0.0.1"


def make_client_id(instance_name: str | None = None) -> str:
    """``ip@instanceName``; ``None`` -> ``pid#nanoTime#n``, unique in the process."""
    if instance_name is None:
        instance_name = f"{os.getpid()}#{time.monotonic_ns()}#{next(_counter)}"
    return f"{local_ip()}@{instance_name}"


def watch(transport: Transport, group: str, on_change: Callable[[], None]) -> int:
    """Call ``on_change`` when ``transport`` reports ``group``'s membership changed.

    Returns a token for :func:`unwatch`. ``on_change`` runs on a transport thread and
    must only wake a service.
    """
    key = id(transport)
    with _lock:
        token = next(_counter)
        table = _watchers.get(key)
        if table is None:
            table = _watchers[key] = {}

            def fan_out(changed_group: str) -> None:
                with _lock:
                    targets = [cb for g, cb in table.values() if g == changed_group]
                for cb in targets:
                    cb()

            transport.set_consumer_ids_changed(fan_out)
        table[token] = (group, on_change)
    return token


def unwatch(transport: Transport, token: int) -> None:
    """Stop a :func:`watch`; the last one removes the transport's handler."""
    key = id(transport)
    with _lock:
        table = _watchers.get(key)
        if table is None:
            return
        table.pop(token, None)
        if table:
            return
        del _watchers[key]
    transport.set_consumer_ids_changed(None)
