"""Admin requests the broker relays to one client of a group and answers with the
client's own answer (RocketMQ ``AdminBrokerProcessor.callConsumer``, docs/admin.md §16):

====  ===================================  ==========================================
code  request                              answer
====  ===================================  ==========================================
307   GET_CONSUMER_RUNNING_INFO            the client's ``ConsumerRunningInfo``
====  ===================================  ==========================================

Rules
-----
Rule 1. The header names ``consumerGroup`` and ``clientId``; the broker finds that
client among the group's online members and sends it the same request (same header
fields and body, a new opaque), waiting up to :data:`CALL_TIMEOUT_S` as the Java
broker's ``Broker2Client.callClient`` does. The client's answer (code, remark, header,
body) goes back to the asker as it is.

Rule 2. The Java broker's remarks for the failures: a client not online is
SYSTEM_ERROR ``The Consumer <group> <clientId> not online``; no answer in time is
CONSUME_MSG_TIMEOUT ``consumer <group> <clientId> Timeout: ...``; a connection that
closes or a client that cannot take broker requests (an in-process one) is SYSTEM_ERROR
``invoke consumer <group> <clientId> Exception: ...``.
"""

from __future__ import annotations

from typing import Final, Protocol, runtime_checkable

from mqstore.broker.context import Processor, RequestContext
from mqstore.remoting.codec import RemotingCommand
from mqstore.remoting.codes import RequestCode, ResponseCode
from mqstore.remoting.headers import ext_str

CALL_TIMEOUT_S: Final = 10.0
"""How long the broker waits for the client (``Broker2Client.callClient``: 10 s)."""


@runtime_checkable
class CallChannel(Protocol):
    """A client channel that can carry a broker request and wait for the answer."""

    def call(
        self, code: int, ext: dict[str, str], body: bytes, timeout_s: float
    ) -> RemotingCommand:
        """Send the request, return the client's answer (TimeoutError, ConnectionError)."""
        ...


def call_consumer(
    ctx: RequestContext, cmd: RemotingCommand, group: str, client_id: str
) -> RemotingCommand:
    """Rules 1 and 2 for request ``cmd`` to ``client_id`` of ``group``."""
    info = ctx.core.consumers.group_info(group)
    client = info.clients.get(client_id) if info is not None else None
    if client is None:
        remark = f"The Consumer <{group}> <{client_id}> not online"
        return cmd.make_response(ResponseCode.SYSTEM_ERROR, remark)
    channel = client.channel
    try:
        if not isinstance(channel, CallChannel):
            raise ConnectionError("the client takes no broker requests")
        answer = channel.call(cmd.code, dict(cmd.ext_fields), cmd.body or b"", CALL_TIMEOUT_S)
    except TimeoutError:
        remark = f"consumer <{group}> <{client_id}> Timeout: no answer in {CALL_TIMEOUT_S:.0f} s"
        return cmd.make_response(ResponseCode.CONSUME_MSG_TIMEOUT, remark)
    except ConnectionError as e:
        remark = f"invoke consumer <{group}> <{client_id}> Exception: {e}"
        return cmd.make_response(ResponseCode.SYSTEM_ERROR, remark)
    return cmd.make_response(answer.code, answer.remark, dict(answer.ext_fields), answer.body)


def process_running_info(ctx: RequestContext, cmd: RemotingCommand) -> RemotingCommand:
    """GET_CONSUMER_RUNNING_INFO (307): headers ``consumerGroup``, ``clientId``,
    ``jstackEnable`` (passed on)."""
    ext = cmd.ext_fields
    return call_consumer(ctx, cmd, ext_str(ext, "consumerGroup"), ext_str(ext, "clientId"))


CLIENT_CALL_PROCESSORS: dict[int, Processor] = {
    RequestCode.GET_CONSUMER_RUNNING_INFO: process_running_info,
}
"""The codes of this module (registered by ``mqstore.broker.processors``)."""
