"""``mqstore bench brokers``: sends per second over a name-server route spanning two
brokers, against the same route on one broker, in one run.

Setup (all child processes on free 127.0.0.1 ports): ``mqstore namesrv`` and two
``mqstore broker --namesrv`` (``broker-a``, ``broker-b``, ASYNC_FLUSH, each its own
store). Topic ``one`` has 8 queues on broker-a only; topic ``two`` has 4 queues on
broker-a and 4 on broker-b: the same number of queues, on one broker or spread over
two. Both brokers run through both contenders (in ``one`` broker-b idles).

Senders: ``--procs`` client processes (each its own interpreter and GIL), each with
``--threads`` threads; every thread has its own ``RemoteTransport`` over the name server
and its own ``Producer`` (fault tolerance off, the 4.x default) and sends ``--size`` B
bodies synchronously (one SEND_MESSAGE_V2 round trip each), round-robin over the
route's writable queues, for ``--seconds``. All processes start on one wall-clock
instant. Rate = acknowledged sends / ``--seconds``.

The two contenders run interleaved ``--reps`` times (one, two, one, two, ...) so a
noisy moment of the machine hits both; the report gives the median rate of each, the
ratio two/one, and CPU seconds per 1,000 sends of the clients and of each broker.

A second broker only adds throughput when the brokers were the bottleneck and have
cores of their own: with every process on the same few cores the clients' and the
brokers' CPU compete, and the ratio says how much of a send's cost the broker side is.
The machine's CPU count and load average are printed with the figures.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import time
from concurrent.futures import ProcessPoolExecutor
from multiprocessing import get_context
from pathlib import Path
from typing import Any

from mqstore.tools.bench._harness import (
    Benchmark,
    Option,
    free_port,
    median,
    run_parallel,
    spawn_cli,
    stop,
    wait_listening,
    wait_until,
)

TOPICS = {"one": {"broker-a": 8}, "two": {"broker-a": 4, "broker-b": 4}}

OPTIONS = (
    Option("--procs", int, 2, "client processes"),
    Option("--threads", int, 4, "sender threads per client process", quick=2),
    Option("--size", int, 256, "body bytes"),
    Option("--seconds", float, 5.0, "seconds per run", quick=1.0),
    Option("--reps", int, 3, "interleaved repetitions of both contenders", quick=1),
)


def proc_cpu(pid: int) -> float:
    """CPU seconds (user + system) of process ``pid`` so far, from ``/proc``."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def send_for(namesrv: str, topic: str, threads: int, size: int, start_at: float,
             seconds: float) -> tuple[int, float]:  # fmt: skip
    """One client process's share: (sends acknowledged, CPU seconds of this process).

    Runs in a child process; every thread waits for ``start_at`` (wall clock) and
    sends until ``start_at + seconds``."""
    from mqstore.client.producer import Producer
    from mqstore.client.remote import RemoteTransport
    from mqstore.message import Message

    body = b"x" * size
    transports = [RemoteTransport(namesrv) for _ in range(threads)]
    producers = [Producer("bench-brokers", t).start() for t in transports]
    for p in producers:  # route looked up and connections dialled before the clock
        p.send(Message(topic, body))

    def run(i: int) -> int:
        time.sleep(max(0.0, start_at - time.time()))
        end = start_at + seconds
        n = 0
        while time.time() < end:
            producers[i].send(Message(topic, body, tags="TagA"))
            n += 1
        return n

    cpu0 = time.process_time()
    sent, _ = run_parallel(threads, run)
    cpu = time.process_time() - cpu0
    for t in transports:
        t.close()
    return sent, cpu


def _route_brokers(namesrv: str, topic: str) -> set[str]:
    from mqstore.client.remote import RemoteTransport
    from mqstore.client.transport import BrokerError, TransportError

    with RemoteTransport(namesrv) as t:
        try:
            route = t.route(topic)
        except (BrokerError, TransportError):
            return set()
    return set() if route is None else {q.broker_name for q in route.queue_datas}


def create_topic(addr: str, topic: str, queues: int) -> None:
    """UPDATE_AND_CREATE_TOPIC on the broker at ``addr``, every field as ``mqadmin
    updateTopic`` sends it (a real 4.9.8 broker refuses the request without them).

    Raises:
        RuntimeError: the broker refused.
    """
    from mqstore.client.remoting_client import RemotingClient
    from mqstore.remoting.codec import RemotingCommand
    from mqstore.remoting.codes import RequestCode, ResponseCode

    client = RemotingClient()
    try:
        ext = {"topic": topic, "defaultTopic": "TBW102", "readQueueNums": str(queues),
               "writeQueueNums": str(queues), "perm": "6", "topicFilterType": "SINGLE_TAG",
               "topicSysFlag": "0", "order": "false"}  # fmt: skip
        cmd = RemotingCommand(RequestCode.UPDATE_AND_CREATE_TOPIC, ext_fields=ext)
        resp = client.invoke(addr, cmd, 10.0)
        if resp.code != ResponseCode.SUCCESS:
            raise RuntimeError(f"creating {topic} on {addr}: {resp.remark}")
    finally:
        client.close()


def _create_topics(addrs: dict[str, str]) -> None:
    for topic, spread in TOPICS.items():
        for name, queues in spread.items():
            create_topic(addrs[name], topic, queues)


def measure(root: Path, args: argparse.Namespace) -> dict[str, Any]:
    """Start the processes, run the interleaved contenders, return every repetition."""
    ns_port = free_port()
    namesrv = f"127.0.0.1:{ns_port}"
    procs: dict[str, subprocess.Popen[bytes]] = {}
    addrs: dict[str, str] = {}
    print(f"cpus {os.cpu_count()}, loadavg {os.getloadavg()[0]:.2f}, {args.procs} client "
          f"processes x {args.threads} threads, {args.size} B bodies, {args.seconds:g} s "
          f"per run, {args.reps} reps")  # fmt: skip
    pool = ProcessPoolExecutor(args.procs, mp_context=get_context("spawn"))
    try:
        procs["namesrv"] = spawn_cli(["namesrv", "--port", str(ns_port)])
        wait_listening(procs["namesrv"], ns_port, "the name server")
        for name in ("broker-a", "broker-b"):
            port = free_port()
            procs[name] = spawn_cli(["broker", "--store", str(root / name), "--port", str(port),
                                  "--ha-port", "0", "--broker-name", name, "--namesrv",
                                  namesrv, "--register-interval", "0.5"])  # fmt: skip
            addrs[name] = f"127.0.0.1:{port}"
            proc = procs[name]
            wait_listening(proc, port, name)
        _create_topics(addrs)
        for topic, spread in TOPICS.items():
            wait_until(lambda t=topic, s=spread: _route_brokers(namesrv, t) == set(s),  # type: ignore[misc]
                       30, f"the route of {topic}", 0.1)  # fmt: skip
        list(pool.map(int, range(args.procs)))  # the client processes exist before timing
        runs: dict[str, list[dict[str, Any]]] = {t: [] for t in TOPICS}
        for rep in range(args.reps):
            for topic in TOPICS:
                cpu0 = {n: proc_cpu(procs[n].pid) for n in addrs}
                start_at = time.time() + 2.0  # every process connected and waiting
                futures = [
                    pool.submit(
                        send_for, namesrv, topic, args.threads, args.size, start_at, args.seconds
                    )
                    for _ in range(args.procs)
                ]
                results = [f.result() for f in futures]
                sends = sum(n for n, _ in results)
                row = {
                    "rep": rep,
                    "sends": sends,
                    "rate": sends / args.seconds,
                    "client_cpu_s": sum(c for _, c in results),
                    "broker_cpu_s": {n: proc_cpu(procs[n].pid) - cpu0[n] for n in addrs},
                    "loadavg_1m": os.getloadavg()[0],
                }
                runs[topic].append(row)
                print(f"  rep {rep + 1} {topic:<4} {row['rate']:>9,.0f} sends/s  "
                      f"load {row['loadavg_1m']:.1f}")  # fmt: skip
    finally:
        pool.shutdown(cancel_futures=True)
        for proc in procs.values():
            stop(proc)
    return {"cpus": os.cpu_count(), "procs": args.procs, "threads": args.threads,
            "size": args.size, "seconds": args.seconds, "runs": runs}  # fmt: skip


def report(result: dict[str, Any], args: argparse.Namespace) -> str:
    """The median rate of each contender, the ratio, and CPU per 1,000 sends."""
    del args
    lines = ["", f"{'route':<28} {'sends/s':>10}  cpu s per 1,000 sends"]
    rates: dict[str, float] = {}
    for topic, label in (("one", "8 queues on 1 broker"), ("two", "4 + 4 queues on 2 brokers")):
        runs = result["runs"][topic]
        rates[topic] = median([r["rate"] for r in runs])
        sends = sum(r["sends"] for r in runs) or 1
        client = sum(r["client_cpu_s"] for r in runs) / sends * 1000
        brokers = ", ".join(
            f"{n} {sum(r['broker_cpu_s'][n] for r in runs) / sends * 1000:.2f}"
            for n in ("broker-a", "broker-b")
        )
        lines.append(f"{label:<28} {rates[topic]:>10,.0f}  clients {client:.2f}, {brokers}")
    ratio = rates["two"] / rates["one"] if rates["one"] else 0.0
    lines.append(f"two brokers / one broker: {ratio:.2f}x ({result['cpus']} cpus)")
    return "\n".join(lines)


main = Benchmark("brokers", __doc__, OPTIONS, measure, report).main


if __name__ == "__main__":
    raise SystemExit(main())
