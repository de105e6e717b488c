"""Producer process for the SIGKILL tests: puts messages from several threads forever.

Run as ``python -m tests.crash.producer ROOT --flush SYNC_FLUSH --life N`` from the
repository root. It opens (and so recovers) the store at ROOT, prints ``READY``, then
each thread puts the messages of :func:`tests.crash.workload.message_for` in turn
(thread 0 in batches of 1-4) and prints one line per PUT_OK, written with a single
``os.write`` so lines from different threads never interleave and nothing waits in a
buffer when the process is killed::

    A <life> <tid> <seq> <topic> <queue_id> <queue_offset> <physical_offset> <size> <uniq_key>

A line is printed only after the put returned PUT_OK, so every line the test reads
is an acknowledged message. The process stops by itself after ``--max-seconds``
(a safety net; the test kills it long before).
"""

from __future__ import annotations

import argparse
import os
import random
import threading
import time

from mqstore import FlushDiskType, MessageStore, PutStatus
from tests.crash.workload import message_for
from tests.helpers import store_config


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("root")
    ap.add_argument("--flush", default="SYNC_FLUSH", choices=[t.value for t in FlushDiskType])
    ap.add_argument("--life", type=int, required=True)
    ap.add_argument("--threads", type=int, default=4)
    ap.add_argument("--file-size", type=int, default=64 * 1024)
    ap.add_argument("--max-seconds", type=float, default=30.0)
    args = ap.parse_args()

    cfg = store_config(
        args.root,
        root_dir=args.root,
        flush_disk_type=FlushDiskType(args.flush),
        commitlog_file_size=args.file_size,
        compress_msg_body_over=1024,
        flush_interval_commitlog_ms=10,
    )
    store = MessageStore.open(cfg)
    os.write(1, b"READY\n")
    deadline = time.monotonic() + args.max_seconds

    def produce(tid: int) -> None:
        seq = 0
        while time.monotonic() < deadline:
            n = random.Random(f"batch:{args.life}:{seq}").randrange(1, 5) if tid == 0 else 1
            msgs = [message_for(args.life, tid, seq + i) for i in range(n)]
            results = store.put_messages(msgs) if n > 1 else [store.put_message(msgs[0])]
            lines = [
                f"A {args.life} {tid} {seq + i} {m.topic} {m.queue_id} {r.queue_offset} "
                f"{r.physical_offset} {r.size} {r.uniq_key}\n"
                for i, (m, r) in enumerate(zip(msgs, results, strict=True))
                if r.status is PutStatus.PUT_OK
            ]
            if lines:
                os.write(1, "".join(lines).encode())
            seq += n

    threads = [threading.Thread(target=produce, args=(t,)) for t in range(args.threads)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    store.close()
    os.write(1, b"DONE\n")


if __name__ == "__main__":
    main()
