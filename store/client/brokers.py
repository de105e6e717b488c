"""The brokers a client talks to, by broker name.

RocketMQ routes by the name server; our clients are given their transports directly
(one per broker), and route a :class:`MessageQueue` to the transport whose
``broker_name`` it carries. A client given one transport that reaches every broker
of a route itself (``spans_brokers``: a RemoteTransport over a name server) sends
every queue's calls to it. Such a transport's ``broker_name`` needs the name server to
know a broker, so nothing here asks it: a client built before any broker registered
(or while none is up) works, and finds the brokers when their routes appear, as a
RocketMQ client does.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence

from mqstore.client.allocate import MessageQueue, sort_queues
from mqstore.client.transport import BrokerError, Transport, TransportError

log = logging.getLogger(__name__)


class Brokers:
    """Transports keyed by broker name. Thread-safe (immutable after construction).

    Raises:
        ValueError: no transport, or two transports for one broker name.
    """

    def __init__(self, transports: Transport | Sequence[Transport]) -> None:
        seq = [transports] if not isinstance(transports, Sequence) else list(transports)
        if not seq:
            raise ValueError("a client needs at least one transport")
        self._all = tuple(seq)
        spans = len(seq) == 1 and getattr(seq[0], "spans_brokers", False)
        self._spanning = seq[0] if spans else None
        """The one transport that reaches every broker of a route itself (a
        RemoteTransport over a name server): queues of any broker go to it."""
        self._by_name: dict[str, Transport] = {}
        if self._spanning is None:
            for t in seq:
                if t.broker_name in self._by_name:
                    raise ValueError(f"two transports for broker {t.broker_name!r}")
                self._by_name[t.broker_name] = t

    def __iter__(self) -> Iterator[Transport]:
        return iter(self._all)

    def for_queue(self, mq: MessageQueue) -> Transport:
        """The transport serving ``mq``.

        Raises:
            TransportError: ``mq`` names a broker this client has no transport for.
        """
        if self._spanning is not None:
            return self._spanning
        try:
            return self._by_name[mq.broker_name]
        except KeyError:
            raise TransportError(f"no transport for broker {mq.broker_name!r}") from None

    def topic_queues(self, topic: str) -> list[MessageQueue]:
        """The topic's queues on every reachable broker, sorted as RocketMQ sorts.

        Raises:
            TransportError: no broker answered (an unreachable broker among several
            only loses its own queues, as a stale route would).
        """
        out: list[MessageQueue] = []
        answered = False
        last: Exception | None = None
        for t in self:
            try:
                out.extend(t.topic_queues(topic))
                answered = True
            except (TransportError, BrokerError) as e:
                last = e
                log.warning("topic_queues(%s) on %s failed: %s", topic, label(t), e)
        if not answered:
            raise TransportError(f"no broker answered topic_queues({topic!r}): {last}")
        return sort_queues(out)

    def consumer_ids(self, group: str, hint: MessageQueue | None = None) -> list[str]:
        """The group's live client ids from one broker (the hint's, else the first).

        Raises:
            TransportError, BrokerError: as the broker call.
        """
        t = self.for_queue(hint) if hint is not None else next(iter(self))
        return t.consumer_ids(group)


def label(transport: Transport) -> str:
    """The transport's name for a log line, asking no broker and raising nothing: a
    spanning transport's ``broker_name`` asks the name server, which may be why the
    call being logged failed."""
    if getattr(transport, "spans_brokers", False):
        return f"the brokers of name server {getattr(transport, 'namesrv_addr', '?')}"
    return transport.broker_name
