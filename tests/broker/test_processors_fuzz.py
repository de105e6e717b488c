"""Processors given arbitrary headers and bodies always answer, never raise."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mqstore.broker.context import RequestContext
from mqstore.broker.core import BrokerCore
from mqstore.broker.processors import NAME_SERVER_PROCESSORS, PROCESSORS, process, process_pull
from mqstore.remoting.codec import RemotingCommand
from mqstore.remoting.codes import RequestCode

FIELDS = [
    "topic", "queueId", "consumerGroup", "commitOffset", "offset", "timestamp", "key",
    "maxNum", "beginTimestamp", "endTimestamp", "group", "delayLevel", "maxReconsumeTimes",
    "clientID", "readQueueNums", "writeQueueNums", "perm", "a", "b", "e", "i", "j", "m",
    "acceptStandardJsonOnly", "boundaryType", "defaultTopicQueueNums",
]  # fmt: skip
VALUES = st.one_of(
    st.sampled_from(["0", "-1", "T", "%RETRY%g", "../x", "", "true", "99999999999999999999"]),
    st.text(max_size=12),
    st.integers(-(2**40), 2**40).map(str),
)
CODES = sorted({*PROCESSORS, *NAME_SERVER_PROCESSORS, 999})


class Channel:
    def notify_consumer_ids_changed(self, group: str) -> None:
        pass


@settings(
    max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    code=st.sampled_from(CODES),
    ext=st.one_of(
        st.dictionaries(st.sampled_from(FIELDS), VALUES, max_size=8),
        st.fixed_dictionaries({f: VALUES for f in FIELDS}),  # every field: deeper paths
    ),
    body=st.one_of(st.binary(max_size=64), st.sampled_from([b"{}", b'{"clientID":"c"}', b"[]"])),
)
def test_any_request_gets_a_response(
    core: BrokerCore, code: int, ext: dict[str, str], body: bytes
) -> None:
    ctx = RequestContext(core, Channel(), ("127.0.0.1", 1), "127.0.0.1:10911")
    cmd = RemotingCommand(code=code, opaque=5, ext_fields=ext, body=body)
    resp = process(ctx, cmd)
    assert resp.is_response and resp.opaque == 5


PULL_FIELDS = ["consumerGroup", "topic", "queueId", "queueOffset", "maxMsgNums", "sysFlag",
               "commitOffset", "suspendTimeoutMillis", "subscription", "expressionType"]  # fmt: skip


@settings(
    max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(ext=st.fixed_dictionaries({f: VALUES for f in PULL_FIELDS}))
def test_any_pull_is_answered_or_held(core: BrokerCore, ext: dict[str, str]) -> None:
    ctx = RequestContext(core, Channel(), ("127.0.0.1", 1), "127.0.0.1:10911")
    cmd = RemotingCommand(code=RequestCode.PULL_MESSAGE, opaque=9, ext_fields=ext)
    answers: list[RemotingCommand] = []
    held_before = core.hold.held_count
    process_pull(ctx, cmd, lambda resp, _records: answers.append(resp))
    held = core.hold.held_count - held_before
    assert (len(answers), held) in ((1, 0), (0, 1))
    assert all(a.is_response and a.opaque == 9 for a in answers)
