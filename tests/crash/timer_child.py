"""A process with timer messages in flight, for tests/crash/test_timer_crash.py.

``python -m tests.crash.timer_child STORE COUNT SEED``: opens the store (timer precision
100 ms), puts COUNT timer messages to topic ``T`` due 0.3 to 2.5 s ahead, printing
``PUT <uniq key>`` for each acknowledged one, then ``D <n>`` every 20 ms with the number of
timers delivered (or, after a crash, found delivered already) since it opened the store,
until it is killed.
"""

from __future__ import annotations

import random
import sys
import time

from mqstore import Message, MessageStore, PutStatus
from tests.crash.timer_workload import timer_config


def main() -> None:
    root, count, seed = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    rng = random.Random(seed)
    with MessageStore.open(timer_config(root)) as store:
        print("READY", flush=True)
        for i in range(count):
            props = {"TIMER_DELAY_MS": str(rng.randrange(300, 2500))}
            r = store.put_message(Message(topic="T", body=b"%d" % i, queue_id=i % 4,
                                          properties=props))  # fmt: skip
            assert r.status is PutStatus.PUT_OK, r
            print("PUT", r.uniq_key, flush=True)
        while True:
            timer = store.logics.timer
            done = timer.delivered + timer.skipped_after_crash if timer is not None else 0
            print("D", done, flush=True)
            time.sleep(0.02)


if __name__ == "__main__":
    main()
