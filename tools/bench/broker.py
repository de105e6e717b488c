"""``mqstore bench broker``: the broker over TCP against in-process puts (one run, printed).

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
3. **Pull over TCP**: one ``RemoteTransport`` reads every queue from offset 0 to its
   max offset (asked before the clock starts), 32 messages per PULL_MESSAGE, records
   decoded and tag-checked client side. Then the same with one thread and connection
   per queue. Every timed pull returns messages: a reader stops at the max offset
   instead of polling the drained queue, so the rows measure reads, not polls.
4. **The same with ACL**: the child broker again with ``--acl`` (one admin account),
   every client request signed (``AclSigner``) and verified: the signing cost, against
   the child-broker rows of the same run.

Each TCP row also shows CPU per message: ``client`` is this process's CPU time
(client threads; with the broker in-proc, the broker too) and ``broker`` the child
broker's (``/proc/<pid>/stat``), both over the row's wall time divided by its
messages. Rates are bounded by whichever side runs out of its one GIL first.

With the broker in this process, clients and broker share one GIL; the child-process
broker is the realistic deployment. The machine's load average and CPU count are
printed: compare numbers only within one run. ``--json FILE`` writes every row.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from mqstore import FlushDiskType, Message, MessageStore, StoreConfig
from mqstore.broker.core import BrokerCore
from mqstore.broker.server import BrokerServer
from mqstore.client.acl_hook import AclSigner
from mqstore.client.allocate import MessageQueue
from mqstore.client.producer import Producer
from mqstore.client.remote import RemoteTransport
from mqstore.client.transport import PullQuery
from mqstore.tools.bench._harness import (
    Benchmark,
    Option,
    free_port,
    run_parallel,
    spawn_cli,
    stop,
    wait_listening,
    wait_until,
)

TOPIC = "bench"
ACL_KEY, ACL_SECRET = "benchmark", "bench-secret"
BATCH = 32
QUEUES = 4  # what an auto-created topic gets (defaultTopicQueueNums)

OPTIONS = (
    Option("--messages", int, 40_000, "messages per body size", quick=2_000),
    Option("--threads", int, 8, "client threads (connections)"),
)


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


class Rows:
    """The measured rows: printed as they come, kept for ``--json``."""

    def __init__(self) -> None:
        self.rows: list[dict[str, Any]] = []

    def add(
        self, label: str, n: int, secs: float, size: int, cpu: str = "", requests: int = 0
    ) -> None:
        """Print and keep one row: ``n`` messages of ``size`` bytes in ``secs``;
        ``requests``: the pulls it took (pull rows; kept for ``--json``)."""
        rate = n / secs
        row: dict[str, Any] = {"label": label, "body_size": size, "messages": n,
                               "seconds": secs, "messages_per_s": rate,
                               "cpu_per_message": cpu.strip()}  # fmt: skip
        if requests:
            row["requests"] = requests
        self.rows.append(row)
        print(f"  {label:<44} {rate:>10,.0f} msg/s  {rate * size / 1e6:>7.1f} MB/s  "
              f"({n} in {secs:.2f} s){cpu}")  # fmt: skip


def in_process_put(rows: Rows, root: Path, size: int, per: int, threads: int) -> None:
    """The reference row: ``put_message`` from the same threads, no broker, no sockets."""
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

    done, secs = run_parallel(threads, put)
    rows.add("in-process put_message", done, secs, size)
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
def broker_child(root: Path, acl: Path | None = None) -> Iterator[tuple[str, int | None]]:
    """``mqstore broker`` in a child process (its own GIL), on a free port; with ``acl``,
    ``--acl`` that file (every request then signed and checked)."""
    port = free_port()
    extra = ["--acl", str(acl)] if acl is not None else []
    proc = spawn_cli(["broker", "--store", str(root), "--port", str(port), "--ha-port", "0",
                      *extra])  # fmt: skip
    try:
        wait_listening(proc, port, "mqstore broker")
        yield f"127.0.0.1:{port}", proc.pid
    finally:
        stop(proc)


def over_tcp(
    rows: Rows,
    addr: str,
    label: str,
    size: int,
    per: int,
    threads: int,
    broker_pid: int | None,
    rpc_hook: AclSigner | None = None,
) -> None:
    body = b"x" * size
    cpu = CpuMeter(broker_pid)
    setup = RemoteTransport(addr, rpc_hook=rpc_hook)
    for q in range(QUEUES):  # create the topic (4 queues) before timing
        mq = MessageQueue(TOPIC, setup.broker_name, q)
        Producer("bench", setup).start().send(Message(TOPIC, body), queue=mq)
    transports = [RemoteTransport(addr, rpc_hook=rpc_hook) for _ in range(threads)]

    def send(i: int) -> int:
        producer = Producer("bench", transports[i]).start()
        for k in range(per):
            producer.send(Message(TOPIC, body, tags="TagA", keys=[f"k{k}"]))
        return per

    cpu.start()
    done, secs = run_parallel(threads, send)
    rows.add(f"send, {threads} connections, {label}", done, secs, size, cpu.per_message(done))

    def send_batches(i: int) -> int:
        producer = Producer("bench", transports[i]).start()
        for k in range(0, per, BATCH):
            n = min(BATCH, per - k)
            producer.send_batch([Message(TOPIC, body, tags="TagA") for _ in range(n)])
        return per

    cpu.start()
    batched, secs = run_parallel(threads, send_batches)
    rows.add(f"send_batch({BATCH}), {threads} connections, {label}", batched, secs, size,
             cpu.per_message(batched))  # fmt: skip
    done += batched

    queues = setup.topic_queues(TOPIC)
    total = done + QUEUES  # dispatch catching up before reads are timed
    wait_until(lambda: sum(setup.max_offset(q) for q in queues) >= total, 60, "dispatch", 0.05)

    ends = {q: setup.max_offset(q) for q in queues}  # asked before timing

    pulls = [0] * len(queues)  # PULL_MESSAGE requests per queue, of the latest row

    def pull_queue(transport: RemoteTransport, i: int) -> int:
        """Messages read from ``queues[i]`` by pulls from 0 to its max offset."""
        mq, offset, got = queues[i], 0, 0
        pulls[i] = 0
        while offset < ends[mq]:
            reply = transport.pull(PullQuery("bench-cg", mq, offset, 32))
            pulls[i] += 1
            if not reply.messages:
                raise RuntimeError(f"{mq}: no messages at {offset}, max offset {ends[mq]}")
            got += len(reply.messages)
            offset = reply.next_begin_offset
        return got

    cpu.start()
    t0 = time.perf_counter()
    got = sum(pull_queue(setup, i) for i in range(len(queues)))
    secs = time.perf_counter() - t0
    rows.add(f"pull, 1 connection, {label}", got, secs, size, cpu.per_message(got), sum(pulls))
    # one connection per queue, whatever --threads was: the send connections number
    # --threads, the queues QUEUES
    pullers = [RemoteTransport(addr, rpc_hook=rpc_hook) for _ in queues]
    cpu.start()
    got, secs = run_parallel(len(queues), lambda i: pull_queue(pullers[i], i))
    rows.add(f"pull, {len(queues)} connections, {label}", got, secs, size,
             cpu.per_message(got), sum(pulls))  # fmt: skip
    for t in [setup, *transports, *pullers]:
        t.close()


def bench_size(rows: Rows, root: Path, size: int, n: int, threads: int) -> None:
    """Every row for one body size."""
    per = n // threads
    print(f"body {size} B, {per * threads} messages, {threads} client threads")
    in_process_put(rows, root, size, per, threads)
    with broker_here(root / f"here-{size}") as (addr, pid):
        over_tcp(rows, addr, "broker in-proc", size, per, threads, pid)
    with broker_child(root / f"child-{size}") as (addr, pid):
        over_tcp(rows, addr, "broker child", size, per, threads, pid)
    acl = root / "plain_acl.yml"  # every request signed (client) and verified (broker)
    acl.write_text(f"accounts:\n  - accessKey: {ACL_KEY}\n    secretKey: {ACL_SECRET}\n"
                   "    admin: true\n")  # fmt: skip
    with broker_child(root / f"child-acl-{size}", acl) as (addr, pid):
        signer = AclSigner(ACL_KEY, ACL_SECRET)
        over_tcp(rows, addr, "broker child, ACL", size, per, threads, pid, signer)


def measure(root: Path, args: argparse.Namespace) -> dict[str, Any]:
    """Every row of both body sizes; rows are printed as they are measured."""
    rows = Rows()
    print(f"loadavg {os.getloadavg()[0]:.2f}, cpus {os.cpu_count()}, dir {root}")
    for size in (100, 1024):
        bench_size(rows, root, size, args.messages, args.threads)
    return {"rows": rows.rows}


main = Benchmark("broker", __doc__, OPTIONS, measure).main


if __name__ == "__main__":
    raise SystemExit(main())
