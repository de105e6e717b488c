"""The ``mqstore`` command line. Each subcommand parses its arguments and calls a
function that does the work; heavy imports (the store, Spark, matplotlib) happen only
inside the subcommand that needs them, so ``mqstore --help`` stays fast.

A user error is one line on stderr, ``mqstore COMMAND: what went wrong``, and an exit
code from :class:`Exit` (listed in ``mqstore --help``), never a traceback; a traceback
means a bug. Read commands (``consume``) open the store read-only
(:mod:`mqstore.tools.storeview`): no lock, no recovery, nothing written.
"""

from __future__ import annotations

import argparse
import errno
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

from mqstore.tools import admin as _admin
from mqstore.tools import quickstart as _quickstart
from mqstore.tools.bench import BENCHMARKS
from mqstore.tools.usage import CliError as CliError  # noqa: PLC0414 (re-export)
from mqstore.tools.usage import Exit as Exit  # noqa: PLC0414 (re-export)
from mqstore.tools.usage import require_store_directory

if TYPE_CHECKING:
    import socket
    import threading

    from mqstore import BrokerRole, MessageStore, StoreConfig
    from mqstore.records import StoredMessage


EXIT_CODES_HELP = """\
exit codes:
  0    success
  1    the command ran and found problems (audit findings, a message not stored or
       refused by the broker, quickstart could not read every message back)
  2    usage or input error: a bad option value, an illegal topic, a path that is a
       file, holds no store or holds other files, an output that already exists or
       cannot be written, a file the OS refuses, a broker or name server that does
       not answer, Java 17 or 21 not found, a Spark master malformed or not answering
  3    busy: the store is locked by another process, or a port is in use
  130  interrupted (Ctrl-C)
  141  the output was closed early (`mqstore consume ... | head`); nothing is printed
"""


class _Parser(argparse.ArgumentParser):
    """An ArgumentParser whose usage errors are one line on stderr (exit 2)."""

    def error(self, message: str) -> NoReturn:
        self.exit(Exit.USAGE, f"{self.prog}: {message} (see {self.prog} --help)\n")


class _Formatter(argparse.RawDescriptionHelpFormatter):
    """Help text with every option's default (flags and options without one excepted)."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        default = action.default
        if (
            "%(default)" in text
            or default is None
            or default is False
            or default is argparse.SUPPRESS
            or not action.option_strings
        ):
            return text
        return f"{text} (default: %(default)s)"


# ----------------------------------------------------------------- argument types


def _int_in(low: int, high: int | None, what: str) -> Callable[[str], int]:
    """An argparse type: an integer from ``low`` to ``high`` (no upper bound for
    ``None``); anything else is refused as "must be <what>"."""

    def parse(text: str) -> int:
        value = _integer(text)
        if value < low or (high is not None and value > high):
            raise argparse.ArgumentTypeError(f"must be {what}, got {text}")
        return value

    return parse


_positive = _int_in(1, None, "a positive integer")
_non_negative = _int_in(0, None, "0 or more")
_port = _int_in(0, 65535, "a port number 0..65535")


def _namesrv_addrs(text: str) -> list[str]:
    from mqstore.client.registration import parse_namesrv_addrs

    try:
        return parse_namesrv_addrs(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def _spark_master(text: str) -> str:
    """A Spark master URL of a form Spark accepts (its reachability is checked later,
    just before the JVM would start)."""
    from mqstore.tools.spark.session import SparkSetupError, check_master

    try:
        check_master(text)
    except SparkSetupError as e:
        raise argparse.ArgumentTypeError(str(e)) from None
    return text


def _integer(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None


_UNITS = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}


def _byte_size(text: str) -> int:
    """Bytes, optionally with a binary suffix: ``65536``, ``64K``, ``1M``, ``1G``."""
    t = text.strip().upper().removesuffix("B").removesuffix("I")
    scale = _UNITS.get(t[-1:], 1)
    digits = t[:-1] if scale > 1 else t
    if not digits.isdigit() or int(digits) == 0:
        raise argparse.ArgumentTypeError(f"not a size in bytes (e.g. 65536, 64K, 1M): {text!r}")
    return int(digits) * scale


# ----------------------------------------------------------------------- parsers


def _add_store_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--store", default="data", help="store directory")
    _add_geometry_args(p)
    p.add_argument(
        "--flush",
        choices=["SYNC_FLUSH", "ASYNC_FLUSH"],
        default="ASYNC_FLUSH",
        help="when a put is acknowledged: after an fdatasync, or once in memory",
    )


def _add_geometry_args(p: argparse.ArgumentParser) -> None:
    """The store's file sizes: taken from its files, else --broker-config, else these
    flags, else RocketMQ's defaults (``mqstore.geometry``); a contradiction is an error."""
    p.add_argument(
        "--file-size",
        type=_byte_size,
        default=None,
        help="CommitLog segment size in bytes, e.g. 64M (default: the store's, else 1G)",
    )
    p.add_argument(
        "--cq-file-size",
        type=_byte_size,
        default=None,
        help="consume-queue file size in bytes (default: the store's, else RocketMQ's)",
    )
    p.add_argument(
        "--index-slots",
        type=_positive,
        default=None,
        help="hash slots per index file (default: the store's, else RocketMQ's)",
    )
    p.add_argument(
        "--index-num",
        type=_positive,
        default=None,
        help="entries per index file (default: the store's, else RocketMQ's)",
    )
    p.add_argument(
        "--broker-config",
        default=None,
        metavar="broker.conf",
        help="take the sizes a RocketMQ broker.conf sets (mappedFileSizeCommitLog, ...)",
    )


def _store_config(args: argparse.Namespace, **fields: object) -> StoreConfig:
    """StoreConfig for ``args.store`` with the store's geometry; says which on stderr.

    Raises:
        CliError: ``args.store`` is a file, or a directory of other files.
        GeometryError: the sizes cannot be told for sure (see ``mqstore.geometry``).
    """
    from mqstore import StoreConfig, geometry

    require_store_directory(args.store)
    flags = {
        "commitlog_file_size": args.file_size,
        "mapped_file_size_consume_queue": args.cq_file_size,
        "max_hash_slot_num": args.index_slots,
        "max_index_num": args.index_num,
    }
    g = geometry.resolve(args.store, flags=flags, broker_config=args.broker_config)
    print(f"mqstore {args.command}: geometry: {g.describe()}", file=sys.stderr)
    return g.apply(StoreConfig(root_dir=args.store, **fields))  # type: ignore[arg-type]


def _add_remote_args(group: argparse._MutuallyExclusiveGroup) -> None:
    """``--broker`` / ``--namesrv``: where a command finds a running broker."""
    group.add_argument(
        "--broker", metavar="HOST:PORT",
        help="an mqstore broker's remoting address (it answers route requests itself)",
    )  # fmt: skip
    group.add_argument(
        "--namesrv", metavar="HOST:PORT",
        help="a name server that knows the broker (mqstore namesrv or RocketMQ's; needed "
        "for a RocketMQ broker)",
    )  # fmt: skip


def _add_broker_parser(sub: argparse._SubParsersAction[_Parser]) -> None:
    """Add the ``broker`` subcommand and its flags to ``sub``."""
    b = sub.add_parser(
        "broker",
        help="run the broker (RocketMQ remoting protocol, with a built-in name server)",
        formatter_class=_Formatter,
        epilog=EXIT_CODES_HELP,
    )
    b.add_argument("--store", required=True, help="store directory (created if missing)")
    b.add_argument("--port", type=_port, default=10911, help="remoting port (0: any free port)")
    b.add_argument("--host", default="127.0.0.1", help="remoting listen address")
    b.add_argument("--broker-name", default="broker-a", help="the name routes give this broker")
    b.add_argument(
        "--grpc-port", type=_port, nargs="?", const=8081, default=None, metavar="G",
        help="also serve RocketMQ 5.x clients (gRPC, plaintext) on port G (8081 when no G "
        "is given; 0: any free port)",
    )  # fmt: skip
    b.add_argument("--grpc-host", default="127.0.0.1", help="gRPC listen address")
    b.add_argument(
        "--grpc-fifo-group", action="append", default=[], metavar="GROUP",
        help="a consumer group that consumes in order over gRPC (repeatable)",
    )  # fmt: skip
    b.add_argument(
        "--flush",
        choices=["ASYNC_FLUSH", "SYNC_FLUSH"],
        default="ASYNC_FLUSH",
        help="when a put is acknowledged: after an fdatasync, or once in memory",
    )
    b.add_argument(
        "--role",
        choices=["ASYNC_MASTER", "SYNC_MASTER", "SLAVE"],
        default="ASYNC_MASTER",
        help="replication role; SYNC_MASTER acknowledges a put once a slave has it",
    )
    b.add_argument(
        "--ha-port",
        type=_port,
        default=None,
        help="port slaves replicate from (default: --port + 1, as RocketMQ; any free "
        "port with --port 0)",
    )
    b.add_argument(
        "--master-ha",
        default=None,
        metavar="HOST:PORT",
        help="the master's HA address (required with --role SLAVE)",
    )
    b.add_argument("--ha-bind", default="127.0.0.1", help="HA listen address")
    b.add_argument(
        "--acl", default=None, metavar="FILE",
        help="RocketMQ plain_acl.yml: requests must be signed by its accounts (docs/acl.md)",
    )  # fmt: skip
    b.add_argument(
        "--ha-secret", default=None,
        help="HA handshake secret, master and slave alike (default with --acl: the first "
        "admin account's secretKey; our addition, RocketMQ slaves cannot answer it)",
    )  # fmt: skip
    b.add_argument(
        "--ha-allow", default=None, metavar="IPS",
        help="comma-separated slave IPs the HA master serves (default: any)",
    )  # fmt: skip
    _add_geometry_args(b)
    b.add_argument(
        "--transaction-timeout-ms", type=_non_negative, default=6_000, metavar="MS",
        help="a half message younger than this is not checked back (transactionTimeOut)",
    )  # fmt: skip
    b.add_argument(
        "--transaction-check-interval-ms", type=_positive, default=60_000, metavar="MS",
        help="how often unresolved half messages are checked back (transactionCheckInterval)",
    )  # fmt: skip
    b.add_argument(
        "--transaction-check-max", type=_positive, default=15, metavar="N",
        help="check-backs before a half message goes to TRANS_CHECK_MAX_TIME_TOPIC",
    )  # fmt: skip
    b.add_argument(
        "--enable-property-filter", action="store_true",
        help="serve SQL92 property filters (RocketMQ enablePropertyFilter; off by default,"
        " as in RocketMQ: SQL92 pulls are then SYSTEM_ERROR; docs/sql92.md)",
    )  # fmt: skip
    b.add_argument(
        "--property-format",
        choices=["5", "4.9"],
        default="5",
        help="store records as this broker version does: 4.9 = RocketMQ 4.9.x's properties"
        " (HashMap(16) order, CLUSTER, WAIT only on batches)",
    )
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
    b.add_argument(
        "--namesrv", type=_namesrv_addrs, default=None, metavar="HOST:PORT",
        help="register with these name servers (';'-separated) every --register-interval s",
    )  # fmt: skip
    b.add_argument("--register-interval", type=float, default=30.0, help=argparse.SUPPRESS)
    # how often held pulls are re-checked besides their arrival wake-ups (RocketMQ: 5 s);
    # a test moves it out of the way to see that a wake-up alone answers a pull
    b.add_argument("--hold-check-interval-ms", type=int, default=5000, help=argparse.SUPPRESS)


def _add_namesrv_parser(sub: argparse._SubParsersAction[_Parser]) -> None:
    """Add the ``namesrv`` subcommand (a RocketMQ name server brokers register with)."""
    n = sub.add_parser(
        "namesrv", help="run a name server (brokers register with --namesrv)",
        formatter_class=_Formatter, epilog=EXIT_CODES_HELP,
    )  # fmt: skip
    n.add_argument("--port", type=_port, default=9876, help="remoting port (0: any free port)")
    n.add_argument("--host", default="127.0.0.1", help="listen address")
    n.add_argument(
        "--expiry", type=float, default=120.0, metavar="S",
        help="drop a broker not registered for S seconds (RocketMQ: 120)",
    )  # fmt: skip
    n.add_argument("--scan-interval", type=float, default=10.0, help=argparse.SUPPRESS)
    n.add_argument(
        "--acl", default=None, metavar="FILE",
        help="RocketMQ plain_acl.yml: registrations need an admin account's signature, "
        "reads any account's (docs/acl.md §8)",
    )  # fmt: skip


def _add_spark_parsers(sub: argparse._SubParsersAction[_Parser]) -> None:
    """Add the Spark subcommands (``audit``, ``reindex``, ``export``) to ``sub``."""
    for name, helptext in (
        ("audit", "check every record of a store directory with Spark"),
        ("reindex", "rebuild consumequeue/ and index/ from the CommitLog with Spark"),
        ("export", "export messages to Parquet with Spark"),
    ):
        s = sub.add_parser(name, help=helptext, formatter_class=_Formatter, epilog=EXIT_CODES_HELP)
        s.add_argument("dir", help="store directory (ours, or a RocketMQ broker's store/)")
        s.add_argument(
            "--master", type=_spark_master, default=None,
            help="Spark master URL: local[*], local[N], spark://HOST:PORT, yarn, k8s://URL "
            "(default: local[*], this machine)",
        )  # fmt: skip
        if name == "audit":
            s.add_argument(
                "--report", default=None, metavar="FILE.json", help="also write the report here"
            )
        if name in ("audit", "reindex"):
            _add_geometry_args(s)
        if name == "reindex":
            s.add_argument(
                "--out",
                default=None,
                help="write the rebuilt store here (default: replace DIR's files atomically)",
            )
        if name == "export":
            s.add_argument(
                "--parquet", required=True, metavar="OUT", help="output directory (must not exist)"
            )
            s.add_argument(
                "--partition-by", choices=["topic"], default=None,
                help="one folder per topic (OUT/topic=NAME/), as Spark partitions Parquet",
            )  # fmt: skip


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return f"mqstore {version('mqstore')}"
    except PackageNotFoundError:
        return "mqstore (not installed)"


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of every subcommand."""
    parser = _Parser(
        prog="mqstore",
        description="A RocketMQ-compatible message store: run it, audit it, benchmark it.",
        formatter_class=_Formatter,
        epilog=EXIT_CODES_HELP,
    )
    parser.add_argument("--version", action="version", version=_version())
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    def add(name: str, helptext: str) -> argparse.ArgumentParser:
        p: argparse.ArgumentParser = sub.add_parser(
            name, help=helptext, formatter_class=_Formatter, epilog=EXIT_CODES_HELP
        )
        return p

    q = add("quickstart", "the guided tour: produce, crash, consume, verify, summarise")
    q.add_argument(
        "dir", nargs="?", default=None, help="store directory to keep (default: a temporary one)"
    )
    q.add_argument("--messages", type=_positive, default=2000, help="how many to produce")
    q.add_argument("--no-spark", action="store_true", help="skip the Spark audit step")

    p = add("produce", "put messages into a store (created if missing)")
    _add_store_args(p)
    p.add_argument("--topic", required=True, help="topic name ([%%|a-zA-Z0-9_-], 1-127 chars)")
    p.add_argument("--count", type=_positive, default=10, help="how many messages")
    p.add_argument("--tags", default=None, help="the messages' tag, e.g. TagA")
    p.add_argument("--body", default="hello from mqstore", help="body text; ' #N' is appended")
    p.add_argument("--queue-id", type=_non_negative, default=0, help="queue to put into")

    c = add(
        "consume",
        "print a topic's messages: from a store directory (read-only: works beside a "
        "running broker), or from a running broker (--broker/--namesrv)",
    )
    src = c.add_mutually_exclusive_group()
    src.add_argument("--store", default="data", help="store directory (must hold a store)")
    _add_remote_args(src)
    c.add_argument("--topic", required=True, help="topic name")
    c.add_argument(
        "--queue-id", type=_non_negative, default=None, help="only this queue (default: all)"
    )
    c.add_argument("--offset", type=_non_negative, default=0, help="first queue offset to read")
    c.add_argument("--limit", type=_positive, default=20, help="print at most this many")
    c.add_argument("--tags", default="*", help='subscription, e.g. "TagA || TagB"')

    s = add("send", "send messages to a running broker (like mqadmin sendMessage)")
    _add_remote_args(s.add_mutually_exclusive_group(required=True))
    s.add_argument("--topic", required=True, help="topic name ([%%|a-zA-Z0-9_-], 1-127 chars)")
    s.add_argument("--count", type=_positive, default=1, help="how many messages")
    s.add_argument("--body", default="hello from mqstore", help="body text; ' #N' is appended")
    s.add_argument("--tags", default=None, help="the messages' tag, e.g. TagA")
    s.add_argument("--keys", default=None, help="the messages' keys (space-separated)")
    s.add_argument(
        "--queue-id", type=_non_negative, default=None,
        help="queue to send to (default: round-robin over the topic's queues)",
    )  # fmt: skip

    _add_broker_parser(sub)
    _add_namesrv_parser(sub)
    _add_spark_parsers(sub)
    _admin.add_parser(sub, _Formatter, EXIT_CODES_HELP)

    be = add("bench", "benchmarks")
    be.add_argument("what", choices=BENCHMARKS, help="which benchmark (see README, Benchmarks)")
    be.add_argument(
        "options",
        nargs=argparse.REMAINDER,
        metavar="...",
        help="the benchmark's options, passed on as given: every one takes --quick, "
        "--json FILE and --dir DIR; mqstore bench NAME --help lists its own "
        "(e.g. commitlog --duration 1, broker --threads 2, flush --layer fuse)",
    )
    return parser


# -------------------------------------------------------------------- subcommands


def _produce(args: argparse.Namespace) -> int:
    from mqstore import FlushDiskType, Message, MessageStore
    from mqstore.message import validate_topic

    validate_topic(args.topic)
    cfg = _store_config(args, flush_disk_type=FlushDiskType[args.flush])
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
                print(f"mqstore produce: not stored: {r.error}", file=sys.stderr)
                return Exit.PROBLEMS
    return Exit.OK


def _remote_addr(args: argparse.Namespace) -> str | None:
    """``--broker`` or ``--namesrv`` (checked as HOST:PORT), None when neither is given."""
    addr: str | None = args.broker or args.namesrv
    if addr is not None:
        host, _, port = addr.rpartition(":")
        if not host or not port.isdigit() or not 0 < int(port) < 65536:
            option = "--broker" if args.broker else "--namesrv"
            raise CliError(f"{option} takes HOST:PORT, got {addr!r}")
    return addr


def _remote_error(addr: str, e: Exception) -> CliError:
    """A broker or name server that did not answer, or refused: one line, exit 2."""
    from mqstore.client.transport import TransportError

    if isinstance(e, TransportError):
        return CliError(f"no answer from {addr}: {e}")
    return CliError(f"{addr} refused: {e}")


def _send(args: argparse.Namespace) -> int:
    """Send ``--count`` messages to a running broker; one line per broker answer."""
    from mqstore import Message
    from mqstore.client.transport import BrokerError, TransportError
    from mqstore.message import validate_topic
    from mqstore.tools import remote

    validate_topic(args.topic)
    addr = _remote_addr(args)
    assert addr is not None  # argparse requires one
    msgs = [
        Message(topic=args.topic, body=f"{args.body} #{i}".encode(), tags=args.tags,
                keys=args.keys)
        for i in range(args.count)
    ]  # fmt: skip
    with remote.connect(addr) as transport:
        try:
            for r in remote.send(transport, msgs, args.queue_id):
                print(f"{r.status.value} queue={r.queue.queue_id} queue_offset={r.queue_offset}"
                      f" msg_id={r.msg_id}")  # fmt: skip
                if r.status.value != "SEND_OK":
                    _say(args, f"not stored as asked: {r.status.value}")
                    return Exit.PROBLEMS
        except BrokerError as e:
            _say(args, f"not stored: {addr} refused: {e}")
            return Exit.PROBLEMS
        except TransportError as e:
            raise _remote_error(addr, e) from None
    return Exit.OK


def _consume_remote(args: argparse.Namespace, addr: str) -> int:
    """Print a topic's messages pulled from a running broker (nothing committed)."""
    from mqstore.client.transport import BrokerError, TransportError
    from mqstore.tools import remote

    shown = 0
    with remote.connect(addr) as transport:
        try:
            queues = remote.queues(transport, args.topic, args.queue_id)
            for queue in queues:
                for m in remote.pull(transport, queue, args.offset, args.tags, args.limit - shown):
                    print(_message_line(m))
                    shown += 1
                if shown >= args.limit:
                    break
        except (BrokerError, TransportError) as e:
            raise _remote_error(addr, e) from None
    if shown == 0:
        where = "" if args.queue_id is None else f" queue {args.queue_id}"
        known = "" if queues else f" (no route for it at {addr})"
        _say(args, f"no messages in topic {args.topic!r}{where}{known}")
    return Exit.OK


def _consume(args: argparse.Namespace) -> int:
    """Print a topic's messages: pulled from a running broker with --broker/--namesrv,
    else read-only from the store (see :mod:`mqstore.tools.storeview`)."""
    from mqstore.message import validate_topic
    from mqstore.tools.storeview import StoreView

    validate_topic(args.topic)
    addr = _remote_addr(args)
    if addr is not None:
        return _consume_remote(args, addr)
    with StoreView(args.store) as view:
        queues = view.queue_ids(args.topic) if args.queue_id is None else [args.queue_id]
        shown = 0
        for queue_id in queues:
            for m in view.messages(args.topic, queue_id, args.offset, args.tags):
                if shown >= args.limit:
                    break
                print(_message_line(m))
                shown += 1
        if shown == 0:
            where = "" if args.queue_id is None else f" queue {args.queue_id}"
            print(f"mqstore consume: no messages in topic {args.topic!r}{where}", file=sys.stderr)
    return Exit.OK


def _message_line(m: StoredMessage) -> str:
    return f"q{m.queue_id}@{m.queue_offset} tags={m.tags or '-'} {body_text(m.body)}"


def body_text(body: bytes) -> str:
    """A body for people: its text when it is printable UTF-8, else a Python literal
    (escaped text, or ``b'...'`` for bytes that are not UTF-8)."""
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError:
        return repr(body)
    return text if text.isprintable() else repr(text)


def _spark(args: argparse.Namespace) -> int:
    import importlib

    _check_spark_paths(args)
    try:
        mod = importlib.import_module(f"mqstore.tools.spark.{args.command}")
        from mqstore.tools.spark.session import build_session
    except ImportError as e:
        raise CliError(
            f"Spark jobs need the spark extra: pip install 'mqstore[spark]' ({e})"
        ) from None
    argv = [args.dir]
    if args.master:
        argv += ["--master", args.master]
    if getattr(args, "report", None):
        argv += ["--report", args.report]
    if getattr(args, "out", None):
        argv += ["--out", args.out]
    if getattr(args, "parquet", None):
        argv += ["--parquet", args.parquet]
    if getattr(args, "partition_by", None):
        argv += ["--partition-by", args.partition_by]
    for flag in ("file_size", "cq_file_size", "index_slots", "index_num", "broker_config"):
        if getattr(args, flag, None) is not None:
            argv += ["--" + flag.replace("_", "-"), str(getattr(args, flag))]
    from mqstore.tools.progress import SparkProgress

    print(f"mqstore {args.command}: starting Spark ...", file=sys.stderr, flush=True)
    from mqstore.tools.spark.layout import input_bytes

    spark = build_session(
        args.master,
        f"mqstore-{args.command}",
        input_bytes=input_bytes(args.dir),
        jvm_work=mod.JVM_WORK,
    )
    with SparkProgress(spark, sys.stderr, f"mqstore {args.command}: "):
        rc: int = mod.main(argv)
    return rc


def _check_spark_paths(args: argparse.Namespace) -> None:
    """Refuse a DIR that holds no store, an existing export output or a --report that
    cannot be written, before the JVM starts (that takes seconds) and long before the
    job's last write."""
    from mqstore.tools.spark._cli import check_output_file
    from mqstore.tools.spark.layout import LayoutError, find_commitlog_dir

    try:
        find_commitlog_dir(Path(args.dir))
        if getattr(args, "report", None) is not None:
            check_output_file(args.report, "--report")
    except (LayoutError, ValueError) as e:
        raise CliError(str(e)) from None
    if hasattr(args, "broker_config"):  # audit, reindex: the geometry, before the JVM
        from mqstore import ConfigError
        from mqstore.tools.spark.layout import discover, geometry_flags

        try:
            discover(args.dir, flags=geometry_flags(args), broker_config=args.broker_config)
        except ConfigError as e:
            raise CliError(str(e)) from None
    parquet = getattr(args, "parquet", None)
    if parquet is not None and os.path.lexists(parquet):
        raise CliError(f"{parquet} already exists: remove it or choose another --parquet")


def _bench(args: argparse.Namespace) -> int:
    import importlib

    try:
        mod = importlib.import_module(f"mqstore.tools.bench.{args.what}")
    except ImportError as e:
        raise CliError(f"bench {args.what} is not available ({e})") from None
    argv: list[str] = args.options
    rc: int = mod.main(argv)
    return rc


def _broker(args: argparse.Namespace) -> int:
    """Serve RocketMQ remoting (+ name server) and HA until SIGTERM/SIGINT.

    The remoting port is bound before the store opens, so a port in use fails at once.
    Prints ``mqstore broker: remoting on HOST:PORT`` once serving (scripts and tests
    wait for that line). On a signal: stop serving, persist consumer offsets and
    topics, close the store.
    """
    import logging
    import signal
    import threading

    from mqstore import BrokerRole, MessageStore
    from mqstore.broker.server import bind_listener

    role = BrokerRole[args.role]
    if role is BrokerRole.SLAVE and not args.master_ha:
        raise CliError("a SLAVE needs --master-ha HOST:PORT")
    require_store_directory(args.store)
    from mqstore.broker.exposure import BrokerAccess

    args.access = BrokerAccess.from_flags(args.acl, args.ha_secret, args.ha_allow)
    grpc_host = args.grpc_host if args.grpc_port is not None else None
    for line in args.access.warnings(args.host, args.ha_bind, role is not BrokerRole.SLAVE,
                                     grpc_host):  # fmt: skip
        print(f"mqstore broker: {line}", file=sys.stderr, flush=True)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    try:  # before the store fixes store_host (server Rule 5); a busy port fails now
        sock = bind_listener(args.host, args.port)
    except OSError as e:
        raise _listen_error(f"cannot listen on {args.host}:{args.port}", e, "--port") from None
    port = int(sock.getsockname()[1])
    try:
        try:  # before the store starts threads: they inherit this thread's mask
            cfg = _broker_config(args, role, port)
            store = MessageStore.open(cfg)
        except OSError as e:
            if e.errno == errno.EADDRINUSE:
                raise _ha_listen_error(args, port, e) from None
            raise
    except BaseException:
        sock.close()
        raise
    with store:
        return _serve_broker(args, store, role, port, sock, stop)


def _start_grpc(args: argparse.Namespace, core: Any, server: Any) -> Any:
    """The gRPC endpoint of ``--grpc-port`` (None without it); prints its address."""
    if args.grpc_port is None:
        return None
    try:
        from mqstore.grpc.server import serve_beside
    except ImportError as e:  # the grpc extra is not installed
        server.stop()
        core.shutdown()
        hint = "pip install 'mqstore[grpc]'"
        raise CliError(f"--grpc-port needs the grpc extra ({hint}): {e}") from None
    try:
        endpoint = serve_beside(core, args.grpc_host, args.grpc_port, args.grpc_fifo_group,
                                acl=args.access.acl)  # fmt: skip
    except OSError as e:
        server.stop()
        core.shutdown()
        where = f"{args.grpc_host}:{args.grpc_port}"
        raise _listen_error(f"cannot listen for gRPC on {where}", e, "--grpc-port") from None
    print(f"mqstore broker: grpc on {endpoint.address}", flush=True)
    return endpoint


def _listen_error(what: str, e: OSError, option: str) -> CliError:
    if e.errno == errno.EADDRINUSE:
        return CliError(f"{what}: the port is in use (choose another {option})", Exit.BUSY)
    return CliError(f"{what}: {e.strerror or e}")


def _ha_listen_error(args: argparse.Namespace, port: int, e: OSError) -> CliError:
    where = f"{args.ha_bind}:{_ha_port(args, port)}"
    return _listen_error(f"cannot listen for slaves on {where}", e, "--ha-port")


def _ha_port(args: argparse.Namespace, port: int) -> int:
    """--ha-port, else RocketMQ's rule: the remoting port + 1 (any free one for --port 0)."""
    if args.ha_port is not None:
        return int(args.ha_port)
    return port + 1 if args.port != 0 else 0


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
        ha_listen_port=_ha_port(args, port), ha_bind_host=args.ha_bind,
        ha_master_address=args.master_ha, store_host=(args.host, port),
        flush_disk_type=FlushDiskType[args.flush], dispatch_process=args.dispatch_process,
        dispatch_cpus=dispatch_cpus, property_format=args.property_format,
        **args.access.store_settings(),
    )  # fmt: skip


def _serve_broker(
    args: argparse.Namespace,
    store: MessageStore,
    role: BrokerRole,
    port: int,
    sock: socket.socket,
    stop: threading.Event,
) -> int:
    """Serve the open ``store`` until ``stop`` is set; return the exit code."""
    from mqstore import BrokerRole
    from mqstore.broker.core import BrokerConfig, BrokerCore
    from mqstore.broker.server import BrokerServer

    ha_addr = ""  # what a slave registers as its HA address
    if role is BrokerRole.SLAVE:
        what = f"replicating from {args.master_ha}"
    else:
        try:
            master = store.serve_replicas()
        except OSError as e:
            sock.close()
            raise _ha_listen_error(args, port, e) from None
        what = f"HA port {master.address}"
        ha_addr = master.address
    broker_id = 1 if role is BrokerRole.SLAVE else 0  # routes list a slave as id 1
    config = BrokerConfig(
        broker_name=args.broker_name, broker_id=broker_id,
        transaction_timeout_ms=args.transaction_timeout_ms,
        transaction_check_interval_ms=args.transaction_check_interval_ms,
        transaction_check_max=args.transaction_check_max,
        enable_property_filter=args.enable_property_filter,
        namesrv_addr=";".join(args.namesrv or ()),
        hold_check_interval_ms=args.hold_check_interval_ms,
    )  # fmt: skip
    core = BrokerCore(store, config)
    server = BrokerServer(core, args.host, port, sock=sock, acl=args.access.acl)
    try:
        server.start()
    except OSError as e:
        core.shutdown()
        raise _listen_error(f"cannot listen on {args.host}:{port}", e, "--port") from None
    print(f"mqstore broker: {role.value} store {args.store}, {what}", flush=True)
    print(f"mqstore broker: remoting on {server.address}", flush=True)
    grpc = _start_grpc(args, core, server)
    registrar = _start_registrar(args, core, server.address, ha_addr)
    try:
        while not stop.wait(1.0):
            pass
    finally:
        if registrar is not None:
            registrar.shutdown()
        if grpc is not None:
            grpc.stop()
        server.stop()
        core.shutdown()
    print("mqstore broker: stopped, offsets persisted", flush=True)
    return Exit.OK


def _registration_signer(acl: Any) -> Any:
    """With ``--acl``, registrations are signed with the file's first admin account (a
    name server with ACL wants an admin's signature on REGISTER_BROKER)."""
    admin = acl.admin() if acl is not None else None
    if admin is None:
        return None
    from mqstore.client.acl_hook import AclSigner

    return AclSigner(admin.access_key, admin.secret_key)


def _start_registrar(args: argparse.Namespace, core: Any, addr: str, ha: str) -> Any:
    """The name-server registration of ``--namesrv`` (None without it)."""
    if args.namesrv is None:
        return None
    from mqstore.client.registration import BrokerRegistrar

    registrar = BrokerRegistrar(
        args.namesrv, cluster=core.config.cluster_name,
        broker_name=core.config.broker_name, broker_id=core.config.broker_id,
        broker_addr=addr, ha_server_addr=ha,
        topics=core.topics.all, interval_s=args.register_interval,
        rpc_hook=_registration_signer(args.access.acl),
    )  # fmt: skip
    core.topics.on_change(lambda _config: registrar.topics_changed())
    registrar.start()
    print(f"mqstore broker: registering with {';'.join(args.namesrv)}", flush=True)
    return registrar


def _namesrv(args: argparse.Namespace) -> int:
    """Serve a name server until SIGTERM/SIGINT; prints ``mqstore namesrv: on HOST:PORT``."""
    import logging
    import signal
    import threading

    from mqstore.broker.acl import AccessControl
    from mqstore.namesrv.server import NameServer

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    try:
        acl = AccessControl.load(args.acl) if args.acl else None
        server = NameServer(
            args.host, args.port, expiry_s=args.expiry, scan_interval_s=args.scan_interval,
            acl=acl,
        )  # fmt: skip
        server.start()
    except ValueError as e:
        raise CliError(str(e)) from None
    except OSError as e:
        raise _listen_error(f"cannot listen on {args.host}:{args.port}", e, "--port") from None
    print(f"mqstore namesrv: on {server.address}", flush=True)
    try:
        while not stop.wait(1.0):
            pass
    finally:
        server.stop()
    return Exit.OK


# --------------------------------------------------------------------------- main

_SPARK_COMMANDS = frozenset({"audit", "reindex", "export", "quickstart"})


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``mqstore`` console script; returns an :class:`Exit` code."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help(sys.stderr)
        return Exit.USAGE
    handlers: dict[str, Callable[[argparse.Namespace], int]] = {
        "quickstart": _quickstart.main,
        "produce": _produce,
        "consume": _consume,
        "send": _send,
        "broker": _broker,
        "namesrv": _namesrv,
        "audit": _spark,
        "reindex": _spark,
        "export": _spark,
        "bench": _bench,
        "admin": _admin_command,
    }
    if args.command in _SPARK_COMMANDS:
        _quiet_py4j()
    try:
        rc = handlers[args.command](args)
        sys.stdout.flush()  # a closed pipe shows here, not at interpreter exit
        return rc
    except BrokenPipeError:
        _discard_stdout()
        return Exit.OUTPUT_CLOSED
    except KeyboardInterrupt:
        _say(args, "interrupted")
        return Exit.INTERRUPTED
    except CliError as e:
        _say(args, str(e))
        return e.code
    except Exception as e:
        code = _user_error_code(e)
        if code is None:
            raise  # a bug: keep the traceback
        _say(args, _describe(e))
        return code


def _admin_command(args: argparse.Namespace) -> int:
    """``mqstore admin``: a broker's or store's operator views (mqstore.tools.admin)."""
    from mqstore.client.transport import TransportError

    try:
        _admin.main(args)
    except (_admin.AdminError, TransportError) as e:
        raise CliError(str(e)) from None  # main prefixes "mqstore admin: "
    return Exit.OK


def _user_error_code(e: Exception) -> Exit | None:
    """The exit code of an exception that reports a user's mistake, None for a bug."""
    from mqstore.errors import (
        ConfigError,
        IllegalMessageError,
        IllegalTopicError,
        NotAStoreError,
        StoreLockedError,
    )

    if isinstance(e, StoreLockedError):
        return Exit.BUSY
    if isinstance(e, ConfigError | IllegalTopicError | IllegalMessageError | NotAStoreError):
        return Exit.USAGE
    if isinstance(e, OSError):
        return Exit.BUSY if e.errno == errno.EADDRINUSE else Exit.USAGE
    return None


def _describe(e: Exception) -> str:
    if isinstance(e, OSError) and e.strerror and e.filename is not None:
        return f"{e.filename}: {e.strerror}"
    return str(e) or type(e).__name__


def _say(args: argparse.Namespace, message: str) -> None:
    print(f"mqstore {args.command}: {message}", file=sys.stderr, flush=True)


def _discard_stdout() -> None:
    """The reader closed our stdout: send what is left to /dev/null, so the flush at
    interpreter exit does not fail a second time."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)


def _quiet_py4j() -> None:
    """py4j logs a traceback per call cut short by Ctrl-C or by the JVM's exit, some
    through the root logger (which would configure itself to print them); the command
    reports those failures itself, so they go nowhere."""
    import logging

    logging.getLogger("py4j").setLevel(logging.CRITICAL)
    root = logging.getLogger()
    if not root.handlers:
        root.addHandler(logging.NullHandler())


if __name__ == "__main__":
    sys.exit(main())
