"""What dispatching a record uses: :data:`DispatchFields`, the tuple the cursor's
per-record step (:func:`mqstore.commitlog.cursor.step`) gives for a valid record, and
:data:`FieldDispatch`, what takes it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Final

DispatchFields = tuple[str, int, int, int, int, int, int, str]
"""What dispatching a record uses (its consume-queue unit, index keys and arrival), in
:data:`DISPATCH_FIELDS` order, which is ``Dispatcher.dispatch_one``'s parameters.

A plain tuple, read by unpacking into named locals or passed on as ``*fields``, never
indexed by number. Not a NamedTuple: building one per record, and passing it on with
``*``, cost the reput loop about a sixth of its time."""

DISPATCH_FIELDS: Final = (
    "topic", "queue_id", "queue_offset", "physical_offset", "size", "sys_flag",
    "store_timestamp", "properties",
)  # fmt: skip
"""The names of :data:`DispatchFields`, in order."""

FieldDispatch = Callable[[str, int, int, int, int, int, int, str], None]
"""What takes a record's :data:`DispatchFields` as its arguments, in that order:
``Dispatcher.dispatch_one``, and whatever the reput thread or recovery hands records
to in its place."""

__all__ = ["DISPATCH_FIELDS", "DispatchFields", "FieldDispatch"]
