"""``mqstore quickstart``: the first ten minutes, as one command.

1. produce from eight threads with SYNC_FLUSH (group commit: every PUT_OK is on disk);
2. simulate a crash (no clean shutdown) and reopen: abnormal recovery re-validates
   the log and rebuilds consume queues and the index;
3. serve the store with the broker on 127.0.0.1 (RocketMQ's remoting protocol) and
   consume it with a rebalancing group of three push consumers (tag filter
   ``TagA || TagB``); one leaves half-way and the others take its queues over at once;
   check that every acknowledged message came back intact;
4. look a message up by key through the index;
5. audit the segments with Spark on ``local[*]`` (skipped with ``--no-spark``, or with
   a line saying why when PySpark or Java 17+ is not installed: the tour still passes
   on steps 1-4, which read every message back);
6. print a summary a person can read in ten seconds.

"""

from __future__ import annotations

import argparse
import dataclasses
import shutil
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the store and client load lazily: `mqstore --help` stays fast
    from mqstore.client.consumer import (
        ConsumeConcurrentlyContext,
        ConsumeConcurrentlyStatus,
        PushConsumer,
    )
    from mqstore.client.remote import RemoteTransport
    from mqstore.consumequeue.results import StoredMessage
    from mqstore.geometry import StoreGeometry
    from mqstore.message_store import MessageStore

TOPIC = "orders"
QUEUES = 4
THREADS = 8


def _produce(store: MessageStore, n: int) -> tuple[dict[str, bytes], float]:
    from mqstore import Message, PutStatus

    acked: dict[str, bytes] = {}
    lock = threading.Lock()

    def worker(w: int) -> None:
        for i in range(w, n, THREADS):
            body = f"order #{i} from producer {w}".encode()
            r = store.put_message(
                Message(
                    topic=TOPIC,
                    body=body,
                    tags="TagA" if i % 2 else "TagB",
                    keys=[f"order-{i}"],
                    queue_id=i % QUEUES,
                )
            )
            if r.status is PutStatus.PUT_OK:
                with lock:
                    acked[r.uniq_key] = body

    t0 = time.perf_counter()
    threads = [threading.Thread(target=worker, args=(w,)) for w in range(THREADS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return acked, time.perf_counter() - t0


class _Group:
    """Three PushConsumers of group ``quickstart`` over TCP, recording what each saw."""

    def __init__(self, namesrv: str) -> None:
        from mqstore.client.consumer import ConsumeFromWhere, ConsumerConfig
        from mqstore.client.remote import RemoteTransport

        self.cfg = ConsumerConfig(
            consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
            suspend_ms=1000,
            persist_offset_interval_ms=500,
        )
        self.namesrv = namesrv
        self.transport_cls = RemoteTransport
        self.lock = threading.Lock()
        self.seen: dict[str, bytes] = {}
        self.per_consumer: dict[str, int] = {}
        self.deliveries = 0
        self.consumers: dict[str, PushConsumer] = {}
        self.transports: list[RemoteTransport] = []

    def start(self, name: str) -> None:
        from mqstore.client.consumer import ConsumeConcurrentlyStatus, PushConsumer

        def on_msgs(
            msgs: Sequence[StoredMessage], _ctx: ConsumeConcurrentlyContext
        ) -> ConsumeConcurrentlyStatus:
            with self.lock:
                for m in msgs:
                    self.deliveries += 1
                    self.per_consumer[name] = self.per_consumer.get(name, 0) + 1
                    self.seen[m.properties.get("UNIQ_KEY", "")] = m.body
            return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

        t = self.transport_cls(self.namesrv)
        c = PushConsumer("quickstart", t, dataclasses.replace(self.cfg, instance_name=name))
        c.subscribe(TOPIC, "TagA || TagB")
        c.register_message_listener(on_msgs)
        c.start()
        self.consumers[name] = c
        self.transports.append(t)

    def owned(self) -> dict[str, list[int]]:
        return {
            name: sorted(mq.queue_id for mq in c.owned() if mq.topic == TOPIC)
            for name, c in self.consumers.items()
        }

    def wait(self, pred: Callable[[], bool], timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if pred():
                return True
            time.sleep(0.05)
        return pred()

    def stop(self, name: str) -> None:
        self.consumers.pop(name).shutdown()

    def close(self) -> None:
        for name in list(self.consumers):
            self.stop(name)
        for t in self.transports:
            t.close()


def _ownership(owned: dict[str, list[int]]) -> str:
    return ", ".join(f"{name}={queues}" for name, queues in owned.items())


def _settled(owned: dict[str, list[int]]) -> bool:
    queues = [q for qs in owned.values() for q in qs]
    return sorted(queues) == list(range(QUEUES)) and all(owned.values())


def _consume(store: MessageStore, acked: dict[str, bytes]) -> tuple[bool, list[str]]:
    """Consume through a broker on 127.0.0.1 with a rebalancing group of three; one
    member leaves half-way and the other two take its queues over."""
    from mqstore.broker.core import BrokerCore
    from mqstore.broker.server import BrokerServer
    from mqstore.broker.topics import TopicConfig

    lines: list[str] = []
    core = BrokerCore(store)
    core.start()
    core.create_topic(TopicConfig(TOPIC, QUEUES, QUEUES))
    server = BrokerServer(core, port=0)
    server.start()
    group = _Group(server.address)
    try:
        # Members join together, as a deployed group does; one joining long after the
        # others took every queue would only show more redeliveries.
        joins = [
            threading.Thread(target=group.start, args=(name,)) for name in ("alice", "bob", "carol")
        ]
        for t in joins:
            t.start()
        for t in joins:
            t.join()
        group.wait(lambda: _settled(group.owned()), 30)
        before = group.owned()
        half = len(acked) // 2
        group.wait(lambda: len(group.seen) >= half, 60)
        group.stop("carol")
        group.wait(lambda: _settled(group.owned()), 30)
        after = group.owned()
        group.wait(lambda: all(k in group.seen for k in acked), 60)
        lines.append(f"group of 3 over TCP ({server.address}), queues: {_ownership(before)}")
        lines.append(f"carol left half-way; rebalanced at once: {_ownership(after)}")
        with group.lock:
            intact = sum(1 for k, body in acked.items() if group.seen.get(k) == body)
            dups = group.deliveries - len(group.seen)
            counts = ", ".join(f"{n} {c}" for n, c in sorted(group.per_consumer.items()))
        lines.append(
            f"{intact}/{len(acked)} acknowledged messages consumed intact ({counts}); "
            f"{dups} redelivered around the rebalance (at-least-once)"
        )
        return intact == len(acked), lines
    finally:
        group.close()
        server.stop()
        core.shutdown()


def main(args: argparse.Namespace) -> int:
    """Run the tour; return 0 when every acknowledged message was read back intact."""
    from mqstore import FlushDiskType, MessageStore, StoreConfig
    from mqstore.tools.usage import require_store_directory

    own_dir = args.dir is None
    if args.dir is not None:
        require_store_directory(args.dir)
    root = Path(args.dir) if args.dir else Path(tempfile.mkdtemp(prefix="mqstore-quickstart-"))
    n = max(1, int(args.messages))
    tour = StoreConfig(root_dir=root, flush_disk_type=FlushDiskType.SYNC_FLUSH)
    cfg = _geometry(root).apply(tour)
    if own_dir:  # removed at the end: naming it would point at nothing
        print("mqstore quickstart: store in a temporary directory, removed at the end")
    else:
        print(f"mqstore quickstart: store at {root} (kept)")
    ok = True
    try:
        store = MessageStore.open(cfg)
        acked, elapsed = _produce(store, n)
        syncs = store.fsync_count
        print(
            f"  1. produced {len(acked)}/{n} messages, SYNC_FLUSH, {THREADS} threads, "
            f"{elapsed:.2f}s ({len(acked) / elapsed:,.0f}/s; {syncs} fdatasyncs, "
            f"{len(acked) / max(1, syncs):.1f} messages per sync)"
        )
        store.abandon()
        with MessageStore.open(cfg) as store2:
            rec = store2.recovery
            assert rec is not None
            print(
                f"  2. crashed and reopened: {rec.mode.value} recovery, "
                f"{rec.records} records checked in {rec.seconds * 1000:.0f} ms"
            )
            store2.wait_dispatched(timeout=30)
            ok, lines = _consume(store2, acked)
            print("  3. " + "\n     ".join(lines))
            hits = store2.query_by_key(TOPIC, "order-7")
            print(f"  4. index lookup of key 'order-7': {len(hits.messages)} message(s)")
        if not args.no_spark:
            ok = _audit(root) and ok
        print(
            "RESULT: " + ("OK - every acknowledged message survived the crash" if ok else "FAILED")
        )
        return 0 if ok else 1
    finally:
        if own_dir:
            shutil.rmtree(root, ignore_errors=True)


TOUR_GEOMETRY = {
    "commitlog_file_size": 16 * 1024 * 1024,
    "max_hash_slot_num": 50_000,
    "max_index_num": 200_000,
}
"""The tour's small files, for a new store; an existing one keeps its own sizes."""


def _geometry(root: Path) -> StoreGeometry:
    """The sizes ``root``'s files show, :data:`TOUR_GEOMETRY` for the ones they do not
    (a new store), RocketMQ's defaults for the rest (``mqstore.geometry``).

    Raises:
        GeometryError: the files contradict each other.
    """
    from mqstore import geometry

    shown = geometry.detect(root)
    return geometry.resolve(root, flags={k: v for k, v in TOUR_GEOMETRY.items() if k not in shown})


def _audit(root: Path) -> bool:
    """Step 5, with progress of its own: the JVM's start, then the stages' tasks."""
    try:
        from mqstore.tools.spark.audit import run_audit
        from mqstore.tools.spark.session import build_session
    except ImportError as e:
        print(f"  5. Spark audit skipped (install the spark extra: {e})")
        return True
    from mqstore.tools.progress import SparkProgress
    from mqstore.tools.spark.session import SparkSetupError, find_java

    try:
        find_java()
    except SparkSetupError as e:  # steps 1-4 checked every message; they stand without it
        print(f"  5. Spark audit skipped ({e})")
        return True
    t0 = time.perf_counter()
    print("  5. Spark audit (local[*]): starting Spark ...", flush=True)
    spark = build_session(None, "mqstore-quickstart")
    print(f"     Spark ready in {time.perf_counter() - t0:.0f}s; auditing ...", flush=True)
    with SparkProgress(spark, sys.stdout, "     "):
        report = run_audit(root)
    verdict = "clean" if report.clean else f"{len(report.errors)} problem(s)"
    print(
        f"     {report.records} records, {len(report.queues)} queues: {verdict} "
        f"({time.perf_counter() - t0:.0f}s)"
    )
    return report.clean
