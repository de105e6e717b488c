"""What a broker started from the command line exposes, and its access settings.

One job: turn the broker's security flags (``--acl``, ``--ha-secret``, ``--ha-allow``)
into the objects the server and the HA master take, and name what stays open. Kept out
of ``tools/cli.py`` so the rules are testable without a process.

Rules
-----
Rule 1. The HA secret is ``--ha-secret`` when given, else the secretKey of the first
admin account of the ACL file: a master and a slave started with the same
``plain_acl.yml`` then authenticate each other without another flag.

Rule 2. A listen address that is not loopback is *exposed*. An exposed remoting port
without ACL lets anyone read any topic, move any group's offsets, change topics and lock
queues; an exposed gRPC port without ACL lets anyone send to and receive from any
topic as any group; an exposed HA port without a secret lets anyone stream the whole
CommitLog and ack SYNC_MASTER puts for data it does not hold. Each gets one warning line.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass

from mqstore.broker.acl import AccessControl


@dataclass(frozen=True, slots=True)
class BrokerAccess:
    """The access settings of one broker process."""

    acl: AccessControl | None
    ha_secret: str | None
    ha_allowed: str | None
    """Comma-separated slave IPs, or None for any."""

    @classmethod
    def from_flags(
        cls, acl_file: str | None, ha_secret: str | None, ha_allow: str | None
    ) -> BrokerAccess:
        """Rule 1.

        Raises:
            AclConfigError: the ACL file cannot be read or is invalid.
        """
        acl = AccessControl.load(acl_file) if acl_file else None
        admin = acl.admin() if acl is not None else None
        secret = ha_secret or (admin.secret_key if admin is not None else None)
        return cls(acl, secret, ha_allow or None)

    def store_settings(self) -> dict[str, str | tuple[str, ...] | None]:
        """The ``StoreConfig`` HA fields these settings give (``ha_secret``,
        ``ha_allowed_slaves``)."""
        allowed = tuple(h.strip() for h in (self.ha_allowed or "").split(",") if h.strip())
        return {"ha_secret": self.ha_secret or None, "ha_allowed_slaves": allowed}

    def warnings(
        self, host: str, ha_bind: str, serves_ha: bool, grpc_host: str | None = None
    ) -> list[str]:
        """Rule 2: one line per exposed, unprotected port (``grpc_host``: the gRPC
        endpoint's address, None when it is not served)."""
        out = []
        if self.acl is None and not is_loopback(host):
            out.append(
                f"warning: remoting on {host} without --acl: anyone who can connect may read "
                "any topic, reset any group's offsets, change topics and lock queues"
            )
        if self.acl is None and grpc_host is not None and not is_loopback(grpc_host):
            out.append(
                f"warning: gRPC on {grpc_host} without --acl: anyone who can connect may send "
                "to and receive from any topic as any group"
            )
        if serves_ha and self.ha_secret is None and not is_loopback(ha_bind):
            out.append(
                f"warning: HA port on {ha_bind} without --ha-secret: anyone who can connect "
                "may stream the whole CommitLog and ack SYNC_MASTER puts it does not hold"
            )
        return out


def is_loopback(host: str) -> bool:
    """True for addresses only this machine can reach (``localhost`` included)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False  # a name or a wildcard ("", "0.0.0.0" parses; names may resolve out)
