"""The FUSE layer's fixture: a fresh mount per test, skipped where FUSE cannot run."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from mqstore.tools.lazyfs import Mount, unavailable_reason


@pytest.fixture
def lazy_mount(tmp_path: Path) -> Iterator[Mount]:
    reason = unavailable_reason()
    if reason is not None:
        pytest.skip(f"FUSE layer unavailable: {reason}")
    with Mount(tmp_path / "fs") as m:
        yield m
