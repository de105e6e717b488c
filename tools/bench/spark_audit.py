"""``mqstore bench spark_audit``: the Spark audit against single-process scans of one store.

Measures, on one generated store (files in the page cache after generation):

* ``recovery.scan``: the engine's own single-process recovery scan (decode + body CRC,
  no per-record checks beyond that), the baseline the issue asks for;
* ``segscan, 1 process``: the audit's per-range record checks run in this process,
  one range after another (what each Spark task does, without Spark);
* ``spark audit``: the whole audit (records, queue continuity, ConsumeQueue units,
  checkpoint) on ``--master``, run twice: cold (the first job starts the Python
  workers) and warm; session start-up excluded and reported separately;
* ``spark reindex``: consumequeue/ rebuilt into a temp dir (compared byte for byte with
  the generated one, which follows the dispatcher's rules).

Records/s counts CommitLog records; MB/s is CommitLog bytes (segment lengths) / time.
By default about 2 GiB of CommitLog in 1 GiB segments, as RocketMQ's default
(``--quick``: 64 MiB in 16 MiB segments). Needs the ``spark`` extra and Java.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path
from typing import Any

from mqstore.commitlog import format as fmt
from mqstore.consumequeue import format as cqfmt
from mqstore.message import host_bytes, tags_code
from mqstore.tools.bench._harness import Option, bench_main

TOPICS = ("bench-a", "bench-b")
QUEUES = 4
BASE_TS = 1_700_000_000_000


def generate(root: Path, size_bytes: int, segment_size: int, body_bytes: int) -> int:
    """Write a store of about ``size_bytes`` of CommitLog; return the record count."""
    (root / "commitlog").mkdir(parents=True)
    enc = fmt.RecordEncoder(host_bytes(("127.0.0.1", 10911)))
    born = host_bytes(("10.0.0.7", 50000))
    bodies = [bytes([i]) * body_bytes for i in range(16)]
    crcs = [fmt.body_crc(b) for b in bodies]
    tails: dict[tuple[str, str], tuple[tuple[bytes, int], int]] = {}
    for t in TOPICS:
        for tags in ("TagA", "TagB"):
            props = f"TAGS\x01{tags}\x02KEYS\x01k\x02"
            tails[t, tags] = (enc.tail(t.encode(), props.encode()), tags_code(tags))
    units: dict[tuple[str, int], bytearray] = {}
    next_qoff: dict[tuple[str, int], int] = {}
    phys = 0
    count = 0
    while phys < size_bytes:
        seg_base = phys
        chunks: list[bytes] = []
        pos = 0
        while phys < size_bytes:
            topic = TOPICS[count % 2]
            qid = (count // 2) % QUEUES
            (tail, version), tcode = tails[topic, ("TagA", "TagB")[count % 3 % 2]]
            body = bodies[count % 16]
            size = enc.size(0, len(body), len(tail))
            if pos + size + fmt.END_FILE_MIN_BLANK_LENGTH > segment_size:
                chunks.append(fmt.encode_blank(segment_size - pos))
                phys = seg_base + segment_size
                break
            qoff = next_qoff.get((topic, qid), 0)
            next_qoff[topic, qid] = qoff + 1
            chunks.append(
                enc.encode(size, version, crcs[count % 16], qid, 0, qoff, phys, 0,
                           BASE_TS + count, born, BASE_TS + count, 0, 0, body, tail)
            )  # fmt: skip
            units.setdefault((topic, qid), bytearray()).extend(cqfmt.encode_unit(phys, size, tcode))
            pos += size
            phys += size
            count += 1
        with open(root / "commitlog" / f"{seg_base:020d}", "wb") as f:
            f.write(b"".join(chunks))
            f.truncate(segment_size)
    for (topic, qid), data in units.items():
        qdir = root / "consumequeue" / topic / str(qid)
        qdir.mkdir(parents=True)
        for start in range(0, len(data), cqfmt.FILE_SIZE):
            with open(qdir / f"{start:020d}", "wb") as f:
                f.write(data[start : start + cqfmt.FILE_SIZE])
                f.truncate(cqfmt.FILE_SIZE)
    return count


def bench_recovery_scan(root: Path, segment_size: int) -> tuple[int, float]:
    """The engine's recovery scan over every segment, with CRC checks."""
    from mqstore.commitlog.recovery import scan
    from mqstore.commitlog.segments import Segments

    segs = Segments(root / "commitlog", segment_size)
    segs.load()
    t0 = time.perf_counter()
    _, records, _, _ = scan(segs, 0, check_crc=True)
    elapsed = time.perf_counter() - t0
    segs.close()
    return records, elapsed


def bench_segscan(root: Path) -> tuple[int, float]:
    """The audit's per-range checks, one process, no Spark."""
    import mmap

    from mqstore.tools.spark.layout import discover
    from mqstore.tools.spark.reader import plan_ranges
    from mqstore.tools.spark.segscan import RecordColumns, scan_range

    t0 = time.perf_counter()
    records = 0
    for rng in plan_ranges(discover(root)):
        with open(rng.path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as mm:
            cols = RecordColumns()
            for _ in scan_range(mm, rng, int(time.time() * 1000), cols):
                pass
            records += len(cols)
    return records, time.perf_counter() - t0


def bench_spark(root: Path, master: str) -> dict[str, Any]:
    """Audit twice (a cold first run starts the Python workers) and reindex once."""
    from mqstore.tools.spark.audit import audit_with
    from mqstore.tools.spark.layout import discover
    from mqstore.tools.spark.reindex import reindex_with
    from mqstore.tools.spark.session import build_session

    t0 = time.perf_counter()
    spark = build_session(master, "bench-spark-audit", progress=True)
    spark.range(1).count()
    out: dict[str, Any] = {"startup": time.perf_counter() - t0}
    for run in ("audit_cold", "audit_warm"):
        t1 = time.perf_counter()
        report = audit_with(spark, discover(root))
        out[run] = time.perf_counter() - t1
        out["findings"] = len(report.findings)
        out["records"] = report.records
    with tempfile.TemporaryDirectory(dir=root.parent) as tmp:
        t1 = time.perf_counter()
        summary = reindex_with(spark, root, tmp)
        out["reindex"] = time.perf_counter() - t1
        out["reindex_units"] = summary["units"]
        cq = root / "consumequeue"
        out["reindex_identical"] = all(
            p.read_bytes() == (Path(tmp) / "consumequeue" / p.relative_to(cq)).read_bytes()
            for p in cq.rglob("*")
            if p.is_file()
        )
    spark.stop()
    return out


def measure(work: Path, args: argparse.Namespace) -> dict[str, Any]:
    """Generate the store under ``work``, then the two single-process scans and Spark."""
    root = work / "store"
    t0 = time.perf_counter()
    n = generate(root, args.size_mib << 20, args.segment_mib << 20, args.body_bytes)
    total = sum(f.stat().st_size for f in (root / "commitlog").iterdir())
    print(f"generated {n} records, {total / 2**20:.0f} MiB of CommitLog"
          f" in {time.perf_counter() - t0:.1f} s")  # fmt: skip
    rows = [
        ("recovery.scan, 1 process", *bench_recovery_scan(root, args.segment_mib << 20)),
        ("segscan, 1 process", *bench_segscan(root)),
    ]
    sp = bench_spark(root, args.master)
    records = int(sp["records"])
    rows.append((f"spark audit (cold), {args.master}", records, sp["audit_cold"]))
    rows.append((f"spark audit (warm), {args.master}", records, sp["audit_warm"]))
    rows.append((f"spark reindex, {args.master}", int(sp["reindex_units"]), sp["reindex"]))
    return {"records": n, "commitlog_bytes": total, "spark": sp,
            "rows": [{"scan": a, "records": r, "seconds": s} for a, r, s in rows]}  # fmt: skip


def report(out: dict[str, Any], _args: argparse.Namespace) -> str:
    """The printed table."""
    total, sp = out["commitlog_bytes"], out["spark"]
    lines = [f"\n{'scan':30} {'records':>10} {'seconds':>8} {'records/s':>11} {'MB/s':>8}"]
    for row in out["rows"]:
        recs, secs = row["records"], row["seconds"]
        lines.append(f"{row['scan']:34} {recs:>10} {secs:>8.1f} {recs / secs:>11,.0f} "
                     f"{total / secs / 1e6:>8.1f}")  # fmt: skip
    lines.append(
        f"(Spark session start-up {sp['startup']:.1f} s not included; audit findings:"
        f" {int(sp['findings'])}; reindex byte-identical to the generated consumequeue/:"
        f" {bool(sp['reindex_identical'])}; load average {os.getloadavg()[0]:.1f})"
    )
    return "\n".join(lines)


OPTIONS: tuple[Option, ...] = (
    ("--size-mib", int, 2048, "CommitLog size in MiB"),
    ("--segment-mib", int, 1024, "segment size in MiB"),
    ("--body-bytes", int, 1000, "body size"),
    ("--master", str, "local[*]", "Spark master"),
)
QUICK = {"size_mib": 64, "segment_mib": 16}


def main(argv: list[str] | None = None) -> int:
    """Generate a store, run the scans, print records/s and MB/s; 0."""
    return bench_main("spark_audit", __doc__, argv, measure, report, OPTIONS, QUICK)


if __name__ == "__main__":
    raise SystemExit(main())
