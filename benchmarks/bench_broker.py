"""Broker-over-TCP benchmark (one run, printed)::

    python benchmarks/bench_broker.py [--messages N] [--threads 8] [--dir DIR]

What it measures, for 100 B and 1 KiB bodies (one tag, one key), each on a fresh
ASYNC_FLUSH store, with the broker twice: a ``BrokerServer`` inside this process, and
``mqstore broker`` in a child process, each on a free 127.0.0.1 port:

1. **In-process put** (the reference): ``MessageStore.put_message`` from the same
   number of threads, no broker, no sockets. Messages per second and MB/s of body.
2. **Send over TCP**: ``--threads`` client threads, each with its own
   ``RemoteTransport`` (its own connection) and ``Producer``, send synchronously
   (one SEND_MESSAGE_V2 round trip per message) round-robin over the topic's 4 queues.
   Rate = messages acknowledged / wall time from the first send to the last answer.
   Then the same messages again as batches of 32 (SEND_BATCH_MESSAGE).
3. **Pull over TCP**: one ``RemoteTransport`` reads every queue from offset 0 to the
   end, 32 messages per PULL_MESSAGE, records decoded and tag-checked client side.
   Then the same with one thread and connection per queue.

Each TCP row also shows CPU per message: ``client`` is this process's CPU time
(client threads; with the broker in-proc, the broker too) and ``broker`` the child
broker's (``/proc/<pid>/stat``), both over the row's wall time divided by its
messages. Rates are bounded by whichever side runs out of its one GIL first.

With the broker in this process, clients and broker share one GIL; the child-process
broker is the realistic deployment. The machine's load average and CPU count are
printed: compare numbers only within one run.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from mqstore import FlushDiskType, Message, MessageStore, StoreConfig
from mqstore.broker.core import BrokerCore
from mqstore.broker.server import BrokerServer
from mqstore.client.allocate import MessageQueue
from mqstore.client.producer import Producer
from mqstore.client.remote import RemoteTransport

TOPIC = "bench"
BATCH = 32
QUEUES = 4  # what an auto-created topic gets (defaultTopicQueueNums)


def run_threads(threads: int, work: Callable[[int], int]) -> tuple[int, float]:
    """Run ``work(i)`` on ``threads`` threads at once; (sum of results, seconds)."""
    results = [0] * threads
    start = threading.Barrier(threads + 1)

    def body(i: int) -> None:
        start.wait()
        results[i] = work(i)

    pool = [threading.Thread(target=body, args=(i,)) for i in range(threads)]
    for t in pool:
        t.start()
    start.wait()
    t0 = time.perf_counter()
    for t in pool:
        t.join()
    return sum(results), time.perf_counter() - t0


def proc_cpu(pid: int) -> float:
    """CPU seconds (user + system) of process ``pid`` so far, from ``/proc``."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class CpuMeter:
    """CPU per message of this process and (optionally) a broker child, per row."""

    def __init__(self, child_pid: int | None) -> None:
        self.child_pid = child_pid
        self._t0 = (0.0, 0.0)

    def start(self) -> None:
        """Mark the start of a timed row."""
        self._t0 = (time.process_time(), proc_cpu(self.child_pid) if self.child_pid else 0.0)

    def per_message(self, n: int) -> str:
        """`` cpu/msg client X us, broker Y us`` since :meth:`start`."""
        me = (time.process_time() - self._t0[0]) / max(n, 1) * 1e6
        text = f"  cpu/msg client {me:6.1f} us"
        if self.child_pid:
            child = (proc_cpu(self.child_pid) - self._t0[1]) / max(n, 1) * 1e6
            text += f", broker {child:6.1f} us"
        return text


def line(label: str, n: int, secs: float, size: int) -> str:
    rate = n / secs
    return (
        f"  {label:<44} {rate:>10,.0f} msg/s  {rate * size / 1e6:>7.1f} MB/s  ({n} in {secs:.2f} s)"
    )


def in_process_put(root: Path, size: int, per: int, threads: int) -> None:
    store = MessageStore.open(
        StoreConfig(
            root_dir=str(root / f"inproc-{size}"), flush_disk_type=FlushDiskType.ASYNC_FLUSH
        )
    )
    body = b"x" * size
    for k in range(2000):  # warm up: first segment mapped, caches filled
        store.put_message(Message("warmup", body, queue_id=k % QUEUES))

    def put(i: int) -> int:
        for k in range(per):
            msg = Message(TOPIC, body, tags="TagA", keys=[f"k{k}"], queue_id=k % QUEUES)
            store.put_message(msg)
        return per

    done, secs = run_threads(threads, put)
    print(line("in-process put_message", done, secs, size))
    store.close()


@contextlib.contextmanager
def broker_here(root: Path) -> Iterator[tuple[str, int | None]]:
    """A BrokerServer in this process (shares the GIL with the clients)."""
    store = MessageStore.open(
        StoreConfig(root_dir=str(root), flush_disk_type=FlushDiskType.ASYNC_FLUSH)
    )
    core = BrokerCore(store)
    core.start()
    server = BrokerServer(core, host="127.0.0.1", port=0)
    port = server.start()
    try:
        yield f"127.0.0.1:{port}", None
    finally:
        server.stop()
        core.shutdown()
        store.close()


@contextlib.contextmanager
def broker_child(root: Path) -> Iterator[tuple[str, int | None]]:
    """``mqstore broker`` in a child process (its own GIL), on a free port."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    cmd = [sys.executable, "-m", "mqstore.tools.cli", "broker", "--store", str(root),
           "--port", str(port), "--ha-port", "0"]  # fmt: skip
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if time.monotonic() > deadline or proc.poll() is not None:
                    raise RuntimeError(f"broker did not start: {cmd}") from None
                time.sleep(0.05)
        yield f"127.0.0.1:{port}", proc.pid
    finally:
        proc.terminate()
        proc.wait(30)


def over_tcp(
    addr: str, label: str, size: int, per: int, threads: int, broker_pid: int | None
) -> None:
    body = b"x" * size
    cpu = CpuMeter(broker_pid)
    setup = RemoteTransport(addr)
    for q in range(QUEUES):  # create the topic (4 queues) before timing
        mq = MessageQueue(TOPIC, setup.broker_name, q)
        Producer("bench", setup).start().send(Message(TOPIC, body), queue=mq)
    transports = [RemoteTransport(addr) for _ in range(threads)]

    def send(i: int) -> int:
        producer = Producer("bench", transports[i]).start()
        for k in range(per):
            producer.send(Message(TOPIC, body, tags="TagA", keys=[f"k{k}"]))
        return per

    cpu.start()
    done, secs = run_threads(threads, send)
    print(line(f"send, {threads} connections, {label}", done, secs, size) + cpu.per_message(done))

    def send_batches(i: int) -> int:
        producer = Producer("bench", transports[i]).start()
        for k in range(0, per, BATCH):
            n = min(BATCH, per - k)
            producer.send_batch([Message(TOPIC, body, tags="TagA") for _ in range(n)])
        return per

    cpu.start()
    batched, secs = run_threads(threads, send_batches)
    print(
        line(f"send_batch({BATCH}), {threads} connections, {label}", batched, secs, size)
        + cpu.per_message(batched)
    )
    done += batched

    queues = setup.topic_queues(TOPIC)
    deadline = time.monotonic() + 60
    total = done + QUEUES
    while sum(setup.max_offset(q) for q in queues) < total and time.monotonic() < deadline:
        time.sleep(0.05)  # dispatch catching up before reads are timed

    def pull_queue(transport: RemoteTransport, mq: MessageQueue) -> int:
        offset, got = 0, 0
        while True:
            reply = transport.pull("bench-cg", mq, offset, 32)
            if not reply.messages:
                return got
            got += len(reply.messages)
            offset = reply.next_begin_offset

    cpu.start()
    t0 = time.perf_counter()
    got = sum(pull_queue(setup, q) for q in queues)
    secs = time.perf_counter() - t0
    print(line(f"pull, 1 connection, {label}", got, secs, size) + cpu.per_message(got))
    cpu.start()
    got, secs = run_threads(len(queues), lambda i: pull_queue(transports[i], queues[i]))
    print(line(f"pull, {len(queues)} connections, {label}", got, secs, size) + cpu.per_message(got))
    for t in [setup, *transports]:
        t.close()


def bench_size(root: Path, size: int, n: int, threads: int) -> None:
    per = n // threads
    print(f"body {size} B, {per * threads} messages, {threads} client threads")
    in_process_put(root, size, per, threads)
    with broker_here(root / f"here-{size}") as (addr, pid):
        over_tcp(addr, "broker in-proc", size, per, threads, pid)
    with broker_child(root / f"child-{size}") as (addr, pid):
        over_tcp(addr, "broker child", size, per, threads, pid)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--messages", type=int, default=40_000)
    ap.add_argument("--threads", type=int, default=8)
    ap.add_argument("--dir", type=Path, default=None)
    args = ap.parse_args()
    root = args.dir or Path(tempfile.mkdtemp(prefix="bench-broker-"))
    print(f"loadavg {os.getloadavg()[0]:.2f}, cpus {os.cpu_count()}, dir {root}")
    try:
        for size in (100, 1024):
            bench_size(root, size, args.messages, args.threads)
    finally:
        if args.dir is None:
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
