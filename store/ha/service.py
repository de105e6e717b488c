"""Which HA service a store runs, built from its :class:`~mqstore.config.StoreConfig`.

The rule ``MessageStore.open`` applies (:func:`start_for`):

* **SYNC_MASTER**: an :class:`~mqstore.ha.master.HAMaster` on ``ha_bind_host:ha_listen_port``
  (127.0.0.1:10912 by default; port 0 picks a free one), and puts with WAIT wait for a
  slave's ack (:mod:`mqstore.ha.group_transfer`). A SYNC_MASTER cannot work without its
  HA port, so a bind failure fails the open.
* **SLAVE** with ``ha_master_address``: an :class:`~mqstore.ha.slave.HASlave` replicating
  from it. A SLAVE without an address is a read-only store (nothing starts).
* **ASYNC_MASTER**: nothing, unless asked with :func:`serve`. This is the default role,
  which every tool and test opens; binding a port as a side effect of opening a
  directory would make two opens fight over 10912 and let a slave replicate from
  whichever store happened to win. ``mqstore broker`` calls :func:`serve`.

The slave's reconnect delay is RocketMQ's fixed 5 s (``ha_reconnect_interval_ms``;
tests shorten it). The handshake secret and the slaves a master accepts are
``ha_secret`` and ``ha_allowed_slaves``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from mqstore.config import BrokerRole, StoreConfig
from mqstore.errors import ConfigError
from mqstore.ha.master import HAMaster, LogSource
from mqstore.ha.slave import HASlave, LogSink
from mqstore.status import PutStatus

ReplicaWait = Callable[[int], PutStatus]
"""The put-path hook: block until a slave acked an end offset, return the status."""

RECONNECT_INTERVAL_MS = 5_000
"""How long a slave waits before reconnecting (RocketMQ ``HAClient``: 5 s)."""


class HAService(Protocol):
    """What the store holds: something to stop, and maybe a put-path wait."""

    @property
    def replica_wait(self) -> ReplicaWait | None: ...

    def stop(self, timeout: float = 5.0) -> None: ...


class ReplicatedLog(LogSource, LogSink, Protocol):
    """The CommitLog as replication uses it: a master reads it, a slave appends to it."""


def _check(cfg: StoreConfig) -> None:
    for name in (
        "ha_housekeeping_interval_ms",
        "ha_send_heartbeat_interval_ms",
        "ha_slave_fallbehind_max",
        "slave_timeout_ms",
    ):
        if getattr(cfg, name) <= 0:
            raise ConfigError(f"{name} must be positive, got {getattr(cfg, name)}")
    if not 0 <= cfg.ha_listen_port < 65536:
        raise ConfigError(f"ha_listen_port must be 0..65535, got {cfg.ha_listen_port}")


def master_for(cfg: StoreConfig, commitlog: LogSource) -> HAMaster:
    """An HAMaster (not started) configured from ``cfg``; sync when the role is SYNC_MASTER."""
    _check(cfg)
    return HAMaster(
        commitlog,
        host=cfg.ha_bind_host,
        port=cfg.ha_listen_port,
        sync=cfg.broker_role is BrokerRole.SYNC_MASTER,
        heartbeat_interval_ms=cfg.ha_send_heartbeat_interval_ms,
        housekeeping_interval_ms=cfg.ha_housekeeping_interval_ms,
        slave_timeout_ms=cfg.slave_timeout_ms,
        fallbehind_max=cfg.ha_slave_fallbehind_max,
        secret=ha_secret(cfg),
        allowed_hosts=_allowed_slaves(cfg),
    )


def ha_secret(cfg: StoreConfig) -> bytes | None:
    """``cfg.ha_secret``: the shared secret of the HA handshake
    (:mod:`mqstore.ha.handshake`), or None for RocketMQ's unauthenticated protocol."""
    return cfg.ha_secret.encode("utf-8") if cfg.ha_secret else None


def _allowed_slaves(cfg: StoreConfig) -> frozenset[str] | None:
    """``cfg.ha_allowed_slaves``: the slave IPs a master accepts, or None (any)."""
    allowed = frozenset(h.strip() for h in cfg.ha_allowed_slaves if h.strip())
    return allowed or None


def slave_for(cfg: StoreConfig, commitlog: LogSink) -> HASlave:
    """An HASlave (not started) replicating from ``cfg.ha_master_address``.

    Raises:
        ConfigError: no or a malformed master address, or a bad interval.
    """
    _check(cfg)
    if not cfg.ha_master_address:
        raise ConfigError("a replicating SLAVE needs ha_master_address (HOST:PORT)")
    try:
        return HASlave(
            commitlog,
            cfg.ha_master_address,
            heartbeat_interval_ms=cfg.ha_send_heartbeat_interval_ms,
            housekeeping_interval_ms=cfg.ha_housekeeping_interval_ms,
            reconnect_interval_ms=cfg.ha_reconnect_interval_ms,
            secret=ha_secret(cfg),
        )
    except ValueError as e:
        raise ConfigError(f"bad HA slave configuration: {e}") from e


def start_for(cfg: StoreConfig, commitlog: ReplicatedLog) -> HAService | None:
    """Start what the role asks for (module docstring); None when nothing is needed.

    Raises:
        OSError: a SYNC_MASTER could not bind its HA port.
        ConfigError: a bad HA setting.
    """
    if cfg.broker_role is BrokerRole.SYNC_MASTER:
        return master_for(cfg, commitlog).start()
    if cfg.broker_role is BrokerRole.SLAVE and cfg.ha_master_address:
        return slave_for(cfg, commitlog).start()
    return None


class ServesReplicas(Protocol):
    """An open store that can serve slaves (``MessageStore``)."""

    def serve_replicas(self) -> HAMaster: ...


def serve(store: ServesReplicas) -> HAMaster:
    """Make an open master store serve slaves: ``store.serve_replicas()`` (kept for the
    scripts that call it here; the store owns its HA service).

    Raises:
        ConfigError: the store is a SLAVE.
        OSError: the HA port could not be bound.
    """
    return store.serve_replicas()


__all__ = [
    "RECONNECT_INTERVAL_MS",
    "HAService",
    "ReplicaWait",
    "ReplicatedLog",
    "master_for",
    "serve",
    "slave_for",
    "start_for",
]
