"""ConsumeQueue files for the audit: whole-file checks and units as numpy columns.

Units are read as one numpy view per file with a dtype derived from
:mod:`mqstore.consumequeue.format`'s unit ``struct``, between the first and the last
non-zero unit (so a 6,000,000-byte file holding a few units is cheap). Blank pre-fill
units are dropped: they point at no message. Units with a negative offset or size are
left in; the caller reports them (``cq_bad_unit``).
"""

from __future__ import annotations

import mmap
from typing import Any, Final

from mqstore.consumequeue import format as cqfmt
from mqstore.tools.spark.layout import CqFile
from mqstore.tools.spark.report import Finding


def file_findings(
    files: tuple[CqFile, ...], file_size: int = cqfmt.FILE_SIZE
) -> tuple[list[Finding], list[tuple[str, int, int, int]]]:
    """``cq_truncated`` findings (a file shorter or longer than the store's
    ``file_size``) and the queue-offset ranges ``[lo, hi)`` each one lost."""
    findings: list[Finding] = []
    lost: list[tuple[str, int, int, int]] = []
    units_per_file = file_size // cqfmt.UNIT_SIZE
    for f in files:
        if f.length == file_size:
            continue
        whole = f.length // cqfmt.UNIT_SIZE
        partial = f.length % cqfmt.UNIT_SIZE
        detail = f"{f.length} bytes, not {file_size}"
        if partial:
            detail += f"; {partial} bytes of a partial unit at the end"
        findings.append(Finding(f.rel_path, f.length, "cq_truncated", detail))
        lost.append((f.topic, f.queue_id, f.base_unit + whole, f.base_unit + units_per_file))
    return findings, lost


def unit_dtype() -> Any:
    """numpy dtype of one unit, derived from the codec's ``struct`` format."""
    import numpy as np

    fmt = cqfmt._UNIT.format
    order = fmt[0]
    dt = np.dtype([(f"f{i}", order + _NP_CODES[c]) for i, c in enumerate(fmt[1:])])
    assert dt.itemsize == cqfmt.UNIT_SIZE
    return dt


_NP_CODES: Final = {"q": "i8", "i": "i4"}


def read_units(data: bytes | mmap.mmap, cq: CqFile) -> dict[str, Any]:
    """Columns (numpy arrays) of the non-zero, non-blank units of one file's bytes:
    ``index`` (unit number in the file), ``u_phys``, ``u_size``, ``u_tags``."""
    import numpy as np

    whole = len(data) // cqfmt.UNIT_SIZE
    words = np.frombuffer(data, dtype=np.uint32, count=whole * cqfmt.UNIT_SIZE // 4)
    nonzero = words != 0  # a unit is 5 words: the first and last used units bound the rest
    if not nonzero.any():
        empty = np.zeros(0, dtype=np.int64)
        return {"index": empty, "u_phys": empty, "u_size": empty, "u_tags": empty}
    per_unit = cqfmt.UNIT_SIZE // 4
    lo = int(np.argmax(nonzero)) // per_unit
    hi = (nonzero.size - 1 - int(np.argmax(nonzero[::-1]))) // per_unit + 1
    units = np.frombuffer(data, unit_dtype(), hi - lo, lo * cqfmt.UNIT_SIZE)
    phys, size, tags = (units[f].astype(np.int64) for f in units.dtype.names or ())
    zero = (phys == 0) & (size == 0) & (tags == 0)
    blank = (phys == 0) & (size == cqfmt.BLANK_SIZE) & (tags == 0)
    keep = ~(zero | blank)
    index = np.arange(lo, hi, dtype=np.int64)
    if keep.all():  # the usual file: no hole, no blank unit
        return {"index": index, "u_phys": phys, "u_size": size, "u_tags": tags}
    return {
        "index": index[keep],
        "u_phys": phys[keep],
        "u_size": size[keep],
        "u_tags": tags[keep],
    }
