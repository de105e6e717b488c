"""``mqstore bench java``: the real RocketMQ 4.9.8 Java client against ``mqstore broker``
and against the real 4.9.8 broker, interleaved in one run, and the ratios.

Needs the shared oracle (``$MQSTORE_ORACLE_498``, else ``../shared/oracles/rocketmq-4.9.8``
beside the repository: the real broker, name server and Java client built from source) and
Java 17+; without them it prints why and measures nothing.

Setup (every process on free 127.0.0.1 ports): the real 4.9.8 name server; the real 4.9.8
broker ``broker-real`` (the oracle's ``bin/mkconf`` settings: ASYNC_MASTER, ASYNC_FLUSH, 8 MiB
CommitLog files) and ``mqstore broker`` ``broker-mq`` (its defaults: ASYNC_FLUSH), both
registered with it; topic ``bench_real`` (4 queues) on the first, ``bench_mq`` (4 queues) on
the second. One JVM runs ``BrokerBench.java`` (beside this module): one
``DefaultMQProducer`` and one ``DefaultMQPullConsumer``, started once, warmed up on both
brokers before the clock.

Per repetition, for each broker in turn (real, mqstore, mqstore, real, ...: the order
alternates so neither always runs first):

* **send**: ``--threads`` Java threads share the producer and send ``--size`` B bodies
  synchronously (one SEND_MESSAGE_V2 round trip each) for ``--seconds``;
* **pull**: ``--pull-threads`` threads share the pull consumer, each reading its queues
  from offset 0 to their max offset, 32 messages per PULL_MESSAGE, again from 0 when done,
  for ``--seconds``.

``--serialize ROCKETMQ`` has the client write the binary header instead of JSON (its
``ROCKETMQ_SERIALIZE_TYPE``); both brokers answer in the type of the request.

Rates are Java's counts over Java's clock. CPU per message is the broker process's
(``/proc/<pid>/stat``) over the phase divided by its messages. The report gives the median
of each broker, the ratio mqstore / real, and the machine's load average: the client, both
brokers and the name server share the machine's cores, so only the ratio means anything.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

from mqstore.tools.bench._harness import (
    Benchmark,
    Option,
    free_port,
    median,
    spawn_cli,
    stop,
    wait_listening,
    wait_until,
)
from mqstore.tools.bench.brokers import _route_brokers, create_topic, proc_cpu

JAVA_SOURCE = Path(__file__).with_name("BrokerBench.java")
BROKERS = {"real": "broker-real", "mq": "broker-mq"}
QUEUES = 4


class HeaderType(str):
    """``--serialize``: JSON or ROCKETMQ, the values RocketMQ's ``ROCKETMQ_SERIALIZE_TYPE``
    takes (``RemotingCommand``); the brokers answer in the type a request used. Anything
    else is a usage error (argparse: one line, exit 2)."""

    def __new__(cls, text: str) -> HeaderType:
        value = text.strip().upper()
        if value not in ("JSON", "ROCKETMQ"):
            raise ValueError(text)
        return super().__new__(cls, value)


OPTIONS = (
    Option("--threads", int, 8, "Java sender threads"),
    Option("--pull-threads", int, 4, "Java puller threads"),
    Option("--size", int, 100, "body bytes"),
    Option("--seconds", float, 5.0, "seconds per phase", quick=1.5),
    Option("--reps", int, 3, "interleaved repetitions", quick=1),
    Option("--serialize", HeaderType, "JSON", "the Java client's headers: JSON or ROCKETMQ"),
)


def oracle_dir() -> Path | None:
    """The 4.9.8 oracle folder, or None when it (or its launcher scripts) is absent."""
    env = os.environ.get("MQSTORE_ORACLE_498")
    repo = Path(__file__).resolve().parents[2]
    candidates = [Path(env)] if env else []
    candidates += [repo.parent / "shared" / "oracles" / "rocketmq-4.9.8",
                   Path("/work/shared/oracles/rocketmq-4.9.8")]  # fmt: skip
    for c in candidates:
        if (c / "bin" / "broker").is_file() and (c / "bin" / "java-run").is_file():
            return c
    return None


def why_not() -> str | None:
    """Why the benchmark cannot run here (None: it can)."""
    if oracle_dir() is None:
        return "the RocketMQ 4.9.8 oracle is absent (set MQSTORE_ORACLE_498)"
    if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
        return "no Java (java on PATH or JAVA_HOME)"
    return None


def _java_env(home: Path) -> dict[str, str]:
    """A JVM environment whose client logs go under ``home``."""
    home.mkdir(parents=True, exist_ok=True)
    opts = f"{os.environ.get('JAVA_TOOL_OPTIONS', '')} -Duser.home={home}".strip()
    return {**os.environ, "HOME": str(home), "TMPDIR": str(home), "JAVA_TOOL_OPTIONS": opts}


def _broker_port() -> int:
    """A free port P with P - 2 (the 4.x VIP channel) and P + 1 (HA) free as well."""
    while True:
        port = free_port()
        if port > 2 and all(_free(p) for p in (port - 2, port + 1)):
            return port


def _free(port: int) -> bool:
    import socket

    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def _start_java(cmd: list[str], env: dict[str, str], log: Path,
                ready: str) -> subprocess.Popen[bytes]:  # fmt: skip
    """A JVM whose output goes to ``log``; returns once ``ready`` is in the log."""
    out = log.open("wb")
    proc = subprocess.Popen(cmd, env=env, stdout=out, stderr=subprocess.STDOUT,
                            stdin=subprocess.DEVNULL)  # fmt: skip

    def up() -> bool:
        if proc.poll() is not None:
            raise RuntimeError(f"{cmd[0]} exited with {proc.returncode}: see {log}")
        return ready in log.read_text(errors="replace")

    wait_until(up, 90, f"{Path(cmd[0]).name} to boot", 0.2)
    return proc


class JavaClient:
    """``BrokerBench.java`` in one JVM, asked one command at a time over stdin."""

    def __init__(self, oracle: Path, namesrv: str, home: Path, serialize: str) -> None:
        cmd = [str(oracle / "bin" / "java-run"), str(JAVA_SOURCE), namesrv]
        env = {**_java_env(home), "ROCKETMQ_SERIALIZE_TYPE": serialize}
        self.proc = subprocess.Popen(cmd, env=env, stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                     text=True)  # fmt: skip
        self.expect("ready")

    def expect(self, word: str) -> list[int]:
        """The integer fields of the next stdout line starting with ``word``."""
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            fields = line.split()
            if fields and fields[0] == word:
                return [int(f) for f in fields[1:]]
            if fields and fields[0] == "error":
                raise RuntimeError(f"the Java client: {line.strip()}")
        raise RuntimeError(f"the Java client exited ({self.proc.wait()}) before {word!r}")

    def ask(self, command: str, word: str) -> list[int]:
        """Send ``command``; the answer's integer fields."""
        assert self.proc.stdin is not None
        self.proc.stdin.write(command + "\n")
        self.proc.stdin.flush()
        return self.expect(word)

    def close(self) -> None:
        """Ask the JVM to quit; kill it if it has not 20 s later."""
        try:
            assert self.proc.stdin is not None
            self.proc.stdin.write("quit\n")
            self.proc.stdin.close()
            self.proc.wait(20)
        except (OSError, subprocess.TimeoutExpired):
            self.proc.kill()
            self.proc.wait()


def measure(root: Path, args: argparse.Namespace) -> dict[str, Any]:
    """Start everything, run the interleaved phases, return every repetition."""
    reason = why_not()
    if reason is not None:
        print(f"skipped: {reason}")
        return {"skipped": reason}
    oracle = oracle_dir()
    assert oracle is not None
    procs: dict[str, subprocess.Popen[bytes]] = {}
    client: JavaClient | None = None
    print(f"cpus {os.cpu_count()}, loadavg {os.getloadavg()[0]:.2f}, Java client: "
          f"{args.threads} sender threads, {args.pull_threads} puller threads, {args.size} B "
          f"bodies, {args.serialize} headers, {args.seconds:g} s per phase, "
          f"{args.reps} reps")  # fmt: skip
    try:
        ns_port = free_port()
        namesrv = f"127.0.0.1:{ns_port}"
        ns_dir = root / "namesrv"
        procs["namesrv"] = _start_java([str(oracle / "bin" / "namesrv"), str(ns_port),
                                        str(ns_dir)], _java_env(ns_dir / "home"),
                                       root / "namesrv.log", "boot success")  # fmt: skip
        addrs: dict[str, str] = {}
        real_port = _broker_port()
        d = root / "real"
        conf = d / "broker.conf"
        subprocess.run([str(oracle / "bin" / "mkconf"), str(conf), BROKERS["real"],
                        str(real_port), str(d / "store"), namesrv], check=True,
                       capture_output=True, timeout=30)  # fmt: skip
        procs["real"] = _start_java([str(oracle / "bin" / "broker"), str(conf), str(d)],
                                    _java_env(d / "home"), root / "real.log",
                                    "boot success")  # fmt: skip
        addrs["real"] = f"127.0.0.1:{real_port}"
        mq_port = free_port()
        procs["mq"] = spawn_cli(["broker", "--store", str(root / "mq"), "--port", str(mq_port),
                                 "--ha-port", "0", "--broker-name", BROKERS["mq"],
                                 "--namesrv", namesrv])  # fmt: skip
        wait_listening(procs["mq"], mq_port, "mqstore broker")
        addrs["mq"] = f"127.0.0.1:{mq_port}"
        for key, addr in addrs.items():
            create_topic(addr, f"bench_{key}", QUEUES)
        for key in addrs:
            wait_until(lambda k=key: _route_brokers(namesrv, f"bench_{k}") == {BROKERS[k]},  # type: ignore[misc]
                       60, f"the route of bench_{key}", 0.2)  # fmt: skip
        client = JavaClient(oracle, namesrv, root / "java-home", args.serialize)
        for key in addrs:  # warm-up: classes loaded, JIT, connections, routes
            for command in (f"send bench_{key} {args.threads} 2 {args.size}",
                            f"pull bench_{key} {args.pull_threads} 1"):  # fmt: skip
                for attempt in range(5):
                    try:
                        client.ask(command, "sent" if command[0] == "s" else "pulled")
                        break
                    except RuntimeError:  # a first call's timeout on a cold, loaded JVM
                        if attempt == 4:
                            raise
        runs: dict[str, list[dict[str, Any]]] = {k: [] for k in addrs}
        for rep in range(args.reps):
            order = ["real", "mq"] if rep % 2 == 0 else ["mq", "real"]
            for key in order:
                pid = procs[key].pid
                row: dict[str, Any] = {"rep": rep}
                cpu0 = proc_cpu(pid)
                ok, failed, nanos = client.ask(
                    f"send bench_{key} {args.threads} {args.seconds} {args.size}", "sent"
                )
                cpu1 = proc_cpu(pid)
                row.update(sent=ok, send_failed=failed, send_rate=ok / (nanos / 1e9),
                           send_cpu_us=(cpu1 - cpu0) / max(ok, 1) * 1e6)  # fmt: skip
                got, pulls, nanos = client.ask(
                    f"pull bench_{key} {args.pull_threads} {args.seconds}", "pulled"
                )
                row.update(pulled=got, pulls=pulls, pull_rate=got / (nanos / 1e9),
                           pull_cpu_us=(proc_cpu(pid) - cpu1) / max(got, 1) * 1e6,
                           loadavg_1m=os.getloadavg()[0])  # fmt: skip
                runs[key].append(row)
                print(f"  rep {rep + 1} {key:<4} send {row['send_rate']:>8,.0f}/s "
                      f"({row['send_cpu_us']:.0f} us broker cpu/msg)  pull "
                      f"{row['pull_rate']:>9,.0f}/s ({row['pull_cpu_us']:.1f} us)  "
                      f"load {row['loadavg_1m']:.1f}")  # fmt: skip
    finally:
        if client is not None:
            client.close()
        for proc in reversed(procs.values()):
            stop(proc)
    return {"cpus": os.cpu_count(), "threads": args.threads, "pull_threads": args.pull_threads,
            "size": args.size, "seconds": args.seconds, "runs": runs}  # fmt: skip


def report(result: dict[str, Any], args: argparse.Namespace) -> str:
    """Median rate and broker CPU per message of each broker, and mqstore / real."""
    if "skipped" in result:
        return ""
    runs = result["runs"]
    lines = ["", f"{'broker':<22} {'send/s':>9} {'cpu us':>7} {'pull/s':>10} {'cpu us':>7}"]
    med: dict[str, dict[str, float]] = {}
    for key, label in (("real", "RocketMQ 4.9.8 broker"), ("mq", "mqstore broker")):
        med[key] = {f: median([r[f] for r in runs[key]])
                    for f in ("send_rate", "send_cpu_us", "pull_rate", "pull_cpu_us")}  # fmt: skip
        m = med[key]
        lines.append(f"{label:<22} {m['send_rate']:>9,.0f} {m['send_cpu_us']:>7.1f} "
                     f"{m['pull_rate']:>10,.0f} {m['pull_cpu_us']:>7.2f}")  # fmt: skip

    def ratio(f: str) -> float:
        return med["mq"][f] / med["real"][f] if med["real"][f] else 0.0

    lines.append(f"mqstore / real: send {ratio('send_rate'):.2f}x, pull {ratio('pull_rate'):.2f}x "
                 f"({args.threads} sender / {args.pull_threads} puller threads, "
                 f"{result['cpus']} cpus, load {os.getloadavg()[0]:.2f})")  # fmt: skip
    return "\n".join(lines)


main = Benchmark("java", __doc__, OPTIONS, measure, report).main


if __name__ == "__main__":
    raise SystemExit(main())
