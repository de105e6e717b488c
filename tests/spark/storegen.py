"""Writing small stores for the Spark tests, and sabotaging them.

Records are built with :func:`mqstore.commitlog.format.make_record` / ``encode`` and units
with :func:`mqstore.consumequeue.format.encode_unit`, into pre-sized files exactly as a
broker lays them out: segments of ``segment_size`` bytes named by start offset, a record
goes to the next segment when ``size + 8`` does not fit, and the 8-byte blank record
(``encode_blank(bytes left)``) then marks the rest of the file as unused (docs/format.md
§2.1). ConsumeQueue files are 6,000,000 bytes, the unit for queue offset N at N * 20.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field, replace
from pathlib import Path

from mqstore import compression
from mqstore.checkpoint import Checkpoint
from mqstore.commitlog import format as fmt
from mqstore.consumequeue import format as cqfmt
from mqstore.message import standard_properties_string

BASE_TS = 1_700_000_000_000
SEGMENT_SIZE = 64 * 1024
TOPICS = ("orders", "payments")
QUEUES = 3


@dataclass(frozen=True)
class Written:
    """A record as written: where it is and what a ConsumeQueue unit must say about it."""

    topic: str
    queue_id: int
    queue_offset: int
    physical_offset: int
    size: int
    tags_code: int
    body: bytes
    compressed: bool


@dataclass
class GeneratedStore:
    """What :func:`build_store` wrote."""

    root: Path
    segment_size: int
    records: list[Written] = field(default_factory=list)
    segments: list[Path] = field(default_factory=list)

    def segment_of(self, physical_offset: int) -> tuple[Path, int]:
        """(segment path, position in it) of a physical offset."""
        base = physical_offset - physical_offset % self.segment_size
        return self.root / "commitlog" / f"{base:020d}", physical_offset - base

    def cq_path(self, topic: str, queue_id: int, queue_offset: int = 0) -> Path:
        """The ConsumeQueue file holding ``queue_offset``."""
        name = cqfmt.file_name_for(queue_offset)
        return self.root / "consumequeue" / topic / str(queue_id) / name


def _body(i: int) -> bytes:
    return (f"message {i} ".encode() + bytes(range(i % 7, 256)) * (1 + i % 3))[
        : 60 + (i * 37) % 500
    ]


def build_store(
    root: Path,
    count: int = 600,
    *,
    segment_size: int = SEGMENT_SIZE,
    skip: dict[tuple[str, int], set[int]] | None = None,
    no_cq_unit: set[int] | None = None,
    checkpoint: bool = True,
) -> GeneratedStore:
    """A store of ``count`` messages over TOPICS x QUEUES, every 5th body zlib-compressed.

    ``skip`` leaves queue offsets unassigned in a queue (a gap); message indexes in
    ``no_cq_unit`` are written to the CommitLog without a ConsumeQueue unit.
    """
    skip = skip or {}
    no_cq_unit = no_cq_unit or set()
    gen = GeneratedStore(root, segment_size)
    (root / "commitlog").mkdir(parents=True)
    next_qoff: dict[tuple[str, int], int] = {}
    seg = bytearray(segment_size)
    seg_base = 0
    pos = 0

    def flush_segment() -> None:
        path = root / "commitlog" / f"{seg_base:020d}"
        path.write_bytes(bytes(seg))
        gen.segments.append(path)

    for i in range(count):
        topic = TOPICS[i % len(TOPICS)]
        qid = (i // len(TOPICS)) % QUEUES
        key = (topic, qid)
        qoff = next_qoff.get(key, 0)
        while qoff in skip.get(key, set()):
            qoff += 1
        next_qoff[key] = qoff + 1
        tags = ("TagA", "TagB", None)[i % 3]
        plain = _body(i)
        sys_flag = 0
        stored = plain
        if i % 5 == 0:
            sys_flag = fmt.COMPRESSED_FLAG | compression.CompressionType.ZLIB.flag
            stored = compression.compress(plain, compression.CompressionType.ZLIB)
        props = standard_properties_string(f"U{i:08d}", tags, f"key-{i} k{i % 10}")
        rec = fmt.make_record(
            topic=topic,
            body=stored,
            properties_string=props,
            queue_id=qid,
            queue_offset=qoff,
            sys_flag=sys_flag,
            born_timestamp=BASE_TS + i * 10 - 3,
            store_timestamp=BASE_TS + i * 10,
        )
        size = rec.total_size
        if pos + size + fmt.END_FILE_MIN_BLANK_LENGTH > segment_size:
            seg[pos : pos + 8] = fmt.encode_blank(segment_size - pos)
            flush_segment()
            seg = bytearray(segment_size)
            seg_base += segment_size
            pos = 0
        phys = seg_base + pos
        rec = replace(rec, physical_offset=phys)
        raw = fmt.encode(rec)
        seg[pos : pos + len(raw)] = raw
        pos += len(raw)
        gen.records.append(
            Written(topic, qid, qoff, phys, len(raw), rec.tags_code, plain, bool(sys_flag))
        )
    flush_segment()
    _write_cq(gen, no_cq_unit)
    if checkpoint:
        cp = Checkpoint(root / "checkpoint")
        cp.physic_msg_timestamp = cp.logics_msg_timestamp = BASE_TS + (count - 1) * 10
        cp.flush()
        cp.close()
    return gen


def _write_cq(gen: GeneratedStore, leave_out: set[int]) -> None:
    for i, w in enumerate(gen.records):
        if i in leave_out:
            continue
        path = gen.cq_path(w.topic, w.queue_id, w.queue_offset)
        if not path.exists():
            path.parent.mkdir(parents=True, exist_ok=True)
            with open(path, "wb") as f:
                f.truncate(cqfmt.FILE_SIZE)
        with open(path, "r+b") as f:
            f.seek(w.queue_offset * cqfmt.UNIT_SIZE % cqfmt.FILE_SIZE)
            f.write(cqfmt.encode_unit(w.physical_offset, w.size, w.tags_code))


# ------------------------------------------------------------------------------ sabotage


def flip_byte(path: Path, pos: int) -> None:
    """Invert every bit of the byte at ``pos``."""
    with open(path, "r+b") as f:
        f.seek(pos)
        b = f.read(1)
        f.seek(pos)
        f.write(bytes([b[0] ^ 0xFF]))


def shrink(path: Path, length: int) -> None:
    """Cut the file to ``length`` bytes."""
    os.truncate(path, length)


def zero(path: Path, start: int, end: int) -> None:
    """Overwrite ``[start, end)`` with zeros (a write that never reached the disk)."""
    with open(path, "r+b") as f:
        f.seek(start)
        f.write(bytes(end - start))


def set_unit_size(path: Path, index: int, size: int) -> None:
    """Rewrite the size field of unit ``index`` of a ConsumeQueue file."""
    with open(path, "r+b") as f:
        f.seek(index * cqfmt.UNIT_SIZE)
        phys, _, tags = cqfmt.unpack_unit(f.read(cqfmt.UNIT_SIZE))
        f.seek(index * cqfmt.UNIT_SIZE)
        f.write(cqfmt.encode_unit(phys, size, tags))


def engine_store(root: Path, slots: int, num: int, count: int = 400) -> Path:
    """A store written by MessageStore itself, so its consumequeue/ and index/ are the
    dispatcher's: ``count`` messages over 3 topics x 4 queues, tags on two thirds, one key
    each plus a key shared by every 7th; small segments and index files of ``slots`` x
    ``num`` (so a few hundred messages roll several index files)."""
    from mqstore import Message, MessageStore, StoreConfig

    cfg = StoreConfig(
        root_dir=str(root), commitlog_file_size=SEGMENT_SIZE, max_hash_slot_num=slots,
        max_index_num=num,
    )  # fmt: skip
    with MessageStore.open(cfg) as store:
        for i in range(count):
            r = store.put_message(
                Message(
                    topic=("orders", "payments", "audit")[i % 3],
                    body=f"body {i} ".encode() * (1 + i % 40),
                    tags=("TagA", "TagB", None)[i % 3],
                    keys=[f"k{i}"] if i % 7 else [f"k{i}", "shared"],
                    queue_id=i % 4,
                )
            )
            assert r.status.stored
    return root
