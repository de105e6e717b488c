"""``mqstore quickstart``: the first ten minutes, as one command.

1. produce from eight threads with SYNC_FLUSH (group commit: every PUT_OK is on disk);
2. simulate a crash (no clean shutdown) and reopen: abnormal recovery re-validates
   the log and rebuilds consume queues and the index;
3. consume every queue with the pull API (tag filter ``TagA || TagB``) and check that
   every acknowledged message came back intact, exactly once;
4. look a message up by key through the index;
5. audit the segments with Spark on ``local[*]`` (skipped with ``--no-spark`` or when
   PySpark is not installed);
6. print a summary a person can read in ten seconds.

The rebalancing consumer group of the product brief replaces step 3 when the
client lands (issue 6).
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
import threading
import time
from pathlib import Path

TOPIC = "orders"
QUEUES = 4
THREADS = 8


def _produce(store: object, n: int) -> tuple[dict[str, bytes], float]:
    from store import Message, PutStatus

    acked: dict[str, bytes] = {}
    lock = threading.Lock()

    def worker(w: int) -> None:
        for i in range(w, n, THREADS):
            body = f"order #{i} from producer {w}".encode()
            r = store.put_message(  # type: ignore[attr-defined]
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


def _consume(store: object) -> tuple[dict[str, bytes], int]:
    from store import GetStatus

    seen: dict[str, bytes] = {}
    duplicates = 0
    for q in range(QUEUES):
        offset = 0
        while True:
            g = store.get_message("quickstart", TOPIC, q, offset, 32, "TagA || TagB")  # type: ignore[attr-defined]
            for m in g.messages:
                key = m.properties.get("UNIQ_KEY", "")
                duplicates += key in seen
                seen[key] = m.body
            if g.status is not GetStatus.FOUND and g.next_begin_offset >= g.max_offset:
                break
            offset = g.next_begin_offset
    return seen, duplicates


def main(args: argparse.Namespace) -> int:
    """Run the tour; return 0 when every acknowledged message was read back intact."""
    from store import FlushDiskType, MessageStore, StoreConfig

    own_dir = args.dir is None
    root = Path(args.dir) if args.dir else Path(tempfile.mkdtemp(prefix="mqstore-quickstart-"))
    n = max(1, int(args.messages))
    cfg = StoreConfig(
        root_dir=root,
        flush_disk_type=FlushDiskType.SYNC_FLUSH,
        commitlog_file_size=64 * 1024 * 1024,
        max_hash_slot_num=50_000,
        max_index_num=200_000,
    )
    print(f"mqstore quickstart: store at {root}")
    ok = True
    try:
        store = MessageStore.open(cfg)
        acked, elapsed = _produce(store, n)
        syncs = getattr(store.flusher, "syncs", 0)
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
            seen, dups = _consume(store2)
            intact = sum(1 for k, body in acked.items() if seen.get(k) == body)
            ok = intact == len(acked) and dups == 0
            print(
                f"  3. consumed {len(seen)} messages from {QUEUES} queues: "
                f"{intact}/{len(acked)} acknowledged messages intact, {dups} duplicates"
            )
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


def _audit(root: Path) -> bool:
    try:
        from tools.spark.audit import run_audit
    except ImportError as e:
        print(f"  5. Spark audit skipped (install the spark extra: {e})")
        return True
    t0 = time.perf_counter()
    report = run_audit(root)
    verdict = "clean" if report.clean else f"{len(report.errors)} problem(s)"
    print(
        f"  5. Spark audit (local[*]): {report.records} records, "
        f"{len(report.queues)} queues: {verdict} ({time.perf_counter() - t0:.0f}s)"
    )
    return report.clean
