"""What every request processor is given: the request's context, and the processor type.

A module of its own so that the processor tables of ``mqstore.broker.processors``,
``mqstore.broker.admin`` and ``mqstore.broker.pop_processors`` (the latter two imported
by the first) share one context type.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from mqstore.broker.consumers import ClientChannel
from mqstore.remoting.codec import RemotingCommand

if TYPE_CHECKING:  # the core imports the POP processors, which import this module
    from mqstore.broker.core import BrokerCore


def _readable(topic: str) -> str | None:
    return None


def _record_readable(topic: str, origin: str | None) -> str | None:
    return None


@dataclass(frozen=True, slots=True)
class RequestContext:
    """Who sent a request and where: the client's channel and address, our address."""

    core: BrokerCore
    channel: ClientChannel
    peer: tuple[str, int]
    broker_addr: str
    serve_name_server: bool = True
    read_refusal: Callable[[str, str | None], str | None] = _record_readable
    """Why the request's sender may not read a record of a topic (the first argument)
    copied from a topic (the second: its ``RETRY_TOPIC`` property, or None), or None
    when it may. With ACL the server sets it per request from the account that signed
    it (``mqstore.broker.acl.read_refusal``); processors that return or copy records
    the request does not name by topic and group (VIEW_MESSAGE_BY_ID, QUERY_MESSAGE,
    CONSUMER_SEND_MSG_BACK) ask it for each record."""
    publish_refusal: Callable[[str], str | None] = _readable
    """Why the sender may not publish to a topic, or None when it may (ACL PUB, set as
    :attr:`read_refusal` is); END_TRANSACTION asks it for the half record's real topic."""

    @property
    def checks_reads(self) -> bool:
        """Whether :attr:`read_refusal` can refuse anything (the broker runs ACL)."""
        return self.read_refusal is not _record_readable


Processor = Callable[[RequestContext, RemotingCommand], RemotingCommand]
"""A request processor: the response to a request command."""

__all__ = ["Processor", "RequestContext"]
