"""The PySpark worker daemon of local sessions, with the scan code imported before it forks.

Spark starts one Python daemon per executor and forks a worker from it for each Python
task slot (``spark.python.daemon.module`` names the daemon's module). A forked worker
inherits what the daemon imported, so importing numpy and the job modules here, once,
saves every worker importing them (about 0.7 s of CPU each on this project's machine,
as much as scanning a few hundred MB).
"""

from __future__ import annotations

import numpy  # noqa: F401
from pyspark.daemon import manager

import mqstore.tools.spark.reindex
import mqstore.tools.spark.tasks  # noqa: F401

if __name__ == "__main__":
    manager()
