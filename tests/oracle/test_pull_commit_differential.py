"""A pull's piggy-backed offset (``PullMessageProcessor``): the same raw PULL_MESSAGE
requests go to the real 4.9.8 broker and to ``mqstore broker``, and the group's committed
offsets (QUERY_CONSUMER_OFFSET) after each must be equal. A push consumer's pull carries
the offset it has consumed to (``sysFlag`` bit 0x1 + ``commitOffset``) once that is above
0; the broker stores it before it answers, also when it holds the pull (long polling).
Skipped without Java or the oracle."""

from __future__ import annotations

import threading
import time

import pytest

from mqstore.remoting.codes import PullSysFlag, RequestCode, ResponseCode
from tests.oracle.conftest import Side
from tests.oracle.harness import create_topic, remoting_call, send_new, wait_until

pytestmark = pytest.mark.integration

TAG_SUB = int(PullSysFlag.SUBSCRIPTION)


def _pull(addr: str, topic: str, group: str, offset: int, flag: int, commit: int,
          suspend_ms: int = 0) -> int:  # fmt: skip
    ext = {"consumerGroup": group, "topic": topic, "queueId": "0", "queueOffset": str(offset),
           "maxMsgNums": "32", "sysFlag": str(flag | TAG_SUB), "commitOffset": str(commit),
           "suspendTimeoutMillis": str(suspend_ms), "subscription": "*", "subVersion": "0",
           "expressionType": "TAG"}  # fmt: skip
    return remoting_call(addr, RequestCode.PULL_MESSAGE, ext).code


def _committed(addr: str, topic: str, group: str) -> tuple[int, int | None]:
    ext = {"consumerGroup": group, "topic": topic, "queueId": "0"}
    r = remoting_call(addr, RequestCode.QUERY_CONSUMER_OFFSET, ext)
    offset = (r.ext_fields or {}).get("offset")
    return r.code, int(offset) if offset is not None and r.code == ResponseCode.SUCCESS else None


def _scenario(addr: str, topic: str, group: str) -> list[object]:
    create_topic(addr, topic, 2)
    for _ in range(3):
        send_new(addr, topic)  # queue 0
    commit = int(PullSysFlag.COMMIT_OFFSET)
    out: list[object] = [_pull(addr, topic, group, 0, 0, 0)]  # no commit flag
    out.append(_committed(addr, topic, group)[1])
    out += [_pull(addr, topic, group, 0, commit, 2), _committed(addr, topic, group)]
    out += [_pull(addr, topic, group, 0, 0, 3), _committed(addr, topic, group)]  # flag off
    # nothing new at offset 3: the pull is held for 3 s, its offset is stored at once
    held = threading.Thread(target=_pull, args=(addr, topic, group, 3,
                                                commit | int(PullSysFlag.SUSPEND), 3, 3000))  # fmt: skip
    start = time.monotonic()
    held.start()
    wait_until(lambda: _committed(addr, topic, group)[1] == 3, 10, 0.05)
    out.append(held.is_alive() or time.monotonic() - start < 3)  # stored while held
    held.join(20)
    return out


def test_a_pulls_commit_offset_is_stored_as_the_real_broker_stores_it(
    real_side: Side, mq_side: Side, unique: str
) -> None:
    real = _scenario(real_side.brokers[0].address, unique, f"G{unique}")
    ours = _scenario(mq_side.brokers[0].address, unique, f"G{unique}")
    assert ours == real
    assert real[2:4] == [ResponseCode.SUCCESS, (ResponseCode.SUCCESS, 2)]  # the oracle's
