"""The reput thread survives a record it cannot dispatch (issue 17): counted, skipped."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from mqstore import Message, MessageStore, StoreConfig


def test_reput_skips_a_record_whose_dispatch_raises_and_dispatches_the_next(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    cfg = StoreConfig(root_dir=tmp_path, commitlog_file_size=1 << 20)
    with MessageStore.open(cfg) as s:
        queues = s.dispatcher.queues
        real_put = queues.put

        def put(topic: str, *args: Any, **kw: Any) -> Any:
            if topic == "poison":
                raise RuntimeError("a unit this queue cannot take")
            return real_put(topic, *args, **kw)

        monkeypatch.setattr(queues, "put", put)
        for _ in range(2):
            s.put_message(Message(topic="poison", body=b"bad"))
        good = s.put_message(Message(topic="good", body=b"fine"))
        assert s.wait_dispatched(60)
        assert s.reput.reput_from >= good.physical_offset + good.size
        assert s.reput.running and s.reput.error is None
        assert s.reput.failures.counts() == {"dispatch": 2}
        assert s.max_offset_in_queue("good", 0) == 1
