"""The gRPC clients an endpoint knows: consumer ids per group, from heartbeats.

A client is known from its first heartbeat (or settings) with a group until it ends
(NotifyClientTermination) or goes :data:`EXPIRE_MS` without a heartbeat; the Python
and Java clients beat every 10 s. The table only serves what the endpoint reports;
POP needs no per-client state.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

EXPIRE_MS = 120_000
"""``channelExpiredTimeout``: a client silent this long is dropped."""


class ClientTable:
    """Client ids per consumer group, with the time each was last heard of."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._lock = threading.Lock()
        self._groups: dict[str, dict[str, float]] = {}

    def seen(self, group: str, client_id: str) -> None:
        """``client_id`` of ``group`` is alive now."""
        if not group or not client_id:
            return
        with self._lock:
            self._groups.setdefault(group, {})[client_id] = self._clock()

    def gone(self, group: str, client_id: str) -> None:
        """``client_id`` left ``group``."""
        with self._lock:
            members = self._groups.get(group)
            if members is not None:
                members.pop(client_id, None)
                if not members:
                    del self._groups[group]

    def members(self, group: str) -> list[str]:
        """The live client ids of ``group``, sorted."""
        horizon = self._clock() - EXPIRE_MS / 1000
        with self._lock:
            members = self._groups.get(group, {})
            for cid in [c for c, t in members.items() if t < horizon]:
                del members[cid]
            return sorted(members)
