"""The store on the power-cut layer: what each flush mode keeps through a real cut.

Each trial runs producers in a child process against a store on the FUSE mount, cuts the
power, SIGKILLs the child and reopens the store from what survived (tools/bench/_flush_fuse).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from mqstore import FlushDiskType
from mqstore.tools.bench._flush_fuse import trial
from mqstore.tools.lazyfs import unavailable_reason

pytestmark = [
    pytest.mark.crash,
    pytest.mark.slow,
    pytest.mark.skipif(unavailable_reason() is not None, reason=f"{unavailable_reason()}"),
]


@pytest.mark.parametrize("seed", [101, 102, 103])
def test_sync_flush_loses_no_acknowledged_message_at_a_cut(tmp_path: Path, seed: int) -> None:
    r = trial(tmp_path, FlushDiskType.SYNC_FLUSH, seed)
    assert r["acked"] > 0
    assert r["acked_lost"] == 0
    assert r["problems"] == []


@pytest.mark.parametrize("seed", [201, 202])
def test_async_flush_loses_only_a_suffix_and_serves_no_corrupt_record(
    tmp_path: Path, seed: int
) -> None:
    r = trial(tmp_path, FlushDiskType.ASYNC_FLUSH, seed)
    assert r["suffix_only"]
    assert r["problems"] == []


def test_async_flush_loses_what_it_acknowledged_before_its_first_sync(tmp_path: Path) -> None:
    r = trial(tmp_path, FlushDiskType.ASYNC_FLUSH, 301, run_s=0.15)
    assert r["acked"] > 0
    assert r["acked_lost"] > 0  # a layer that never loses anything is testing nothing
    assert r["suffix_only"] and r["problems"] == []


def test_sync_flush_survives_a_cut_right_after_segment_rolls(tmp_path: Path) -> None:
    """64 KiB segments roll every ~150 messages: a cut after 1 s has crossed many rolls,
    new consume-queue and index files among them."""
    r = trial(tmp_path, FlushDiskType.SYNC_FLUSH, 401, run_s=1.0)
    assert r["acked"] > 300
    assert r["acked_lost"] == 0 and r["problems"] == []
