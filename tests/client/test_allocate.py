"""Allocation strategies against hand-computed tables, plus group-wide properties.

Expected tables follow RocketMQ's Java arithmetic step by step (comments show the
working); the consistent-hash table was computed separately with a naive linear scan
over the MD5 ring, not with the code under test.
"""

from __future__ import annotations

import doctest
import random
from collections.abc import Callable, Sequence
from itertools import pairwise

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mqstore.client import allocate
from mqstore.client.allocate import (
    MessageQueue,
    NameRoomResolver,
    Strategy,
    allocate_averagely,
    allocate_averagely_by_circle,
    allocate_by_config,
    allocate_by_machine_room,
    allocate_consistent_hash,
    allocate_machine_room_nearby,
    assignment,
    java_string_key,
    md5_first4,
    sort_cids,
    sort_queues,
    strategy_by_name,
)

G = "group"


def mq(queue_id: int, broker: str = "broker-a", topic: str = "TopicTest") -> MessageQueue:
    return MessageQueue(topic, broker, queue_id)


def queues(n: int, broker: str = "broker-a") -> list[MessageQueue]:
    return [mq(q, broker) for q in range(n)]


def cids(n: int) -> list[str]:
    return [f"c{i}" for i in range(n)]


def ids(result: Sequence[MessageQueue]) -> list[int]:
    return [m.queue_id for m in result]


def shares(
    strategy: Strategy, mqs: Sequence[MessageQueue], cid_all: Sequence[str]
) -> list[list[int]]:
    return [ids(strategy(G, cid, mqs, cid_all)) for cid in cid_all]


# --- MessageQueue -------------------------------------------------------------------------


def test_md5_vector_from_the_fact_sheet() -> None:
    assert md5_first4("cid-0") == 2711717015


def test_str_is_java_to_string() -> None:
    assert str(mq(3)) == "MessageQueue [topic=TopicTest, brokerName=broker-a, queueId=3]"


def test_order_is_topic_then_broker_then_queue_id() -> None:
    expected = [
        MessageQueue("A", "b", 2),
        MessageQueue("A", "b", 10),
        MessageQueue("A", "c", 0),
        MessageQueue("B", "a", 0),
    ]
    shuffled = expected[::-1]
    assert sort_queues(shuffled) == expected
    assert sorted(shuffled) == expected
    assert expected[0] < expected[1] <= expected[2] and expected[3] > expected[2] >= expected[2]


def test_non_bmp_sorts_before_high_bmp_as_in_java() -> None:
    high_bmp, emoji = "\uffff", "\U0001f600"
    assert high_bmp < emoji  # Python: code points
    assert sort_cids([high_bmp, emoji]) == [emoji, high_bmp]  # Java: UTF-16 units
    assert MessageQueue("T", emoji, 0) < MessageQueue("T", high_bmp, 0)
    assert MessageQueue(emoji, "z", 0) < MessageQueue(high_bmp, "a", 0)


def test_queue_id_outside_java_int_is_rejected() -> None:
    with pytest.raises(ValueError, match="Java int"):
        MessageQueue("T", "b", 2**31)


def test_message_queue_is_frozen_hashable_and_slotted() -> None:
    assert {mq(1), mq(1)} == {mq(1)}
    assert not hasattr(mq(1), "__dict__")
    with pytest.raises(AttributeError):
        mq(1).queue_id = 2  # type: ignore[misc]


def utf16_units(s: str) -> list[int]:
    units: list[int] = []
    for ch in s:
        cp = ord(ch)
        if cp > 0xFFFF:
            cp -= 0x10000
            units += [0xD800 + (cp >> 10), 0xDC00 + (cp & 0x3FF)]
        else:
            units.append(cp)
    return units


def java_compare(a: str, b: str) -> int:
    """String.compareTo, literally: first differing unit, else length."""
    ua, ub = utf16_units(a), utf16_units(b)
    for x, y in zip(ua, ub, strict=False):
        if x != y:
            return x - y
    return len(ua) - len(ub)


java_text = st.text(st.characters(codec=None, exclude_categories=()), max_size=6)


@given(java_text, java_text)
def test_java_string_key_matches_string_compare_to(a: str, b: str) -> None:
    expected = java_compare(a, b)
    ka, kb = java_string_key(a), java_string_key(b)
    assert (ka < kb) == (expected < 0)
    assert (ka == kb) == (expected == 0)


# --- AVG ------------------------------------------------------------------------------------

AVG_CASES = [
    # Q, C, shares.  mod = Q % C; the first mod consumers take Q//C + 1.
    (8, 3, [[0, 1, 2], [3, 4, 5], [6, 7]]),  # mod 2: 3 from 0, 3 from 3, 2 from 2*2+2=6
    (10, 4, [[0, 1, 2], [3, 4, 5], [6, 7], [8, 9]]),  # mod 2: c2 from 2*2+2, c3 from 3*2+2
    (6, 3, [[0, 1], [2, 3], [4, 5]]),
    (4, 4, [[0], [1], [2], [3]]),
    (2, 5, [[0], [1], [], [], []]),  # Q <= C: size 1; c2 starts at 2+2=4 > Q
    (1, 1, [[0]]),
    (5, 1, [[0, 1, 2, 3, 4]]),
    (7, 2, [[0, 1, 2, 3], [4, 5, 6]]),
]


@pytest.mark.parametrize(("q", "c", "expected"), AVG_CASES)
def test_averagely_table(q: int, c: int, expected: list[list[int]]) -> None:
    assert shares(allocate_averagely, queues(q), cids(c)) == expected


def test_averagely_spans_brokers_in_sorted_order() -> None:
    mqs = sort_queues(queues(2, "broker-b") + queues(2, "broker-a"))
    result = allocate_averagely(G, "c0", mqs, cids(2))
    assert result == [mq(0, "broker-a"), mq(1, "broker-a")]


# --- AVG_BY_CIRCLE --------------------------------------------------------------------------

CIRCLE_CASES = [
    (8, 3, [[0, 3, 6], [1, 4, 7], [2, 5]]),
    (10, 4, [[0, 4, 8], [1, 5, 9], [2, 6], [3, 7]]),
    (2, 5, [[0], [1], [], [], []]),
    (3, 1, [[0, 1, 2]]),
]


@pytest.mark.parametrize(("q", "c", "expected"), CIRCLE_CASES)
def test_averagely_by_circle_table(q: int, c: int, expected: list[list[int]]) -> None:
    assert shares(allocate_averagely_by_circle, queues(q), cids(c)) == expected


# --- preconditions ---------------------------------------------------------------------------


def nearby_by_prefix(inner: Strategy) -> Strategy:
    resolver = NameRoomResolver(lambda b: b.split("-")[0], lambda c: c.split("-")[0])
    return allocate_machine_room_nearby(inner, resolver)


CHECKED: dict[str, Strategy] = {
    "AVG": allocate_averagely,
    "AVG_BY_CIRCLE": allocate_averagely_by_circle,
    "MACHINE_ROOM": allocate_by_machine_room(["broker"]),
    "NEARBY": nearby_by_prefix(allocate_averagely),
    "CONSISTENT_HASH": allocate_consistent_hash(),
}


@pytest.mark.parametrize("name", CHECKED)
def test_current_cid_not_in_group_gets_nothing(name: str) -> None:
    assert CHECKED[name](G, "stranger", queues(4), ["hz-c1", "hz-c2"]) == []


@pytest.mark.parametrize("name", CHECKED)
@pytest.mark.parametrize(
    ("cid", "mqs", "cid_all", "message"),
    [
        ("", queues(2), [""], "currentCID"),
        ("c0", [], ["c0"], "mqAll"),
        ("c0", queues(2), [], "cidAll"),
    ],
)
def test_empty_inputs_raise_like_java(
    name: str, cid: str, mqs: list[MessageQueue], cid_all: list[str], message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        CHECKED[name](G, cid, mqs, cid_all)


# --- CONFIG -------------------------------------------------------------------------------


def test_by_config_ignores_inputs_and_checks_nothing() -> None:
    configured = [mq(5), mq(1, "broker-z")]
    strategy = allocate_by_config(configured)
    assert strategy(G, "", [], []) == configured
    first = strategy(G, "c0", queues(8), cids(3))
    first.clear()
    assert strategy(G, "c0", queues(8), cids(3)) == configured


# --- MACHINE_ROOM ---------------------------------------------------------------------------


def test_machine_room_keeps_room_at_name_brokers_and_deals_the_remainder() -> None:
    mqs = sort_queues(
        [
            *queues(4, "hz@broker-a"),
            mq(0, "hz@broker-d@"),  # Java split drops the trailing empty part: kept
            mq(0, "hz@x@y"),  # three parts: dropped
            mq(0, "hz@"),  # one part: dropped
            *queues(2, "sh@broker-b"),  # room not ours
            mq(0, "broker-c"),  # no room
        ]
    )
    strategy = allocate_by_machine_room({"hz"})
    # kept (P=5) = hz@broker-a 0..3, hz@broker-d@ 0; C=2: share 2, rem 1
    c0 = strategy(G, "c0", mqs, cids(2))
    c1 = strategy(G, "c1", mqs, cids(2))
    assert c0 == [mq(0, "hz@broker-a"), mq(1, "hz@broker-a"), mq(0, "hz@broker-d@")]
    assert c1 == [mq(2, "hz@broker-a"), mq(3, "hz@broker-a")]


def test_machine_room_remainder_is_round_robin_not_blocks() -> None:
    mqs = queues(8, "room@b")
    # P=8, C=3: share 2, rem 2 -> c0: 0,1 + 6; c1: 2,3 + 7; c2: 4,5
    assert shares(allocate_by_machine_room(["room"]), mqs, cids(3)) == [
        [0, 1, 6],
        [2, 3, 7],
        [4, 5],
    ]


def test_machine_room_more_consumers_than_queues() -> None:
    assert shares(allocate_by_machine_room(["r"]), queues(2, "r@b"), cids(3)) == [[0], [1], []]


def test_machine_room_with_no_matching_room_gives_nothing() -> None:
    assert allocate_by_machine_room(["bj"])(G, "c0", queues(3, "hz@b"), cids(1)) == []


# --- MACHINE_ROOM_NEARBY ---------------------------------------------------------------------


NEARBY_MQS = sort_queues([*queues(4, "hz-b1"), *queues(4, "sh-b1"), *queues(2, "bj-b1")])
NEARBY_CIDS = sort_cids(["hz-c1", "hz-c2", "sh-c1"])


def test_nearby_own_room_first_then_rooms_without_consumers() -> None:
    strategy = nearby_by_prefix(allocate_averagely)
    got = assignment(strategy, G, NEARBY_MQS, NEARBY_CIDS)
    # hz queues split among hz consumers, sh among sh; bj (no consumer) over all three.
    assert got == {
        "hz-c1": [mq(0, "hz-b1"), mq(1, "hz-b1"), mq(0, "bj-b1")],
        "hz-c2": [mq(2, "hz-b1"), mq(3, "hz-b1"), mq(1, "bj-b1")],
        "sh-c1": queues(4, "sh-b1"),
    }


def test_nearby_orphan_rooms_in_java_string_order() -> None:
    rooms = {"broker-1": "\uffff", "broker-2": "\U0001f600", "broker-3": "aa", "broker-4": "hz"}
    resolver = NameRoomResolver(rooms.__getitem__, lambda c: "hz")
    mqs = sort_queues(mq(0, broker) for broker in rooms)
    strategy = allocate_machine_room_nearby(allocate_averagely, resolver)
    # my room hz first, then the orphan rooms in Java order: aa, emoji (D83D...), U+FFFF;
    # neither queue order nor Python's code-point order gives this
    assert strategy(G, "c", mqs, ["c"]) == [
        mq(0, "broker-4"),
        mq(0, "broker-3"),
        mq(0, "broker-2"),
        mq(0, "broker-1"),
    ]


def test_nearby_consumer_in_room_without_queues_only_shares_orphans() -> None:
    mqs = sort_queues([*queues(2, "hz-b"), *queues(3, "bj-b")])
    strategy = nearby_by_prefix(allocate_averagely_by_circle)
    got = assignment(strategy, G, mqs, ["gz-c", "hz-c"])
    # gz has no queues; hz keeps its own; bj (orphan) by circle over [gz-c, hz-c]
    assert got == {
        "gz-c": [mq(0, "bj-b"), mq(2, "bj-b")],
        "hz-c": [mq(0, "hz-b"), mq(1, "hz-b"), mq(1, "bj-b")],
    }


def test_nearby_empty_room_raises() -> None:
    strategy = allocate_machine_room_nearby(
        allocate_averagely, NameRoomResolver(lambda b: "", lambda c: "hz")
    )
    with pytest.raises(ValueError, match="Machine room is null for mq"):
        strategy(G, "c0", queues(1), ["c0"])
    strategy = allocate_machine_room_nearby(
        allocate_averagely, NameRoomResolver(lambda b: "hz", lambda c: None)
    )
    with pytest.raises(ValueError, match="Machine room is null for consumer id c0"):
        strategy(G, "c0", queues(1), ["c0"])


# --- CONSISTENT_HASH ---------------------------------------------------------------------------

CH_CIDS = ["consumer-a", "consumer-b", "consumer-c"]


def test_consistent_hash_table() -> None:
    got = assignment(allocate_consistent_hash(), G, queues(8), CH_CIDS)
    assert {cid: ids(share) for cid, share in got.items()} == {
        "consumer-a": [0],
        "consumer-b": [2, 6],
        "consumer-c": [1, 3, 4, 5, 7],
    }


def test_consistent_hash_leave_moves_only_the_leavers_queues() -> None:
    got = assignment(allocate_consistent_hash(), G, queues(8), ["consumer-a", "consumer-c"])
    assert {cid: ids(share) for cid, share in got.items()} == {
        "consumer-a": [0, 2, 6],
        "consumer-c": [1, 3, 4, 5, 7],
    }


def table_hash(table: dict[str, int], calls: list[str] | None = None) -> Callable[[str], int]:
    def hash_fn(key: str) -> int:
        if calls is not None:
            calls.append(key)
        return table[key]

    return hash_fn


def qkey(queue_id: int) -> str:
    return str(mq(queue_id))


def test_ring_takes_first_node_at_or_after_the_hash_and_wraps() -> None:
    table = {"a-0": 10, "b-0": 20} | {qkey(q): h for q, h in enumerate([5, 10, 15, 20, 25])}
    strategy = allocate_consistent_hash(1, table_hash(table))
    assert shares(strategy, queues(5), ["a", "b"]) == [[0, 1, 4], [2, 3]]


@pytest.mark.parametrize(("cid_all", "winner"), [(["a", "b"], "b"), (["b", "a"], "a")])
def test_ring_collision_later_node_overwrites(cid_all: list[str], winner: str) -> None:
    table = {"a-0": 10, "b-0": 10, qkey(0): 3}
    got = assignment(allocate_consistent_hash(1, table_hash(table)), G, queues(1), cid_all)
    assert got[winner] == [mq(0)]


def test_ring_repeated_cid_continues_replica_numbers_from_nodes_it_still_owns() -> None:
    calls: list[str] = []
    table = {"a-0": 1, "a-1": 2, "b-0": 1, "b-1": 3, "a-2": 4, qkey(0): 0}
    allocate_consistent_hash(2, table_hash(table, calls))(G, "a", queues(1), ["a", "b", "a"])
    # b-0 took a-0's slot, so a owns one node when it is added again: a-1, a-2
    assert calls[:6] == ["a-0", "a-1", "b-0", "b-1", "a-1", "a-2"]


def test_zero_virtual_nodes_owns_nothing_and_negative_is_rejected() -> None:
    assert allocate_consistent_hash(0)(G, "c0", queues(3), ["c0"]) == []
    with pytest.raises(ValueError, match="virtualNodeCnt"):
        allocate_consistent_hash(-1)


# --- registry ---------------------------------------------------------------------------------


def test_registry_by_rocketmq_names() -> None:
    assert strategy_by_name("AVG") is allocate_averagely
    assert strategy_by_name("AVG_BY_CIRCLE") is allocate_averagely_by_circle
    assert strategy_by_name("CONFIG", queues=[mq(7)])(G, "x", [], []) == [mq(7)]
    assert strategy_by_name("MACHINE_ROOM", consumer_idcs=["r"])(
        G, "c0", queues(2, "r@b"), ["c0"]
    ) == queues(2, "r@b")
    ch = strategy_by_name("CONSISTENT_HASH")
    assert assignment(ch, G, queues(8), CH_CIDS)["consumer-b"] == [mq(2), mq(6)]


def test_registry_builds_nearby_with_its_inner_strategy() -> None:
    resolver = NameRoomResolver(lambda b: b.split("-")[0], lambda c: c.split("-")[0])
    strategy = strategy_by_name("MACHINE_ROOM_NEARBY-AVG_BY_CIRCLE", resolver=resolver)
    mqs = sort_queues([*queues(2, "hz-b"), *queues(3, "bj-b")])
    assert strategy(G, "gz-c", mqs, ["gz-c", "hz-c"]) == [mq(0, "bj-b"), mq(2, "bj-b")]


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("LEAST_LOADED", "unknown"),
        ("CONFIG", "queues"),
        ("MACHINE_ROOM", "IDCs"),
        ("MACHINE_ROOM_NEARBY-AVG", "resolver"),
    ],
)
def test_registry_rejects_unknown_names_and_missing_settings(name: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        strategy_by_name(name)


def test_module_doctests() -> None:
    result = doctest.testmod(allocate)
    assert result.attempted > 0 and result.failed == 0


# --- properties --------------------------------------------------------------------------------

TOPICS = ["TopicTest", "%RETRY%g", "t\U0001f600"]
BROKERS = ["broker-a", "broker-b", "hz@broker-c", "sh-broker-d", "\uffff"]

queue_lists = st.lists(
    st.builds(MessageQueue, st.sampled_from(TOPICS), st.sampled_from(BROKERS), st.integers(0, 31)),
    min_size=1,
    max_size=40,
    unique=True,
).map(sort_queues)
cid_lists = st.lists(st.text(min_size=1, max_size=8), min_size=1, max_size=8, unique=True).map(
    sort_cids
)

PARTITIONING = {
    "AVG": allocate_averagely,
    "AVG_BY_CIRCLE": allocate_averagely_by_circle,
    "CONSISTENT_HASH": allocate_consistent_hash(),
}


def assert_partition(got: dict[str, list[MessageQueue]], expected: Sequence[MessageQueue]) -> None:
    flat = [m for share in got.values() for m in share]
    assert sorted(flat) == sorted(expected)  # union is everything, nothing twice


@pytest.mark.parametrize("name", PARTITIONING)
@given(mqs=queue_lists, cid_all=cid_lists)
def test_every_queue_has_exactly_one_owner(
    name: str, mqs: list[MessageQueue], cid_all: list[str]
) -> None:
    assert_partition(assignment(PARTITIONING[name], G, mqs, cid_all), mqs)


@given(mqs=queue_lists, cid_all=cid_lists)
def test_averagely_is_contiguous_and_balanced(mqs: list[MessageQueue], cid_all: list[str]) -> None:
    got = assignment(allocate_averagely, G, mqs, cid_all)
    assert [m for cid in cid_all for m in got[cid]] == mqs
    sizes = [len(got[cid]) for cid in cid_all]
    assert max(sizes) - min(sizes) <= 1 and sizes == sorted(sizes, reverse=True)


@given(mqs=queue_lists, cid_all=cid_lists)
def test_by_circle_is_balanced(mqs: list[MessageQueue], cid_all: list[str]) -> None:
    sizes = [
        len(share) for share in assignment(allocate_averagely_by_circle, G, mqs, cid_all).values()
    ]
    assert max(sizes) - min(sizes) <= 1


@given(mqs=queue_lists, cid_all=cid_lists, data=st.data())
def test_consistent_hash_join_and_leave_move_only_that_consumers_queues(
    mqs: list[MessageQueue], cid_all: list[str], data: st.DataObject
) -> None:
    strategy = allocate_consistent_hash()

    def owners(group: list[str]) -> dict[MessageQueue, str]:
        return {m: cid for cid, share in assignment(strategy, G, mqs, group).items() for m in share}

    mover = data.draw(st.text(min_size=1, max_size=8).filter(lambda c: c not in cid_all))
    before = owners(cid_all)
    after = owners(sort_cids([*cid_all, mover]))
    assert all(after[m] in (before[m], mover) for m in mqs)  # join: only the newcomer takes
    leaver = data.draw(st.sampled_from(cid_all))
    if len(cid_all) > 1:
        after = owners([c for c in cid_all if c != leaver])
        assert all(after[m] == before[m] for m in mqs if before[m] != leaver)


ROOMS = ["hz", "sh", "bj"]


@given(
    mqs=st.lists(
        st.builds(lambda r, q: mq(q, f"{r}-b"), st.sampled_from(ROOMS), st.integers(0, 7)),
        min_size=1,
        max_size=20,
        unique=True,
    ).map(sort_queues),
    cid_all=st.lists(
        st.builds(lambda r, n: f"{r}-c{n}", st.sampled_from(ROOMS), st.integers(0, 3)),
        min_size=1,
        max_size=6,
        unique=True,
    ).map(sort_cids),
    inner=st.sampled_from(list(PARTITIONING.values())),
)
def test_nearby_partitions_all_queues(
    mqs: list[MessageQueue], cid_all: list[str], inner: Strategy
) -> None:
    got = assignment(nearby_by_prefix(inner), G, mqs, cid_all)
    assert_partition(got, mqs)
    rooms_with_consumers = {c.split("-")[0] for c in cid_all}
    for cid, share in got.items():  # a queue in a room with consumers stays in that room
        for m in share:
            room = m.broker_name.split("-")[0]
            assert room not in rooms_with_consumers or room == cid.split("-")[0]


@given(mqs=queue_lists, cid_all=cid_lists)
def test_machine_room_partitions_the_kept_queues(
    mqs: list[MessageQueue], cid_all: list[str]
) -> None:
    got = assignment(allocate_by_machine_room(["hz"]), G, mqs, cid_all)
    assert_partition(got, [m for m in mqs if m.broker_name.startswith("hz@")])


@given(st.lists(st.builds(MessageQueue, java_text, java_text, st.integers(0, 3)), max_size=8))
def test_sort_queues_is_java_order(mqs: list[MessageQueue]) -> None:
    shuffled = mqs[:]
    random.Random(0).shuffle(shuffled)
    got = sort_queues(shuffled)
    for a, b in pairwise(got):
        c = java_compare(a.topic, b.topic) or java_compare(a.broker_name, b.broker_name)
        assert c < 0 or (c == 0 and a.queue_id <= b.queue_id)
