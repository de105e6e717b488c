"""Building the SparkSession the jobs share: laptop-sized settings, ``--master`` for a cluster.

Two environment variables are set before the JVM starts (docs/design.md §3.1):

* ``PYSPARK_PYTHON`` defaults to this interpreter, so Python workers have pyarrow and
  can import ``store`` even from a venv that is not activated;
* ``SPARK_LOCAL_IP`` defaults to 127.0.0.1 for local masters and for a standalone master
  on loopback, so nothing listens on external interfaces. For a remote cluster it is left
  alone: executors must reach the driver.

Under ``spark-submit`` the JVM starts before this code runs: export
``SPARK_LOCAL_IP=127.0.0.1`` (and PYSPARK_PYTHON) yourself there.

On a non-local master the ``store`` and ``tools`` packages are zipped and shipped with
``addPyFile``, so executors need only Python, pyarrow and numpy. Segment files are read
by path inside tasks: on a cluster they must be on a filesystem every worker mounts at
the same path (NFS, a shared volume), as with any ``file://`` input.
"""

from __future__ import annotations

import atexit
import os
import sys
import tempfile
import zipfile
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
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
    # Local Python workers inherit this: they import store/ and tools/ even when the
    # project is not installed (spark-submit puts only the script's folder on sys.path).
    repo = str(Path(__file__).resolve().parents[2])
    paths = os.environ.get("PYTHONPATH", "").split(os.pathsep)
    if repo not in paths:
        os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (repo, *paths) if p)
    if _is_loopback_master(master):
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
        os.environ.setdefault("SPARK_MASTER_HOST", "127.0.0.1")


def _package_zip() -> Path:
    """Zip ``store/`` and ``tools/`` (sources only) for executors on a cluster."""
    repo = Path(__file__).resolve().parents[2]
    fd, name = tempfile.mkstemp(prefix="mqstore-py-", suffix=".zip")
    os.close(fd)
    with zipfile.ZipFile(name, "w", zipfile.ZIP_DEFLATED) as zf:
        for pkg in ("store", "tools"):
            for path in sorted((repo / pkg).rglob("*.py")):
                zf.write(path, path.relative_to(repo).as_posix())
    return Path(name)


def build_session(
    master: str | None = None,
    app_name: str = "mqstore",
    *,
    progress: bool = False,
    conf: dict[str, str] | None = None,
) -> SparkSession:
    """Get or create the SparkSession for a job.

    ``master`` defaults to ``local[*]`` (or whatever spark-submit already configured).
    ``progress`` turns on Spark's console progress bar. An already running session is
    reused as is (tests share one), so ``conf`` only applies to a new one.
    """
    from pyspark.sql import SparkSession

    active = SparkSession.getActiveSession()
    if active is not None:
        return active
    # Under spark-submit the JVM already exists and carries the submitted master.
    submitted = "PYSPARK_GATEWAY_PORT" in os.environ
    chosen = master or DEFAULT_MASTER
    set_environment(chosen)
    builder = SparkSession.builder.appName(app_name)
    if master is not None or not submitted:
        builder = builder.master(chosen)
    settings = dict(SMALL_MACHINE_CONF)
    settings["spark.ui.showConsoleProgress"] = "true" if progress else "false"
    settings.update(conf or {})
    for key, value in settings.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("WARN")
    if not is_local_master(master_url(spark)):
        shipped = _package_zip()
        spark.sparkContext.addPyFile(str(shipped))
        atexit.register(shipped.unlink, missing_ok=True)
    return spark
