"""A master or slave store in its own process, for the HA process tests (and benchmarks).

Run with ``sys.executable``::

    ha_proc.py master --store DIR --status FILE [--role SYNC_MASTER] [--produce N]
                      [--threads T] [--rate R] [--body-size B] [--acks FILE]
                      [--housekeeping-ms MS] [--hold-at K]
    ha_proc.py slave  --store DIR --status FILE --master HOST:PORT [--reconnect-ms MS]

The process opens the store the way a broker does (``MessageStore.open`` with the HA
fields; an ASYNC_MASTER calls ``mqstore.ha.service.serve``), then rewrites ``--status``
(JSON, atomically) every 20 ms until SIGTERM, when it closes the store cleanly, writes
a last status with ``"closed": true`` and exits 0. SIGKILL is the crash the tests want.

A master with ``--produce N`` (-1: until stopped) puts messages whose body starts with
``<thread>-<seq>`` from ``--threads`` threads; with ``--acks`` every PUT_OK appends a
line ``thread-seq physical_offset size`` with one ``os.write`` (so it survives SIGKILL
once the put has returned). With ``--hold-at K`` the producer stops after K messages
until the process gets SIGUSR1 (a test then knows the load is not over).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import sys
import threading
import time
from pathlib import Path
from typing import Any

from mqstore import BrokerRole, Message, MessageStore, PutStatus, StoreConfig
from mqstore.ha import service as ha_service
from mqstore.ha.master import HAMaster
from mqstore.ha.slave import HASlave


def _config(args: argparse.Namespace) -> StoreConfig:
    common: dict[str, Any] = {
        "root_dir": args.store,
        "commitlog_file_size": args.file_size,
        "ha_send_heartbeat_interval_ms": args.heartbeat_ms,
        "ha_housekeeping_interval_ms": args.housekeeping_ms,
        "ha_reconnect_interval_ms": args.reconnect_ms,
    }
    if args.cmd == "slave":
        return StoreConfig(broker_role=BrokerRole.SLAVE, ha_master_address=args.master, **common)
    return StoreConfig(broker_role=BrokerRole[args.role], ha_listen_port=args.ha_port, **common)


def streaming(master: HAMaster) -> bool:
    """A slave is connected and its stream's start is chosen (so it starts at 0 here)."""
    return any(link.next_transfer_offset is not None for link in master.links())


class Producer:
    """Threads putting numbered messages; counts statuses, logs PUT_OKs to the ack file."""

    def __init__(
        self,
        store: MessageStore,
        args: argparse.Namespace,
        stop: threading.Event,
        resume: threading.Event,
    ):
        self.store = store
        self.count = args.produce
        self.hold_at = args.hold_at
        self.resume = resume
        self.body_size = args.body_size
        self.stop = stop
        self.wait_slave = args.after_connect
        self.interval = args.threads / args.rate if args.rate > 0 else 0.0
        self.ack_fd = (
            os.open(args.acks, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644) if args.acks else -1
        )
        self.statuses: dict[str, int] = {}
        self.lock = threading.Lock()
        self.threads = [
            threading.Thread(target=self.run, args=(t, args.threads), daemon=True)
            for t in range(args.threads)
        ]

    def start(self) -> None:
        for t in self.threads:
            t.start()

    @property
    def done(self) -> bool:
        return all(not t.is_alive() for t in self.threads)

    def join(self, timeout: float) -> None:
        for t in self.threads:
            t.join(timeout)

    def run(self, me: int, threads: int) -> None:
        ha = self.store.ha
        while self.wait_slave and isinstance(ha, HAMaster) and not streaming(ha):
            if self.stop.wait(0.01):
                return
        seq = 0
        next_at = time.monotonic()
        while not self.stop.is_set() and (self.count < 0 or seq * threads + me < self.count):
            if 0 <= self.hold_at <= seq * threads + me:
                while not self.resume.wait(0.01):
                    if self.stop.is_set():
                        return
            if self.interval:  # pace the load: --rate messages per second over all threads
                next_at += self.interval
                delay = next_at - time.monotonic()
                if delay > 0 and self.stop.wait(delay):
                    return
            tag = f"{me}-{seq}".encode()
            body = tag + b"." * max(0, self.body_size - len(tag))
            try:
                r = self.store.put_message(Message(topic="ha", body=body, queue_id=seq % 4))
            except Exception:  # the store closed under us at shutdown
                return
            with self.lock:
                self.statuses[r.status.value] = self.statuses.get(r.status.value, 0) + 1
            if r.status is PutStatus.PUT_OK and self.ack_fd >= 0:
                os.write(self.ack_fd, f"{me}-{seq} {r.physical_offset} {r.size}\n".encode())
            seq += 1


def _status(store: MessageStore, producer: Producer | None, closed: bool) -> dict[str, Any]:
    out: dict[str, Any] = {"pid": os.getpid(), "closed": closed}
    if not closed:
        out["max_offset"] = store.max_physical_offset
        out["min_offset"] = store.min_physical_offset
    ha = store.ha
    if isinstance(ha, HAMaster):
        out.update(
            port=ha.port,
            connections=ha.connection_count(),
            accepted=ha.accepted,
            push_to_slave=ha.push_to_slave_max_offset,
            master_error=ha.last_error,
        )
    elif isinstance(ha, HASlave):
        out.update(
            connected=ha.connected,
            sessions=ha.sessions,
            diverged=ha.diverged,
            slave_error=ha.last_error,
        )
    if producer is not None:
        with producer.lock:
            out["statuses"] = dict(producer.statuses)
        out["produced_all"] = producer.done
    return out


def _write_status(path: Path, status: dict[str, Any]) -> None:
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(status))
    os.replace(tmp, path)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("cmd", choices=["master", "slave"])
    p.add_argument("--store", required=True)
    p.add_argument("--status", required=True, type=Path)
    p.add_argument("--file-size", type=int, default=1 << 20)
    p.add_argument("--heartbeat-ms", type=int, default=5000)
    p.add_argument("--reconnect-ms", type=int, default=200)
    p.add_argument("--housekeeping-ms", type=int, default=20_000)
    p.add_argument("--role", default="ASYNC_MASTER", choices=["ASYNC_MASTER", "SYNC_MASTER"])
    p.add_argument("--ha-port", type=int, default=0)
    p.add_argument("--master", default=None, metavar="HOST:PORT")
    p.add_argument("--produce", type=int, default=0)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--body-size", type=int, default=1024)
    p.add_argument("--acks", default=None)
    p.add_argument("--after-connect", action="store_true", help="produce once a slave streams")
    p.add_argument("--rate", type=float, default=0, help="messages per second (0: flat out)")
    p.add_argument("--hold-at", type=int, default=-1, help="pause after K messages until SIGUSR1")
    args = p.parse_args(argv)

    stop = threading.Event()
    resume = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGUSR1, lambda *_: resume.set())
    store = MessageStore.open(_config(args))
    if args.cmd == "master" and store.ha is None:
        ha_service.serve(store)
    producer = None
    if args.cmd == "master" and args.produce:
        producer = Producer(store, args, stop, resume)
        producer.start()
    while not stop.wait(0.02):
        _write_status(args.status, _status(store, producer, closed=False))
    if producer is not None:
        producer.join(10.0)
    with contextlib.suppress(Exception):
        store.close()
    _write_status(args.status, _status(store, producer, closed=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
