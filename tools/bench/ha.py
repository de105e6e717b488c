"""``mqstore bench ha``: replication throughput on loopback, SYNC vs ASYNC_MASTER put latency.

What it measures, in one run, printed:

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
import statistics
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from mqstore import BrokerRole, Message, MessageStore, PutStatus, StoreConfig
from mqstore.ha import service as ha_service
from mqstore.ha.master import HAMaster
from mqstore.tools.bench._harness import (
    Benchmark,
    Option,
    percentile,
    spawn_cli,
    stop,
    wait_until,
)

BODY = 1024
FILE_SIZE = 1 << 30

OPTIONS = (
    Option("--messages", int, 200_000, "messages per throughput phase", quick=5_000),
    Option("--rounds", int, 20, "latency rounds, each role one block per round", quick=4),
    Option("--block", int, 250, "puts per latency block", quick=100),
)


def start_slave(root: Path, port: int) -> subprocess.Popen[bytes]:
    """A slave broker process replicating from 127.0.0.1:port."""
    master = f"127.0.0.1:{port}"
    args = ["broker", "--store", str(root), "--port", "0", "--role", "SLAVE", "--master-ha", master]
    return spawn_cli([*args, "--file-size", str(FILE_SIZE)])


def wait(check: Callable[[], bool], timeout: float, what: str) -> None:
    """Poll finely: the catch-up and follow clocks stop when ``check`` first holds."""
    wait_until(check, timeout, what, poll=0.0005)


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


def _first_ack(store: MessageStore, master: HAMaster) -> None:
    """Wait for the slave to connect, then for its ack of one put."""
    wait(lambda: master.connection_count() > 0, 30, "slave connection")
    store.put_message(message(0))
    end = store.max_physical_offset
    wait(lambda: master.push_to_slave_max_offset >= end, 30, "first ack")


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
            _first_ack(store, master)
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


def measure(work: Path, args: argparse.Namespace) -> dict[str, Any]:
    """Both throughput phases, then the latency blocks of both roles."""
    n, rounds, block = args.messages, args.rounds, args.block
    alone, catch_up, follow, per_msg = throughput(work, n)
    summary: dict[str, dict[str, float]] = {}
    for name, values in latencies(work, rounds, block).items():
        s = sorted(values)
        summary[name] = {"p50_us": percentile(s, 50), "p99_us": percentile(s, 99),
                         "mean_us": statistics.fmean(s)}  # fmt: skip
    return {"messages": n, "record_bytes": per_msg, "puts_per_role": rounds * block,
            "puts_alone_mb_per_s": alone, "catch_up_mb_per_s": catch_up,
            "follow_mb_per_s": follow, "put_latency_us": summary}  # fmt: skip


def report(out: dict[str, Any], _args: argparse.Namespace) -> str:
    """The printed table."""
    lines = [
        f"HA replication on loopback, {BODY} B bodies ({out['record_bytes']} B records), "
        f"{out['messages']} messages per phase, {os.cpu_count()} CPUs",
        f"  catch-up (new slave copies the log)   {out['catch_up_mb_per_s']:8.1f} MB/s",
        f"  follow (slave keeps up with puts)     {out['follow_mb_per_s']:8.1f} MB/s",
        f"  puts alone, no slave (follow's bound) {out['puts_alone_mb_per_s']:8.1f} MB/s",
        f"put latency, one thread, {out['puts_per_role']} puts per role (us)",
        f"  {'role':<14}{'p50':>9}{'p99':>9}{'mean':>9}",
    ]
    for name, r in out["put_latency_us"].items():
        lines.append(f"  {name:<14}{r['p50_us']:9.1f}{r['p99_us']:9.1f}{r['mean_us']:9.1f}")
    return "\n".join(lines)


main = Benchmark("ha", __doc__, OPTIONS, measure, report).main


if __name__ == "__main__":
    raise SystemExit(main())
