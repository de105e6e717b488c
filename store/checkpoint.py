"""The ``checkpoint`` file (RocketMQ ``StoreCheckpoint``).

One 4096-byte page, mapped, big-endian longs; the rest of the page stays zero::

    off  field                 set by
    0    physicMsgTimestamp    the CommitLog flusher: store time of the last flushed message
    8    logicsMsgTimestamp    each ConsumeQueue write (store time of its message)
    16   indexMsgTimestamp     when an index file fills
    24   masterFlushedOffset   (5.0+) HA
    32   confirmPhyOffset      (5.1.1+)

Abnormal recovery starts from the newest CommitLog segment whose first message is
not newer than ``min_timestamp`` (= min(physic, logics) - 3000 ms), so a stale
checkpoint only costs a longer scan, never lost data.
"""

from __future__ import annotations

import mmap
import os
import struct
from pathlib import Path

from mqstore import _platform, faults

PAGE = 4096
_FIELDS = struct.Struct(">qqqqq")
MIN_TIMESTAMP_SLACK_MS = 3000


class Checkpoint:
    """The mapped checkpoint page. Fields are plain attributes; :meth:`flush` persists."""

    def __init__(self, path: Path) -> None:
        self.path = path
        existed = path.exists() and path.stat().st_size >= _FIELDS.size
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            # Allocated, not just truncated: the first write into a sparse page of a
            # mapping on a full disk is SIGBUS, not an exception.
            _platform.allocate(fd, PAGE)
        except BaseException:
            os.close(fd)
            raise
        self._fd = fd
        self._mm = mmap.mmap(fd, PAGE)
        values: tuple[int, ...] = _FIELDS.unpack_from(self._mm, 0) if existed else (0,) * 5
        self.physic_msg_timestamp: int = values[0]
        self.logics_msg_timestamp: int = values[1]
        self.index_msg_timestamp: int = values[2]
        self.master_flushed_offset: int = values[3]
        self.confirm_phy_offset: int = values[4]

    @property
    def min_timestamp(self) -> int:
        """``max(0, min(physic, logics) - 3000)`` (RocketMQ ``getMinTimestamp``)."""
        return max(
            0, min(self.physic_msg_timestamp, self.logics_msg_timestamp) - MIN_TIMESTAMP_SLACK_MS
        )

    @property
    def min_timestamp_index(self) -> int:
        """``min(min_timestamp, index)``: the index-safe variant."""
        return min(self.min_timestamp, self.index_msg_timestamp)

    def note(
        self, *, physic: int | None = None, logics: int | None = None, index: int | None = None
    ) -> None:
        """Set the store times its writers have reached (None keeps a field as it is);
        :meth:`flush` persists them. Each has one writer (the table above): ``physic``
        the CommitLog flusher, ``logics`` the consume-queue flush, ``index`` the index
        when a file fills."""
        if physic is not None:
            self.physic_msg_timestamp = physic
        if logics is not None:
            self.logics_msg_timestamp = logics
        if index is not None:
            self.index_msg_timestamp = index

    def flush(self) -> None:
        """Write the fields into the page and sync it.

        Raises:
            OSError: the sync failed.
        """
        faults.point("before_write_checkpoint")
        _FIELDS.pack_into(
            self._mm,
            0,
            self.physic_msg_timestamp,
            self.logics_msg_timestamp,
            self.index_msg_timestamp,
            self.master_flushed_offset,
            self.confirm_phy_offset,
        )
        _platform.fdatasync(self._fd, what=str(self.path))

    def close(self) -> None:
        """Unmap and close (does not flush)."""
        if self._fd >= 0:
            self._mm.close()
            os.close(self._fd)
            self._fd = -1
