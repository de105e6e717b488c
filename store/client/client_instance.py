"""Client identity and broker notifications shared by the consumers of one process.

- Client ids are RocketMQ's ``ip@instanceName``. RocketMQ turns the default instance
  name into ``pid#nanoTime``; we do the same plus a process-wide counter, so several
  consumers in one process (embedded mode) are distinct group members.
- A transport has one NOTIFY_CONSUMER_IDS_CHANGED handler, but several consumers may
  share a transport: :func:`watch` adds a consumer to the transport's own
  ``group_listeners``, which calls every consumer registered for the notified group.
"""

from __future__ import annotations

import os
import secrets
import socket
import time
from collections.abc import Callable

from mqstore.client.transport import Transport


def local_ip() -> str:
    """This host's address as peers see it (RocketMQ ``RemotingUtil.getLocalAddress``),
    falling back to loopback on hosts without a routable interface."""
    try:
        ip = socket.gethostbyname(socket.gethostname())
    except OSError:
        return "127.0.0.1"
    return ip or "127.0.0.1"


def make_client_id(instance_name: str | None = None) -> str:
    """``ip@instanceName``; ``None`` -> ``pid#nanoTime#random``, unique in the process
    (the random part tells apart two consumers made in the same nanosecond tick)."""
    if instance_name is None:
        instance_name = f"{os.getpid()}#{time.monotonic_ns()}#{secrets.token_hex(4)}"
    return f"{local_ip()}@{instance_name}"


def watch(transport: Transport, group: str, on_change: Callable[[], None]) -> int:
    """Call ``on_change`` when ``transport`` reports ``group``'s membership changed.

    Returns a token for :func:`unwatch`. ``on_change`` runs on a transport thread and
    must only wake a service.
    """
    return transport.group_listeners.add(group, on_change)


def unwatch(transport: Transport, token: int) -> None:
    """Stop a :func:`watch`."""
    transport.group_listeners.remove(token)
