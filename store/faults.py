"""Named fault-injection points (bbolt's gofail idea, in a few lines).

Production code calls ``faults.point("name", **context)`` at every write and sync
boundary. With no hook registered that is one dict lookup. Tests register a hook to
raise (simulating EIO/ENOSPC), to record (which bytes were durable at a crash), or to
kill the process at a precise moment::

    with faults.inject("before_fdatasync", raise_oserror(errno.EIO)):
        store.put_message(msg)        # -> flush fails, store poisoned

Points used by the engine: ``before_fdatasync``, ``after_fdatasync`` (context ``what``:
a file path), ``before_allocate`` (``size``; a new segment or checkpoint file, still
empty, sparse or not), ``before_index_allocate`` (``offset``,
``size``, ``what``: the index region about to be reserved), ``index_entries_written``
and ``index_slots_written`` (``what``: the index file; a put's entries, then its slot
heads, are in, its header not yet), ``index_header_fields_written`` (``what``: the index
file; a put's header fields are in, its count not yet), ``before_write_checkpoint``,
``match_list_written`` (``what``: the list's (topic, queue id, first offset, slot); a
dispatch's SQL92 match-list entries are in, its consume-queue units not yet).
"""

from __future__ import annotations

import errno
import os
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

Hook = Callable[..., None]

_hooks: dict[str, Hook] = {}
_lock = threading.Lock()


def point(name: str, **context: Any) -> None:
    """Run the hook registered for ``name``, if any. Hooks may raise."""
    hook = _hooks.get(name)
    if hook is not None:
        hook(**context)


def register(name: str, hook: Hook) -> None:
    """Install ``hook`` at ``name`` (replacing any previous one)."""
    with _lock:
        _hooks[name] = hook


def clear(name: str | None = None) -> None:
    """Remove one hook, or all of them."""
    with _lock:
        if name is None:
            _hooks.clear()
        else:
            _hooks.pop(name, None)


@contextmanager
def inject(name: str, hook: Hook) -> Iterator[None]:
    """Install a hook for the duration of a ``with`` block."""
    register(name, hook)
    try:
        yield
    finally:
        clear(name)


def raise_oserror(code: int = errno.EIO, *, after: int = 0) -> Hook:
    """A hook that raises ``OSError(code)`` from its ``after+1``-th call on."""
    calls = [0]

    def hook(**_: Any) -> None:
        calls[0] += 1
        if calls[0] > after:
            raise OSError(code, os.strerror(code))

    return hook
