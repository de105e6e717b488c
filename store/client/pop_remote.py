"""A SimpleConsumer transport over TCP: the broker's POP codes through remoting.

POP_MESSAGE (200050), ACK_MESSAGE (200051), CHANGE_MESSAGE_INVISIBLETIME (200053) with
RocketMQ's header fields, and BATCH_ACK_MESSAGE (200151) with mqstore's JSON body
(``mqstore.broker.pop_processors`` describes them); each
message's receipt handle is built from the POP response header as RocketMQ's client
does (``mqstore.pop.wire``). One broker address; thread-safe as the remoting client is.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

from mqstore.client.remoting_client import RemotingClient
from mqstore.client.simple_consumer import ReceivedMessage
from mqstore.client.wire import decode_pull_body
from mqstore.errors import InvalidReceiptHandleError
from mqstore.pop import wire as pop_wire
from mqstore.pop.receipt import ReceiptHandle
from mqstore.pop.records import POP_ORDER_REVIVE_QUEUE
from mqstore.remoting.codec import RemotingCommand
from mqstore.remoting.codes import ResponseCode
from mqstore.remoting.fastjson import dumps, loads

POP_MESSAGE = 200050
ACK_MESSAGE = 200051
CHANGE_MESSAGE_INVISIBLETIME = 200053
BATCH_ACK_MESSAGE = 200151


class PopRequestError(Exception):
    """The broker refused a POP request (code and remark in the message)."""


class RemotePop:
    """A :class:`~mqstore.client.simple_consumer.PopTransport` to one broker."""

    def __init__(self, client: RemotingClient, address: str, timeout_s: float = 5.0) -> None:
        self.client = client
        self.address = address
        self.timeout_s = timeout_s

    def _call(
        self, code: int, ext: dict[str, str], wait_ms: int = 0, body: bytes = b""
    ) -> RemotingCommand:
        req = RemotingCommand(code, ext_fields=ext, body=body)
        return self.client.invoke(self.address, req, self.timeout_s + wait_ms / 1000)

    def pop(
        self, group: str, topic: str, max_count: int, invisible_ms: int, *,
        subscription: str, fifo: bool, wait_ms: int, queue_id: int = -1,
    ) -> list[ReceivedMessage]:  # fmt: skip
        """POP_MESSAGE; ``queue_id`` -1: every queue of the topic."""
        ext = {
            "consumerGroup": group, "topic": topic, "queueId": str(queue_id),
            "maxMsgNums": str(max_count), "invisibleTime": str(invisible_ms),
            "pollTime": str(wait_ms), "bornTime": str(time.time_ns() // 1_000_000),
            "initMode": "0", "expType": "TAG",
            "exp": subscription, "order": "true" if fifo else "false",
        }  # fmt: skip
        resp = self._call(POP_MESSAGE, ext, wait_ms)
        if resp.code in (ResponseCode.POLLING_TIMEOUT, ResponseCode.PULL_NOT_FOUND):
            return []  # nothing: 5.3.3's answer, and older brokers' (mqstore's before)
        if resp.code != ResponseCode.SUCCESS:
            raise PopRequestError(f"POP_MESSAGE {topic}: code {resp.code} {resp.remark}")
        msgs = decode_pull_body(resp.body, "*")
        out = []
        for m, (handle, attempt) in zip(
            msgs, pop_wire.receipts(msgs, resp.ext_fields), strict=True
        ):
            h = ReceiptHandle.parse(handle)
            out.append(ReceivedMessage(m, topic, handle, attempt, h.deadline))
        return out

    def ack(self, group: str, topic: str, handle: str) -> bool:
        h = ReceiptHandle.parse(handle)
        ext = {"consumerGroup": group, "topic": topic, "queueId": str(h.queue_id),
               "extraInfo": handle, "offset": str(h.queue_offset)}  # fmt: skip
        resp = self._call(ACK_MESSAGE, ext)
        if resp.code == ResponseCode.INVALID_PARAMETER:
            raise InvalidReceiptHandleError(resp.remark or handle)
        return resp.code == ResponseCode.SUCCESS

    def batch_ack(self, group: str, topic: str, handles: Sequence[str]) -> list[bool]:
        """BATCH_ACK_MESSAGE: whether each handle's message was acknowledged.

        Raises:
            InvalidReceiptHandleError: the broker could not parse a handle (none acked).
            PopRequestError: the broker refused the request otherwise.
        """
        body = dumps({"consumerGroup": group, "topic": topic, "extraInfoList": list(handles)})
        resp = self._call(BATCH_ACK_MESSAGE, {}, body=body.encode())
        if resp.code == ResponseCode.INVALID_PARAMETER:
            raise InvalidReceiptHandleError(resp.remark or "a receipt handle is malformed")
        if resp.code != ResponseCode.SUCCESS:
            raise PopRequestError(f"BATCH_ACK_MESSAGE {topic}: code {resp.code} {resp.remark}")
        return [s == "OK" for s in loads(resp.body)["statusList"]]

    def change_invisible(
        self, group: str, topic: str, handle: str, invisible_ms: int
    ) -> str | None:
        h = ReceiptHandle.parse(handle)
        ext = {"consumerGroup": group, "topic": topic, "queueId": str(h.queue_id),
               "extraInfo": handle, "offset": str(h.queue_offset),
               "invisibleTime": str(invisible_ms)}  # fmt: skip
        resp = self._call(CHANGE_MESSAGE_INVISIBLETIME, ext)
        if resp.code == ResponseCode.INVALID_PARAMETER:
            raise InvalidReceiptHandleError(resp.remark or handle)
        if resp.code != ResponseCode.SUCCESS:
            return None
        f = resp.ext_fields
        new = ReceiptHandle(h.queue_offset, int(f["popTime"]), int(f["invisibleTime"]),
                            int(f["reviveQid"]), h.retry, h.broker_name, h.queue_id,
                            h.queue_offset)  # fmt: skip
        if new.revive_qid == POP_ORDER_REVIVE_QUEUE:  # FIFO: the batch's handle, longer
            new = ReceiptHandle(h.ck_start_offset, new.pop_time, new.invisible_time, new.revive_qid,
                                h.retry, h.broker_name, h.queue_id, h.queue_offset)  # fmt: skip
        return new.encode()
