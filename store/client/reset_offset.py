"""RESET_CONSUMER_CLIENT_OFFSET (220): a broker tells a group's online clients to
restart a topic's queues at new offsets (``mqadmin resetOffsetByTime``; docs/admin.md §9).

The request header names ``topic`` and ``group``; the body is a ``ResetOffsetBody``, a
fastjson ``Map<MessageQueue, Long>`` whose keys are bean objects (docs/admin.md §2), so
:func:`parse_reset_offset_body` reads that form. A transport keeps one handler per
group (:class:`ResetOffsetHandlers`); a push consumer registers itself while running.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable

from mqstore.client.allocate import MessageQueue
from mqstore.client.by_group import ByGroup
from mqstore.remoting.codec import RemotingCommand

log = logging.getLogger(__name__)

ResetHandler = Callable[[str, dict[MessageQueue, int]], None]
"""Called with the topic and its new offsets, on a transport thread."""


def parse_reset_offset_body(body: bytes) -> dict[MessageQueue, int]:
    """``{"offsetTable":{{"brokerName":..,"queueId":..,"topic":..}:<long>,...}}``.

    >>> parse_reset_offset_body(b'{"offsetTable":{{"brokerName":"b","queueId":1,'
    ...                         b'"topic":"T"}:7}}')
    {MessageQueue(topic='T', broker_name='b', queue_id=1): 7}

    Raises:
        ValueError: the body is not of that shape.
    """
    text = body.decode()
    dec = json.JSONDecoder()
    head = '{"offsetTable":{'
    if not text.startswith(head):
        raise ValueError("not a ResetOffsetBody")
    out: dict[MessageQueue, int] = {}
    pos = len(head)
    while pos < len(text) and text[pos] != "}":
        key, pos = dec.raw_decode(text, pos)
        if text[pos : pos + 1] != ":" or not isinstance(key, dict):
            raise ValueError(f"bad offsetTable entry at {pos}")
        value, pos = dec.raw_decode(text, pos + 1)
        try:
            mq = MessageQueue(str(key["topic"]), str(key["brokerName"]), int(key["queueId"]))
        except (KeyError, TypeError) as e:
            raise ValueError(f"bad MessageQueue key {key!r}") from e
        if not isinstance(value, int) or isinstance(value, bool):
            raise ValueError(f"bad offset {value!r}")
        out[mq] = value
        if text[pos : pos + 1] == ",":
            pos += 1
    if text[pos:] != "}}":
        raise ValueError("not a ResetOffsetBody")
    return out


class ResetOffsetHandlers(ByGroup[ResetHandler]):
    """The handlers of one transport, by group. Thread-safe."""

    def dispatch(self, request: RemotingCommand) -> None:
        """Run the group's handler for one request (a bad body is logged, not raised)."""
        ext = request.ext_fields
        handler = self.get(ext.get("group", ""))
        if handler is None:
            return
        try:
            offsets = parse_reset_offset_body(request.body)
        except ValueError as e:
            log.warning("ignored a reset-offset request: %s", e)
            return
        handler(ext.get("topic", ""), offsets)
