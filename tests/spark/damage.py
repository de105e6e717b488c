"""Single-field damage to a store's files, at positions the audit must report: record
header fields the body CRC does not cover, consume-queue units, index entries."""

from __future__ import annotations

import mmap
import struct
from dataclasses import dataclass
from pathlib import Path

from mqstore.commitlog import bulk
from mqstore.tools.spark.layout import discover


@dataclass(frozen=True, slots=True)
class Rec:
    """A record: its segment (relative to the store root), position there, log offset."""

    file: str
    pos: int
    offset: int
    sys_flag: int
    store_ts: int


def records(root: Path) -> list[Rec]:
    """Every valid record of the store, in log order."""
    layout = discover(root)
    out = []
    for seg in layout.segments:
        with open(seg.path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as mm:
            pos = 0
            while pos < len(mm):
                b = bulk.scan(mm, pos, len(mm), check_crc=False)
                a = b.records
                rel = Path(seg.path).relative_to(layout.root).as_posix()
                out += [
                    Rec(rel, p, seg.base_offset + p, f, t)
                    for p, f, t in zip(a.position.tolist(), a.sys_flag.tolist(),
                                       a.store_timestamp.tolist(), strict=True)
                ]  # fmt: skip
                if b.stop is not None or b.end <= pos:
                    break
                pos = b.end
    return out


FIELDS = {
    # name: (struct format, byte position in a record with IPv4 hosts)
    "total_size": (">i", 0),
    "magic": (">i", 4),
    "body_crc": (">i", 8),
    "queue_id": (">i", 12),
    "flag": (">i", 16),
    "queue_offset": (">q", 20),
    "physical_offset": (">q", 28),
    "sys_flag": (">i", 36),
    "born_timestamp": (">q", 40),
    "born_ip": (">i", 48),
    "born_port": (">i", 52),
    "store_timestamp": (">q", 56),
    "store_ip": (">i", 64),
    "store_port": (">i", 68),
    "reconsume_times": (">i", 72),
    "prepared_offset": (">q", 76),
}
"""Every header field of a record whose hosts are IPv4 (docs/format.md §1.1), each host
split into its address and port."""


def read_field(root: Path, rec: Rec, name: str) -> int:
    fmt, at = FIELDS[name]
    with open(root / rec.file, "rb") as f:
        f.seek(rec.pos + at)
        return int(struct.unpack(fmt, f.read(struct.calcsize(fmt)))[0])


def write_field(root: Path, rec: Rec, name: str, value: int) -> None:
    fmt, at = FIELDS[name]
    with open(root / rec.file, "r+b") as f:
        f.seek(rec.pos + at)
        f.write(struct.pack(fmt, value))
