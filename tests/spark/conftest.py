"""One local[2] SparkSession for every Spark test in the run (5-20 s to start)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    """The shared session; stopped at the end of the test run."""
    pytest.importorskip("pyspark")
    pytest.importorskip("pyarrow")
    from mqstore.tools.spark.session import build_session

    session = build_session("local[2]", "mqstore-tests")
    yield session
    session.stop()
