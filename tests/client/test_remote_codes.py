"""RemoteTransport's response-code mapping, against a scripted peer that answers with
the codes a real broker rarely produces on demand (flush timeouts, refusals)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from mqstore.client.allocate import MessageQueue
from mqstore.client.remote import RemoteTransport
from mqstore.client.transport import BrokerError, PullQuery, PullStatus, SendStatus
from mqstore.message import Message
from mqstore.remoting.codec import RemotingCommand
from mqstore.remoting.codes import RequestCode, ResponseCode
from tests.client.scripted_peer import ScriptedPeer

pytestmark = pytest.mark.integration


class Broker:
    """Name server and broker in one scripted peer; ``code`` answers sends and pulls."""

    def __init__(self) -> None:
        self.code = ResponseCode.SUCCESS
        self.peer = ScriptedPeer(self.respond).start()

    def route(self) -> bytes:
        addrs = '{0:"' + self.peer.address + '"}'  # fastjson: an unquoted broker id
        return (
            '{"brokerDatas":[{"brokerAddrs":' + addrs + ',"brokerName":"b1","cluster":"c"}],'
            '"queueDatas":[{"brokerName":"b1","perm":6,"readQueueNums":2,"writeQueueNums":2}]}'
        ).encode()

    def respond(self, req: RemotingCommand) -> list[RemotingCommand]:
        if req.is_response or req.is_oneway:
            return []
        if req.code == RequestCode.GET_ROUTEINFO_BY_TOPIC:
            return [req.make_response(ResponseCode.SUCCESS, body=self.route())]
        fields = {"msgId": "ID", "queueId": 1, "queueOffset": 7, "nextBeginOffset": 3,
                  "minOffset": 0, "maxOffset": 9, "suggestWhichBrokerId": 0}  # fmt: skip
        return [req.make_response(self.code, remark="scripted", ext_fields=fields)]


@pytest.fixture
def broker() -> Iterator[Broker]:
    b = Broker()
    yield b
    b.peer.stop()


MQ = MessageQueue("T", "b1", 1)


@pytest.mark.parametrize(
    ("code", "status"),
    [
        (ResponseCode.SUCCESS, SendStatus.SEND_OK),
        (ResponseCode.FLUSH_DISK_TIMEOUT, SendStatus.FLUSH_DISK_TIMEOUT),
        (ResponseCode.FLUSH_SLAVE_TIMEOUT, SendStatus.FLUSH_SLAVE_TIMEOUT),
        (ResponseCode.SLAVE_NOT_AVAILABLE, SendStatus.SLAVE_NOT_AVAILABLE),
    ],
)
def test_send_response_code_maps_to_send_status(
    broker: Broker, code: ResponseCode, status: SendStatus
) -> None:
    broker.code = code
    with RemoteTransport(broker.peer.address) as t:
        result = t.send("pg", MQ, [Message("T", b"x")])
    assert (result.status, result.queue, result.queue_offset) == (status, MQ, 7)


def test_send_refusal_raises_broker_error_with_code_and_remark(broker: Broker) -> None:
    broker.code = ResponseCode.SERVICE_NOT_AVAILABLE
    with RemoteTransport(broker.peer.address) as t, pytest.raises(BrokerError) as err:
        t.send("pg", MQ, [Message("T", b"x")])
    assert (err.value.code, err.value.remark) == (14, "scripted")


@pytest.mark.parametrize(
    ("code", "status"),
    [
        (ResponseCode.PULL_NOT_FOUND, PullStatus.NO_NEW_MSG),
        (ResponseCode.PULL_RETRY_IMMEDIATELY, PullStatus.NO_MATCHED_MSG),
        (ResponseCode.PULL_OFFSET_MOVED, PullStatus.OFFSET_ILLEGAL),
    ],
)
def test_pull_response_code_maps_to_pull_status(
    broker: Broker, code: ResponseCode, status: PullStatus
) -> None:
    broker.code = code
    with RemoteTransport(broker.peer.address) as t:
        reply = t.pull(PullQuery("g", MQ, 3, 32))
    assert (reply.status, reply.next_begin_offset, reply.max_offset) == (status, 3, 9)


def test_pull_error_code_raises_broker_error(broker: Broker) -> None:
    broker.code = ResponseCode.SUBSCRIPTION_NOT_LATEST
    with RemoteTransport(broker.peer.address) as t, pytest.raises(BrokerError):
        t.pull(PullQuery("g", MQ, 0, 32))


def test_long_poll_request_carries_suspend_flag_and_time(broker: Broker) -> None:
    broker.code = ResponseCode.PULL_NOT_FOUND
    with RemoteTransport(broker.peer.address) as t:
        t.pull(PullQuery("g", MQ, 0, 32, "A || B", commit_offset=5, suspend_ms=1500))
    pulls = []
    while not broker.peer.received.empty():
        cmd = broker.peer.received.get_nowait()
        if cmd.code == RequestCode.PULL_MESSAGE:
            pulls.append(cmd)
    (pull,) = pulls
    ext = pull.ext_fields
    assert int(ext["sysFlag"]) == 0x1 | 0x2 | 0x4
    assert (ext["suspendTimeoutMillis"], ext["commitOffset"], ext["subscription"]) == (
        "1500",
        "5",
        "A || B",
    )
