"""The real mqadmin's command set, run against the real 4.9.8 broker and against mqstore
(``tests/oracle/test_mqadmin_differential.py``), and how their outputs are compared.

One place for both: :data:`COMMANDS` (every 4.9.8 ``mqadmin`` command whose request codes
either broker or name server serves, in run order, each with the outcome expected:
:data:`SAME`, or why the outputs differ), :data:`NOT_RUN` (commands left out, and why),
and :func:`normalise` (what may differ between two runs of the same system: addresses,
ports, times, ids, rates). A command line is a template: ``{ns}`` the name server,
``{addr}`` the broker, ``{broker}`` its name (both sides use the same name), ``{cluster}``,
``{topic}`` / ``{group}`` the run's topic and push group, ``{dir}`` a folder of the side's
own. ``@MSGID@`` / ``@OFFSETMSGID@`` are filled by ``AdminBatch.java`` with the first
message's ids. Lines before :data:`START` run before the producer and consumer start.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Final

SAME: Final = "same"
START: Final = "=start"
"""The line separating set-up commands from the rest (``AdminBatch.java``)."""


@dataclass(frozen=True, slots=True)
class Command:
    """One mqadmin command line and the outcome expected against both systems."""

    line: str
    expect: str = SAME
    """:data:`SAME`, or why the outputs differ (a difference left for later)."""
    numbers: bool = False
    """Compare with every number replaced (rates and sums sampled at different times)."""

    @property
    def name(self) -> str:
        return self.line.split()[0]


COMMANDS: Final[tuple[Command, ...]] = (
    Command("updateTopic -n {ns} -c {cluster} -t {topic} -r 2 -w 2"),
    Command(START),
    Command("clusterList -n {ns}", numbers=True),
    Command("topicList -n {ns}"),
    Command("topicList -n {ns} -c"),
    Command("topicRoute -n {ns} -t {topic}"),
    Command("topicStatus -n {ns} -t {topic}"),
    Command("topicClusterList -n {ns} -t {topic}"),
    Command("brokerStatus -n {ns} -b {addr}", numbers=True),
    Command("getBrokerConfig -n {ns} -b {addr}"),
    Command("updateBrokerConfig -n {ns} -b {addr} -k longPollingEnable -v true"),
    Command("getConsumerConfig -n {ns} -g {group}"),
    Command("updateSubGroup -n {ns} -b {addr} -g {group}X"),
    Command("getConsumerConfig -n {ns} -g {group}X"),
    Command("deleteSubGroup -n {ns} -b {addr} -g {group}X"),
    Command("getConsumerConfig -n {ns} -g {group}X"),
    Command("producerConnection -n {ns} -g {group}_P -t {topic}"),
    Command("consumerConnection -n {ns} -g {group}"),
    Command("consumerProgress -n {ns} -g {group}", numbers=True),
    Command("consumerProgress -n {ns}"),
    Command("consumerStatus -n {ns} -g {group}"),
    Command("brokerConsumeStats -n {ns} -b {addr}"),
    Command("statsAll -n {ns}", numbers=True),
    Command("statsAll -n {ns} -t {topic}", numbers=True),
    Command("queryMsgById -n {ns} -i @OFFSETMSGID@"),
    Command("queryMsgByUniqueKey -n {ns} -i @MSGID@ -t {topic}"),
    Command("queryMsgByKey -n {ns} -t {topic} -k k1"),
    Command("queryMsgByOffset -n {ns} -t {topic} -b {broker} -i 0 -o 0"),
    Command("queryCq -n {ns} -t {topic} -q 0 -i 0 -c 5 -b {addr}"),
    Command("queryCq -n {ns} -t {topic} -q 0 -i 7 -c 5 -b {addr}"),
    Command("printMsg -n {ns} -t {topic}"),
    Command("printMsgByQueue -n {ns} -t {topic} -a {broker} -i 1"),
    Command("consumeMessage -n {ns} -t {topic} -b {broker} -i 1 -o 0 -c 2"),
    Command("allocateMQ -n {ns} -t {topic} -i 10.0.0.1,10.0.0.2"),
    Command("sendMsgStatus -n {ns} -b {broker} -s 16 -c 2", numbers=True),
    Command("sendMessage -n {ns} -t {topic} -p hello -k kk -c tagx -b {broker} -i 0"),
    Command("checkMsgSendRT -n {ns} -t {topic} -a 2 -s 16", numbers=True),
    Command("cloneGroupOffset -n {ns} -s {group} -d {group}C -t {topic}"),
    # {group}C holds the offsets cloned from the push group, which are what each Java
    # consumer had committed at that moment: on a loaded machine one side may be a
    # commit behind, so the numbers are not compared (the table's shape is).
    Command("resetOffsetByTime -n {ns} -g {group}C -t {topic} -s -1", numbers=True),
    Command("skipAccumulatedMessage -n {ns} -g {group}C -t {topic}"),
    Command(
        "updateTopicPerm -n {ns} -c {cluster} -t {topic} -p 4",
    ),
    Command("getNamesrvConfig -n {ns}"),
    Command("updateKvConfig -n {ns} -s NS -k K -v V"),
    Command("deleteKvConfig -n {ns} -s NS -k K"),
    Command("updateOrderConf -n {ns} -t {topic} -m get"),
    Command("updateNamesrvConfig -n {ns} -k clusterTest -v false"),
    Command("cleanExpiredCQ -n {ns} -b {addr}"),
    Command("deleteExpiredCommitLog -n {ns} -b {addr}"),
    Command("cleanUnusedTopic -n {ns} -b {addr}"),
    # 4.9.8's own client cannot read a broker's GET_ALL_PRODUCER_INFO answer (fastjson:
    # no default constructor of ProducerTableInfo): both sides print that failure
    Command("producer -n {ns} -b {addr}"),
    Command("updateTopic -n {ns} -c {cluster} -t {topic}D"),
    Command("deleteTopic -n {ns} -c {cluster} -t {topic}D"),
    Command("topicRoute -n {ns} -t {topic}D"),
    Command("queryMsgTraceById -n {ns} -i @MSGID@"),
    Command("exportMetadata -n {ns} -c {cluster} -f {dir}"),
    Command("exportConfigs -n {ns} -c {cluster} -f {dir}"),
    Command("exportMetrics -n {ns} -c {cluster} -f {dir}"),
    # the count is of the topics the broker has registered by then, which on a loaded
    # machine may include one more auto-created topic on one side: compared without it
    # (tests/oracle/test_namesrv_differential.py checks the count against the routes)
    Command("wipeWritePerm -n {ns} -b {broker}", numbers=True),
    Command("addWritePerm -n {ns} -b {broker}", numbers=True),
)
"""In run order: later commands see what earlier ones did (the same on both sides)."""

NOT_RUN: Final[dict[str, str]] = {
    "startMonitoring": "runs until killed",
    "clusterRT": "runs until killed (a send round every interval)",
    "updateAclConfig": "ACL is off on both brokers; the ACL tables are h-acl's (docs/acl.md)",
    "deleteAclConfig": "ACL is off on both brokers",
    "clusterAclConfigVersion": "ACL is off: a 4.9.8 broker without ACL never answers 52",
    "updateGlobalWhiteAddr": "ACL is off on both brokers",
}
"""4.9.8 mqadmin commands left out of the run, and why."""


# ----------------------------------------------------------------- normalisation

_DROP = re.compile(r"^\t(at |\.\.\. \d+ more)")
_RULES: Final[tuple[tuple[re.Pattern[str], str], ...]] = (
    (re.compile(r"/tmp/\S*"), "<path>"),
    (re.compile(r"\b\d{1,3}(\.\d{1,3}){3}:\d+\b"), "<addr>"),
    (re.compile(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(,\d{3})?"), "<time>"),
    (re.compile(r"\b[0-9A-F]{32,}\b"), "<id>"),
    (re.compile(r"\b1\d{12}\b"), "<epoch-ms>"),
    (re.compile(r"\b\d{13}/"), "<epoch-ms>/"),
    (re.compile(r"(commitLogOffset=|CommitLog Offset: +|physicOffset=)\d+"), r"\1<pos>"),
    (re.compile(r"\brt=\d+ms"), "rt=<ms>"),
    (re.compile(r"\(\d+\(ms\)\)|timeout, \d+\(ms\)"), "<ms>"),
    # settings naming this process's ports and installation, and files under the
    # user's home (getBrokerConfig, getNamesrvConfig): where it runs, not what it does
    (
        re.compile(
            r"^((?:rocketmqHome|kvConfigPath|configStorePath|listenPort|haListenPort)"
            r" += ).*$",
            re.M,
        ),
        r"\1<process>",
    ),
    # thread counts 4.9.8 derives from the processors the JVM counts (cgroup quota and
    # shares included), which a Python process counts on its own (java_settings)
    (
        re.compile(
            r"^((?:sendMessage|putMessageFuture|pullMessage|processReplyMessage|"
            r"queryMessage|heartbeat|endTransaction)ThreadPoolNums|"
            r"clientCallbackExecutorThreads)( += ).*$",
            re.M,
        ),
        r"\1\2<cpus>",
    ),
    # bytes written and not yet flushed when the request came (flushed every 500 ms)
    (re.compile(r"^(remainHowManyDataToFlush +: ).*$", re.M), r"\1<bytes>"),
    # the put-time distribution of the broker's last whole minute: "null" before its
    # first minute ended (brokerStatus; its shape is checked in tests/broker)
    (re.compile(r"^(putMessageDistributeTime +: ).*$", re.M), r"\1<last minute>"),
)
_NUMBER = re.compile(r"\b\d+(\.\d+)?\b")
_RATES = re.compile(r"(?<=: )<n>( <n>)*$", re.M)
"""A rate line (``putTps : 0.0 0.1``): 4.9.8 gives one number per window (10 s, 60 s,
600 s) the broker has lived through, mqstore always three (a window longer than the
uptime averaged over the uptime), so how many differs with the uptime (docs/admin.md §6)."""


def normalise(text: str, command: Command) -> str:
    """``text`` as compared: stack-trace frames dropped, then addresses, ports, times,
    ids, epoch times, CommitLog positions and response times replaced by placeholders
    (every number too for a command compared with ``numbers``, a rate's numbers as one),
    trailing spaces cut."""
    lines = [ln.rstrip() for ln in text.splitlines() if not _DROP.match(ln)]
    out = "\n".join(lines).strip("\n")
    for pattern, repl in _RULES:
        out = pattern.sub(repl, out)
    if command.numbers:
        out = _RATES.sub("<rates>", _NUMBER.sub("<n>", out))
    return out


def render(command: Command, **values: str) -> str:
    """The command's line for one side: placeholders filled, arguments tab-separated."""
    if command.line == START:
        return START
    return "\t".join(word.format(**values) for word in command.line.split())


def split_outputs(stdout: str) -> dict[int, str]:
    """AdminBatch's output by command number (``### BEGIN n`` .. ``### END n``)."""
    found = re.findall(r"^### BEGIN (\d+)\n(.*?)^### END \1$", stdout, re.S | re.M)
    return {int(n): body for n, body in found}
