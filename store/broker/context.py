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


@dataclass(frozen=True, slots=True)
class RequestContext:
    """Who sent a request and where: the client's channel and address, our address."""

    core: BrokerCore
    channel: ClientChannel
    peer: tuple[str, int]
    broker_addr: str
    serve_name_server: bool = True


Processor = Callable[[RequestContext, RemotingCommand], RemotingCommand]
"""A request processor: the response to a request command."""

__all__ = ["Processor", "RequestContext"]
