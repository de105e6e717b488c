"""BrokerCore.pull: response codes, offsets, long polling."""

from __future__ import annotations

import functools
import threading
import time
from collections.abc import Iterator

import pytest

from mqstore.broker.core import BrokerConfig, BrokerCore
from mqstore.broker.hold import PullHoldService
from mqstore.broker.pulls import PullOutcome, PullRequest, response_code
from mqstore.broker.topics import TopicConfig
from mqstore.message import Message
from mqstore.message_store import MessageStore
from mqstore.remoting.codes import ResponseCode
from mqstore.status import GetStatus
from tests.broker.core_helpers import pull, put, query


@pytest.mark.parametrize(
    ("status", "offset", "code"),
    [
        (GetStatus.FOUND, 0, ResponseCode.SUCCESS),
        (GetStatus.MESSAGE_WAS_REMOVING, 3, ResponseCode.PULL_RETRY_IMMEDIATELY),
        (GetStatus.NO_MATCHED_MESSAGE, 3, ResponseCode.PULL_RETRY_IMMEDIATELY),
        (GetStatus.NO_MATCHED_LOGIC_QUEUE, 0, ResponseCode.PULL_NOT_FOUND),
        (GetStatus.NO_MATCHED_LOGIC_QUEUE, 3, ResponseCode.PULL_OFFSET_MOVED),
        (GetStatus.NO_MESSAGE_IN_QUEUE, 0, ResponseCode.PULL_NOT_FOUND),
        (GetStatus.NO_MESSAGE_IN_QUEUE, 3, ResponseCode.PULL_OFFSET_MOVED),
        (GetStatus.OFFSET_FOUND_NULL, 3, ResponseCode.PULL_NOT_FOUND),
        (GetStatus.OFFSET_OVERFLOW_ONE, 3, ResponseCode.PULL_NOT_FOUND),
        (GetStatus.OFFSET_OVERFLOW_BADLY, 3, ResponseCode.PULL_OFFSET_MOVED),
        (GetStatus.OFFSET_TOO_SMALL, 3, ResponseCode.PULL_OFFSET_MOVED),
        (GetStatus.OFFSET_RESET, 3, ResponseCode.PULL_OFFSET_MOVED),
    ],
)
def test_status_maps_to_the_spec_response_code(
    status: GetStatus, offset: int, code: ResponseCode
) -> None:
    assert response_code(status, offset) is code


def test_offset_moved_becomes_retry_immediately_on_a_lenient_slave() -> None:
    code = response_code(GetStatus.OFFSET_TOO_SMALL, 3, slave_without_offset_check=True)
    assert code is ResponseCode.PULL_RETRY_IMMEDIATELY


@pytest.fixture
def topic_t(core: BrokerCore) -> None:
    """Topic ``T`` with 4 queues exists (created, nothing stored yet)."""
    core.create_topic(TopicConfig("T"))


@pytest.mark.usefixtures("topic_t")
def test_pull_of_an_empty_queue_at_zero_is_not_found(core: BrokerCore) -> None:
    out = pull(core, PullRequest(query("T", 0, 0)))
    assert (out.code, out.next_begin_offset) == (ResponseCode.PULL_NOT_FOUND, 0)


@pytest.mark.usefixtures("topic_t")
def test_pull_of_an_empty_queue_past_zero_is_offset_moved_to_zero(core: BrokerCore) -> None:
    out = pull(core, PullRequest(query("T", 0, 7)))
    assert (out.code, out.next_begin_offset) == (ResponseCode.PULL_OFFSET_MOVED, 0)


def test_pull_of_a_topic_without_config_is_topic_not_exist(core: BrokerCore) -> None:
    out = pull(core, PullRequest(query("Nowhere", 0, 0)))
    assert out.code is ResponseCode.TOPIC_NOT_EXIST
    assert out.remark == "topic[Nowhere] not exist, apply first please!"


def test_pull_of_a_topic_without_config_commits_no_offset(core: BrokerCore) -> None:
    pull(core, PullRequest(query("Nowhere", 0, 0, commit_offset=5)))
    assert core.offsets.query("g", "Nowhere", 0) is None


def test_pull_of_a_topic_put_through_the_store_after_start_registers_it(
    core: BrokerCore, store: MessageStore
) -> None:
    put(store, "Late", 1, queue_id=2)
    out = pull(core, PullRequest(query("Late", 2, 0)))
    assert out.code is ResponseCode.SUCCESS
    assert core.topic_config("Late") == TopicConfig("Late", 3, 3)


@pytest.mark.usefixtures("topic_t")
def test_pull_of_a_queue_id_past_the_read_queues_is_system_error(core: BrokerCore) -> None:
    out = pull(core, PullRequest(query("T", 4, 0), client_host="10.0.0.9"))
    assert out.code is ResponseCode.SYSTEM_ERROR
    assert out.remark == (
        "queueId[4] is illegal, topic:[T] topicConfig.readQueueNums:[4] consumer:[10.0.0.9]"
    )


@pytest.mark.usefixtures("topic_t")
def test_pull_of_a_negative_queue_id_is_system_error(core: BrokerCore) -> None:
    assert pull(core, PullRequest(query("T", -1, 0))).code is ResponseCode.SYSTEM_ERROR


def test_pull_found_returns_raw_records_and_next_offset(
    core: BrokerCore, store: MessageStore
) -> None:
    put(store, "T", 3)
    out = pull(core, PullRequest(query("T", 0, 0, max_count=2)))
    assert out.code is ResponseCode.SUCCESS
    assert (out.next_begin_offset, out.min_offset, out.max_offset) == (2, 0, 3)
    assert len(out.buffers) == 2
    assert int.from_bytes(out.buffers[0][:4], "big") == len(out.buffers[0])


def test_decoded_pull_returns_messages(core: BrokerCore, store: MessageStore) -> None:
    put(store, "T", 2)
    out = pull(core, PullRequest(query("T", 0, 0), decoded=True))
    assert [m.body for m in out.messages] == [b"m0", b"m1"]


def test_pull_at_max_offset_is_not_found(core: BrokerCore, store: MessageStore) -> None:
    put(store, "T", 2)
    out = pull(core, PullRequest(query("T", 0, 2)))
    assert (out.code, out.next_begin_offset) == (ResponseCode.PULL_NOT_FOUND, 2)


def test_pull_past_max_offset_is_moved_to_max(core: BrokerCore, store: MessageStore) -> None:
    put(store, "T", 2)
    out = pull(core, PullRequest(query("T", 0, 9)))
    assert (out.code, out.next_begin_offset) == (ResponseCode.PULL_OFFSET_MOVED, 2)


def test_pull_with_no_matching_tag_is_retry_immediately_past_the_scan(
    core: BrokerCore, store: MessageStore
) -> None:
    put(store, "T", 3, tags="A")
    out = pull(core, PullRequest(query("T", 0, 0, expression="B")))
    assert (out.code, out.next_begin_offset) == (ResponseCode.PULL_RETRY_IMMEDIATELY, 3)


def test_pull_piggy_backed_commit_offset_is_stored(core: BrokerCore, store: MessageStore) -> None:
    put(store, "T", 3)
    pull(core, PullRequest(query("T", 0, 1, commit_offset=1)))
    assert core.offsets.query("g", "T", 0) == 1


@pytest.fixture
def timerless_core(store: MessageStore) -> Iterator[BrokerCore]:
    """A core whose periodic re-check of held pulls is 120 s away: within a test, only a
    put's wake-up or a hold's own deadline can answer a held pull."""
    c = BrokerCore(store, BrokerConfig(hold_check_interval_ms=120_000))
    c.start()
    c.create_topic(TopicConfig("T"))
    yield c
    c.shutdown()


def test_held_pull_is_answered_by_a_put_not_by_a_timer(
    timerless_core: BrokerCore, store: MessageStore
) -> None:
    done = threading.Event()
    box: list[tuple[float, PullOutcome]] = []

    def on_done(o: PullOutcome) -> None:
        box.append((time.perf_counter(), o))
        done.set()

    timerless_core.pull(PullRequest(query("T", 0, 0, suspend_ms=120_000)), on_done)
    assert timerless_core.hold.held_count == 1
    t0 = time.perf_counter()
    store.put_message(Message("T", b"late", queue_id=0))
    assert done.wait(60)  # the suspend and the re-check are 120 s away
    print(f"long-poll wake latency after put: {(box[0][0] - t0) * 1000:.2f} ms")
    assert box[0][1].code is ResponseCode.SUCCESS


def test_held_pull_times_out_with_not_found_after_its_suspend_time(
    timerless_core: BrokerCore,
) -> None:
    t0 = time.monotonic()
    out = pull(timerless_core, PullRequest(query("T", 0, 0, suspend_ms=200)), timeout=60)
    elapsed = time.monotonic() - t0
    assert out.code is ResponseCode.PULL_NOT_FOUND
    assert 0.15 <= elapsed < 60  # at its own deadline: the re-check is 120 s away


def test_held_pull_ignores_a_message_with_another_tag(
    timerless_core: BrokerCore, store: MessageStore
) -> None:
    done = threading.Event()
    box: list[PullOutcome] = []

    def on_done(o: PullOutcome) -> None:
        box.append(o)
        done.set()

    query_a = query("T", 0, 0, expression="A", suspend_ms=120_000)
    timerless_core.pull(PullRequest(query_a), on_done)
    put(store, "T", 1, tags="B")
    assert not done.wait(0.5)  # nothing else can answer for 120 s
    put(store, "T", 1, tags="A")
    assert done.wait(60)
    assert box[0].code is ResponseCode.SUCCESS


@pytest.mark.usefixtures("topic_t")
def test_held_pull_is_answered_exactly_once(core: BrokerCore, store: MessageStore) -> None:
    calls: list[PullOutcome] = []
    first = threading.Event()

    def on_done(o: PullOutcome) -> None:
        calls.append(o)
        first.set()

    core.pull(PullRequest(query("T", 0, 0, suspend_ms=300)), on_done)
    put(store, "T", 3)
    assert first.wait(60)
    time.sleep(0.5)  # past the suspend time: a second answer would have come by now
    assert len(calls) == 1


def test_shutdown_answers_held_pulls(store: MessageStore) -> None:
    c = BrokerCore(store)
    c.start()
    done = threading.Event()
    c.pull(PullRequest(query("T", 0, 0, suspend_ms=60_000)), lambda o: done.set())
    c.shutdown()
    assert done.is_set()


def test_check_loop_releases_a_pull_whose_arrival_was_missed() -> None:
    newest = {("T", 0): 0}
    answered: list[PullRequest] = []
    hold = PullHoldService(lambda r, _cb: answered.append(r), lambda t, q: newest[(t, q)])
    request = PullRequest(query("T", 0, 0, suspend_ms=60_000))
    hold.hold(request, lambda _o: None, 60_000)  # no thread started, no listener
    hold.check_all()
    assert hold.held_count == 1
    newest[("T", 0)] = 1  # a message arrived, its notification lost
    hold.check_all()
    hold.stop()  # drains the wake-up pool
    assert answered == [request]


@pytest.mark.usefixtures("topic_t")
def test_many_held_pulls_over_several_queues_are_each_answered_once(
    core: BrokerCore, store: MessageStore
) -> None:
    answers: list[tuple[int, ResponseCode]] = []
    lock = threading.Lock()
    all_done = threading.Event()
    total = 20

    def on_done(qid: int, out: PullOutcome) -> None:
        with lock:
            answers.append((qid, out.code))
            if len(answers) == total:
                all_done.set()

    for i in range(total):
        qid = i % 4
        core.pull(
            PullRequest(query("T", qid, 0, suspend_ms=30_000)), functools.partial(on_done, qid)
        )
    assert core.hold.held_count == total
    for qid in range(4):
        store.put_message(Message("T", b"x", queue_id=qid))
    assert all_done.wait(60)
    assert sorted(answers) == sorted((i % 4, ResponseCode.SUCCESS) for i in range(total))
    assert core.hold.held_count == 0


def test_pull_of_an_illegal_topic_name_is_topic_not_exist(core: BrokerCore) -> None:
    out = pull(core, PullRequest(query("../x", 0, 0, commit_offset=3)))
    assert out.code is ResponseCode.TOPIC_NOT_EXIST
    assert core.offsets.query("g", "../x", 0) is None
