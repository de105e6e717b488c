"""The dispatcher killed (SIGKILL, a real process) inside an index put's header write,
between its fields and its count, then restarted.

The header's fields (end offset and time, slots in use, and for a file's first put its
begin) are then the put's while the count is the one before it. The restarted child
must catch the index up from the last entry the count covers, not from the header's
end offset: that one is the cut put's last message, and starting there would skip its
earlier messages, whose keys would never be found. The files must end up byte for byte
as a record-by-record dispatch leaves them (which implies every key finds each of its
messages exactly once).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from mqstore import StoreConfig
from tests.crash.test_killed_batch_dispatch import (
    assert_same_as_reference,
    copy_log,
    expected,
    log_dir,
    log_end,
    run_child,
)

__all__ = ["expected", "log_dir"]  # module fixtures, shared with the killed-batch tests

pytestmark = pytest.mark.crash

POINT = "index_header_fields_written"


@pytest.mark.parametrize("hit", [2, 3, 5])
@pytest.mark.parametrize("path", ["small-batches", "records"])
def test_child_killed_between_an_index_headers_fields_and_count_restarts_to_the_reference(
    log_dir: Path, expected: StoreConfig, tmp_path: Path, path: str, hit: int
) -> None:
    cfg = copy_log(log_dir, tmp_path)
    end = log_end(log_dir)
    assert run_child(cfg, end, point=POINT, hit=hit, restart=False, path=path)
    assert not run_child(cfg, end, restart=True, path=path)
    assert_same_as_reference(cfg, expected)


def test_child_killed_in_a_header_twice_restarts_to_the_reference(
    log_dir: Path, expected: StoreConfig, tmp_path: Path
) -> None:
    """Killed in a header, restarted, killed in its catch-up's first header (the
    repaired file's), restarted again."""
    cfg = copy_log(log_dir, tmp_path)
    end = log_end(log_dir)
    assert run_child(cfg, end, point=POINT, hit=4, restart=False, path="small-batches")
    assert run_child(cfg, end, point=POINT, hit=1, restart=True)
    assert not run_child(cfg, end, restart=True)
    assert_same_as_reference(cfg, expected)
