"""A topic's config (RocketMQ ``TopicConfig``): the value a broker persists, hands to
the name server in its registration and clients read in routes. Pure."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final

from mqstore.remoting.fastjson import Bean
from mqstore.remoting.values import PERM_READ, PERM_RW, PERM_WRITE

MESSAGE_TYPE_ATTRIBUTE: Final = "message.type"
"""``TopicAttributes.TOPIC_MESSAGE_TYPE_ATTRIBUTE``: what a 5.x client may send to the topic."""


@dataclass(frozen=True, slots=True)
class TopicConfig:
    """One topic's config (RocketMQ ``TopicConfig``)."""

    topic_name: str
    read_queue_nums: int = 4
    write_queue_nums: int = 4
    perm: int = PERM_RW
    topic_filter_type: str = "SINGLE_TAG"
    topic_sys_flag: int = 0
    order: bool = False
    attributes: tuple[tuple[str, str], ...] = ()
    """RocketMQ 5's topic attributes (sorted pairs); only ``message.type`` is known."""

    @property
    def message_type(self) -> str:
        """The ``TopicMessageType`` (``TopicConfig.getTopicMessageType``: NORMAL when the
        attribute is absent)."""
        return dict(self.attributes).get(MESSAGE_TYPE_ATTRIBUTE, "NORMAL")

    @property
    def readable(self) -> bool:
        """PERM_READ is set."""
        return bool(self.perm & PERM_READ)

    @property
    def writeable(self) -> bool:
        """PERM_WRITE is set."""
        return bool(self.perm & PERM_WRITE)

    def to_bean(self) -> Bean:
        """The fastjson bean RocketMQ writes (alphabetical fields); ``attributes`` only
        when there are some (RocketMQ 4.9.8 has none and writes none)."""
        extra = {"attributes": dict(self.attributes)} if self.attributes else {}
        return Bean(
            **extra,
            order=self.order,
            perm=self.perm,
            readQueueNums=self.read_queue_nums,
            topicFilterType=self.topic_filter_type,
            topicName=self.topic_name,
            topicSysFlag=self.topic_sys_flag,
            writeQueueNums=self.write_queue_nums,
        )

    @classmethod
    def from_json(cls, name: str, obj: dict[str, Any]) -> TopicConfig:
        """Read one entry of ``topicConfigTable`` (missing fields take the defaults)."""
        return cls(
            topic_name=str(obj.get("topicName", name)),
            read_queue_nums=int(obj.get("readQueueNums", 4)),
            write_queue_nums=int(obj.get("writeQueueNums", 4)),
            perm=int(obj.get("perm", PERM_RW)),
            topic_filter_type=str(obj.get("topicFilterType", "SINGLE_TAG")),
            topic_sys_flag=int(obj.get("topicSysFlag", 0)),
            order=bool(obj.get("order", False)),
            attributes=tuple(
                sorted((str(k), str(v)) for k, v in dict(obj.get("attributes") or {}).items())
            ),
        )
