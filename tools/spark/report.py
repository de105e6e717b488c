"""The audit report: findings, per-queue statistics, the human summary and the JSON file.

Every finding names a file (relative to the store root), a byte position *in that file*,
a kind and a detail. Kinds and what they mean:

===================== ======== ======================================================
kind                  severity meaning
===================== ======== ======================================================
bad_crc               error    BODYCRC does not match the stored body
bad_magic, bad_size,  error    a record header or its lengths cannot be right (the
length_mismatch,               scan resumes at the next valid record, see detail)
truncated, bad_text
bad_physical_offset   error    PHYSICALOFFSET field differs from the record's position
bad_timestamp         error    store timestamp <= 0 or more than a day in the future
timestamp_regression  warning  store timestamp lower than the previous record's
bad_blank             error    end-of-file record with a wrong size or data after it
missing_blank         error    a segment before the last ends without a blank record
zeroed_gap            error    zeros inside the data, followed by records
torn_tail             warning  the last record of the last segment was cut short:
                               truncation (recovery drops it), not corruption
segment_size          error    a segment's length or name breaks the fixed-size series
queue_gap             error    queue offsets missing inside a topic/queue
queue_duplicate       error    two records with the same topic/queue/queue offset
cq_truncated          error    ConsumeQueue file length not 6,000,000 bytes
cq_bad_unit           error    a unit with a negative offset or size
cq_wrong_offset       error    unit for queue offset N points elsewhere than record N
cq_wrong_size         error    unit size differs from the record's TOTALSIZE
cq_wrong_tags         error    unit tag code differs from the record's TAGS hash
cq_orphan             error    unit for a queue offset the CommitLog does not have
cq_missing            error    records without units in a queue that has a CQ dir
checkpoint_ahead      error    a checkpoint timestamp after the newest stored record
index_header          error    index file size or header field (indexCount,
                               hashSlotCount, begin/end phy offset) inconsistent
index_bad_chain       error    a slot or previous-entry link outside the used entries,
                               forward, or into another slot
index_dangling        error    an index entry's offset is not the start of a record
index_wrong_key       error    an entry's key hash is none of its record's index keys
index_time            error    an entry's time diff disagrees with the record's store
                               timestamp and the file's begin
fenced_damage         error    a range recovery fenced off as damaged (the store's
                               ``damage.json``): log range, bytes, messages lost, reason
no_valid_record       error    the segments hold bytes but not one valid record
===================== ======== ======================================================
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Final

WARNING_KINDS: Final = frozenset({"timestamp_regression", "torn_tail"})


@dataclass(frozen=True, slots=True, order=True)
class Finding:
    """One problem: ``offset`` is the byte position inside ``file``."""

    file: str
    offset: int
    kind: str
    detail: str

    @property
    def severity(self) -> str:
        """``warning`` for kinds that do not fail the audit, else ``error``."""
        return "warning" if self.kind in WARNING_KINDS else "error"


@dataclass(frozen=True, slots=True, order=True)
class QueueStats:
    """Dispatchable records of one topic/queue (prepared and rolled-back ones excluded)."""

    topic: str
    queue_id: int
    count: int
    min_queue_offset: int
    max_queue_offset: int
    bytes: int
    min_store_timestamp: int
    max_store_timestamp: int
    not_dispatched: int = 0


@dataclass(slots=True)
class AuditReport:
    """Everything an audit found; ``exit_code`` is the CLI's."""

    store: str
    segments: int
    segment_size: int
    records: int
    bytes: int
    findings: list[Finding] = field(default_factory=list)
    queues: list[QueueStats] = field(default_factory=list)
    checks: dict[str, str] = field(default_factory=dict)
    checkpoint: dict[str, int] | None = None
    master: str = ""
    elapsed_s: float = 0.0

    @property
    def errors(self) -> list[Finding]:
        """Findings that fail the audit."""
        return [f for f in self.findings if f.severity == "error"]

    @property
    def clean(self) -> bool:
        """No error-level findings (warnings allowed)."""
        return not self.errors

    @property
    def exit_code(self) -> int:
        """0 clean, 1 problems found."""
        return 0 if self.clean else 1

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form: every finding with its severity, every queue."""
        return {
            "store": self.store,
            "master": self.master,
            "clean": self.clean,
            "segments": self.segments,
            "segment_size": self.segment_size,
            "records": self.records,
            "bytes": self.bytes,
            "elapsed_s": round(self.elapsed_s, 3),
            "checks": self.checks,
            "checkpoint": self.checkpoint,
            "findings": [asdict(f) | {"severity": f.severity} for f in self.findings],
            "queues": [asdict(q) for q in self.queues],
        }

    def write_json(self, path: str | Path) -> None:
        """Write :meth:`to_dict` to ``path`` (replaced atomically)."""
        target = Path(path)
        tmp = target.with_name(target.name + ".tmp")
        tmp.write_text(json.dumps(self.to_dict(), indent=2) + "\n")
        tmp.replace(target)

    def summary(self, max_lines: int = 20) -> str:
        """The human summary printed by the CLI."""
        kinds: dict[str, int] = {}
        for f in self.findings:
            kinds[f.kind] = kinds.get(f.kind, 0) + 1
        verdict = "CLEAN" if self.clean else "PROBLEMS FOUND"
        lines = [
            f"audit of {self.store}: {verdict}",
            f"  {self.records} records in {self.segments} segments of {self.segment_size} bytes"
            f" ({self.bytes / 2**20:.1f} MiB), {len(self.queues)} topic/queues,"
            f" {self.elapsed_s:.1f} s on {self.master}",
        ]
        lines += [f"  {name}: {state}" for name, state in self.checks.items()]
        if kinds:
            lines.append("  findings: " + ", ".join(f"{k}={n}" for k, n in sorted(kinds.items())))
            lines += [
                f"    [{f.severity}] {f.kind} {f.file}@{f.offset}: {f.detail}"
                for f in self.findings[:max_lines]
            ]
            if len(self.findings) > max_lines:
                lines.append(f"    ... {len(self.findings) - max_lines} more (see --report)")
        else:
            lines.append("  findings: none")
        return "\n".join(lines)
