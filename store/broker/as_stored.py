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

A batch message is stored byte for byte as 4.9.8 writes it: its own string as sent,
then the batch's (``Message.stored_properties``), duplicates and all; its
``properties`` map is the merged one a reader's parse gives (appended values win).
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
    cfg: StoreConfig,
    messages: Sequence[Message],
    header_properties: str,
    *,
    batch: bool,
    sent_properties: Sequence[str] = (),
) -> list[Message]:
    """``messages`` (built from one send) as a broker of ``cfg``'s format stores them;
    ``sent_properties``: each message's properties string as sent (a batch's are kept
    byte for byte in 4.9's format)."""
    fmt = PropertyFormat.parse(cfg.property_format)
    if fmt is PropertyFormat.V5:
        return list(messages)
    cluster = {PROPERTY_CLUSTER: cfg.broker_cluster}
    if not batch:
        return [dataclasses.replace(m, properties={**m.properties, **cluster}) for m in messages]
    header = string_to_properties(header_properties)
    header.pop(PROPERTY_DELAY_TIME_LEVEL, None)  # 4.9.8 refuses a delayed batch; here the
    # messages' own delay levels stand
    appended = fmt.serialize({**header, **cluster})
    wait = header.get(PROPERTY_WAIT_STORE_MSG_OK)
    out = []
    for i, m in enumerate(messages):
        props = {**m.properties, **header, **cluster}
        if wait is None and not m.wait_store_msg_ok:
            props[PROPERTY_WAIT_STORE_MSG_OK] = "false"
        waits = props.get(PROPERTY_WAIT_STORE_MSG_OK, "true") != "false"
        raw = _appended(sent_properties[i], appended) if i < len(sent_properties) else None
        verbatim = raw if m.delay_level <= 0 else None  # a delayed one is re-propertied
        out.append(
            dataclasses.replace(
                m, properties=props, wait_store_msg_ok=waits, stored_properties=verbatim
            )
        )
    return out


def _appended(own: str, batch: str) -> str:
    """A batch message's stored string in 4.9.8 (``MessageExtEncoder.encode(batch)``): its
    own string, one ``\\x02`` when it does not end with one, then the batch's."""
    if own and batch and not own.endswith("\x02"):
        return own + "\x02" + batch
    return own + batch
