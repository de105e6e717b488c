"""The crash tests' workload and verdicts, shared by the in-process tests and producer.py.

A message is named by (life, thread, seq): its topic, queue, tags, keys and body are
derived from that name, so a test can rebuild what a producer process sent from one
line of its output. A *life* is one run of a store between two crashes.

Verdicts after a crash and reopen (:func:`verify`):

* **lost**: a put that had to survive (acknowledged PUT_OK; under power loss, also
  inside the durable part of the log) is missing or differs at its offset;
* **phantom**: a record in the recovered log that is not what the latest put at that
  physical offset wrote (resurrected bytes from beyond an earlier recovery cut, a torn
  record that passed the checks, ...). Recovery must never serve one.
"""

from __future__ import annotations

import random
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from mqstore import Message, MessageStore, PutStatus
from mqstore.commitlog.format import RecordInfo
from mqstore.compression import decompress
from mqstore.message_store import PutResult
from tests.helpers import LogScan

TOPICS = ("TopicA", "TopicB", "TopicC")  # same length: fixed-size bodies give fixed records
QUEUES = 4
COMPRESSIBLE = b"the quick brown fox jumps over the lazy dog. "


def message_for(life: int, tid: int, seq: int, fixed_size: int | None = None) -> Message:
    """The message thread ``tid`` puts as its ``seq``-th in ``life`` (deterministic)."""
    rng = random.Random(f"{life}:{tid}:{seq}")
    topic = TOPICS[rng.randrange(len(TOPICS))]
    queue_id = rng.randrange(QUEUES)
    head = f"{life:03d}:{tid:02d}:{seq:06d}:".encode()
    if fixed_size is not None:
        body = head + rng.randbytes(max(0, fixed_size - len(head)))
    elif rng.random() < 0.03:  # over compress_msg_body_over: a compressed record
        body = head + COMPRESSIBLE * rng.randrange(40, 80)
    else:
        body = head + rng.randbytes(rng.randrange(1, 600))
    return Message(
        topic=topic,
        body=body,
        queue_id=queue_id,
        tags=f"Tag{seq % 5}",
        keys=[f"k{tid:02d}-{seq:06d}"],
    )


@dataclass(frozen=True, slots=True)
class Put:
    """One put as the producer saw it. ``acked``: PUT_OK, returned before any crash."""

    life: int
    tid: int
    seq: int
    topic: str
    queue_id: int
    body: bytes
    status: PutStatus
    physical_offset: int
    queue_offset: int
    size: int
    uniq_key: str
    acked: bool

    @property
    def end(self) -> int:
        """Log offset just past the record."""
        return self.physical_offset + self.size


def put_from(life: int, tid: int, seq: int, msg: Message, r: PutResult, acked: bool) -> Put:
    """A :class:`Put` from a message and its result."""
    return Put(
        life,
        tid,
        seq,
        msg.topic,
        msg.queue_id,
        bytes(msg.body),
        r.status,
        r.physical_offset,
        r.queue_offset,
        r.size,
        r.uniq_key,
        acked,
    )


@dataclass
class Verdict:
    """Outcome of :func:`verify` (lists of human-readable findings)."""

    must_survive: int = 0
    lost: list[str] = field(default_factory=list)
    phantoms: list[str] = field(default_factory=list)


def record_mismatch(log: LogScan, index: dict[int, RecordInfo], p: Put) -> str | None:
    """Why the log does not hold ``p`` intact at its offset (None if it does).

    ``index`` is ``log.by_offset()``.
    """
    info = index.get(p.physical_offset)
    where = f"put {p.life}:{p.tid}:{p.seq} at {p.physical_offset}"
    if info is None:
        return f"{where}: no record there"
    if (info.topic, info.queue_id, info.queue_offset) != (p.topic, p.queue_id, p.queue_offset):
        return (
            f"{where}: record is {info.topic}-{info.queue_id}@{info.queue_offset}, "
            f"put was {p.topic}-{p.queue_id}@{p.queue_offset}"
        )
    if info.uniq_key != p.uniq_key:
        return f"{where}: UNIQ_KEY {info.uniq_key!r} != {p.uniq_key!r}"
    try:
        body = decompress(log.bodies[p.physical_offset], info.sys_flag)
    except ValueError as e:
        return f"{where}: body does not decompress: {e}"
    if body != p.body:
        return f"{where}: body differs ({len(body)} vs {len(p.body)} bytes)"
    return None


def verify(
    store: MessageStore,
    log: LogScan,
    puts: Iterable[Put],
    expected_at: dict[int, Put],
    must_survive: Callable[[Put], bool],
) -> Verdict:
    """Judge a recovered store against the puts made before the crash.

    ``puts`` are this life's puts; ``expected_at`` maps physical offsets to the latest
    put written there in any earlier life still held (updated in place: this life's
    puts are added, offsets the recovery cut are dropped). Records an earlier open
    recovered were durable, so losing one later counts as lost. Acked puts are also
    read back through the store's API (``look_message_by_offset``).
    """
    verdict = Verdict()
    index = log.by_offset()
    held = dict(expected_at)  # recovered before, so durable: must be recovered again
    for p in puts:
        if p.physical_offset < 0:
            continue
        if must_survive(p):
            verdict.must_survive += 1
            why = record_mismatch(log, index, p)
            if why is None:
                rec = store.look_message_by_offset(p.physical_offset)
                if rec is None or rec.decompressed_body() != p.body:
                    why = f"put {p.life}:{p.tid}:{p.seq}: look_message_by_offset disagrees"
            if why is not None:
                verdict.lost.append(why)
        if p.status.stored:
            expected_at[p.physical_offset] = p
    for p in held.values():
        why = record_mismatch(log, index, p)
        if why is not None:
            verdict.lost.append(f"recovered by an earlier open, gone now: {why}")
    survivors: dict[int, Put] = {}
    for phys, info in log.records:
        p = expected_at.get(phys)
        if p is None:
            verdict.phantoms.append(
                f"record at {phys} ({info.topic}-{info.queue_id}@{info.queue_offset}) "
                "matches no put made at that offset"
            )
            continue
        why = record_mismatch(log, index, p)
        if why is not None:
            verdict.phantoms.append(f"record at {phys} is not the put made there: {why}")
            continue
        survivors[phys] = p
    expected_at.clear()
    expected_at.update(survivors)
    return verdict


STATS: dict[str, Counter[str]] = defaultdict(Counter)
"""Counters per test family, printed by ``tests/crash/conftest.py`` after the run."""
