"""HA replication benchmark: loopback throughput and SYNC_MASTER vs ASYNC_MASTER put latency.

What it measures, in one run, printed::

    python benchmarks/bench_ha.py [--quick] [--messages N] [--dir DIR]

1. **Catch-up throughput.** A master store (this process) is filled with N messages of
   1 KiB, then an empty slave (``mqstore broker --role SLAVE``, its own process) is
   started; the clock runs from the slave's connection to its ack of the master's end.
   MB/s = replicated bytes / seconds (MB = 10^6 bytes). The log fits one CommitLog file,
   so the new slave starts at offset 0 and copies all of it.
2. **Follow throughput.** With the slave connected, the master appends N more messages
   flat out (one thread); the clock runs from the first put to the slave's ack of the
   last byte: what replication sustains while producing. The single producer thread
   bounds it, so the rate of the same puts with no slave (phase 1's fill) is printed
   next to it: the gap is what serving the slave costs the producer (same process,
   one GIL).
3. **Put latency.** An ASYNC_MASTER and a SYNC_MASTER store in this process, each with
   its own slave process, take single-threaded 1 KiB puts in alternating blocks (so
   both see the same machine state); p50/p99 per role. SYNC_MASTER's extra time is a
   round trip to the slave: the writer wakes, sends the frame, the slave appends and
   reports, the waiter wakes.

Loopback only, ASYNC_FLUSH on both sides (no fsync in the numbers).
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from mqstore import BrokerRole, Message, MessageStore, PutStatus, StoreConfig
from mqstore.ha import service as ha_service
from mqstore.ha.master import HAMaster

BODY = 1024
FILE_SIZE = 1 << 30


def start_slave(root: Path, port: int) -> subprocess.Popen[bytes]:
    """A slave broker process replicating from 127.0.0.1:port."""
    return subprocess.Popen(
        [sys.executable, "-m", "mqstore.tools.cli", "broker", "--store", str(root),
         "--role", "SLAVE", "--master-ha", f"127.0.0.1:{port}", "--file-size", str(FILE_SIZE)],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip


def stop(proc: subprocess.Popen[bytes]) -> None:
    proc.terminate()
    try:
        proc.wait(20)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def wait(check: object, timeout: float, what: str) -> None:
    assert callable(check)
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise SystemExit(f"bench_ha: timed out waiting for {what}")
        time.sleep(0.0005)


def open_master(root: Path, role: BrokerRole) -> tuple[MessageStore, HAMaster]:
    cfg = StoreConfig(root_dir=root, broker_role=role, commitlog_file_size=FILE_SIZE,
                      ha_listen_port=0, compress_msg_body_over=1 << 20)  # fmt: skip
    store = MessageStore.open(cfg)
    return store, ha_service.serve(store)


def message(i: int) -> Message:
    return Message(topic="bench", body=b"%08d" % i + b"x" * (BODY - 8), queue_id=i % 8)


def throughput(work: Path, n: int) -> tuple[float, float, float, int]:
    """(puts-alone MB/s, catch-up MB/s, follow MB/s, bytes per message)."""
    store, master = open_master(work / "tp-m", BrokerRole.ASYNC_MASTER)
    slave = None
    try:
        t0 = time.perf_counter()
        for i in range(n):
            store.put_message(message(i))
        end = store.max_physical_offset
        alone = end / (time.perf_counter() - t0) / 1e6
        slave = start_slave(work / "tp-s", master.port)
        wait(lambda: master.connection_count() > 0, 30, "slave connection")
        t0 = time.perf_counter()
        wait(lambda: master.push_to_slave_max_offset >= end, 120, "catch-up")
        catch_up = end / (time.perf_counter() - t0) / 1e6

        start = store.max_physical_offset
        t0 = time.perf_counter()
        for i in range(n):
            store.put_message(message(i))
        end = store.max_physical_offset
        wait(lambda: master.push_to_slave_max_offset >= end, 120, "follow")
        follow = (end - start) / (time.perf_counter() - t0) / 1e6
        return alone, catch_up, follow, (end - start) // n
    finally:
        if slave is not None:
            stop(slave)
        store.close()


def latencies(work: Path, rounds: int, block: int) -> dict[str, list[float]]:
    """Put latencies in microseconds per role, from alternating blocks."""
    stores = {}
    slaves = []
    try:
        for role in (BrokerRole.ASYNC_MASTER, BrokerRole.SYNC_MASTER):
            store, master = open_master(work / f"lat-{role.value}", role)
            stores[role.value] = (store, master)
            slaves.append(start_slave(work / f"lat-{role.value}-s", master.port))
        for store, master in stores.values():
            wait(lambda m=master: m.connection_count() > 0, 30, "slave connection")
            store.put_message(message(0))
            wait(lambda s=store, m=master: m.push_to_slave_max_offset >= s.max_physical_offset,
                 30, "first ack")  # fmt: skip
        samples: dict[str, list[float]] = {name: [] for name in stores}
        seq = 0
        for _ in range(rounds):
            for name, (store, _m) in stores.items():
                out = samples[name]
                for _ in range(block):
                    msg = message(seq)
                    seq += 1
                    t0 = time.perf_counter_ns()
                    r = store.put_message(msg)
                    out.append((time.perf_counter_ns() - t0) / 1000)
                    if r.status is not PutStatus.PUT_OK:
                        raise SystemExit(f"bench_ha: {name} put returned {r.status}")
        return samples
    finally:
        for p in slaves:
            stop(p)
        for store, _m in stores.values():
            store.close()


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--messages", type=int, default=200_000, help="messages per throughput phase")
    p.add_argument("--quick", action="store_true", help="small counts (smoke run)")
    p.add_argument("--dir", default=None, help="work directory (default: a temp dir)")
    args = p.parse_args(argv)
    n = 5_000 if args.quick else args.messages
    rounds, block = (4, 100) if args.quick else (20, 250)
    work = Path(args.dir or tempfile.mkdtemp(prefix="bench-ha-"))
    work.mkdir(parents=True, exist_ok=True)
    try:
        alone, catch_up, follow, per_msg = throughput(work, n)
        lat = latencies(work, rounds, block)
    finally:
        if args.dir is None:
            shutil.rmtree(work, ignore_errors=True)
    print(f"HA replication on loopback, {BODY} B bodies ({per_msg} B records), "
          f"{n} messages per phase, {os.cpu_count()} CPUs")  # fmt: skip
    print(f"  catch-up (new slave copies the log)   {catch_up:8.1f} MB/s")
    print(f"  follow (slave keeps up with puts)     {follow:8.1f} MB/s")
    print(f"  puts alone, no slave (follow's bound) {alone:8.1f} MB/s")
    print(f"put latency, one thread, {rounds * block} puts per role (us)")
    print(f"  {'role':<14}{'p50':>9}{'p99':>9}{'mean':>9}")
    for name, values in lat.items():
        print(f"  {name:<14}{pct(values, 0.5):9.1f}{pct(values, 0.99):9.1f}"
              f"{statistics.fmean(values):9.1f}")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
