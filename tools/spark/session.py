"""Building the SparkSession the jobs share: laptop-sized settings, ``--master`` for a cluster.

Two environment variables are set before the JVM starts (docs/design.md §3.1):

* ``PYSPARK_PYTHON`` defaults to this interpreter, so Python workers have pyarrow and
  can import ``mqstore`` even from a venv that is not activated;
* ``SPARK_LOCAL_IP`` defaults to 127.0.0.1 for local masters and for a standalone master
  on loopback, so nothing listens on external interfaces. For a remote cluster it is left
  alone: executors must reach the driver.

Spark's own log lines stay out of the command line's output: the JVM starts with a log4j2
configuration at level ``MQSTORE_SPARK_LOG`` (default ``off``; ``warn`` or ``info`` to see
Spark's lines again), and its stderr passes through a filter that drops the JVM's start-up
notices; everything else (a Python worker's traceback) still reaches stderr. Failures reach
Python as exceptions either way.

Before a JVM starts, :func:`build_session` checks what would otherwise fail late and
noisily (:class:`SparkSetupError`, one line for the user): the master URL's form
(:func:`check_master`), that a ``spark://`` master answers on its port as Spark does (a
dead one made Spark retry for over a minute; one that accepts but is no Spark master,
wait without end), and that Java 17 or 21 is there (``$JAVA_HOME/bin/java``,
else ``java`` on PATH, the one spark-submit runs; :func:`find_java`).

Under ``spark-submit`` the JVM starts before this code runs: export
``SPARK_LOCAL_IP=127.0.0.1`` (and PYSPARK_PYTHON) yourself there.

On a non-local master the ``mqstore`` package (store/ and tools/) is zipped and shipped with
``addPyFile``, so executors need only Python, pyarrow and numpy. Segment files are read
by path inside tasks: on a cluster they must be on a filesystem every worker mounts at
the same path (NFS, a shared volume), as with any ``file://`` input.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import zipfile
from pathlib import Path
from typing import IO, TYPE_CHECKING

from mqstore.errors import ConfigError
from mqstore.tools.spark import masterprobe

if TYPE_CHECKING:
    from pyspark import SparkConf
    from pyspark.sql import SparkSession

DEFAULT_MASTER = "local[*]"
_LOOPBACK_HOSTS = ("127.0.0.1", "localhost")

SMALL_MACHINE_CONF: dict[str, str] = {
    "spark.driver.memory": "1g",
    "spark.ui.enabled": "false",
    "spark.sql.shuffle.partitions": "2",
    "spark.default.parallelism": "2",
    "spark.ui.showConsoleProgress": "false",
    "spark.sql.execution.arrow.pyspark.enabled": "true",
    # no .crc side files next to Parquet/JSON output
    "spark.hadoop.fs.file.impl": "org.apache.hadoop.fs.RawLocalFileSystem",
}


QUICK_START_BYTES = 256 << 20
"""Inputs up to this size start the JVM for a short life (:data:`QUICK_START_JVM`)."""
QUICK_START_JVM = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"
"""JVM options for a small input, or a job whose work runs in Python tasks: the C1
compiler only and the serial collector. The JVM starts and warms up seconds sooner (most
of a small job's time is the JVM compiling Spark's own code); the optimising compiler
pays off only where the JVM itself works through the data (Parquet encoding and Arrow
conversion in export), and there only over a large input."""

DAEMON_MODULE = "mqstore.tools.spark._daemon"
"""The Python worker daemon of local sessions (see the module): on a cluster the executors'
Python may not have ``mqstore`` installed before the shipped zip arrives, so it is set
for local masters only."""

LOG_LEVEL_ENV = "MQSTORE_SPARK_LOG"
_LOG4J2 = """\
rootLogger.level = {level}
rootLogger.appenderRef.stderr.ref = console
appender.console.type = Console
appender.console.name = console
appender.console.target = SYSTEM_ERR
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = %d{{yy/MM/dd HH:mm:ss}} %p %c{{1}}: %m%n%ex
"""
_JVM_NOTICES = (
    b"WARNING: Using incubator modules",
    b"Setting default log level to ",
    b"To adjust logging level use sc.setLogLevel(",
)
"""Lines the JVM prints at start-up past log4j (System.err), dropped from stderr."""


JAVA_VERSIONS = (17, 21)
"""The Java releases PySpark 4 supports (newer ones are let through: they may work)."""
MASTER_CONNECT_TIMEOUT_S = 5.0
"""How long :func:`check_master` waits for a ``spark://`` master to accept a connection."""

_LOCAL_MASTER = re.compile(r"local(\[(\*|[1-9]\d*)(,\s*[1-9]\d*)?\])?")
_LOCAL_CLUSTER = re.compile(r"local-cluster\[[1-9]\d*,\s*[1-9]\d*,\s*[1-9]\d*\]")
_HOST_PORT = re.compile(r"(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9_.-]+):(\d{1,5})")


class SparkSetupError(ConfigError):
    """Spark cannot start here as asked: a malformed or unreachable master URL, or no
    suitable Java. The message is one line for the user (exit 2 on the command line)."""


def _spark_endpoints(master: str) -> list[tuple[str, int]]:
    """``(host, port)`` of each master of a ``spark://h1:p1[,h2:p2]`` URL."""
    out = []
    for part in master.removeprefix("spark://").split(","):
        m = _HOST_PORT.fullmatch(part.strip())
        if m is None or not 0 < int(m.group(2)) < 65536:
            raise SparkSetupError(
                f"bad Spark master URL {master!r}: spark:// takes HOST:PORT[,HOST:PORT...]"
            )
        out.append((m.group(1).strip("[]"), int(m.group(2))))
    return out


def check_master(master: str) -> None:
    """Refuse a master URL Spark would not accept: ``local``, ``local[N|*]``,
    ``local[N|*,F]``, ``local-cluster[N,C,M]``, ``spark://HOST:PORT[,...]``, ``yarn``
    and ``k8s://URL`` pass.

    Raises:
        SparkSetupError: any other form.
    """
    if _LOCAL_MASTER.fullmatch(master) or _LOCAL_CLUSTER.fullmatch(master):
        return
    if master == "yarn" or (master.startswith("k8s://") and len(master) > len("k8s://")):
        return
    if master.startswith("spark://"):
        _spark_endpoints(master)
        return
    raise SparkSetupError(
        f"bad Spark master URL {master!r} (expected local[*], local[N], spark://HOST:PORT,"
        " yarn or k8s://URL)"
    )


def check_master_reachable(master: str, timeout_s: float = MASTER_CONNECT_TIMEOUT_S) -> None:
    """For a ``spark://`` master: one of its addresses accepts a TCP connection and
    answers as a Spark RPC server (:func:`mqstore.tools.spark.masterprobe.probe`), each
    within ``timeout_s`` (other masters are not probed): a port that accepts but is no
    Spark master would leave the job waiting for a registration without end.

    Raises:
        SparkSetupError: the URL is malformed, or no address answers.
    """
    check_master(master)
    if not master.startswith("spark://"):
        return
    reasons = []
    for host, port in _spark_endpoints(master):
        try:
            why = masterprobe.probe(host, port, timeout_s)
        except OSError as e:
            reasons.append(f"{host}:{port}: {e.strerror or e}")
            continue
        if why is None:
            return
        reasons.append(f"{host}:{port} {why}: not a Spark master")
    raise SparkSetupError(f"Spark master {master} cannot be reached ({'; '.join(reasons)})")


def find_java() -> tuple[str, int]:
    """The ``java`` spark-submit would run (``$JAVA_HOME/bin/java`` when JAVA_HOME is
    set, else ``java`` on PATH) and its major version.

    Raises:
        SparkSetupError: none there, it does not run, or it is older than Java 17.
    """
    wanted = " or ".join(str(v) for v in JAVA_VERSIONS)
    home = os.environ.get("JAVA_HOME")
    java = os.path.join(home, "bin", "java") if home else shutil.which("java")
    if home and not os.access(java or "", os.X_OK):
        raise SparkSetupError(
            f"Java {wanted} not found: JAVA_HOME={home} has no bin/java (fix or unset JAVA_HOME)"
        )
    if java is None:
        raise SparkSetupError(
            f"Java {wanted} not found: no java on PATH and JAVA_HOME is not set;"
            " Spark needs one (install a JDK or set JAVA_HOME)"
        )
    try:
        out = subprocess.run(
            [java, "-version"], capture_output=True, text=True, timeout=30, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as e:
        raise SparkSetupError(f"Java {wanted} not found: {java} does not run ({e})") from None
    m = re.search(r'version "(\d+)(?:\.(\d+))?', out.stderr + out.stdout)
    if m is None:
        raise SparkSetupError(f"Java {wanted} not found: {java} -version says no version")
    major = int(m.group(2) or 0) if m.group(1) == "1" else int(m.group(1))  # "1.8.0" is 8
    if major < min(JAVA_VERSIONS):
        raise SparkSetupError(f"Java {wanted} not found: {java} is Java {major}")
    return java, major


def _log_level() -> str:
    return os.environ.get(LOG_LEVEL_ENV, "off").strip().lower() or "off"


def _log4j2_file(level: str) -> Path:
    """A log4j2 properties file at ``level`` for this process's JVM (removed at exit)."""
    fd, name = tempfile.mkstemp(prefix="mqstore-log4j2-", suffix=".properties")
    with os.fdopen(fd, "w") as f:
        f.write(_LOG4J2.format(level=level))
    path = Path(name)
    atexit.register(path.unlink, missing_ok=True)  # the test run may have removed it
    return path


def _forward_stderr(stream: IO[bytes]) -> None:
    """Copy the JVM's stderr to ours, without its start-up notices, until it closes."""
    out = sys.stderr.buffer if hasattr(sys.stderr, "buffer") else None
    for line in iter(stream.readline, b""):
        if line.startswith(_JVM_NOTICES):
            continue
        if out is not None:
            out.write(line)
            out.flush()
        else:
            sys.stderr.write(line.decode(errors="replace"))


def _kill_starting_jvm() -> None:
    """Kill this process's spark-submit children (Linux /proc; elsewhere nothing).

    A JVM whose start was interrupted has no gateway yet, so nothing would tell it to
    exit: it would keep running, and keep the terminal's output open, after we exit.
    """
    me = str(os.getpid())
    try:
        pids = [p for p in os.listdir("/proc") if p.isdigit()]
    except OSError:
        return
    for pid in pids:
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            continue
        parent = stat.rsplit(")", 1)[-1].split()[1]  # the field after state
        if parent == me and b"spark" in cmdline.lower():
            with contextlib.suppress(OSError):
                os.kill(int(pid), signal.SIGKILL)


def _start_quiet_jvm(conf: SparkConf) -> None:
    """Start the gateway JVM with its stderr filtered and make it the SparkContext's."""
    from pyspark import SparkContext
    from pyspark.java_gateway import launch_gateway

    try:  # pyspark's function is not annotated; popen_kwargs is its hook for the JVM's streams
        gateway = launch_gateway(conf, popen_kwargs={"stderr": subprocess.PIPE})  # type: ignore[no-untyped-call]
    except BaseException:  # Ctrl-C while the JVM starts: it ignores SIGINT and would linger
        _kill_starting_jvm()
        raise
    proc = getattr(gateway, "proc", None)
    if proc is not None and proc.stderr is not None:
        threading.Thread(
            target=_forward_stderr, args=(proc.stderr,), name="spark-stderr", daemon=True
        ).start()
    SparkContext(conf=conf, gateway=gateway)


def master_url(spark: SparkSession) -> str:
    """The master URL of a running session (a SparkContext always has one)."""
    master = spark.sparkContext.master
    if master is None:
        raise RuntimeError("the SparkContext has no master URL")
    return master


def is_local_master(master: str) -> bool:
    """True for ``local``/``local[N]``/``local[N,R]`` masters."""
    return master == "local" or master.startswith("local[")


def _is_loopback_master(master: str) -> bool:
    if is_local_master(master):
        return True
    host = master.split("://", 1)[-1].split(":", 1)[0]
    return host in _LOOPBACK_HOSTS


def set_environment(master: str) -> None:
    """Set PYSPARK_PYTHON and (for loopback masters) SPARK_LOCAL_IP unless already set."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    if _is_loopback_master(master):
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
        os.environ.setdefault("SPARK_MASTER_HOST", "127.0.0.1")


def _package_zip() -> Path:
    """Zip the ``mqstore`` package (sources only) as installed, for executors on a cluster.

    The package's folders are named by the repository (``store/``, ``tools/``), so the
    archive lays them out under their import names: ``mqstore/`` and ``mqstore/tools/``.
    """
    import mqstore
    import mqstore.tools

    engine = Path(mqstore.__file__).resolve().parent
    tools = Path(mqstore.tools.__file__).resolve().parent
    fd, name = tempfile.mkstemp(prefix="mqstore-py-", suffix=".zip")
    os.close(fd)
    with zipfile.ZipFile(name, "w", zipfile.ZIP_DEFLATED) as zf:
        for root, prefix in ((engine, "mqstore"), (tools, "mqstore/tools")):
            for path in sorted(root.rglob("*.py")):
                rel = path.relative_to(root)
                if prefix == "mqstore" and rel.parts[0] == "tools":
                    continue  # an installed layout nests tools/ in the engine already
                zf.write(path, f"{prefix}/{rel.as_posix()}")
    return Path(name)


def quick_start(input_bytes: int | None, *, jvm_work: bool = True) -> bool:
    """Whether a new session's JVM starts with :data:`QUICK_START_JVM`: for a job whose
    work runs in Python (``jvm_work`` false), or an input known to be at most
    :data:`QUICK_START_BYTES`."""
    return not jvm_work or (input_bytes is not None and input_bytes <= QUICK_START_BYTES)


def build_session(
    master: str | None = None,
    app_name: str = "mqstore",
    *,
    progress: bool = False,
    conf: dict[str, str] | None = None,
    input_bytes: int | None = None,
    jvm_work: bool = True,
) -> SparkSession:
    """Get or create the SparkSession for a job.

    ``master`` defaults to ``local[*]`` (or whatever spark-submit already configured).
    ``progress`` turns on Spark's console progress bar. ``input_bytes`` (what the job
    will read, when known) at most :data:`QUICK_START_BYTES` starts the JVM with
    :data:`QUICK_START_JVM`; so does ``jvm_work=False`` at any size, for a job whose
    work runs in Python tasks while the JVM only schedules them and moves their small
    results (audit, reindex: C2's compile threads then cost seconds of CPU and return
    nothing). An already running session is reused as is (tests share one), so
    ``conf``, ``input_bytes`` and ``jvm_work`` only apply to a new one.

    Raises:
        SparkSetupError: before any JVM starts, for a bad or unreachable ``master`` or
            no Java 17+ (:func:`check_master_reachable`, :func:`find_java`).
    """
    from pyspark.sql import SparkSession

    active = SparkSession.getActiveSession()
    if active is not None:
        return active
    # Under spark-submit the JVM already exists and carries the submitted master.
    submitted = "PYSPARK_GATEWAY_PORT" in os.environ
    chosen = master or DEFAULT_MASTER
    if not submitted:
        check_master_reachable(chosen)
        find_java()
    set_environment(chosen)
    builder = SparkSession.builder.appName(app_name)
    if master is not None or not submitted:
        builder = builder.master(chosen)
    settings = dict(SMALL_MACHINE_CONF)
    settings["spark.ui.showConsoleProgress"] = "true" if progress else "false"
    level = _log_level()
    java = f"-Dlog4j2.configurationFile=file:{_log4j2_file(level)}"
    if quick_start(input_bytes, jvm_work=jvm_work):
        java = f"{java} {QUICK_START_JVM}"
    settings["spark.driver.extraJavaOptions"] = java
    settings["spark.executor.extraJavaOptions"] = java
    if is_local_master(chosen):  # workers fork from a daemon that has the job code loaded
        settings["spark.python.daemon.module"] = DAEMON_MODULE
    settings.update(conf or {})
    for key, value in settings.items():
        builder = builder.config(key, value)
    if not submitted:
        from pyspark import SparkConf

        jvm_conf = SparkConf().setAll(list(settings.items())).setAppName(app_name)
        _start_quiet_jvm(jvm_conf.setMaster(chosen))
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel(level.upper())
    if not is_local_master(master_url(spark)):
        shipped = _package_zip()
        spark.sparkContext.addPyFile(str(shipped))
        atexit.register(shipped.unlink, missing_ok=True)
    return spark
