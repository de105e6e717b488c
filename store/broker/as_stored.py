"""What a broker of the store's property format stores for a send (docs/format.md §1.6;
``mqstore.property_format``).

With the default 5.x format the sent messages are stored as they are (the project's
broker has always done so). With ``property_format="4.9"`` the broker stores what a
RocketMQ 4.9.8 broker does (``SendMessageProcessor``, ``CommitLog.MessageExtEncoder``):

* every message gets ``CLUSTER`` = the store's ``broker_cluster``;
* a single message keeps no ``WAIT`` (4.9 removes it before serialising; the wire
  decoder has already taken it into ``wait_store_msg_ok``);
* a batch's messages get the SEND_BATCH_MESSAGE header's properties appended to
  their own, ``WAIT`` included, so where a header carries one message's keys every
  message reads them (the defect of issue 26's old producer), and a Java or the
  project's producer's header adds ``WAIT`` only.

Properties are a map here, so the appended values win as a reader's parse makes
them win; the byte order of 4.9.8's concatenation (the message's string, then the
batch's) is not kept: the store writes the merged map in HashMap(16) order.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from mqstore.config import StoreConfig
from mqstore.message import (
    PROPERTY_CLUSTER,
    PROPERTY_DELAY_TIME_LEVEL,
    PROPERTY_WAIT_STORE_MSG_OK,
    Message,
    string_to_properties,
)
from mqstore.property_format import PropertyFormat


def as_stored(
    cfg: StoreConfig, messages: Sequence[Message], header_properties: str, *, batch: bool
) -> list[Message]:
    """``messages`` (built from one send) as a broker of ``cfg``'s format stores them."""
    if PropertyFormat.parse(cfg.property_format) is PropertyFormat.V5:
        return list(messages)
    cluster = {PROPERTY_CLUSTER: cfg.broker_cluster}
    if not batch:
        return [dataclasses.replace(m, properties={**m.properties, **cluster}) for m in messages]
    header = string_to_properties(header_properties)
    header.pop(PROPERTY_DELAY_TIME_LEVEL, None)  # 4.9.8 refuses a delayed batch; here the
    # messages' own delay levels stand
    wait = header.get(PROPERTY_WAIT_STORE_MSG_OK)
    out = []
    for m in messages:
        props = {**m.properties, **header, **cluster}
        if wait is None and not m.wait_store_msg_ok:
            props[PROPERTY_WAIT_STORE_MSG_OK] = "false"
        waits = props.get(PROPERTY_WAIT_STORE_MSG_OK, "true") != "false"
        out.append(dataclasses.replace(m, properties=props, wait_store_msg_ok=waits))
    return out
