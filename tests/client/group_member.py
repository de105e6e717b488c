"""A consumer-group member process for the multi-process test.

    python -m tests.client.group_member NAMESRV NAME OUT_DIR

Consumes topic ``T`` as group ``g`` over RemoteTransport. For each message it appends
``NAME body queue offset`` to ``OUT_DIR/NAME.log`` and flushes *before* returning
CONSUME_SUCCESS, so a line exists for every message whose offset may have been
committed. Every 50 ms it writes the queues it owns to ``OUT_DIR/NAME.owned`` (atomic
replace). SIGTERM shuts down gracefully; SIGKILL is the crash case.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import threading
from pathlib import Path

from mqstore.client.consumer import (
    ConsumeConcurrentlyStatus,
    ConsumeFromWhere,
    ConsumerConfig,
    PushConsumer,
)
from mqstore.client.remote import RemoteTransport


def main() -> None:
    namesrv, name, out = sys.argv[1], sys.argv[2], Path(sys.argv[3])
    log = open(out / f"{name}.log", "a", encoding="utf-8")  # noqa: SIM115
    lock = threading.Lock()

    def on_msgs(msgs, ctx):
        with lock:
            for m in msgs:
                log.write(f"{name} {m.body.decode()} {m.queue_id} {m.queue_offset}\n")
            log.flush()
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    cfg = ConsumerConfig(
        consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
        suspend_ms=500,
        rebalance_interval_ms=2000,
        persist_offset_interval_ms=200,
        exception_delay_ms=100,
        instance_name=name,
    )
    transport = RemoteTransport(namesrv)
    c = PushConsumer("g", transport, cfg)
    c.subscribe("T")
    c.register_message_listener(on_msgs)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    c.start()
    owned_path = out / f"{name}.owned"
    while not stop.wait(0.05):
        tmp = owned_path.with_suffix(".tmp")
        tmp.write_text(json.dumps(sorted(mq.queue_id for mq in c.owned() if mq.topic == "T")))
        os.replace(tmp, owned_path)
    c.shutdown()
    transport.close()
    owned_path.write_text("[]")


if __name__ == "__main__":
    main()
