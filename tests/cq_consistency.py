"""Are a store's consume queues and index consistent with its CommitLog? Read from the files.

:func:`check_cq_consistency` reads a *closed* store directory (or one whose store was
abandoned and reopened) straight from its files, never through the store under test,
and returns a list of problems (empty = consistent):

1. **CommitLog.** Records are walked from the first file while they decode valid
   (BODYCRC included); a blank record continues at the next file.
2. **Every NOT/COMMIT record has its unit.** Queue ``(topic, queueId)`` holds, at the
   record's queue offset, exactly (physical offset, size, tags code); the tags code
   is the TAGS hash, or the deliver time for ``SCHEDULE_TOPIC_XXXX`` records with
   DELAY. PREPARED / ROLLBACK records have none.
3. **Every unit has its record.** A real unit points at a record of that queue and
   offset; blank pre-fill units only precede the queue's first real unit; a queue
   ends right after its last record (``max offset`` = last queue offset + 1); bytes
   after a queue's end are zero. Units pointing below the CommitLog's first offset
   (expired, not yet cleaned) are allowed.
4. **Index** (``check_index``): for every record but ROLLBACK, ``topic#UNIQ_KEY`` and
   ``topic#k`` for each KEYS token are reachable from their slot's chain in some index
   file, with the record's offset; index headers count their entries right.
"""

from __future__ import annotations

import os
from collections import defaultdict
from pathlib import Path

from mqstore.commitlog import format as fmt
from mqstore.config import StoreConfig
from mqstore.consumequeue.format import BLANK_SIZE, UNIT_SIZE, iter_units
from mqstore.index import format as ifmt
from mqstore.message import tags_code
from mqstore.schedule import SCHEDULE_TOPIC, DelayLevels

MAX_PROBLEMS = 50


def _log_records(
    root: Path, cfg: StoreConfig, problems: list[str]
) -> tuple[list[fmt.RecordInfo], int]:
    directory = Path(cfg.commitlog_dir) if cfg.commitlog_dir else root / "commitlog"
    if not directory.is_dir():
        return [], 0
    names = sorted(n for n in os.listdir(directory) if len(n) == 20 and n.isdigit())
    records: list[fmt.RecordInfo] = []
    start = int(names[0]) if names else 0
    for i, name in enumerate(names):
        data = (directory / name).read_bytes()
        base = int(name)
        pos = 0
        while True:
            r = fmt.scan(data, pos, len(data), check_crc=True)
            if isinstance(r, fmt.RecordInfo):
                if r.physical_offset != base + pos:
                    problems.append(
                        f"record at {base + pos} says PHYSICALOFFSET {r.physical_offset}"
                    )
                records.append(r)
                pos += r.size
                continue
            if isinstance(r, fmt.EndOfSegment):
                break
            if i != len(names) - 1:
                problems.append(
                    f"CommitLog {name}: {r.kind.value} at {base + pos} before the last file"
                )
            return records, start
    return records, start


def _expected_units(
    records: list[fmt.RecordInfo], levels: DelayLevels
) -> dict[tuple[str, int], dict[int, tuple[int, int, int]]]:
    out: dict[tuple[str, int], dict[int, tuple[int, int, int]]] = defaultdict(dict)
    for r in records:
        if r.sys_flag & fmt.TRANSACTION_MASK not in (
            fmt.TRANSACTION_NOT_TYPE,
            fmt.TRANSACTION_COMMIT_TYPE,
        ):
            continue
        props = r.properties
        code = tags_code(props.get("TAGS"))
        if r.topic == SCHEDULE_TOPIC and props.get("DELAY", "").isdigit():
            deliver = levels.deliver_timestamp(int(props["DELAY"]), r.store_timestamp)
            code = code if deliver is None else deliver
        out[r.topic, r.queue_id][r.queue_offset] = (r.physical_offset, r.size, code)
    return out


def _queue_units(
    qdir: Path, file_size: int, problems: list[str]
) -> tuple[int, list[tuple[int, int, int]]]:
    """(first queue offset, valid units) of one queue directory."""
    names = sorted(n for n in os.listdir(qdir) if len(n) == 20 and n.isdigit())
    if not names:
        return 0, []
    first = int(names[0]) // UNIT_SIZE
    units: list[tuple[int, int, int]] = []
    for i, name in enumerate(names):
        data = (qdir / name).read_bytes()
        if len(data) != file_size:
            problems.append(f"{qdir / name}: size {len(data)} != {file_size}")
            return first, units
        if int(name) != (first + len(units)) * UNIT_SIZE:
            problems.append(f"{qdir / name}: does not follow the previous file")
            return first, units
        for j, (phys, size, tags) in enumerate(iter_units(data)):
            if phys < 0 or size <= 0:
                if data[j * UNIT_SIZE :].strip(b"\0"):
                    problems.append(f"{qdir / name}: non-zero bytes after the end at unit {j}")
                if i != len(names) - 1:
                    problems.append(f"{qdir / name}: ends before the last file")
                return first, units
            units.append((phys, size, tags))
    return first, units


def _check_queues(root: Path, cfg: StoreConfig, records: list[fmt.RecordInfo], log_start: int,
                  problems: list[str]) -> None:  # fmt: skip
    expected = _expected_units(records, DelayLevels.parse(cfg.message_delay_level))
    cq_root = root / "consumequeue"
    seen: set[tuple[str, int]] = set()
    if cq_root.is_dir():
        for topic in sorted(os.listdir(cq_root)):
            for qid in sorted(os.listdir(cq_root / topic)):
                key = (topic, int(qid))
                seen.add(key)
                first, units = _queue_units(
                    cq_root / topic / qid, cfg.consume_queue_file_size, problems
                )
                _check_one_queue(key, first, units, expected.get(key, {}), log_start, problems)
    for key, want in expected.items():
        if key not in seen and want:
            problems.append(f"queue {key}: {len(want)} records but no consume queue")


def _check_one_queue(key: tuple[str, int], first: int, units: list[tuple[int, int, int]],
                     want: dict[int, tuple[int, int, int]], log_start: int, problems: list[str]) -> None:  # fmt: skip
    real_seen = False
    for i, unit in enumerate(units):
        q = first + i
        if unit[0] == 0 and unit[1] == BLANK_SIZE and unit[2] == 0:
            if real_seen:
                problems.append(f"queue {key}: blank unit at {q} after real units")
            continue
        real_seen = True
        if q in want:
            if want[q] != unit:
                problems.append(f"queue {key} offset {q}: unit {unit} != record {want[q]}")
        elif unit[0] >= log_start:
            problems.append(
                f"queue {key} offset {q}: unit {unit} points at no record of this queue"
            )
    end = first + len(units)
    for q in sorted(want):
        if not first <= q < end:
            problems.append(
                f"queue {key}: record at queue offset {q} has no unit (units {first}..{end - 1})"
            )
    if want and end != max(want) + 1:
        problems.append(f"queue {key}: ends at {end}, the log's last record is offset {max(want)}")


def _check_index(
    root: Path, cfg: StoreConfig, records: list[fmt.RecordInfo], problems: list[str]
) -> None:
    directory = root / "index"
    files = []
    if directory.is_dir():
        for name in sorted(os.listdir(directory)):
            if len(name) == ifmt.NAME_LENGTH and name.isdigit():
                data = (directory / name).read_bytes()
                header = ifmt.Header(*ifmt.HEADER.unpack_from(data, 0))
                files.append((name, data, header))
    slots = cfg.max_hash_slot_num

    def reachable(key: str, phys: int) -> bool:
        h = ifmt.key_hash(key)
        for _name, data, header in files:
            (cur,) = ifmt.SLOT.unpack_from(data, ifmt.slot_position(h % slots))
            hops = 0
            while 0 < cur < header.index_count and hops <= header.index_count:
                e = ifmt.Entry(*ifmt.ENTRY.unpack_from(data, ifmt.entry_position(slots, cur)))
                if e.key_hash == h and e.phy_offset == phys:
                    return True
                cur = e.prev_index
                hops += 1
        return False

    for name, data, header in files:
        last = ifmt.entry_position(slots, header.index_count - 1)
        if (
            header.index_count > 1
            and ifmt.ENTRY.unpack_from(data, last)[1] != header.end_phy_offset
        ):
            problems.append(f"index {name}: last entry does not point at endPhyOffset")
    for r in records:
        if r.sys_flag & fmt.TRANSACTION_MASK == fmt.TRANSACTION_ROLLBACK_TYPE:
            continue
        keys = [k for k in [r.uniq_key, *r.keys] if k]
        for k in keys:
            if not reachable(ifmt.build_key(r.topic, k), r.physical_offset):
                problems.append(
                    f"index: {r.topic}#{k} of the record at {r.physical_offset} not found"
                )
        if len(problems) > MAX_PROBLEMS:
            return


def check_cq_consistency(root: Path | str, cfg: StoreConfig | None = None, *,
                         check_index: bool = True) -> list[str]:  # fmt: skip
    """Problems found comparing consume queues (and index) with the CommitLog; [] if none.

    ``cfg`` gives the file sizes (CommitLog, consume queue, index) and delay levels;
    the store must not be open for writing while this reads.
    """
    root = Path(root)
    cfg = cfg or StoreConfig(root_dir=root)
    problems: list[str] = []
    records, log_start = _log_records(root, cfg, problems)
    _check_queues(root, cfg, records, log_start, problems)
    if check_index and cfg.message_index_enable:
        _check_index(root, cfg, records, problems)
    return problems[:MAX_PROBLEMS]
