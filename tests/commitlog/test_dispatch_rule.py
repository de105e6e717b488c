"""The dispatch rule (mqstore.commitlog.dispatch_rule): what it decides, and that its
record-at-a-time functions and numpy twins agree."""

from __future__ import annotations

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from mqstore.commitlog import dispatch_rule as rule
from mqstore.commitlog import format as fmt
from mqstore.message import properties_to_string, string_to_properties, tags_code
from mqstore.schedule import DelayLevels
from mqstore.system_topics import SCHEDULE_TOPIC

LEVELS = DelayLevels.parse("1s 5s 10s 30s 1m 2m 3m 4m 5m 6m 7m 8m 9m 10m 20m 30m 1h 2h")
TYPES = {
    "NOT": fmt.TRANSACTION_NOT_TYPE,
    "PREPARED": fmt.TRANSACTION_PREPARED_TYPE,
    "COMMIT": fmt.TRANSACTION_COMMIT_TYPE,
    "ROLLBACK": fmt.TRANSACTION_ROLLBACK_TYPE,
}
sys_flags = st.integers(min_value=-(2**31), max_value=2**31 - 1)


def test_only_not_and_commit_records_get_a_unit_and_a_queue_offset() -> None:
    got = {name: rule.gets_unit(flag) for name, flag in TYPES.items()}
    assert got == {"NOT": True, "PREPARED": False, "COMMIT": True, "ROLLBACK": False}
    assert rule.takes_queue_offset is rule.gets_unit


def test_every_record_but_a_rollback_has_its_keys_indexed() -> None:
    got = {name: rule.gets_keys(flag) for name, flag in TYPES.items()}
    assert got == {"NOT": True, "PREPARED": True, "COMMIT": True, "ROLLBACK": False}


@given(st.lists(sys_flags, max_size=50))
def test_the_numpy_twins_agree_with_the_scalar_rule(flags: list[int]) -> None:
    arr = np.array(flags, dtype=np.int64)
    assert rule.units_mask(arr).tolist() == [rule.gets_unit(f) for f in flags]
    assert rule.keys_mask(arr).tolist() == [rule.gets_keys(f) for f in flags]


def test_a_delayed_record_is_coded_with_its_deliver_time() -> None:
    props = {"DELAY": "3", "TAGS": "TagA"}
    assert rule.tags_code_of(SCHEDULE_TOPIC, props, 1_000, LEVELS) == 1_000 + 10_000


def test_a_delay_property_outside_the_schedule_topic_keeps_the_tags_hash() -> None:
    props = {"DELAY": "3", "TAGS": "TagA"}
    assert rule.tags_code_of("T", props, 1_000, LEVELS) == tags_code("TagA")


def test_a_schedule_record_without_a_usable_level_keeps_the_tags_hash() -> None:
    for level in (None, "x", "0"):
        props = {"TAGS": "TagA"} | ({"DELAY": level} if level is not None else {})
        assert rule.tags_code_of(SCHEDULE_TOPIC, props, 1_000, LEVELS) == tags_code("TagA")


@given(
    st.sampled_from(["T", SCHEDULE_TOPIC]),
    st.dictionaries(
        st.sampled_from(["TAGS", "DELAY", "KEYS", "a"]),
        st.one_of(st.sampled_from(["1", "18", "99", "-2", "TagA"]), st.text("abc ", max_size=4)),
    ),
    st.integers(min_value=0, max_value=2**40),
)
def test_the_properties_string_path_gives_the_dict_paths_code(
    topic: str, props: dict[str, str], store_ts: int
) -> None:
    text = properties_to_string(props)
    parsed = string_to_properties(text)
    assert rule.unit_tags_code(topic, text, store_ts, LEVELS) == rule.tags_code_of(
        topic, parsed, store_ts, LEVELS
    )


def test_bulk_delayed_selection_marks_only_schedule_records() -> None:
    topics = ("T", SCHEDULE_TOPIC)
    ids = np.array([0, 1, 1, 0])
    assert rule.needs_delayed_code(ids, topics).tolist() == [False, True, True, False]
    assert rule.needs_delayed_code(ids, ("T", "U")).tolist() == [False] * 4
