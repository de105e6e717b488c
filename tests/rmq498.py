"""The store Apache RocketMQ 4.9.8 wrote (``tests/fixtures/rocketmq-4.9.8-store``): copies
and its manifest, for the tests that hold mqstore to it."""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path

from tests.conftest import FIXTURES

FIXTURE = FIXTURES / "rocketmq-4.9.8-store"


@dataclass(frozen=True, slots=True)
class Put:
    """One manifest line: what was put, and where RocketMQ stored it."""

    topic: str
    queue_id: int
    queue_offset: int
    physical_offset: int
    tag: str
    key: str
    uniq_key: str
    delay_level: int
    body: bytes


def copy_store(dst: Path) -> Path:
    """A writable copy of the fixture's ``store/`` at ``dst``."""
    shutil.copytree(FIXTURE / "store", dst)
    for p in [dst, *dst.rglob("*")]:
        p.chmod(0o755 if p.is_dir() else 0o644)
    return dst


def manifest() -> list[Put]:
    """Every message of the fixture, in put order."""
    out = []
    for line in (FIXTURE / "manifest.tsv").read_text().splitlines():
        t, q, qo, po, tag, key, uniq, delay, body = line.split("\t")
        out.append(Put(t, int(q), int(qo), int(po), tag, key, uniq, int(delay), body.encode()))
    return out
