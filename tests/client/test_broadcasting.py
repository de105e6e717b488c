"""BROADCASTING end to end: every member of the group receives every message, and
each keeps its own progress in a LocalFileOffsetStore file it resumes from."""

from __future__ import annotations

import dataclasses
import json

import pytest

from mqstore.client.consumer import (
    ConsumeFromWhere,
    MessageModel,
)
from tests.client import consumer_harness
from tests.client.consumer_harness import FAST, Seen, broker, create_topic, produce, wait_until

pytestmark = pytest.mark.integration

CFG = dataclasses.replace(
    FAST,
    message_model=MessageModel.BROADCASTING,
    consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
)


def start(core, seen, name, offset_dir):
    cfg = dataclasses.replace(CFG, instance_name=name)  # stable id: same offsets file
    return consumer_harness.started_consumer(
        core, seen, name, cfg, group="bg", offset_dir=offset_dir
    )


def each_saw_all(seen, names, bodies):
    with seen.lock:
        return all(set(bodies) <= set(seen.by_consumer[n]) for n in names)


def test_two_broadcasting_members_each_receive_every_message(tmp_path):
    with broker(tmp_path / "broker") as core:
        qs = create_topic(core, "T", 4)
        seen = Seen()
        cs = [start(core, seen, f"b{i}", tmp_path / "offsets") for i in range(2)]
        try:
            assert wait_until(lambda: all(len(c.owned()) == 4 for c in cs), 5)
            bodies = produce(core, qs, 200)
            assert wait_until(lambda: each_saw_all(seen, ["b0", "b1"], bodies), 10)
        finally:
            for c in cs:
                c.shutdown()


def test_broadcasting_members_keep_offsets_in_their_own_files(tmp_path):
    with broker(tmp_path / "broker") as core:
        qs = create_topic(core, "T", 2)
        seen = Seen()
        cs = [start(core, seen, f"b{i}", tmp_path / "offsets") for i in range(2)]
        try:
            bodies = produce(core, qs, 10)
            assert wait_until(lambda: each_saw_all(seen, ["b0", "b1"], bodies), 10)
        finally:
            for c in cs:
                c.shutdown()
        for c in cs:
            doc = json.loads(c.offset_store.path.read_text())  # type: ignore[union-attr]
            offsets = {e["queueId"]: e["offset"] for e in doc["offsetTable"] if e["topic"] == "T"}
            assert offsets == {0: 5, 1: 5}
        assert cs[0].offset_store.path != cs[1].offset_store.path  # type: ignore[union-attr]
        # A broadcasting group keeps no offsets on the broker.
        assert core.offsets.query("bg", "T", 0) is None


def test_a_restarted_broadcasting_consumer_resumes_from_its_file(tmp_path):
    with broker(tmp_path / "broker") as core:
        qs = create_topic(core, "T", 2)
        seen = Seen()
        first = start(core, seen, "b0", tmp_path / "offsets")
        try:
            old = produce(core, qs, 10, prefix="old")
            assert seen.wait_for(lambda got: set(old) <= set(got), 45)
        finally:
            first.shutdown()
        new = produce(core, qs, 10, prefix="new")
        again = Seen()
        second = start(core, again, "b0", tmp_path / "offsets")
        try:
            assert again.wait_for(lambda got: set(new) <= set(got), 45)
            # FIRST_OFFSET would replay "old-*": the file's offsets won.
            assert not set(old) & set(again.counts())
        finally:
            second.shutdown()
