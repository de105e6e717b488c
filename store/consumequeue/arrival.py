"""What dispatching announces: a message that just became pullable (long polling, POP
notification and the pull API's arrival listeners all wait on it)."""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple


class Arrival(NamedTuple):
    """A message that just became pullable: the next offset to pull is ``queue_offset + 1``."""

    topic: str
    queue_id: int
    queue_offset: int
    tags_code: int
    store_timestamp: int


ArrivalListener = Callable[[Arrival], None]
