"""Issue-14 benchmark: what a queue costs when a store holds thousands of them::

    python benchmarks/bench_queues.py [--quick] [--scenarios 10000x1,10000x10] [--dir DIR]

Each scenario runs in a fresh child process (so its RSS is its own) on an embedded
store with the default sizes, given in its config (1 GiB CommitLog segments,
300,000-unit consume-queue files, 5M-slot index files; ASYNC_FLUSH, dispatch in a
thread) and measures, for ``Q`` queues with ``M``
messages each (topics of 20 queues, 100-byte bodies, one ``put_message`` per
message, queues taken round-robin):

* **put rate**: messages / wall time of the puts, against a reference scenario in
  the same run that puts the same number of messages over 4 queues;
* **disk**: real allocated bytes (``st_blocks * 512``, what ``du`` shows) of
  ``consumequeue/`` and of the whole store, after ``close()``; per queue;
* **RSS**: the process's resident set after dispatch, minus the reference's (the
  same messages over 4 queues): divided by Q, the memory a queue costs;
* **close()** after the puts, then **open()** of the cleanly closed store, and
  whether every queue reads back its messages (``get_message`` of each queue).

Figures vary with the load of this shared machine: compare within one run only.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

QUEUES_PER_TOPIC = 20
BODY = b"x" * 100


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


def run_child(root: Path, queues: int, per_queue: int, total: int) -> dict[str, Any]:
    """One scenario: ``total`` messages over ``queues`` queues, measured."""
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
    store.wait_dispatched(600)
    dispatched_s = time.perf_counter() - t0 - put_s
    rss_open = rss_bytes()
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
    for topic, qid in targets:
        got = store.get_message("bench", topic, qid, 0, per_queue)
        if len(got.messages) == min(per_queue, total // queues):
            readable += 1
    rss_reopened = rss_bytes()
    t3 = time.perf_counter()
    store.close()
    reclose_s = time.perf_counter() - t3
    return {
        "queues": queues,
        "per_queue": per_queue,
        "messages": total,
        "put_rate": total / put_s,
        "dispatch_after_puts_s": dispatched_s,
        "rss_before_open": rss0,
        "rss_after_dispatch": rss_open,
        "rss_after_reopen_reads": rss_reopened,
        "close_s": close_s,
        "open_s": open_s,
        "close_after_reads_s": reclose_s,
        "cq_disk": cq_disk,
        "store_disk": store_disk,
        "readable_queues": readable,
    }


def scenario(base: Path, queues: int, per_queue: int, total: int) -> dict[str, Any]:
    root = base / f"q{queues}x{per_queue}-{total}"
    shutil.rmtree(root, ignore_errors=True)
    out = subprocess.run(
        [sys.executable, __file__, "--child", str(root), str(queues), str(per_queue), str(total)],
        check=True,
        capture_output=True,
        text=True,
    )
    shutil.rmtree(root, ignore_errors=True)
    result: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def report(many: dict[str, Any], ref: dict[str, Any]) -> str:
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
        f"  RSS after reopen + reading every queue {many['rss_after_reopen_reads'] / mib:.1f} MiB",
        f"  dispatch done      {many['dispatch_after_puts_s']:9.2f} s after the last put "
        f"(4 queues: {ref['dispatch_after_puts_s']:.2f} s)",
        f"  close()            {many['close_s']:9.2f} s (4 queues: {ref['close_s']:.2f} s); "
        f"after reading every queue {many['close_after_reads_s']:.2f} s",
        f"  open() after clean close {many['open_s']:9.2f} s (4 queues: {ref['open_s']:.2f} s)",
        f"  readable queues    {many['readable_queues']} of {q}",
    ]
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--child", nargs=4, metavar=("ROOT", "QUEUES", "PER", "TOTAL"))
    ap.add_argument("--scenarios", default="10000x1,2000x20,10000x10",
                    help="QUEUESxMESSAGES, comma-separated (default: %(default)s)")  # fmt: skip
    ap.add_argument("--quick", action="store_true", help="1000x1 and 200x20 only")
    ap.add_argument("--dir", default=None, help="where the stores go (default: a temp dir)")
    ap.add_argument("--json", default=None, help="write the results here too")
    args = ap.parse_args()
    if args.child:
        root, q, per, total = args.child
        print(json.dumps(run_child(Path(root), int(q), int(per), int(total))))
        return
    specs = "1000x1,200x20" if args.quick else args.scenarios
    base = Path(args.dir or tempfile.mkdtemp(prefix="bench-queues-"))
    base.mkdir(parents=True, exist_ok=True)
    results = []
    try:
        for spec in specs.split(","):
            q, per = (int(x) for x in spec.split("x"))
            total = q * per
            ref = scenario(base, 4, -(-total // 4), total)
            many = scenario(base, q, per, total)
            print(report(many, ref), flush=True)
            results.append({"many": many, "reference": ref})
    finally:
        if args.dir is None:
            shutil.rmtree(base, ignore_errors=True)
    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
