"""A push consumer that consumes by POP, with the broker assigning the queues.

RocketMQ 4.9.3+/5.x ``DefaultMQPushConsumer`` in POP mode: the client does not
rebalance; it registers (HEART_BEAT), optionally sets its group's mode to POP for the
topic (SET_MESSAGE_REQUEST_MODE), asks the broker which queues to consume
(QUERY_ASSIGNMENT, again every ``rebalance_interval``), and pops from them on worker
threads. Each message goes to the listener; ``True`` acknowledges it, ``False`` or an
exception hides it for the next retry delay (CHANGE_MESSAGE_INVISIBLETIME), after which
any consumer of the group receives it again with its attempt raised, up to the group's
maximum and then ``%DLQ%<group>``. At least once, as every POP consumer.

Use::

    consumer = PopPushConsumer("group", "orders", listener, RemotingClient(), "127.0.0.1:10911")
    consumer.start()
    ...
    consumer.shutdown()
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable, Mapping, Sequence

from mqstore.client.pop_remote import RemotePop
from mqstore.client.remoting_client import RemotingClient
from mqstore.client.simple_consumer import ReceivedMessage
from mqstore.client.wire import heartbeat_body
from mqstore.errors import InvalidReceiptHandleError
from mqstore.remoting.codec import RemotingCommand
from mqstore.remoting.codes import RequestCode, ResponseCode
from mqstore.remoting.fastjson import dumps, loads
from mqstore.remoting.values import ConsumerData, Heartbeat, SubscriptionData

log = logging.getLogger(__name__)

QUERY_ASSIGNMENT = 400
SET_MESSAGE_REQUEST_MODE = 401
Listener = Callable[[ReceivedMessage], bool]
DEFAULT_RETRY_DELAYS = (1.0, 5.0, 10.0, 30.0, 60.0)
"""Seconds a failed message stays hidden, by attempt (the last repeats)."""


class PopPushConsumer:
    """Listener-driven POP consumption of one topic (see the module docstring)."""

    def __init__(
        self,
        group: str,
        topic: str,
        listener: Listener,
        client: RemotingClient,
        address: str,
        *,
        subscription: str = "*",
        threads: int = 2,
        batch: int = 16,
        invisible_duration: float = 60.0,
        pop_share_queue_num: int | None = 0,
        rebalance_interval: float = 20.0,
        retry_delays: Sequence[float] = DEFAULT_RETRY_DELAYS,
        client_id: str | None = None,
    ) -> None:
        self.group, self.topic, self.listener = group, topic, listener
        self.client, self.address = client, address
        self.subscription = subscription
        self.threads, self.batch = threads, batch
        self.invisible_ms = int(invisible_duration * 1000)
        self.pop_share_queue_num = pop_share_queue_num
        self.rebalance_interval = rebalance_interval
        self.retry_delays = tuple(retry_delays)
        self.client_id = client_id or f"127.0.0.1@{os.getpid()}@{id(self):x}"
        self._pop = RemotePop(client, address)
        self._assigned: list[int] = []
        self._stop = threading.Event()
        self._workers: list[threading.Thread] = []
        self._count_lock = threading.Lock()
        self.consumed = 0
        """Messages the listener accepted."""

    # ------------------------------------------------------------------ control

    def start(self) -> None:
        """Register, set POP mode (unless ``pop_share_queue_num`` is None), take the
        assignment and start the workers.

        Raises:
            RuntimeError: the broker refused the registration or the mode.
        """
        self._heartbeat()
        if self.pop_share_queue_num is not None:
            body = {"topic": self.topic, "consumerGroup": self.group, "mode": "POP",
                    "popShareQueueNum": self.pop_share_queue_num}  # fmt: skip
            self._call(SET_MESSAGE_REQUEST_MODE, body)
        self.rebalance()
        self._stop.clear()
        for i in range(self.threads):
            t = threading.Thread(target=self._work, args=(i,), name=f"pop-push-{i}", daemon=True)
            t.start()
            self._workers.append(t)

    def shutdown(self) -> None:
        """Stop the workers (messages in hand are finished first) and unregister."""
        self._stop.set()
        for t in self._workers:
            t.join(30)
        self._workers.clear()
        req = RemotingCommand(
            RequestCode.UNREGISTER_CLIENT,
            ext_fields={"clientID": self.client_id, "consumerGroup": self.group},
        )
        try:
            self.client.invoke(self.address, req, 3.0)
        except Exception as e:  # the broker may be gone already: nothing to undo
            log.info("unregister %s: %s", self.client_id, e)

    @property
    def assigned(self) -> list[int]:
        """The queue ids last assigned (-1 alone: every queue)."""
        return list(self._assigned)

    def rebalance(self) -> None:
        """Ask the broker for this client's queues (QUERY_ASSIGNMENT)."""
        body = {"topic": self.topic, "consumerGroup": self.group, "clientId": self.client_id,
                "messageModel": "CLUSTERING", "strategyName": "AVG"}  # fmt: skip
        resp = self._call(QUERY_ASSIGNMENT, body)
        items = loads(resp.body).get("messageQueueAssignments") or []
        self._assigned = sorted(int(a["messageQueue"]["queueId"]) for a in items)

    # ------------------------------------------------------------------ inside

    def _call(self, code: int, body: Mapping[str, object]) -> RemotingCommand:
        req = RemotingCommand(code, body=dumps(body).encode())
        resp = self.client.invoke(self.address, req, 5.0)
        if resp.code != ResponseCode.SUCCESS:
            raise RuntimeError(f"request {code}: code {resp.code} {resp.remark}")
        return resp

    def _heartbeat(self) -> None:
        hb = Heartbeat(
            self.client_id,
            (
                ConsumerData(
                    self.group, subscriptions=(SubscriptionData(self.topic, self.subscription),)
                ),
            ),
        )
        req = RemotingCommand(RequestCode.HEART_BEAT, body=dumps(heartbeat_body(hb)).encode())
        resp = self.client.invoke(self.address, req, 5.0)
        if resp.code != ResponseCode.SUCCESS:
            raise RuntimeError(f"heartbeat: code {resp.code} {resp.remark}")

    def _work(self, index: int) -> None:
        last_rebalance = time.monotonic()
        turn = index
        while not self._stop.is_set():
            if index == 0 and time.monotonic() - last_rebalance > self.rebalance_interval:
                self._refresh()
                last_rebalance = time.monotonic()
            queues = self._assigned
            if not queues:
                self._stop.wait(0.2)
                continue
            queue_id = queues[turn % len(queues)]
            turn += 1
            try:
                got = self._pop.pop(
                    self.group, self.topic, self.batch, self.invisible_ms,
                    subscription=self.subscription, fifo=False, wait_ms=200, queue_id=queue_id,
                )  # fmt: skip
            except Exception as e:  # broker restarting, connection lost: try again
                log.warning("pop from %s failed: %s", self.address, e)
                self._stop.wait(0.5)
                continue
            for m in got:
                self._consume(m)

    def _refresh(self) -> None:
        try:
            self._heartbeat()
            self.rebalance()
        except Exception as e:
            log.warning("rebalance of %s failed: %s", self.group, e)

    def _consume(self, m: ReceivedMessage) -> None:
        try:
            ok = bool(self.listener(m))
        except Exception:
            log.exception("listener failed on %s", m.msg_id)
            ok = False
        try:
            if ok:
                if self._pop.ack(self.group, m.topic, m.receipt_handle):
                    with self._count_lock:
                        self.consumed += 1
                return
            delay = self.retry_delays[min(m.delivery_attempt, len(self.retry_delays)) - 1]
            self._pop.change_invisible(self.group, m.topic, m.receipt_handle, int(delay * 1000))
        except (InvalidReceiptHandleError, OSError) as e:
            log.warning("settling %s failed: %s", m.msg_id, e)
