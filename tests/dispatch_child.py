"""What the tests of the dispatcher child process (``dispatch_process=True``) share.

The child runs only where :func:`mqstore.consumequeue.shared.supported` says so, and its
tests start it with ``python -c`` from the checkout, on stores whose every file rolls.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from mqstore.consumequeue import shared

REPO = Path(__file__).resolve().parents[1]
"""The checkout: the working directory of the processes these tests start."""

needs_child = pytest.mark.skipif(
    not shared.supported(), reason="the dispatcher child needs Linux on x86-64"
)
"""Skip a test (or, in ``pytestmark``, a module) where the child cannot run."""

ROLLING_SIZES: dict[str, Any] = {
    "commitlog_file_size": 64 * 1024,
    "mapped_file_size_consume_queue": 100 * 20,  # 100 units per queue file
    "max_hash_slot_num": 64,
    "max_index_num": 400,  # ~130 messages of 3 keys per index file
}
"""StoreConfig sizes under which CommitLog, consume-queue and index files all roll within
a few hundred messages (JSON-able: the tests pass them to the processes they start)."""
