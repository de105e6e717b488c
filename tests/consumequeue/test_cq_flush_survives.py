"""The consume-queue flusher survives a round that raises something other than OSError
(issue 17): counted, the next round runs. A failed sync still poisons the store."""

from __future__ import annotations

from pathlib import Path

import pytest

from mqstore import Message, MessageStore, StoreConfig
from tests.helpers import FailsFirst, until


def test_cq_flusher_goes_on_after_a_non_oserror_round(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    cfg = StoreConfig(
        root_dir=tmp_path, commitlog_file_size=1 << 20, flush_interval_consume_queue_ms=20
    )
    with MessageStore.open(cfg) as s:
        logics = s._life.logics
        flusher = logics.flusher
        assert flusher is not None
        flush = FailsFirst(logics.queues.flush, "a bug in one round")
        monkeypatch.setattr(logics.queues, "flush", flush)
        until(lambda: flush.calls >= 3, what="three flush rounds")
        assert flusher.running and flusher.error is None
        assert flusher.failures.counts() == {"flush": 1}
        assert s.put_message(Message(topic="t", body=b"still accepted")).status.ok
