"""The timer's three files: ``timerlog/``, ``timerwheel`` and ``config/timercheck``.

Where and how big (RocketMQ 5.3.3: ``TimerMessageStore.getTimerLogPath`` /
``getTimerWheelPath``, ``BrokerPathConfigHelper.getTimerCheckPath``): timer-log files of
``mapped_file_size_timer_log`` (100 MiB) named by their 20-digit start offset under
``<root>/timerlog/``; one wheel file ``<root>/timerwheel`` of
:data:`~mqstore.timer.format.WHEEL_BYTES` (38,707,200 bytes); the checkpoint page
``<root>/config/timercheck`` (4 KiB). Byte layouts: :mod:`mqstore.timer.format`.

Cost: every file is sparse. The timer log reserves space ahead of its writes as a
CommitLog segment does (:class:`~mqstore.commitlog.mapped_file.MappedFile`); the wheel
allocates a 4 KiB page the first time a slot in it is written (``posix_fallocate``,
so a full disk is an ``OSError`` from the write call, never a SIGBUS through the
mapping). A wheel with a million timers due over a day holds 86,400 slots: 2.7 MB.

Single-threaded: only the timer service touches these objects.
"""

from __future__ import annotations

import mmap
import os
from pathlib import Path

from mqstore.commitlog.mapped_file import MappedFile, allocate_range, offset_to_name
from mqstore.config import OS_PAGE_SIZE
from mqstore.errors import SegmentLoadError
from mqstore.timer import format as tf

_RESERVE_CHUNK = 4 << 20


class TimerLog:
    """The timer log: 52-byte units appended across fixed-size mapped files."""

    def __init__(self, directory: Path, file_size: int) -> None:
        self.directory = directory
        self.file_size = file_size
        self.files: list[MappedFile] = []

    def load(self) -> None:
        """Map the existing files (each starts "full"; :meth:`recover_from` sets the end).

        Raises:
            SegmentLoadError: a file with a bad name or size.
        """
        if not self.directory.is_dir():
            return
        names = sorted(p.name for p in self.directory.iterdir() if not p.name.startswith("."))
        for name in names:
            if len(name) != 20 or not name.isdigit():
                raise SegmentLoadError(f"{self.directory / name}: not a timer-log file name")
            self.files.append(MappedFile(self.directory / name, self.file_size, create=False,
                                         reserve_chunk=_RESERVE_CHUNK))  # fmt: skip

    @property
    def end(self) -> int:
        """The position after the last unit written."""
        if not self.files:
            return 0
        last = self.files[-1]
        return last.file_from_offset + last.wrote_position

    def _new_file(self, offset: int) -> MappedFile:
        self.directory.mkdir(parents=True, exist_ok=True)
        mf = MappedFile(self.directory / offset_to_name(offset), self.file_size, create=True,
                        reserve_chunk=_RESERVE_CHUNK)  # fmt: skip
        self.files.append(mf)
        return mf

    def append(self, unit: bytes) -> int:
        """Append one unit; return its position (a file too full gets its blank first).

        Raises:
            OSError: no space for the unit (nothing was written).
        """
        mf = self.files[-1] if self.files else self._new_file(0)
        if mf.is_full:
            mf = self._new_file(mf.file_from_offset + self.file_size)
        if len(unit) + tf.MIN_BLANK_LEN > mf.free:
            mf.append(tf.encode_blank(mf.free))
            mf.mark_full()
            mf = self._new_file(mf.file_from_offset + self.file_size)
        return mf.file_from_offset + mf.append(unit)

    def unit_at(self, pos: int) -> tf.Unit | None:
        """The unit at ``pos`` (None past the end or where no unit is)."""
        if not self.files:
            return None
        i = (pos - self.files[0].file_from_offset) // self.file_size
        if not 0 <= i < len(self.files):
            return None
        mf = self.files[i]
        rel = pos - mf.file_from_offset
        if rel + tf.UNIT_SIZE > mf.wrote_position:
            return None
        return tf.decode_unit(mf.view, rel)

    def recover_from(self, start: int) -> list[tuple[int, tf.Unit]]:
        """Find the end of what was written from ``start`` on (a unit boundary the
        checkpoint recorded), cut any torn tail there, and return the units found
        past ``start`` with their positions (recovery re-links them into the wheel)."""
        found: list[tuple[int, tf.Unit]] = []
        if not self.files:
            return found
        first = self.files[0].file_from_offset
        start = max(start, first)
        i = min((start - first) // self.file_size, len(self.files) - 1)
        for mf in self.files[:i]:
            mf.set_positions(mf.file_size)
        pos = start - self.files[i].file_from_offset
        while i < len(self.files):
            mf = self.files[i]
            view = mf.view
            while pos + tf.UNIT_SIZE <= mf.file_size:
                u = tf.decode_unit(view, pos)
                if u is None:
                    break
                found.append((mf.file_from_offset + pos, u))
                pos += tf.UNIT_SIZE
            blank = pos + tf.MIN_BLANK_LEN <= mf.file_size and int.from_bytes(
                view[pos + 12 : pos + 16], "big", signed=True) == tf.BLANK_MAGIC  # fmt: skip
            if blank and i + 1 < len(self.files):
                mf.set_positions(mf.file_size)
                i += 1
                pos = 0
                continue
            mf.truncate_to(pos)
            mf.set_positions(pos)
            for extra in self.files[i + 1 :]:
                extra.destroy()
            del self.files[i + 1 :]
            break
        return found

    def last_due(self, mf: MappedFile) -> int:
        """The latest due time of the units of ``mf`` (a full file: it no longer changes)."""
        view = mf.view
        latest = -1
        for pos in range(0, mf.file_size - tf.UNIT_SIZE + 1, tf.UNIT_SIZE):
            u = tf.decode_unit(view, pos)
            if u is None:
                break
            latest = max(latest, u.due_ms)
        return latest

    def delete_done(self, read_ms: int, due_of: dict[str, int]) -> int:
        """Delete the full files whose every unit was due before ``read_ms`` (their slots
        are read: no chain still runs through them); ``due_of`` caches each file's latest
        due time by name. Returns how many went.

        Raises:
            OSError: a file could not be deleted.
        """
        gone = 0
        while len(self.files) > 1:
            mf = self.files[0]
            name = mf.path.name
            if name not in due_of:
                due_of[name] = self.last_due(mf)
            if due_of[name] >= read_ms:
                break
            mf.destroy()
            del self.files[0]
            del due_of[name]
            gone += 1
        return gone

    def flush(self) -> None:
        """``fdatasync`` what was written.

        Raises:
            OSError: the sync failed.
        """
        for mf in self.files[-2:]:
            mf.flush()

    def close(self) -> None:
        """Unmap every file."""
        for mf in self.files:
            mf.close()
        self.files = []


class TimerWheel:
    """The wheel file, mapped; slots are read and written in place."""

    def __init__(self, path: Path, precision_ms: int) -> None:
        """Open (or create, sparse) the wheel.

        Raises:
            SegmentLoadError: an existing file has the wrong size.
            OSError: the file cannot be created or mapped.
        """
        self.path = path
        self.precision_ms = precision_ms
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            size = os.fstat(fd).st_size
            if size not in (0, tf.WHEEL_BYTES):
                raise SegmentLoadError(f"{path}: size {size} != {tf.WHEEL_BYTES}")
            if size == 0:
                os.ftruncate(fd, tf.WHEEL_BYTES)
            self._mm = mmap.mmap(fd, tf.WHEEL_BYTES)
        except BaseException:
            os.close(fd)
            raise
        self._fd = fd
        self._reserved: set[int] = set()

    def get(self, time_ms: int) -> tf.Slot:
        """The slot of ``time_ms`` (``EMPTY_SLOT`` when it holds another round's)."""
        at = tf.slot_index(time_ms, self.precision_ms) * tf.SLOT_SIZE
        return tf.decode_slot(self._mm, at, time_ms, self.precision_ms)

    def put(self, slot: tf.Slot) -> None:
        """Write ``slot`` at its time's index.

        Raises:
            OSError: no space for the page the slot is in (nothing was written).
        """
        at = tf.slot_index(slot.time_ms, self.precision_ms) * tf.SLOT_SIZE
        page = at // OS_PAGE_SIZE
        if page not in self._reserved:
            allocate_range(self._fd, page * OS_PAGE_SIZE, OS_PAGE_SIZE, what=str(self.path))
            self._reserved.add(page)
        self._mm[at : at + tf.SLOT_SIZE] = tf.encode_slot(slot, self.precision_ms)

    def flush(self) -> None:
        """``msync`` the mapping.

        Raises:
            OSError: the sync failed.
        """
        self._mm.flush()

    def close(self) -> None:
        """Unmap and close."""
        self._mm.close()
        os.close(self._fd)


class CheckpointFile:
    """``config/timercheck``: one page, the fields of :class:`~mqstore.timer.format.Checkpoint`."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def read(self) -> tf.Checkpoint | None:
        """The stored checkpoint, None when there is none (or it is too short)."""
        try:
            raw = self.path.read_bytes()
        except FileNotFoundError:
            return None
        if len(raw) < 72:
            raw = raw + bytes(72 - len(raw)) if len(raw) >= 56 else b""
        return tf.decode_checkpoint(raw) if raw else None

    def write(self, cp: tf.Checkpoint, *, sync: bool) -> None:
        """Write the checkpoint in place (the page keeps its size).

        Raises:
            OSError: the write or the sync failed.
        """
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            if os.fstat(fd).st_size < tf.CHECKPOINT_BYTES:
                os.ftruncate(fd, tf.CHECKPOINT_BYTES)
            os.pwrite(fd, tf.encode_checkpoint(cp), 0)
            if sync:
                os.fdatasync(fd)
        finally:
            os.close(fd)
