"""The ``mqstore`` command line. Each subcommand parses its arguments and calls a
function that does the work; heavy imports (Spark, matplotlib) happen only inside
the subcommand that needs them.

Exit codes: 0 success, 1 the job ran and found problems, 2 usage or I/O error.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING

from mqstore.tools import quickstart as _quickstart

if TYPE_CHECKING:
    import socket
    import threading

    from mqstore import BrokerRole, MessageStore, StoreConfig


def _add_store_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--store", default="data", help="store directory (default: ./data)")
    _add_geometry_args(p)
    p.add_argument("--flush", choices=["SYNC_FLUSH", "ASYNC_FLUSH"], default="ASYNC_FLUSH")


def _add_geometry_args(p: argparse.ArgumentParser) -> None:
    """The store's file sizes: taken from its files, else --broker-config, else these
    flags, else RocketMQ's defaults (``mqstore.geometry``); a contradiction is an error."""
    p.add_argument("--file-size", type=int, default=None, help="CommitLog segment size in bytes")
    p.add_argument(
        "--cq-file-size", type=int, default=None, help="consume-queue file size in bytes"
    )
    p.add_argument("--index-slots", type=int, default=None, help="hash slots per index file")
    p.add_argument("--index-num", type=int, default=None, help="entries per index file")
    p.add_argument(
        "--broker-config",
        default=None,
        metavar="broker.conf",
        help="take the sizes a RocketMQ broker.conf sets (mappedFileSizeCommitLog, ...)",
    )


def _store_config(args: argparse.Namespace, **fields: object) -> StoreConfig:
    """StoreConfig for ``args.store`` with the store's geometry; says which on stderr.

    Raises:
        GeometryError: the sizes cannot be told for sure (see ``mqstore.geometry``).
    """
    from mqstore import StoreConfig, geometry

    flags = {
        "commitlog_file_size": args.file_size,
        "mapped_file_size_consume_queue": args.cq_file_size,
        "max_hash_slot_num": args.index_slots,
        "max_index_num": args.index_num,
    }
    g = geometry.resolve(args.store, flags=flags, broker_config=args.broker_config)
    print(f"mqstore {args.command}: geometry: {g.describe()}", file=sys.stderr)
    return g.apply(StoreConfig(root_dir=args.store, **fields))  # type: ignore[arg-type]


def _add_broker_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the ``broker`` subcommand and its flags to ``sub``."""
    b = sub.add_parser("broker", help="run the broker (RocketMQ remoting protocol)")
    b.add_argument("--store", required=True)
    b.add_argument("--port", type=int, default=10911, help="remoting port (0: any free)")
    b.add_argument("--host", default="127.0.0.1", help="remoting listen address (127.0.0.1)")
    b.add_argument("--broker-name", default="broker-a")
    b.add_argument("--flush", choices=["ASYNC_FLUSH", "SYNC_FLUSH"], default="ASYNC_FLUSH")
    b.add_argument(
        "--role", choices=["ASYNC_MASTER", "SYNC_MASTER", "SLAVE"], default="ASYNC_MASTER"
    )
    b.add_argument("--ha-port", type=int, default=10912)
    b.add_argument("--master-ha", default=None, metavar="HOST:PORT")
    b.add_argument("--ha-bind", default="127.0.0.1", help="HA listen address (127.0.0.1)")
    _add_geometry_args(b)
    b.add_argument(
        "--dispatch-process",
        action="store_true",
        help="build consume queues and the index in a child process (uses a second core)",
    )
    b.add_argument(
        "--cpus",
        default=None,
        metavar="LIST",
        help="run the broker's threads on these CPUs (taskset syntax, e.g. 0 or 0-1)",
    )
    b.add_argument(
        "--dispatch-cpus",
        default=None,
        metavar="LIST",
        help="run the dispatcher process on these CPUs (with --dispatch-process)",
    )


def _add_spark_parsers(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the Spark subcommands (``audit``, ``reindex``, ``export``) to ``sub``."""
    for name, helptext in (
        ("audit", "check every record of a store directory with Spark"),
        ("reindex", "rebuild consumequeue/ and index/ from the CommitLog with Spark"),
        ("export", "export messages to Parquet with Spark"),
    ):
        s = sub.add_parser(name, help=helptext, add_help=True)
        s.add_argument("dir")
        s.add_argument("--master", default=None, help="Spark master URL (default local[*])")
        if name == "audit":
            s.add_argument("--report", default=None, metavar="FILE.json")
        if name == "reindex":
            s.add_argument("--out", default=None)
        if name == "export":
            s.add_argument("--parquet", required=True, metavar="OUT")


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of every subcommand."""
    parser = argparse.ArgumentParser(
        prog="mqstore",
        description="A RocketMQ-compatible message store: run it, audit it, benchmark it.",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    q = sub.add_parser("quickstart", help="the guided tour: produce, consume, verify, summarise")
    q.add_argument("dir", nargs="?", default=None, help="store directory (default: a temp dir)")
    q.add_argument("--messages", type=int, default=2000)
    q.add_argument("--no-spark", action="store_true", help="skip the Spark audit step")

    p = sub.add_parser("produce", help="put messages into a store")
    _add_store_args(p)
    p.add_argument("--topic", required=True)
    p.add_argument("--count", type=int, default=10)
    p.add_argument("--tags", default=None)
    p.add_argument("--body", default="hello from mqstore")
    p.add_argument("--queue-id", type=int, default=0)

    c = sub.add_parser("consume", help="print the messages of a topic")
    _add_store_args(c)
    c.add_argument("--topic", required=True)
    c.add_argument("--limit", type=int, default=20)
    c.add_argument("--tags", default="*", help='subscription, e.g. "TagA || TagB"')

    _add_broker_parser(sub)
    _add_spark_parsers(sub)

    be = sub.add_parser("bench", help="benchmarks")
    be.add_argument("what", choices=["flush", "commitlog"], help="which benchmark")
    be.add_argument("--json", default=None, metavar="FILE")
    be.add_argument("--plot", default=None, metavar="FILE.png")
    be.add_argument("--quick", action="store_true", help="small counts (smoke run)")
    return parser


def _geometry_refused(args: argparse.Namespace, e: Exception) -> int:
    print(f"mqstore {args.command}: {e}", file=sys.stderr)
    return 2


def _produce(args: argparse.Namespace) -> int:
    from mqstore import ConfigError, FlushDiskType, Message, MessageStore

    try:
        cfg = _store_config(args, flush_disk_type=FlushDiskType[args.flush])
    except ConfigError as e:
        return _geometry_refused(args, e)
    with MessageStore.open(cfg) as store:
        for i in range(args.count):
            r = store.put_message(
                Message(
                    topic=args.topic,
                    body=f"{args.body} #{i}".encode(),
                    tags=args.tags,
                    queue_id=args.queue_id,
                )
            )
            print(f"{r.status.value} queue_offset={r.queue_offset} msg_id={r.msg_id}")
            if not r.status.stored:
                print(f"error: {r.error}", file=sys.stderr)
                return 1
    return 0


def _consume(args: argparse.Namespace) -> int:
    """Pull a topic's queues from offset 0 through the pull API and print the messages."""
    from mqstore import ConfigError, GetStatus, MessageStore

    try:
        cfg = _store_config(args)
    except ConfigError as e:
        return _geometry_refused(args, e)
    with MessageStore.open(cfg) as store:
        store.wait_dispatched(timeout=30)
        shown = 0
        queue_id = 0
        while shown < args.limit and store.max_offset_in_queue(args.topic, queue_id) > 0:
            offset = 0
            while shown < args.limit:
                g = store.get_message("mqstore-cli", args.topic, queue_id, offset, 32, args.tags)
                for m in g.messages[: args.limit - shown]:
                    print(f"q{m.queue_id}@{m.queue_offset} tags={m.tags} {m.body[:80]!r}")
                    shown += 1
                if g.status is not GetStatus.FOUND and g.next_begin_offset >= g.max_offset:
                    break
                offset = g.next_begin_offset
            queue_id += 1
        if shown == 0:
            print(f"no messages in topic {args.topic!r}")
    return 0


def _spark(args: argparse.Namespace) -> int:
    import importlib

    try:
        mod = importlib.import_module(f"mqstore.tools.spark.{args.command}")
    except ImportError as e:
        print(
            f"mqstore {args.command}: Spark jobs need the spark extra: "
            f"pip install -e '.[spark]' ({e})",
            file=sys.stderr,
        )
        return 2
    argv = [args.dir]
    if args.master:
        argv += ["--master", args.master]
    if getattr(args, "report", None):
        argv += ["--report", args.report]
    if getattr(args, "out", None):
        argv += ["--out", args.out]
    if getattr(args, "parquet", None):
        argv += ["--parquet", args.parquet]
    rc: int = mod.main(argv)
    return rc


def _bench(args: argparse.Namespace) -> int:
    import importlib

    try:
        mod = importlib.import_module(f"mqstore.tools.bench.{args.what}")
    except ImportError as e:
        print(f"mqstore bench {args.what}: not available ({e})", file=sys.stderr)
        return 2
    argv: list[str] = []
    if args.json:
        argv += ["--json", args.json]
    if args.plot:
        argv += ["--plot", args.plot]
    if args.quick:
        argv += ["--quick"]
    rc: int = mod.main(argv)
    return rc


def _broker(args: argparse.Namespace) -> int:
    """Serve RocketMQ remoting (+ name server) and HA until SIGTERM/SIGINT.

    Prints ``mqstore broker: remoting on HOST:PORT`` once serving (scripts and tests
    wait for that line). On a signal: stop serving, persist consumer offsets and
    topics, close the store.
    """
    import logging
    import signal
    import threading

    from mqstore import BrokerRole, ConfigError, MessageStore
    from mqstore.broker.server import bind_listener

    role = BrokerRole[args.role]
    if role is BrokerRole.SLAVE and not args.master_ha:
        print("mqstore broker: a SLAVE needs --master-ha HOST:PORT", file=sys.stderr)
        return 2
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    try:  # --port 0: take the free port before the store fixes store_host (server Rule 5)
        sock = bind_listener(args.host, 0) if args.port == 0 else None
    except OSError as e:
        print(f"mqstore broker: cannot listen on {args.host}:0: {e}", file=sys.stderr)
        return 2
    port = args.port if sock is None else int(sock.getsockname()[1])
    try:  # before the store starts threads: they inherit this thread's mask
        cfg = _broker_config(args, role, port)
    except ConfigError as e:
        if sock is not None:
            sock.close()
        print(f"mqstore broker: {e}", file=sys.stderr)
        return 2
    try:
        store = MessageStore.open(cfg)
    except OSError as e:
        if sock is not None:
            sock.close()
        print(f"mqstore broker: cannot open {args.store}: {e}", file=sys.stderr)
        return 2
    with store:
        return _serve_broker(args, store, role, port, sock, stop)


def _broker_config(args: argparse.Namespace, role: BrokerRole, port: int) -> StoreConfig:
    """Pin this process to ``--cpus`` and build the broker's StoreConfig (ConfigError,
    GeometryError among them: the store's sizes, see ``_store_config``)."""
    from mqstore import FlushDiskType, affinity

    if args.cpus is not None:
        affinity.pin_process(affinity.parse_cpu_list(args.cpus))
    dispatch_cpus = (
        affinity.parse_cpu_list(args.dispatch_cpus) if args.dispatch_cpus is not None else ()
    )
    return _store_config(
        args, broker_role=role,
        ha_listen_port=args.ha_port, ha_bind_host=args.ha_bind,
        ha_master_address=args.master_ha, store_host=(args.host, port),
        flush_disk_type=FlushDiskType[args.flush], dispatch_process=args.dispatch_process,
        dispatch_cpus=dispatch_cpus,
    )  # fmt: skip


def _serve_broker(
    args: argparse.Namespace,
    store: MessageStore,
    role: BrokerRole,
    port: int,
    sock: socket.socket | None,
    stop: threading.Event,
) -> int:
    """Serve the open ``store`` until ``stop`` is set; return the exit code (0, or 2)."""
    from mqstore import BrokerRole
    from mqstore.broker.core import BrokerConfig, BrokerCore
    from mqstore.broker.server import BrokerServer
    from mqstore.ha import service as ha_service
    from mqstore.ha.master import HAMaster

    if role is BrokerRole.SLAVE:
        what = f"replicating from {args.master_ha}"
    else:
        master = store.ha if isinstance(store.ha, HAMaster) else ha_service.serve(store)
        what = f"HA port {master.address}"
    broker_id = 1 if role is BrokerRole.SLAVE else 0  # routes list a slave as id 1
    core = BrokerCore(store, BrokerConfig(broker_name=args.broker_name, broker_id=broker_id))
    server = BrokerServer(core, args.host, port, sock=sock)
    try:
        server.start()
    except OSError as e:
        print(f"mqstore broker: cannot listen on {args.host}:{port}: {e}", file=sys.stderr)
        core.shutdown()
        return 2
    print(f"mqstore broker: {role.value} store {args.store}, {what}", flush=True)
    print(f"mqstore broker: remoting on {server.address}", flush=True)
    try:
        while not stop.wait(1.0):
            pass
    finally:
        server.stop()
        core.shutdown()
    print("mqstore broker: stopped, offsets persisted", flush=True)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``mqstore`` console script."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return 2
    handlers = {
        "quickstart": _quickstart.main,
        "produce": _produce,
        "consume": _consume,
        "broker": _broker,
        "audit": _spark,
        "reindex": _spark,
        "export": _spark,
        "bench": _bench,
    }
    try:
        return handlers[args.command](args)
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
