"""``mqstore admin VIEW``: operator views of a broker, as ``mqadmin`` prints them
(docs/admin.md §10).

``progress`` is a consumer group's lag per queue (``consumerProgress``, docs/admin.md §4);
``topic-status`` (``topicStatus``, §3), ``consumer-connections`` / ``producer-connections``
(§5) and ``broker-status`` (``brokerStatus``, §6) ask a running broker (``--broker``).
``rebalance --group GROUP`` makes every online member of a consumer group rebalance now: it
sends NOTIFY_CONSUMER_IDS_CHANGED to the broker, which relays it to the group's clients
as it does when membership changes (``mqstore.broker.admin``, Rule 4); a group with no
online member is an error (exit 2).

Two sources, same rows:

- ``--broker HOST:PORT``: GET_CONSUME_STATS (208) to a running broker (ours or a Java
  one), its ``ConsumeStats`` body read with its MessageQueue-keyed map (docs/admin.md §2).
- ``--store DIR``: read-only, from the directory's ``config/consumerOffset.json`` and the
  consume queue files (a queue's next offset = the units written); safe beside a
  running broker since nothing is opened for writing. Last timestamps are not read
  there (0).

Output: a table (topic, broker, queue, broker offset, consumer offset, diff, last time)
and the total diff; ``--json`` prints ``{"group":..,"rows":[..],"diffTotal":..}``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

from mqstore.broker.admin_bodies import QueueProgress
from mqstore.remoting.values import MessageQueue

CQ_UNIT = 20


class AdminError(Exception):
    """The broker refused or the input is not usable (one line for the user)."""


def mq_keyed(text: str) -> list[tuple[dict[str, Any], Any]]:
    """Entries of a fastjson ``Map<MessageQueue, V>`` text (bean keys, unquoted).

    Raises:
        ValueError: not of that shape.
    """
    dec = json.JSONDecoder()
    if not text.startswith("{"):
        raise ValueError("not a map")
    out, pos = [], 1
    while pos < len(text) and text[pos] != "}":
        key, pos = dec.raw_decode(text, pos)
        if text[pos : pos + 1] != ":" or not isinstance(key, dict):
            raise ValueError(f"bad entry at {pos}")
        value, pos = dec.raw_decode(text, pos + 1)
        out.append((key, value))
        if text[pos : pos + 1] == ",":
            pos += 1
    return out


def rows_of_consume_stats(body: bytes) -> list[QueueProgress]:
    """The rows of a ``ConsumeStats`` body.

    Raises:
        ValueError: the body is not a ``ConsumeStats``.
    """
    text = body.decode()
    _, sep, rest = text.partition('"offsetTable":')
    if not sep:
        raise ValueError("no offsetTable")
    end = rest.rindex("}")  # the ConsumeStats object's own closing brace
    rows = [
        QueueProgress(
            MessageQueue(str(k["topic"]), str(k["brokerName"]), int(k["queueId"])),
            int(v["brokerOffset"]),
            int(v["consumerOffset"]),
            int(v.get("lastTimestamp", 0)),
        )
        for k, v in mq_keyed(rest[:end])
    ]
    return sorted(rows, key=lambda r: r.queue)


def call_broker(addr: str, code: int, ext: dict[str, str]) -> bytes:
    """One admin request; the response body.

    Raises:
        AdminError: the broker answered an error. TransportError: no answer.
    """
    from mqstore.client.remoting_client import RemotingClient
    from mqstore.remoting.codec import RemotingCommand
    from mqstore.remoting.codes import ResponseCode

    client = RemotingClient()
    try:
        resp = client.invoke(addr, RemotingCommand(code, ext_fields=ext), 5.0)
    finally:
        client.close()
    if resp.code != ResponseCode.SUCCESS:
        raise AdminError(f"broker answered {resp.code}: {resp.remark}")
    return resp.body


def progress_from_broker(addr: str, group: str, topic: str | None) -> list[QueueProgress]:
    """GET_CONSUME_STATS over TCP.

    Raises:
        AdminError: the broker answered an error. TransportError: no answer.
    """
    ext = {"consumerGroup": group}
    if topic:
        ext["topic"] = topic
    body = call_broker(addr, 208, ext)
    try:
        return rows_of_consume_stats(body)
    except (ValueError, KeyError, TypeError) as e:
        raise AdminError(f"cannot read the broker's ConsumeStats: {e}") from None


def _queue_units(folder: Path) -> int:
    """The next queue offset of a consume queue folder (units written so far)."""
    files = sorted((int(p.name), p) for p in folder.iterdir() if p.name.isdigit())
    for start, path in reversed(files):
        with open(path, "rb") as f:
            data = f.read()
        n = 0
        while (n + 1) * CQ_UNIT <= len(data) and any(data[n * CQ_UNIT : (n + 1) * CQ_UNIT]):
            n += 1
        if n or start == files[0][0]:
            return start // CQ_UNIT + n
    return 0


def progress_from_store(
    root: str | os.PathLike[str], group: str, topic: str | None
) -> list[QueueProgress]:
    """Read-only progress from a store directory (see the module doc).

    Raises:
        AdminError: not a store directory, or its offsets file is unreadable.
    """
    from mqstore.remoting.fastjson import FastjsonError, read_config_file

    base = Path(root)
    if not (base / "commitlog").is_dir():
        raise AdminError(f"{base} holds no store (no commitlog/ directory)")
    try:
        loaded = read_config_file(base / "config" / "consumerOffset.json") or {}
    except FastjsonError as e:
        raise AdminError(f"consumerOffset.json: {e}") from None
    table = loaded.get("offsetTable") or {} if isinstance(loaded, dict) else {}
    rows = []
    for key, queues in table.items():
        t, _, g = str(key).rpartition("@")
        if g != group or (topic and t != topic) or not isinstance(queues, dict):
            continue
        cq = base / "consumequeue" / t
        ids = {int(q) for q in queues} | {
            int(p.name) for p in (cq.iterdir() if cq.is_dir() else []) if p.name.isdigit()
        }
        for qid in sorted(ids):
            folder = cq / str(qid)
            broker = _queue_units(folder) if folder.is_dir() else 0
            rows.append(
                QueueProgress(MessageQueue(t, "-", qid), broker, int(queues.get(qid, 0)), 0)
            )
    return sorted(rows, key=lambda r: r.queue)


def render(group: str, rows: list[QueueProgress], as_json: bool) -> str:
    """The table (or JSON) ``mqstore admin progress`` prints."""
    total = sum(r.lag for r in rows)
    if as_json:
        doc = {
            "group": group,
            "rows": [
                {
                    "topic": r.queue.topic, "broker_name": r.queue.broker_name,
                    "queue_id": r.queue.queue_id, "broker_offset": r.broker_offset,
                    "consumer_offset": r.consumer_offset, "last_timestamp": r.last_timestamp,
                    "diff": r.lag,
                }
                for r in rows
            ],
            "diffTotal": total,
        }  # fmt: skip
        return json.dumps(doc)
    lines = [
        f"{'#Topic':<32} {'#Broker':<16} {'#QID':>4} {'#Broker Offset':>15} "
        f"{'#Consumer Offset':>16} {'#Diff':>8}  #LastTime"
    ]
    for r in rows:
        q = r.queue
        lines.append(
            f"{q.topic:<32} {q.broker_name:<16} {q.queue_id:>4} {r.broker_offset:>15} "
            f"{r.consumer_offset:>16} {r.lag:>8}  {r.last_timestamp}"
        )
    lines.append(f"\nDiff Total: {total}")
    return "\n".join(lines)


def add_parser(sub: Any, formatter: type[argparse.HelpFormatter], epilog: str) -> None:
    """Add ``admin`` (with its ``progress`` view) to the CLI's subcommands."""
    a = sub.add_parser(
        "admin",
        help="operator views of a broker or store (consumer lag)",
        formatter_class=formatter,
        epilog=epilog,
    )
    views = a.add_subparsers(dest="view", metavar="VIEW", required=True)
    p = views.add_parser(
        "progress",
        help="a consumer group's lag per queue (consumerProgress)",
        formatter_class=formatter,
        epilog=epilog,
    )
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--broker", metavar="HOST:PORT", help="ask a running broker")
    src.add_argument("--store", metavar="DIR", help="read a store directory (read-only)")
    p.add_argument("--group", required=True, help="consumer group")
    p.add_argument("--topic", default=None, help="only this topic (default: the group's)")
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")
    others = (
        ("topic-status", "a topic's queues: min/max offsets, last update (topicStatus)"),
        ("consumer-connections", "a consumer group's live clients (consumerConnection)"),
        ("producer-connections", "a producer group's live clients (producerConnection)"),
        ("broker-status", "the broker's runtime info (brokerStatus)"),
    )
    r = views.add_parser(
        "rebalance",
        help="make a consumer group's online members rebalance now (NOTIFY_CONSUMER_IDS_CHANGED)",
        formatter_class=formatter,
        epilog=epilog,
    )
    r.add_argument("--group", default=None, help="consumer group")
    r.add_argument("legacy_group", nargs="?", default=None, help=argparse.SUPPRESS)
    r.add_argument("--broker", required=True, metavar="HOST:PORT", help="a broker of the group")
    r.add_argument("--json", action="store_true", help="print JSON")
    for name, helptext in others:
        v = views.add_parser(name, help=helptext, formatter_class=formatter, epilog=epilog)
        v.add_argument("--broker", required=True, metavar="HOST:PORT", help="the broker")
        if name == "topic-status":
            v.add_argument("--topic", required=True, help="topic name")
        elif name != "broker-status":
            v.add_argument("--group", required=True, help="group name")
        v.add_argument("--json", action="store_true", help="print JSON")


def _other_view(args: argparse.Namespace) -> str:
    """The text of the broker views other than ``progress``."""
    from mqstore.remoting.fastjson import FastjsonError, loads

    if args.view == "topic-status":
        body = call_broker(args.broker, 202, {"topic": args.topic})
        _, _, rest = body.decode().partition('"offsetTable":')
        try:
            entries = mq_keyed(rest[: rest.rindex("}")])
        except ValueError as e:
            raise AdminError(f"cannot read the broker's TopicStatsTable: {e}") from None
        rows = sorted(({**k, **v} for k, v in entries), key=lambda r: r["queueId"])
        if args.json:
            return json.dumps({"topic": args.topic, "queues": rows})
        lines = [
            f"{'#Broker Name':<16} {'#QID':>4} {'#Min Offset':>12} {'#Max Offset':>12}  "
            "#Last Updated"
        ]
        lines += [
            f"{r['brokerName']:<16} {r['queueId']:>4} {r['minOffset']:>12} "
            f"{r['maxOffset']:>12}  {r['lastUpdateTimestamp']}"
            for r in rows
        ]
        return "\n".join(lines)
    code, ext = {
        "consumer-connections": (203, {"consumerGroup": getattr(args, "group", "")}),
        "producer-connections": (204, {"producerGroup": getattr(args, "group", "")}),
        "broker-status": (28, {}),
    }[args.view]
    try:
        doc = loads(call_broker(args.broker, code, ext))
    except FastjsonError as e:
        raise AdminError(f"cannot read the broker's answer: {e}") from None
    if args.json:
        return json.dumps(doc)
    if args.view == "broker-status":
        table = doc.get("table") or {}
        return "\n".join(f"{k:<32}: {table[k]}" for k in sorted(table))
    conns = sorted(doc.get("connectionSet") or [], key=lambda c: str(c.get("clientId")))
    lines = [f"{'#ClientId':<40} {'#ClientAddr':<22} {'#Language':<10} #Version"]
    lines += [
        f"{c.get('clientId', ''):<40} {c.get('clientAddr', ''):<22} "
        f"{c.get('language', ''):<10} {c.get('version', '')}"
        for c in conns
    ]
    return "\n".join(lines)


def rebalance(addr: str, group: str) -> list[str]:
    """Ask the broker at ``addr`` to notify ``group``'s members; the notified client ids.

    Raises:
        AdminError: no online member (CONSUMER_NOT_ONLINE) or another refusal.
        TransportError: the broker did not answer.
    """
    body = call_broker(addr, 40, {"consumerGroup": group})
    try:
        ids = json.loads(body)["clientIds"]
    except (ValueError, KeyError, TypeError) as e:
        raise AdminError(f"cannot read the broker's answer: {e}") from None
    return [str(i) for i in ids]


def _rebalance_group(args: argparse.Namespace) -> str:
    """``--group`` of ``rebalance``, as every view takes it; the positional GROUP of
    earlier releases still works, with a deprecation line on stderr.

    Raises:
        AdminError: neither given, or both and they differ.
    """
    group: str | None = args.group
    legacy: str | None = args.legacy_group
    if legacy is not None:
        if group is not None and group != legacy:
            raise AdminError(f"two groups given: --group {group} and {legacy}")
        print(
            f"mqstore admin: rebalance GROUP is deprecated: use --group {legacy}",
            file=sys.stderr,
        )
        group = legacy
    if group is None:
        raise AdminError("rebalance needs --group GROUP")
    return group


def main(args: argparse.Namespace) -> list[QueueProgress]:
    """Run ``mqstore admin VIEW`` and print; returns the rows of ``progress``.

    Raises:
        AdminError: see the sources. TransportError: the broker did not answer.
    """
    if args.view == "rebalance":
        args.group = _rebalance_group(args)
        ids = rebalance(args.broker, args.group)
        if args.json:
            print(json.dumps({"consumerGroup": args.group, "clientIds": ids}))
        else:
            print(f"rebalance of {args.group}: notified {len(ids)} client(s): {', '.join(ids)}")
        return []
    if args.view != "progress":
        print(_other_view(args))
        return []
    if args.broker:
        rows = progress_from_broker(args.broker, args.group, args.topic)
    else:
        rows = progress_from_store(args.store, args.group, args.topic)
    print(render(args.group, rows, args.json))
    return rows
