"""The broker's POP state: one :class:`BrokerPop` per broker core, owned by it
(``BrokerCore.pop``, started on first use, closed by ``BrokerCore.shutdown``) and used
by the POP processors over remoting and by the gRPC service alike."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from mqstore.broker.pop_assignment import RequestModeTable
from mqstore.broker.pop_polling import PopPolling
from mqstore.pop.service import PopConfig, PopService

if TYPE_CHECKING:
    from mqstore.broker.offsets import ConsumerOffsetManager
    from mqstore.broker.subscriptions import SubscriptionGroupManager
    from mqstore.broker.topics import TopicConfigManager
    from mqstore.store_view import StoreView


class BrokerPop:
    """The broker's POP service: a :class:`PopService` over the core's store, with the
    topics' queue counts from the topic table, each group's ``retryMaxTimes`` + 1
    as its maximum of delivery attempts, and the consumer offset table as the position
    pops and pulls of a group share."""

    def __init__(
        self,
        store: StoreView,
        broker_name: str,
        topics: TopicConfigManager,
        groups: SubscriptionGroupManager,
        offsets: ConsumerOffsetManager,
    ) -> None:
        self._store, self._topics, self._groups = store, topics, groups
        self.service = PopService(
            store, PopConfig(broker_name=broker_name),
            queue_ids=self._queue_ids, max_attempts=self._max_attempts,
            shared_offsets=offsets,
        )  # fmt: skip
        self.modes = RequestModeTable(Path(store.root) / "config" / "messageRequestMode.json")
        self.service.start()
        self.polling = PopPolling()
        """The suspended POP_MESSAGE / NOTIFICATION requests (long polling)."""
        store.add_arrival_listener(self.polling.on_arrival)

    def _queue_ids(self, topic: str) -> Sequence[int]:
        tc = self._topics.get(topic)
        if tc is not None:
            return range(tc.read_queue_nums)
        return self._store.queue_ids(topic)

    def _max_attempts(self, group: str) -> int:
        g = self._groups.find(group)
        return (g.retry_max_times if g is not None else 16) + 1

    def close(self) -> None:
        """Answer the held requests, stop the revive thread and save the POP state."""
        self._store.remove_arrival_listener(self.polling.on_arrival)
        self.polling.stop()
        self.service.stop()
