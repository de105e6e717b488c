"""Child process for the SIGKILL test: pops, acks some, reports, then waits to be killed.

argv: store dir. Prints one line per event, flushed: ``ACKED <body>`` after an ack
returned OK (SYNC_FLUSH: durable), ``HELD <body>`` for popped-not-acked, ``READY``.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

from mqstore import FlushDiskType, MessageStore
from mqstore.pop import AckStatus, PopConfig, PopService
from mqstore.pop import state as pop_state
from tests.helpers import store_config, until


def main() -> None:
    root = Path(sys.argv[1])
    store = MessageStore.open(store_config(root, flush_disk_type=FlushDiskType.SYNC_FLUSH))
    pop = PopService(store, PopConfig(persist_interval_ms=100))
    pop.start()
    popped = 0
    for _ in range(4):
        r = pop.pop("g", "T", 8, 60_000)
        popped += len(r.messages)
        for i, m in enumerate(r.messages):
            if i % 2 == 0 and pop.ack("g", "T", m.receipt_handle) is AckStatus.OK:
                print("ACKED", m.body.decode(), flush=True)
            else:
                print("HELD", m.body.decode(), flush=True)
    # the periodic state save must have passed every pop before the kill, however slow the
    # machine: pop offsets not yet saved would deliver the popped messages again (allowed)
    until(
        lambda: sum(pop_state.load(Path(store.root) / "config").offsets.values()) == popped,
        timeout=60.0, what="a state save covering every pop",
    )  # fmt: skip
    print("READY", flush=True)
    time.sleep(600)


if __name__ == "__main__":
    main()
