"""``mqstore bench queues``: what a queue costs when a store holds thousands of them.

``mqstore bench queues [--quick] [--scenarios 10000x1,10000x10] [--json FILE] [--dir DIR]``

Each scenario ``QxM`` puts ``M`` messages into each of ``Q`` queues (topics of 20
queues, 100-byte bodies, one ``put_message`` per message, queues taken round-robin)
on an embedded store with the default sizes, given in its config (1 GiB CommitLog
segments, 300,000-unit consume-queue files, 5M-slot index files; ASYNC_FLUSH,
dispatch in a thread), and a reference that puts the same number of messages over
4 queues. Each runs in a fresh child process (so its RSS is its own) and measures:

* **put rate**: messages / wall time of the puts, against the reference's;
* **dispatch done**: time from the last put until every message is dispatched;
* **dispatcher CPU**: user and system CPU time of the dispatch thread (``reput``)
  per message, from ``/proc/self/task/TID/stat``: user time is interpreter time the
  producer competes with for the GIL, system time is the kernel's work on the queue
  files (creating each queue's directory and file, writing units);
* **disk**: real allocated bytes (``st_blocks * 512``, what ``du`` shows) of
  ``consumequeue/`` and of the whole store, after ``close()``; per queue;
* **RSS**: the process's resident set after dispatch, minus the reference's (the
  same messages over 4 queues): divided by Q, the memory a queue costs;
* **close()** after the puts (and how many queues it found with units not yet synced:
  the close syncs those, and only those), then **open()** of the cleanly closed store, the time
  to read every queue once after it (a queue's files are read on first use), whether
  every queue reads back its messages (``get_message`` of each queue), and the RSS
  after those reads.

Figures vary with the load of this shared machine: compare within one run only (the
load average is printed).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from mqstore.tools.bench._harness import Benchmark, Option

QUEUES_PER_TOPIC = 20
BODY = b"x" * 100

OPTIONS = (
    Option(
        "--scenarios",
        str,
        "10000x1,10000x10",
        "QUEUESxMESSAGES, comma-separated",
        quick="500x1,100x5",
    ),
)


def allocated_bytes(path: Path) -> int:
    """Real allocated bytes under ``path`` (sum of ``st_blocks * 512``, as ``du``)."""
    total = 0
    for root, _dirs, files in os.walk(path):
        for name in files:
            with contextlib.suppress(FileNotFoundError):
                total += os.stat(os.path.join(root, name)).st_blocks * 512
    return total


def rss_bytes() -> int:
    """Resident set size of this process (``VmRSS``)."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0


def thread_cpu(name: str) -> tuple[float, float]:
    """(user, system) CPU seconds of this process's live thread called ``name``
    (0, 0 if there is none, or off Linux)."""
    import threading

    tick = os.sysconf("SC_CLK_TCK")
    for t in threading.enumerate():
        if t.name != name or t.native_id is None:
            continue
        try:
            with open(f"/proc/self/task/{t.native_id}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            return 0.0, 0.0
        return int(fields[11]) / tick, int(fields[12]) / tick  # utime, stime
    return 0.0, 0.0


def run_child(root: Path, queues: int, per_queue: int, total: int) -> dict[str, Any]:
    """One scenario in this process: ``total`` messages over ``queues`` queues."""
    from mqstore import Message, MessageStore, StoreConfig

    topics = [f"T{t}" for t in range(-(-queues // QUEUES_PER_TOPIC))]
    targets = [(topics[q // QUEUES_PER_TOPIC], q % QUEUES_PER_TOPIC) for q in range(queues)]
    msgs = [
        Message(topic=targets[i % queues][0], body=BODY, queue_id=targets[i % queues][1])
        for i in range(total)
    ]
    # The default sizes, given: a store told its sizes does not detect them from its
    # files on open (mqstore.geometry), which is not what is measured here.
    cfg = StoreConfig(
        root_dir=root,
        commitlog_file_size=1 << 30,
        mapped_file_size_consume_queue=300_000 * 20,
        max_hash_slot_num=5_000_000,
        max_index_num=20_000_000,
    )
    rss0 = rss_bytes()
    store = MessageStore.open(cfg)
    put = store.put_message
    t0 = time.perf_counter()
    for m in msgs:
        r = put(m)
        if not r.status.stored:
            raise SystemExit(f"put failed: {r}")
    put_s = time.perf_counter() - t0
    store.wait_dispatched(3600)
    dispatched_s = time.perf_counter() - t0 - put_s
    reput_user, reput_sys = thread_cpu("reput")
    rss_open = rss_bytes()
    waiting = store.queues.dirty_count  # what the close syncs (the rest costs no I/O)
    t1 = time.perf_counter()
    store.close()
    close_s = time.perf_counter() - t1
    del msgs
    cq_disk = allocated_bytes(cfg.consume_queue_path)
    store_disk = allocated_bytes(root)
    t2 = time.perf_counter()
    store = MessageStore.open(cfg)
    open_s = time.perf_counter() - t2
    readable = 0
    expected = min(per_queue, total // queues)
    t3 = time.perf_counter()
    for topic, qid in targets:
        got = store.get_message("bench", topic, qid, 0, per_queue)
        if len(got.messages) == expected:
            readable += 1
    reads_s = time.perf_counter() - t3
    rss_reopened = rss_bytes()
    t4 = time.perf_counter()
    store.close()
    reclose_s = time.perf_counter() - t4
    return {
        "queues": queues,
        "per_queue": per_queue,
        "messages": total,
        "put_rate": total / put_s,
        "dispatch_after_puts_s": dispatched_s,
        "dispatch_user_us": reput_user / total * 1e6,
        "dispatch_sys_us": reput_sys / total * 1e6,
        "rss_before_open": rss0,
        "rss_after_dispatch": rss_open,
        "rss_after_reopen_reads": rss_reopened,
        "close_s": close_s,
        "queues_unsynced_at_close": waiting,
        "open_s": open_s,
        "read_every_queue_s": reads_s,
        "close_after_reads_s": reclose_s,
        "cq_disk": cq_disk,
        "store_disk": store_disk,
        "readable_queues": readable,
    }


def scenario(base: Path, queues: int, per_queue: int, total: int) -> dict[str, Any]:
    """Run one scenario in a child process under ``base`` (removed after)."""
    root = base / f"q{queues}x{per_queue}-{total}"
    shutil.rmtree(root, ignore_errors=True)
    child = [sys.executable, "-m", "mqstore.tools.bench.queues", "--child", str(root)]
    try:
        out = subprocess.run(
            [*child, str(queues), str(per_queue), str(total)],
            check=True,
            capture_output=True,
            text=True,
        )
    finally:
        shutil.rmtree(root, ignore_errors=True)
    result: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def parse_scenarios(spec: str) -> list[tuple[int, int]]:
    """``"10000x1,2000x20"`` -> ``[(10000, 1), (2000, 20)]``.

    >>> parse_scenarios("10000x1, 4x5")
    [(10000, 1), (4, 5)]
    """
    out = []
    for part in spec.split(","):
        q, _, per = part.strip().partition("x")
        out.append((int(q), int(per)))
    return out


def measure(work: Path, args: argparse.Namespace) -> dict[str, Any]:
    """Every scenario of ``args.scenarios`` and its 4-queue reference, in this order."""
    results = []
    for q, per in parse_scenarios(args.scenarios):
        total = q * per
        ref = scenario(work, 4, -(-total // 4), total)
        many = scenario(work, q, per, total)
        results.append({"many": many, "reference": ref})
    return {"scenarios": results, "loadavg_after": list(os.getloadavg()),
            "cpu_count": os.cpu_count()}  # fmt: skip


def report_one(many: dict[str, Any], ref: dict[str, Any]) -> str:
    """The lines of one scenario against its reference."""
    q = many["queues"]
    mib = 1024 * 1024
    extra_rss = many["rss_after_dispatch"] - ref["rss_after_dispatch"]
    lines = [
        f"{q} queues x {many['per_queue']} ({many['messages']} messages) vs 4 queues:",
        f"  put rate           {many['put_rate']:9.0f}/s vs {ref['put_rate']:9.0f}/s "
        f"= {many['put_rate'] / ref['put_rate']:.2f}x",
        f"  consumequeue disk  {many['cq_disk'] / mib:9.1f} MiB = "
        f"{many['cq_disk'] / q / 1024:.1f} KiB per queue (4 queues: "
        f"{ref['cq_disk'] / 1024:.0f} KiB)",
        f"  store disk         {many['store_disk'] / mib:9.1f} MiB (4 queues: "
        f"{ref['store_disk'] / mib:.1f} MiB)",
        f"  RSS after dispatch {many['rss_after_dispatch'] / mib:9.1f} MiB vs "
        f"{ref['rss_after_dispatch'] / mib:.1f} MiB: {extra_rss / q / 1024:.2f} KiB per queue",
        f"  dispatch done      {many['dispatch_after_puts_s']:9.2f} s after the last put "
        f"(4 queues: {ref['dispatch_after_puts_s']:.2f} s)",
        f"  dispatcher CPU     {many['dispatch_user_us']:6.1f} us user + "
        f"{many['dispatch_sys_us']:.1f} us system per message (4 queues: "
        f"{ref['dispatch_user_us']:.1f} + {ref['dispatch_sys_us']:.1f})",
        f"  close()            {many['close_s']:9.2f} s (4 queues: {ref['close_s']:.2f} s); "
        f"{many['queues_unsynced_at_close']} queues unsynced then",
        f"  open() after clean close {many['open_s']:7.2f} s (4 queues: {ref['open_s']:.2f} s)",
        f"  first read of every queue after open {many['read_every_queue_s']:.2f} s; "
        f"RSS then {many['rss_after_reopen_reads'] / mib:.1f} MiB; "
        f"close() then {many['close_after_reads_s']:.2f} s",
        f"  readable queues    {many['readable_queues']} of {q}",
    ]
    return "\n".join(lines)


def report(out: dict[str, Any], _args: argparse.Namespace) -> str:
    """The printed table: each scenario against its reference, then the load."""
    parts = [report_one(r["many"], r["reference"]) for r in out["scenarios"]]
    load = out["loadavg_after"][0]
    parts.append(f"load average {load:.1f} on {out['cpu_count']} CPUs")
    return "\n".join(parts)


BENCHMARK = Benchmark("queues", __doc__, OPTIONS, measure, report)


def main(argv: list[str] | None = None) -> int:
    """Run the scenarios and print the table; 0. ``--child ROOT Q M TOTAL`` runs one
    scenario in this process and prints its figures as JSON (what :func:`scenario`
    starts)."""
    args = list(sys.argv[1:] if argv is None else argv)
    if args[:1] == ["--child"]:
        root, q, per, total = args[1:5]
        print(json.dumps(run_child(Path(root), int(q), int(per), int(total))))
        return 0
    return BENCHMARK.main(args)


if __name__ == "__main__":
    raise SystemExit(main())
