"""``mqstore bench spark_audit``: the Spark jobs against single-process scans of one store.

Builds a store as a broker leaves it (CommitLog segments, consume queues and ``index/``
built by the store's IndexService, every message with TAGS, a KEYS token and a UNIQ_KEY
of its own, as the dispatcher indexes them) and times, on the same files in the page
cache:

* ``numpy scan``: the minimal single-process reference: the TOTALSIZE walk, the header
  fields read with numpy, ``zlib.crc32`` of every body;
* ``recovery scan``: the engine's own single-process recovery scan (codec + CRC);
* ``bulk scan``: :mod:`mqstore.commitlog.bulk` in one process (CRC, index key hashes);
* ``audit`` (records, consume queues and index; cold, then warm twice), ``reindex --out``
  (checked byte-identical to the generated consumequeue/ and index/) and
  ``export --parquet`` on ``--master``; the session start-up is timed on its own;
* with ``--cli 1`` (the default), ``mqstore audit`` and ``mqstore reindex --out`` as an
  operator runs them, each minus the mean of the same command on a store of 10 records
  just before and after (the interpreter's and Spark's start-up).

Every Spark figure is printed as records/s and as a ratio to the numpy and recovery scans
of this run, and to the mean of a numpy scan run just before and just after the job
(``x numpy around``: the ratio that holds when the machine's load changes during a run),
and with the CPU seconds each used (a Spark job's: the driver, the JVM and the Python
workers, from ``/proc``; ``CPU x numpy``: the numpy scan's CPU per record over the row's),
which the machine's load changes far less than the wall times.
Default 2 GiB of CommitLog in 1 GiB segments, 3 topics of 8 queues (about 1.8M records
of ~1.15 KiB and 3.7M index entries: the size a real audit amortises the job's fixed cost
over; ``--quick``: 64 MiB in 16 MiB segments); the store is deleted afterwards. Needs the
``spark`` extra and Java.
"""

from __future__ import annotations

import argparse
import os
import time
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

from mqstore.commitlog import _layout
from mqstore.commitlog import format as fmt
from mqstore.consumequeue import format as cqfmt
from mqstore.message import host_bytes, tags_code
from mqstore.tools.bench._harness import Benchmark, Option

TOPICS = ("bench-a", "bench-b", "bench-c")
QUEUES = 8
BASE_TS = 1_700_000_000_000
INDEX_SLOTS = 100_000
INDEX_NUM = 400_000

OPTIONS = (
    Option("--size-mib", int, 2048, "CommitLog size in MiB", quick=64),
    Option("--segment-mib", int, 1024, "segment size in MiB", quick=16),
    Option("--body-bytes", int, 1000, "body size"),
    Option("--master", str, "local[2]", "Spark master"),
    Option("--cli", int, 1, "also time audit and reindex run by the mqstore command (0: no)"),
)
TINY_RECORDS = 10
"""The store the command-line rows subtract: Spark's and the interpreter's start-up."""


def generate(root: Path, size_bytes: int, segment_size: int, body_bytes: int) -> int:
    """Write a store of about ``size_bytes`` of CommitLog with consume queues and
    ``index/`` (built by the store's IndexService); return the record count."""
    from mqstore.index import IndexService

    (root / "commitlog").mkdir(parents=True)
    store_host = host_bytes(("127.0.0.1", 10911))
    born = host_bytes(("10.0.0.7", 50000))
    bodies = [bytes([i]) * body_bytes for i in range(16)]
    crcs = [fmt.body_crc(b) for b in bodies]
    index = IndexService(root / "index", INDEX_SLOTS, INDEX_NUM, clock=lambda: BASE_TS)
    index.load(last_exit_ok=True, index_msg_timestamp=0)
    units: dict[tuple[str, int], bytearray] = {}
    next_qoff: dict[tuple[str, int], int] = {}
    phys = count = 0
    while phys < size_bytes:
        seg_base, pos, chunks = phys, 0, []
        while phys < size_bytes:
            topic, qid = TOPICS[count % len(TOPICS)], (count // len(TOPICS)) % QUEUES
            tags = f"Tag{count % 5}"
            uniq, key = f"0A000007C35018B4AAC2{count:012X}", f"order-{count}"
            props = f"TAGS\x01{tags}\x02KEYS\x01{key}\x02UNIQ_KEY\x01{uniq}\x02"
            body = bodies[count % 16]
            size = fmt.record_length(0, 1, len(body), len(topic), len(props))
            if pos + size + fmt.END_FILE_MIN_BLANK_LENGTH > segment_size:
                chunks.append(fmt.encode_blank(segment_size - pos))
                phys = seg_base + segment_size
                break
            qoff = next_qoff.get((topic, qid), 0)
            next_qoff[topic, qid] = qoff + 1
            ts = BASE_TS + count
            chunks.append(
                fmt.encode_raw(
                    queue_id=qid, flag=0, queue_offset=qoff, physical_offset=phys, sys_flag=0,
                    born_timestamp=ts, born_host=born, store_timestamp=ts,
                    store_host=store_host, reconsume_times=0, prepared_transaction_offset=0,
                    body=body, crc=crcs[count % 16], topic=topic.encode(),
                    properties=props.encode(),
                )
            )  # fmt: skip
            units.setdefault((topic, qid), bytearray()).extend(
                cqfmt.encode_unit(phys, size, tags_code(tags))
            )
            index.build(topic, phys, ts, uniq, [key])
            pos, phys, count = pos + size, phys + size, count + 1
        with open(root / "commitlog" / f"{seg_base:020d}", "wb") as f:
            f.write(b"".join(chunks))
            f.truncate(segment_size)
    index.flush()
    index.close()
    for (topic, qid), data in units.items():
        qdir = root / "consumequeue" / topic / str(qid)
        qdir.mkdir(parents=True)
        for start in range(0, len(data), cqfmt.FILE_SIZE):
            with open(qdir / f"{start:020d}", "wb") as f:
                f.write(data[start : start + cqfmt.FILE_SIZE])
                f.truncate(cqfmt.FILE_SIZE)
    return count


def numpy_scan(root: Path) -> int:
    """The minimal reference: walk the sizes, read the header fields with numpy, CRC
    every body with zlib. Returns the record count (CRC failures are counted out)."""
    import mmap

    total = 0
    for seg in sorted((root / "commitlog").iterdir()):
        with open(seg, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as mm:
            total += _numpy_segment(mm)
    return total


def _numpy_segment(mm: Any) -> int:
    import numpy as np

    unpack = _layout._SIZE_MAGIC.unpack_from
    hdr = _layout._HEADERS[(_layout.IPV4_HOST_LEN, _layout.IPV4_HOST_LEN)].size
    pos, end, starts = 0, len(mm) - 8, []
    while pos <= end:
        size, magic = unpack(mm, pos)
        if magic not in (_layout.MAGIC_V1, _layout.MAGIC_V2):
            break
        starts.append(pos)
        pos += size
    p = np.asarray(starts, np.int64)
    u8 = np.frombuffer(mm, np.uint8)

    def field(at: int, width: int) -> Any:
        return u8[p[:, None] + at + np.arange(width)].view(f">i{width}").ravel()

    qid, qoff = field(_layout.QUEUE_ID_POS, 4), field(_layout.QUEUE_OFFSET_POS, 8)
    crc, body_len = field(_layout.BODY_CRC_POS, 4), field(hdr - 4, 4)
    with memoryview(mm) as v:
        ok = np.fromiter(
            (zlib.crc32(v[a : a + n]) & 0x7FFFFFFF
             for a, n in zip((p + hdr).tolist(), body_len.tolist(), strict=True)),
            np.int64, p.size,
        ) == crc  # fmt: skip
    return int(ok.sum()) + 0 * int(qid.sum() + qoff.sum())


def recovery_scan(root: Path, segment_size: int) -> int:
    """The engine's recovery scan over every segment, with CRC checks."""
    from mqstore.commitlog.recovery import scan
    from mqstore.commitlog.segments import Segments

    segs = Segments(root / "commitlog", segment_size)
    segs.load()
    try:
        return scan(segs, 0, check_crc=True)[1]
    finally:
        segs.close()


def bulk_scan(root: Path) -> int:
    """:mod:`mqstore.commitlog.bulk` over every segment, CRC and index keys included."""
    import mmap

    from mqstore.commitlog import bulk

    total = 0
    for seg in sorted((root / "commitlog").iterdir()):
        with open(seg, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as mm:
            pos = 0
            while True:
                b = bulk.scan(mm, pos, len(mm), keys=True)
                total += len(b.records)
                if b.stop is not None or b.end >= len(mm):
                    break
                pos = b.end
    return total


def _timed(fn: Any, *args: Any) -> tuple[Any, float]:
    t0 = time.perf_counter()
    out = fn(*args)
    return out, time.perf_counter() - t0


def tree_cpu() -> float:
    """CPU seconds (user + system) used so far by this process and every live
    descendant (the Spark JVM, its Python daemon and workers), plus the children they
    reaped, from ``/proc``: what a job cost whatever the machine's load (0.0 without
    ``/proc``)."""
    ticks = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
    parent: dict[int, int] = {}
    cpu: dict[int, int] = {}
    for entry in Path("/proc").glob("[0-9]*"):
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2 :].split()  # after "pid (comm) "
        pid = int(entry.name)
        parent[pid] = int(fields[1])
        cpu[pid] = sum(int(f) for f in fields[11:15])  # utime stime cutime cstime
    if not cpu:
        return 0.0
    total, todo = 0, [os.getpid()]
    children: dict[int, list[int]] = {}
    for pid, ppid in parent.items():
        children.setdefault(ppid, []).append(pid)
    while todo:
        pid = todo.pop()
        total += cpu.get(pid, 0)
        todo.extend(children.get(pid, ()))
    return total / ticks


def spark_runs(root: Path, master: str, work: Path) -> dict[str, Any]:
    """Session start-up, audit (cold, warm), reindex --out and export --parquet; each job
    is bracketed by a numpy scan just before and after it (``ref_<job>``: their mean), so
    its ratio holds even when the machine's load changes during the run."""
    from mqstore.tools.spark.audit import audit_with
    from mqstore.tools.spark.export import export_with
    from mqstore.tools.spark.layout import discover
    from mqstore.tools.spark.reindex import reindex_with
    from mqstore.tools.spark.session import build_session

    t0 = time.perf_counter()
    spark = build_session(master, "mqstore-benchmark")
    spark.range(1).count()
    out: dict[str, Any] = {"startup": time.perf_counter() - t0}

    def bracket(key: str, fn: Any, *args: Any) -> Any:
        before = _timed(numpy_scan, root)[1]
        cpu0 = tree_cpu()
        result, out[key] = _timed(fn, *args)
        out[f"cpu_{key}"] = tree_cpu() - cpu0
        out[f"ref_{key}"] = (before + _timed(numpy_scan, root)[1]) / 2
        print(f"{key}: {out[key]:.2f} s (numpy scan around it {out[f'ref_{key}']:.2f} s)")
        return result

    for run in ("audit_cold", "audit_warm", "audit_warm2"):
        report = bracket(run, audit_with, spark, discover(root))
        out["findings"], out["records"] = len(report.findings), report.records
        out["index_check"] = report.checks.get("index", "")
    summary = bracket("reindex", reindex_with, spark, root, work / "reindexed")
    out["reindex_units"] = summary["units"]
    out["reindex_identical"] = all(
        p.read_bytes() == (work / "reindexed" / p.relative_to(root)).read_bytes()
        for d in ("consumequeue", "index")
        for p in (root / d).rglob("*")
        if p.is_file()
    )
    result = bracket("export", export_with, spark, root, work / "export.parquet")
    out["export_rows"] = result.rows
    spark.stop()
    return out


def cli_runs(root: Path, master: str, work: Path, body_bytes: int) -> dict[str, Any]:
    """``mqstore audit`` and ``mqstore reindex --out`` as an operator runs them, each on
    the store and on a store of :data:`TINY_RECORDS` records: ``cli_<job>`` is the
    difference (the command's start-up removed), bracketed by numpy scans like
    :func:`spark_runs`' jobs."""
    import subprocess
    import sys

    tiny = work / "tiny"
    generate(tiny, TINY_RECORDS * (body_bytes + 150), 1 << 20, body_bytes)
    out: dict[str, Any] = {}
    jobs: dict[str, Callable[[Path, str], list[str]]] = {
        "audit": lambda d, n: ["audit", str(d), "--master", master],
        "reindex": lambda d, n: ["reindex", str(d), "--master", master,
                                 "--out", str(work / f"cli-reindex-{n}")],
    }  # fmt: skip

    def run(args: list[str]) -> float:
        t0 = time.perf_counter()
        quiet = subprocess.DEVNULL
        cmd = [sys.executable, "-m", "mqstore.tools.cli", *args]
        subprocess.run(cmd, stdout=quiet, stderr=quiet, check=False)
        return time.perf_counter() - t0

    for key, argv in jobs.items():
        small = run(argv(tiny, "tiny-1"))
        before = _timed(numpy_scan, root)[1]
        cpu0 = tree_cpu()
        big = run(argv(root, "big"))
        out[f"cpu_cli_{key}"] = tree_cpu() - cpu0
        out[f"ref_cli_{key}"] = (before + _timed(numpy_scan, root)[1]) / 2
        small = (small + run(argv(tiny, "tiny-2"))) / 2  # before and after: load drifts
        out[f"cli_{key}"] = max(big - small, 1e-3)
        print(f"mqstore {key}: {big:.2f} s, {small:.2f} s on {TINY_RECORDS} records"
              f" (numpy scan around it {out[f'ref_cli_{key}']:.2f} s)", flush=True)  # fmt: skip
    return out


ROWS = (
    ("audit_cold", "audit (cold)"),
    ("audit_warm", "audit (warm)"),
    ("audit_warm2", "audit (warm, again)"),
    ("reindex", "reindex --out"),
    ("export", "export --parquet"),
)
CLI_ROWS = (
    ("cli_audit", "mqstore audit - start-up"),
    ("cli_reindex", "mqstore reindex - start-up"),
)


def measure(work: Path, args: argparse.Namespace) -> dict[str, Any]:
    """Generate the store under ``work``, run the three scans, then the Spark jobs."""
    root = work / "store"
    n, secs = _timed(generate, root, args.size_mib << 20, args.segment_mib << 20,
                     args.body_bytes)  # fmt: skip
    total = sum(f.stat().st_size for f in (root / "commitlog").iterdir())
    files = sum(1 for _ in (root / "index").iterdir())
    print(f"store: {n} records of {args.body_bytes} B bodies, {total / 2**20:.0f} MiB of"
          f" CommitLog in {args.segment_mib} MiB segments, {files} index files,"
          f" built in {secs:.1f} s", flush=True)  # fmt: skip
    rows: list[dict[str, Any]] = []
    for name, fn, fargs in (
        ("numpy scan, 1 process", numpy_scan, (root,)),
        ("recovery scan, 1 process", recovery_scan, (root, args.segment_mib << 20)),
        ("bulk scan, 1 process", bulk_scan, (root,)),
    ):
        cpu0 = time.process_time()
        recs, secs = _timed(fn, *fargs)
        cpu = time.process_time() - cpu0
        rows.append({"scan": name, "records": recs, "seconds": secs, "around": 0.0, "cpu": cpu})
        print(f"{name}: {recs} records in {secs:.2f} s", flush=True)
    sp = spark_runs(root, args.master, work)
    rows_wanted: tuple[tuple[str, str], ...] = ROWS
    if args.cli:
        sp |= cli_runs(root, args.master, work, args.body_bytes)
        rows_wanted = ROWS + CLI_ROWS
    for key, label in rows_wanted:
        rows.append({"scan": f"{label}, {args.master}", "records": int(sp["records"]),
                     "seconds": sp[key], "around": sp[f"ref_{key}"],
                     "cpu": sp[f"cpu_{key}"]})  # fmt: skip
    return {"records": n, "commitlog_bytes": total, "spark": sp, "rows": rows,
            "load_average": os.getloadavg()[0]}  # fmt: skip


def report(out: dict[str, Any], _args: argparse.Namespace) -> str:
    """The printed table: records/s, MB/s and the ratios of every row."""
    rows, total, sp = out["rows"], out["commitlog_bytes"], out["spark"]
    ref_np = rows[0]["records"] / rows[0]["seconds"]
    ref_rec = rows[1]["records"] / rows[1]["seconds"]
    cpu_np = rows[0]["cpu"] / rows[0]["records"]
    lines = [f"\n{'':36} {'records':>9} {'s':>6} {'records/s':>10} {'MB/s':>6}"
             f" {'x numpy':>7} {'x recov':>7} {'x numpy around':>14} {'CPU s':>6}"
             f" {'CPU x numpy':>11}"]  # fmt: skip
    for r in rows:
        rate = r["records"] / r["seconds"]
        near = f"{r['around'] / r['seconds']:>14.2f}" if r["around"] else f"{'':>14}"
        cpu = r["cpu"] / r["records"]
        lines.append(
            f"{r['scan']:36} {r['records']:>9} {r['seconds']:>6.2f} {rate:>10,.0f}"
            f" {total / r['seconds'] / 1e6:>6.0f} {rate / ref_np:>7.2f} {rate / ref_rec:>7.2f}"
            f" {near} {r['cpu']:>6.2f} {cpu_np / cpu if cpu else 0:>11.2f}"
        )
    lines.append(
        f"Spark start-up {sp['startup']:.1f} s not included; audit findings {sp['findings']}"
        f" ({sp['index_check']}); reindex {sp['reindex_units']} units, consumequeue/ and"
        f" index/ byte-identical: {sp['reindex_identical']}; export rows {sp['export_rows']};"
        f" load average {out['load_average']:.1f}"
    )
    return "\n".join(lines)


main = Benchmark("spark_audit", __doc__, OPTIONS, measure, report).main


if __name__ == "__main__":
    raise SystemExit(main())
