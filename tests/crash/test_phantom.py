"""A power loss that drops a long run of unsynced pages and keeps the pages after it.

Background writeback (or a volatile disk cache) can leave megabytes of zeros where
the newest records were, with older-written pages of the same life intact after
them. Recovery cuts at the zeros; unless everything past the cut is invalidated, a
later life that writes up to those old records and crashes makes them line up after
its own, and a recovery then serves them as current (a phantom).
"""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from mqstore import Message, MessageStore
from tests.crash.lined_up import fixed_message, unsynced_store
from tests.helpers import check_consistency, reopen
from tests.powerloss import PAGE, DiskModel, power_loss

pytestmark = pytest.mark.crash

FILE_SIZE = 4 << 20
"""Above 1 MiB, so a hole longer than any fixed zero-run limit fits in one segment."""
RECORD = 1024
HOLE = 3 << 19
"""1.5 MiB of dropped pages at the start of the segment."""


def _fixed(life: int, i: int) -> Message:
    """A message whose record is exactly RECORD bytes, so lives line up record by record."""
    return fixed_message(f"life{life} {i:05d} ", f"k{i:05d}", RECORD)


def _async_store(tmp_path: Path) -> MessageStore:
    return unsynced_store(tmp_path, FILE_SIZE)


def _bodies(store: MessageStore) -> list[bytes]:
    out: list[bytes] = []
    offset = 0
    while True:
        r = store.get_message("g", "orders", 0, offset, 512)
        if not r.messages:
            return out
        out += [m.body for m in r.messages]
        offset = r.next_begin_offset


def test_a_multi_mib_hole_never_brings_an_old_life_back(tmp_path: Path):
    s = _async_store(tmp_path)
    n1 = (HOLE + (1 << 20)) // RECORD  # the hole, then 1 MiB of life-1 records kept
    model = DiskModel(s.root)
    with model.installed():
        rs = [s.put_message(_fixed(1, i)) for i in range(n1)]
        assert {r.size for r in rs} == {RECORD}
        image = s.abandon()
    first_page_kept = HOLE // PAGE
    power_loss(
        image,
        random.Random(0),
        model,
        decide=lambda p, page: (
            "kept" if p.endswith("0" * 20) and page >= first_page_kept else "dropped"
        ),
    )

    s = reopen(s.cfg)
    assert s.max_physical_offset == 0  # the log starts with the hole: nothing survives
    n2 = HOLE // RECORD  # life 2 writes exactly up to the old records
    rs2 = [s.put_message(_fixed(2, i)) for i in range(n2)]
    assert rs2[-1].physical_offset + RECORD == HOLE
    s.abandon()  # an ordinary crash: the page cache survives

    s = reopen(s.cfg)
    try:
        assert s.max_physical_offset == HOLE
        bodies = _bodies(s)
        assert len(bodies) == n2
        assert not [b for b in bodies if b.startswith(b"life1")]
        assert check_consistency(s.root, FILE_SIZE, end=s.max_physical_offset) == []
    finally:
        s.close()
