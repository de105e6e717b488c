"""System topics are the broker's: a client cannot send a checkpoint or an ack into the
revive topic, and one an older broker accepted is not obeyed after a restart
(``mqstore.system_topics``; issue 39's exfiltration by a forged checkpoint)."""

from __future__ import annotations

import time

from mqstore import Message
from mqstore.broker.pop_processors import broker_pop
from mqstore.client.remoting_client import RemotingClient
from mqstore.pop.records import (
    ACK_TAG,
    CK_TAG,
    PROPERTY_START_DELIVER_TIME,
    AckMsg,
    PopCheckPoint,
    revive_topic,
)
from mqstore.remoting.codec import RemotingCommand
from mqstore.remoting.codes import RequestCode, ResponseCode
from tests.pop.conftest import Broker, put, until

SECRETS = [b"SECRET-0", b"SECRET-1", b"SECRET-2"]


def _checkpoint(broker: Broker, group: str, queue_id: int = 0, later: int = 0) -> PopCheckPoint:
    """A checkpoint of SecretT queue ``queue_id`` offsets 0-2 for ``group``, due at once
    (``later`` ms after the others: revived after them, in the same round)."""
    return PopCheckPoint(
        topic="SecretT", group=group, queue_id=queue_id, start_offset=0,
        pop_time=int(time.time() * 1000) - 120_000 + later, invisible_time=1000, diffs=(0, 1, 2),
        broker_name=broker.core.config.broker_name,
    )  # fmt: skip


def _record(broker: Broker, ck: PopCheckPoint, **kw: object) -> Message:
    topic = revive_topic(broker.store.cfg.broker_cluster)  # POP not started: replay from 0
    props = {PROPERTY_START_DELIVER_TIME: str(ck.revive_time), **kw.pop("properties", {})}  # type: ignore[dict-item]
    return Message(topic=topic, body=ck.to_json(), tags=CK_TAG, queue_id=0, properties=props,
                   **kw)  # type: ignore[arg-type]  # fmt: skip


def _copies(broker: Broker, group: str) -> int:
    """How many messages were revived into the group's POP retry topic of SecretT."""
    return broker.store.max_offset_in_queue(f"%RETRY%{group}_SecretT", 0)


def test_a_client_send_of_a_checkpoint_to_the_revive_topic_is_refused(broker: Broker) -> None:
    broker.core.topics.learn("SecretT", 1)
    ck = _checkpoint(broker, "mallory")
    topic = revive_topic(broker.store.cfg.broker_cluster)
    ext = {"producerGroup": "pg", "topic": topic, "defaultTopic": "TBW102",
           "defaultTopicQueueNums": "4", "queueId": "0", "sysFlag": "0",
           "bornTimestamp": str(int(time.time() * 1000)), "flag": "0",
           "properties": "TAGS\x01ck\x02"}  # fmt: skip
    with RemotingClient() as client:
        resp = client.invoke(broker.server.address,
                             RemotingCommand(RequestCode.SEND_MESSAGE, ext_fields=ext,
                                             body=ck.to_json()), 5)  # fmt: skip
    assert resp.code == ResponseCode.NO_PERMISSION
    assert resp.remark == f"Sending message to topic[{topic}] is forbidden."
    assert broker.store.max_offset_in_queue(topic, 0) == 0


def test_a_forged_checkpoint_an_older_broker_accepted_copies_nothing_after_restart(
    broker: Broker,
) -> None:
    broker.core.topics.learn("SecretT", 2)
    put(broker.store, "SecretT", SECRETS, queue_id=0)
    put(broker.store, "SecretT", SECRETS, queue_id=1)
    # what an older broker stored for a client's send: CLUSTER stamped, the client's port
    forged = _record(broker, _checkpoint(broker, "mallory"),
                     properties={"CLUSTER": "DefaultCluster"}, born_host=("127.0.0.1", 53211))  # fmt: skip
    # the same checkpoint as the broker writes it (born port 0, no CLUSTER): the control
    own = _record(broker, _checkpoint(broker, "control", queue_id=1, later=1000))
    for m in (forged, own):
        assert broker.store.put_message(m).status.ok
    broker.restart()
    broker_pop(broker.core)  # replays the revive topic
    until(lambda: _copies(broker, "control") == 3, what="the broker's checkpoint revived")
    # the copies are dispatched in CommitLog order: the forged one's would be in by now
    assert _copies(broker, "mallory") == 0


def test_a_forged_ack_does_not_drop_a_message_of_another_group_after_restart(
    broker: Broker,
) -> None:
    broker.core.topics.learn("SecretT", 1)
    put(broker.store, "SecretT", SECRETS)
    pop = broker_pop(broker.core).service
    got = pop.pop("victim", "SecretT", 3, 3000)
    assert [m.message.body for m in got.messages] == SECRETS
    name = broker.core.config.broker_name
    ack = AckMsg("SecretT", "victim", 0, 0, got.pop_time, name, (0, 1, 2))
    forged = Message(topic=pop.revive_topic, body=ack.to_json(), tags=ACK_TAG,
                     queue_id=got.revive_qid, properties={"CLUSTER": "DefaultCluster"},
                     born_host=("127.0.0.1", 53211))  # fmt: skip
    assert broker.store.put_message(forged).status.ok
    broker.restart()
    broker_pop(broker.core)
    until(lambda: _copies(broker, "victim") == 3, what="the victim's messages revived")
