"""Progress of a running Spark job, printed as the command's own lines.

Spark's console progress bar and log lines are turned off for the command line
(:mod:`mqstore.tools.spark.session`); this reporter polls the SparkContext's status
tracker from a daemon thread instead and prints one short line when the job has moved on,
at most every ``interval`` seconds. It never raises: once the JVM is gone (the job ended
or was interrupted) it stops quietly.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, TextIO

from mqstore.closeable import Stoppable

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


@dataclass(eq=False)
class SparkProgress(Stoppable):
    """Context manager: report the tasks of the active stages while the block runs."""

    spark: SparkSession
    out: TextIO
    prefix: str
    """Put before every line printed."""
    interval: float = 3.0
    """Seconds between two polls of the status tracker (so between two lines at least)."""

    def __post_init__(self) -> None:
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="spark-progress", daemon=True)
        self._t0 = time.monotonic()

    def start(self) -> None:
        """Start reporting (the times printed count from now)."""
        self._t0 = time.monotonic()
        self._thread.start()

    def stop(self) -> None:
        """Stop reporting; waits at most one interval for the reporter thread."""
        self._stop.set()
        self._thread.join(timeout=self.interval + 1)

    def _run(self) -> None:
        last = None
        while not self._stop.wait(self.interval):
            try:
                line = self._line()
            except Exception:  # the JVM went away (end of job, Ctrl-C): nothing to report
                return
            if line is not None and line != last and not self._stop.is_set():
                seconds = time.monotonic() - self._t0
                print(f"{self.prefix}{line} ({seconds:.0f}s)", file=self.out, flush=True)
                last = line

    def _line(self) -> str | None:
        """``stage 3: 2/5 tasks`` for the active stages, or None when none runs."""
        tracker = self.spark.sparkContext.statusTracker()
        parts = []
        for stage_id in sorted(tracker.getActiveStageIds()):
            info = tracker.getStageInfo(stage_id)
            if info is not None:
                parts.append(f"stage {stage_id}: {info.numCompletedTasks}/{info.numTasks} tasks")
        return ", ".join(parts) if parts else None
