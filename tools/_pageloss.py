"""Page-by-page loss for :mod:`mqstore.tools.powerloss`: the report and the per-page fate.

Pure over bytes: :func:`_lose_pages` takes a file's content in memory and on disk
and returns what the disk holds after the loss (see the model in tools/powerloss.py).
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, field

PAGE = 4096
SECTOR = 512


@dataclass
class PowerLossReport:
    """What :func:`power_loss` did.

    ``durable_end`` is the log offset below which every byte after the loss is what
    the process wrote (engine-independent: from the model, not the store's claims).
    ``claimed_flushed`` is the store's own flushed offset from the CrashImage.
    ``violations`` lists bytes the store reported flushed that no completed
    ``fdatasync`` covered (always empty without a model).
    """

    reason: str = ""
    kept: int = 0
    dropped: int = 0
    torn: int = 0
    abort_lost: bool = False
    durable_end: int = 0
    claimed_flushed: int = 0
    violations: list[str] = field(default_factory=list)


def _first_diff(a: bytes, b: bytes) -> int:
    """First index where ``a`` and ``b`` differ (-1 if equal); page-wise then byte-wise."""
    n = min(len(a), len(b))
    for start in range(0, n, PAGE):
        end = min(n, start + PAGE)
        if a[start:end] != b[start:end]:
            for i in range(start, end):
                if a[i] != b[i]:
                    return i
    return -1 if len(a) == len(b) else n


def _fit(durable: bytes | None, size: int) -> bytes:
    if durable is None:
        return bytes(size)
    return durable[:size] + bytes(max(0, size - len(durable)))


Decide = Callable[[str, int], str]
"""``decide(path, page_index)`` -> "kept", "dropped" or "torn": a fixed outcome for tests."""


def _lose_pages(
    path: str,
    memory: bytes,
    durable: bytes,
    rng: random.Random,
    p_keep: float,
    p_drop: float,
    decide: Decide | None,
    report: PowerLossReport,
) -> bytes:
    out = bytearray(memory)
    for start in range(0, len(memory), PAGE):
        end = min(start + PAGE, len(memory))
        if memory[start:end] == durable[start:end]:
            continue
        if decide is not None:
            fate = decide(path, start // PAGE)
        else:
            x = rng.random()
            fate = "kept" if x < p_keep else "dropped" if x < p_keep + p_drop else "torn"
        if fate == "kept":
            report.kept += 1
            continue
        if fate == "dropped":
            report.dropped += 1
            cut = start
        else:
            report.torn += 1
            sectors = -(-(end - start) // SECTOR)
            cut = start + SECTOR * (rng.randrange(1, sectors) if sectors > 1 else 0)
        out[cut:end] = durable[cut:end]
    return bytes(out)
