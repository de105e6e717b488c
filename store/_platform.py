"""OS calls the store depends on, in one place so tests can fault-inject them.

Every durability-relevant syscall goes through this module (bbolt's ``bolt_unix.go``
idea): tests monkeypatch :func:`fdatasync` to raise ``OSError(EIO)`` or
:func:`allocate` to raise ``OSError(ENOSPC)``.

Why ``os.fdatasync`` and not ``mmap.flush()``: on Linux both write back the page
cache of a shared mapping, but ``mmap.flush()`` holds the GIL for the whole msync
(other threads nearly stop) while ``os.fdatasync`` releases it, which is what lets
producers keep appending while the flusher waits, so group commit batches form
naturally (docs/design.md §1).
"""

from __future__ import annotations

import errno
import fcntl
import os

from mqstore import faults


def fdatasync(fd: int, *, what: str = "") -> None:
    """Flush a file's data (and the metadata needed to read it) to stable storage.

    Raises:
        OSError: the device reported an error; the caller must treat the data written
            since the last successful sync as possibly lost.
    """
    faults.point("before_fdatasync", what=what)
    os.fdatasync(fd)
    faults.point("after_fdatasync", what=what)


def allocate(fd: int, size: int, *, sparse: bool = False) -> None:
    """Size a new file to ``size`` bytes: reserved, so later writes through a mapping
    cannot hit ENOSPC (which would be SIGBUS, not an exception), or ``sparse`` (only
    the length set; the caller reserves ranges as it writes them).

    Both pass the fault point ``before_allocate`` while the file is still empty: a
    file created under the name of one deleted earlier is a new file, which the
    simulated disk must not credit with the old one's durable bytes.

    Raises:
        OSError: ENOSPC when the disk cannot hold the file.
    """
    faults.point("before_allocate", size=size)
    if sparse:
        os.ftruncate(fd, size)
        return
    try:
        os.posix_fallocate(fd, 0, size)
    except OSError as e:
        if e.errno in (errno.EOPNOTSUPP, errno.EINVAL):  # filesystems without fallocate
            os.ftruncate(fd, size)
        else:
            raise


def reserve_ahead(used: int, most: int, least: int) -> int:
    """How far past ``used`` bytes a sparse file reserves before writing on: as much
    again as it holds, at least ``least``, at most ``most``.

    A file's reservations so grow with it: a small store costs about what it holds,
    and a busy file reaches ``most``-sized chunks after a few doublings, so the
    number of ``fallocate`` calls grows only by about log2(``most`` / ``least``).

    >>> reserve_ahead(0, 64 << 20, 1 << 20), reserve_ahead(5 << 20, 64 << 20, 1 << 20)
    (1048576, 5242880)
    >>> reserve_ahead(0, 4096, 1 << 20), reserve_ahead(1 << 30, 64 << 20, 1 << 20)
    (4096, 67108864)
    """
    return min(most, max(least, used))


def allocate_range(fd: int, offset: int, length: int, *, point: str, what: str = "") -> None:
    """Allocate ``[offset, offset + length)`` of a sparse file (its contents stay), so
    writes through a mapping there cannot hit ENOSPC; nothing on a filesystem without
    ``fallocate`` (writes then allocate as they come). ``point`` names the fault point
    passed first (``offset``, ``size``, ``what``), so tests can fail one kind of file.

    Raises:
        OSError: ENOSPC (or EDQUOT) when the disk cannot back the range.
    """
    faults.point(point, offset=offset, size=length, what=what)
    try:
        os.posix_fallocate(fd, offset, length)
    except OSError as e:
        if e.errno not in (errno.EOPNOTSUPP, errno.EINVAL):
            raise


def try_lock(fd: int) -> bool:
    """Take an exclusive, non-blocking lock on an open file; False if someone holds it.

    ``flock`` locks belong to the open file description, so a second ``open()`` of the
    same store in this very process is refused too.
    """
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    return True


def unlock(fd: int) -> None:
    """Release a lock taken by :func:`try_lock`."""
    fcntl.flock(fd, fcntl.LOCK_UN)


def fsync_dir(path: str | os.PathLike[str]) -> None:
    """Make a directory's entries (created/renamed/deleted files) durable."""
    faults.point("before_fsync_dir", what=os.fspath(path))
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def make_dirs_durable(path: str | os.PathLike[str]) -> None:
    """Create ``path`` and its missing parents so that they survive a power loss.

    A synced file is only reachable after a power loss if every directory entry on its
    path is durable too: POSIX makes a new entry durable only when its directory is
    synced (ext4's journal usually saves a careless writer; other filesystems and a
    strict model do not). Each directory created here is synced, then its parent.
    """
    target = os.path.abspath(path)
    missing: list[str] = []
    p = target
    while not os.path.isdir(p):
        missing.append(p)
        parent = os.path.dirname(p)
        if parent == p:
            break
        p = parent
    for d in reversed(missing):
        try:
            os.mkdir(d)
        except FileExistsError:
            continue
        fsync_dir(d)
        fsync_dir(os.path.dirname(d))
