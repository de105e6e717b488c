"""The harness itself: the real 4.9.8 and mqstore, each behind its own name server, serve
the same Java producer and push group (tests/oracle/java/Group.java)."""

from __future__ import annotations

import pytest

from tests.oracle.conftest import Side
from tests.oracle.harness import Fleet


@pytest.mark.integration
@pytest.mark.parametrize("side", ["real_side", "mq_side"])
def test_java_producer_and_push_group_through_each_name_server(
    side: str, fleet: Fleet, unique: str, request: pytest.FixtureRequest
) -> None:
    s: Side = request.getfixturevalue(side)
    group = fleet.java_session("Group", s.ns, unique, f"G{unique}", "1")
    group.ask("warm", "warmed")
    assert group.ask("send 20", "sent") == [20, 0]
    group.ask("start", "started")
    group.ask("wait 20 60000", "got")
    acked, distinct, _, lost, _ = group.ask("quit", "summary")
    assert (acked, distinct, lost) == (20, 20, 0), s.label
