"""The page a store and its dispatcher process share (``dispatch_process=True``).

A small file, ``<root>/dispatch.state``, mapped by both processes: a few signed
64-bit slots, each written by one side only. The parent publishes how far the
child may dispatch (``limit``: the written end under ASYNC_FLUSH, the flushed end
under SYNC_FLUSH) and the CommitLog's first offset (for expiry); the child
publishes how far it has dispatched and its index and checkpoint state.

Ordering: the child writes a record's queue unit and index entries *before* it
publishes ``dispatched`` past the record, and the parent writes a record before
publishing ``limit`` past it; the other side reads the slot first, then the data.
Each write is a plain store through a shared mapping, so this relies on the
processor keeping stores (and loads) in program order, which x86-64 does (TSO).
:func:`supported` says whether this machine qualifies; elsewhere the store keeps
its in-process dispatcher thread.

The file is scratch: it is recreated at every open and deleted at close. Nothing
durable lives in it (the checkpoint stays the parent's).
"""

from __future__ import annotations

import mmap
import os
import platform
import struct
from enum import IntEnum
from pathlib import Path

FILE_NAME = "dispatch.state"
_SLOT = struct.Struct("<q")
SIZE = 4096


class Slot(IntEnum):
    """Slot numbers (each 8 bytes at ``slot * 8``) and who writes them."""

    LIMIT = 0
    """parent: the CommitLog offset the child may dispatch up to."""
    MIN_PHYSICAL = 1
    """parent: the CommitLog's first offset (queue and index files below it expire)."""
    DISPATCHED = 2
    """child: every record before this offset has its unit (and index entries, unless
    ``INDEXED`` is 0)."""
    INDEXED = 3
    """child: 1 when no index catch-up is running or pending."""
    INDEX_DISABLED = 4
    """child: 1 while indexing is off for lack of disk space."""
    LOGICS_MSG_TIMESTAMP = 5
    """child: the checkpoint's ``logicsMsgTimestamp`` after its last thorough flush."""
    INDEX_MSG_TIMESTAMP = 6
    """child: the checkpoint's ``indexMsgTimestamp`` (end time of the last full index
    file flushed)."""
    GENERATION = 7
    """child: bumped on every start (diagnostics: how many children served this open)."""


def supported() -> bool:
    """Whether the dispatcher may run in a child process here (Linux on x86-64)."""
    return platform.system() == "Linux" and platform.machine() in ("x86_64", "AMD64")


class SharedState:
    """The mapped slots; attribute-free on purpose: ``get``/``set`` by :class:`Slot`."""

    def __init__(self, path: Path, *, create: bool) -> None:
        """Map ``path`` (creating it zeroed with ``create``).

        Raises:
            OSError: the file cannot be created or opened.
        """
        self.path = path
        flags = os.O_RDWR | (os.O_CREAT | os.O_TRUNC if create else 0)
        fd = os.open(path, flags, 0o644)
        try:
            if create:
                os.ftruncate(fd, SIZE)
            self._mm = mmap.mmap(fd, SIZE)
        finally:
            os.close(fd)

    def get(self, slot: Slot) -> int:
        """The slot's value."""
        return int(_SLOT.unpack_from(self._mm, slot * 8)[0])

    def set(self, slot: Slot, value: int) -> None:
        """Publish ``value`` in ``slot``.

        One 8-byte copy of the packed value: ``pack_into`` would zero the slot before
        filling it, and the other process could read that 0 (a dispatched offset or
        limit of 0, a checkpoint time of 0).
        """
        pos = slot * 8
        self._mm[pos : pos + 8] = _SLOT.pack(value)

    def close(self) -> None:
        """Unmap (the file stays)."""
        if not self._mm.closed:
            self._mm.close()
