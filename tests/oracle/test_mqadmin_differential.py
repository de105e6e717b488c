"""The real mqadmin's command set against the real 4.9.8 broker and against mqstore
(issue 37): every command of :data:`tests.oracle.admin_commands.COMMANDS` runs, in one JVM
per side (``java/AdminBatch.java``: a JVM start costs seconds on a loaded machine), against
a real 4.9.8 name server + broker and against ``mqstore namesrv`` + ``mqstore broker``, the
two runs in parallel, each with a live Java producer and push group (6 messages, consumed
and committed, before the commands run). The outputs are compared after
:func:`~tests.oracle.admin_commands.normalise`; the outcome of every command is printed
as a table, and the test fails when a command expected to give the same output does not.
A command expected to differ is only reported (a fix elsewhere may make it equal).

Both brokers run with the same settings (:data:`REAL_CONF`, :data:`MQ_FLAGS`), so the
settings and status tables (``getBrokerConfig``, ``brokerStatus``, ``clusterList``)
compare value by value, modulo what names the process (ports, paths, its installation).
The mqstore broker stores what a 4.9.8 broker stores (``--property-format 4.9``: the
``CLUSTER`` property on every message, docs/format.md §1.6). Both brokers carry the same
name and cluster, so route and listing orders (Java hash
orders of the same names) agree. The real broker checks transactions every second
(``transactionCheckInterval=1000``, 60 s by default) so that it has created
``RMQ_SYS_TRANS_HALF_TOPIC``, which mqstore has from the start, before the listings run.
"""

from __future__ import annotations

import os
import re
import subprocess
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from tests.oracle.admin_commands import (
    COMMANDS,
    NOT_RUN,
    SAME,
    START,
    Command,
    normalise,
    render,
    split_outputs,
)
from tests.oracle.harness import JAVA_DIR, ORACLE, Fleet, Proc, Ran

pytestmark = pytest.mark.integration

BROKER = "broker-x"
CLUSTER = "DefaultCluster"
TOPIC, GROUP, MESSAGES = "TAdm", "GAdm", "6"
RUN_TIMEOUT_S = 900.0
REAL_CONF = ("transactionCheckInterval=1000", "mappedFileSizeCommitLog=65536",
             "mappedFileSizeConsumeQueue=4000", "maxHashSlotNum=100", "maxIndexNum=400",
             "diskMaxUsedSpaceRatio=75", "cleanFileForciblyEnable=true")  # fmt: skip
"""The real broker's settings beside ``bin/mkconf``'s: the mqstore broker's small files
(``SMALL_STORE_FLAGS``), and RocketMQ's own defaults for the disk settings mkconf changes
(mqstore's too), so that ``getBrokerConfig`` compares like with like."""
MQ_FLAGS = ("--property-format", "4.9", "--transaction-check-interval-ms", "1000")


def _run_side(ns: Proc, broker: Proc, folder: Path) -> Ran:
    """AdminBatch against one side, in ``folder`` (its working directory: consumerStatus
    writes a file per client there)."""
    folder.mkdir(parents=True)
    values = {"ns": ns.address, "addr": broker.address, "broker": BROKER, "cluster": CLUSTER,
              "topic": TOPIC, "group": GROUP, "dir": str(folder / "export")}  # fmt: skip
    script = folder / "commands.txt"
    script.write_text("".join(render(c, **values) + "\n" for c in COMMANDS))
    cmd = [str(ORACLE / "bin" / "java-run"), str(JAVA_DIR / "AdminBatch.java"), ns.address,
           TOPIC, GROUP, MESSAGES, str(script)]  # fmt: skip
    home = folder / "home"
    home.mkdir()
    env = {**os.environ, "HOME": str(home), "TMPDIR": str(home)}
    p = subprocess.run(cmd, env=env, cwd=folder, capture_output=True, text=True,
                       timeout=RUN_TIMEOUT_S, check=False, stdin=subprocess.DEVNULL)  # fmt: skip
    return Ran(p.returncode, p.stdout, p.stderr)


@pytest.fixture(scope="module")
def outputs(fleet: Fleet, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    """Each side's AdminBatch output (module-scoped: one real broker, one mqstore broker)."""
    root = tmp_path_factory.mktemp("mqadmin")
    with ThreadPoolExecutor(2) as pool:
        real_ns, mq_ns = pool.map(lambda start: start(), (fleet.real_namesrv, fleet.mq_namesrv))
        real_broker, mq_broker = pool.map(
            lambda start: start(),
            (lambda: fleet.real_broker(BROKER, real_ns.address, *REAL_CONF),
             lambda: fleet.mq_broker(BROKER, mq_ns.address, *MQ_FLAGS)),
        )  # fmt: skip
        time.sleep(2)  # the real broker's first transaction check creates the half topic
        runs = pool.map(
            lambda side: _run_side(*side),
            ((real_ns, real_broker, root / "real"), (mq_ns, mq_broker, root / "mq")),
        )
        real, mq = list(runs)
    try:
        yield {"real": real.out, "mq": mq.out, "errors": real.err + mq.err}
    finally:
        for proc in (mq_broker, real_broker, mq_ns, real_ns):
            proc.stop()
        for path in re.findall(r"^Message Body Path: +(\S+)$", real.out + mq.out, re.M):
            Path(path).unlink(missing_ok=True)  # the queryMsgBy* commands write the bodies


def _outcomes(outputs: dict[str, str]) -> list[tuple[Command, str, str, str]]:
    """(command, outcome, real text, mqstore text) per command run; outcome is SAME or
    "differs"."""
    real, mq = split_outputs(outputs["real"]), split_outputs(outputs["mq"])
    rows = []
    for n, cmd in enumerate(c for c in COMMANDS if c.line != START):
        assert n in real and n in mq, f"command {n} ({cmd.name}) did not run:\n{outputs}"
        a, b = normalise(real[n], cmd), normalise(mq[n], cmd)
        rows.append((cmd, SAME if a == b else "differs", a, b))
    return rows


def test_every_mqadmin_command_gives_the_real_brokers_table(outputs: dict[str, str]) -> None:
    rows = _outcomes(outputs)
    report = [f"{'command':<26} {'expected':<9} outcome"]
    for cmd, outcome, _, _ in rows:
        expected = SAME if cmd.expect == SAME else "differs"
        report.append(f"{cmd.line[:60]:<60} {expected:<9} {outcome}")
    report += [f"{name:<26} not run: {why}" for name, why in NOT_RUN.items()]
    print("\n".join(report))
    wrong = [
        f"{cmd.line}\n--- real\n{a}\n--- mqstore\n{b}"
        for cmd, outcome, a, b in rows
        if cmd.expect == SAME and outcome != SAME
    ]
    assert not wrong, "\n\n".join(wrong)


def test_the_command_list_covers_every_mqadmin_command() -> None:
    """Every command of 4.9.8's ``mqadmin`` help is run or named in NOT_RUN."""
    listed = {c.name for c in COMMANDS if c.line != START} | set(NOT_RUN)
    assert listed == MQADMIN_498_COMMANDS


MQADMIN_498_COMMANDS = frozenset(
    [
        "updateTopic",
        "deleteTopic",
        "updateSubGroup",
        "deleteSubGroup",
        "updateBrokerConfig",
        "updateTopicPerm",
        "topicRoute",
        "topicStatus",
        "topicClusterList",
        "brokerStatus",
        "queryMsgById",
        "queryMsgByKey",
        "queryMsgByUniqueKey",
        "queryMsgByOffset",
        "queryMsgTraceById",
        "printMsg",
        "printMsgByQueue",
        "sendMsgStatus",
        "brokerConsumeStats",
        "producerConnection",
        "consumerConnection",
        "consumerProgress",
        "consumerStatus",
        "cloneGroupOffset",
        "producer",
        "clusterList",
        "topicList",
        "updateKvConfig",
        "deleteKvConfig",
        "wipeWritePerm",
        "addWritePerm",
        "resetOffsetByTime",
        "skipAccumulatedMessage",
        "updateOrderConf",
        "cleanExpiredCQ",
        "deleteExpiredCommitLog",
        "cleanUnusedTopic",
        "startMonitoring",
        "statsAll",
        "allocateMQ",
        "checkMsgSendRT",
        "clusterRT",
        "getNamesrvConfig",
        "updateNamesrvConfig",
        "getBrokerConfig",
        "getConsumerConfig",
        "queryCq",
        "sendMessage",
        "consumeMessage",
        "updateAclConfig",
        "deleteAclConfig",
        "clusterAclConfigVersion",
        "updateGlobalWhiteAddr",
        "exportMetadata",
        "exportConfigs",
        "exportMetrics",
    ]
)
"""The commands ``mqadmin`` (4.9.8) lists with no arguments."""
