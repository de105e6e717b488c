"""Timer messages over remoting (docs/timer.md §1): SEND_MESSAGE with RocketMQ 5's timer
properties is delivered at its time; beyond the maximum, RocketMQ's code 13 and remark."""

from __future__ import annotations

import time

from mqstore.broker.core import BrokerCore
from mqstore.client.remoting_client import RemotingClient
from mqstore.remoting.codec import RemotingCommand
from mqstore.remoting.codes import RequestCode, ResponseCode
from mqstore.status import GetStatus
from tests.helpers import until


def send(address: str, properties: str) -> RemotingCommand:
    ext = {"producerGroup": "pg", "topic": "T", "defaultTopic": "TBW102",
           "defaultTopicQueueNums": "4", "queueId": "1", "sysFlag": "0",
           "bornTimestamp": str(int(time.time() * 1000)), "flag": "0",
           "properties": properties}  # fmt: skip
    with RemotingClient() as client:
        return client.invoke(address, RemotingCommand(RequestCode.SEND_MESSAGE, ext_fields=ext,
                                                      body=b"x"), 5)  # fmt: skip


def test_a_timer_send_is_held_then_delivered_to_its_own_topic(core: BrokerCore, address: str):
    core.topics.learn("T", 4)
    # REAL_TOPIC from the client is overwritten: the message goes to the topic it was sent to
    resp = send(address, "TIMER_DELAY_MS\x01700\x02REAL_TOPIC\x01SecretT\x02REAL_QID\x010\x02")
    assert resp.code == ResponseCode.SUCCESS, resp.remark
    store = core.store
    store.wait_dispatched(60)
    assert store.get_message("g", "T", 1, 0, 8).status is not GetStatus.FOUND
    until(lambda: store.get_message("g", "T", 1, 0, 8).status is GetStatus.FOUND, what="delivery")
    (m,) = store.get_message("g", "T", 1, 0, 8).messages
    assert m.properties["REAL_TOPIC"] == "T" and "TIMER_OUT_MS" in m.properties
    assert store.max_offset_in_queue("SecretT", 0) == 0


def test_a_timer_beyond_three_days_gets_rocketmqs_answer(core: BrokerCore, address: str):
    core.topics.learn("T", 4)
    resp = send(address, f"TIMER_DELAY_SEC\x01{3 * 86400 + 5}\x02")
    assert resp.code == ResponseCode.MESSAGE_ILLEGAL == 13
    assert resp.remark == (
        "timer message illegal, the delay time should not be bigger than the max delay "
        "259200000ms; or if set del msg, the delay time should be bigger than the current time"
    )
