"""The audit report: findings, per-queue statistics, the human summary and the JSON file.

Every finding names a file (relative to the store root), a byte position *in that file*,
a kind and a detail. :data:`KINDS` lists every kind with its severity and meaning;
docs/audit.md explains each severity and the JSON schema (:data:`SCHEMA_VERSION`), and
a test holds the two to the same table.

Severity: ``error`` fails the audit (exit 1); ``warning`` is counted in the summary line
and fails it only with ``--strict``.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Final

SCHEMA_VERSION: Final = 2
"""Version of the JSON report's layout (docs/audit.md): raised when a field changes
meaning or goes; new kinds and new fields do not raise it."""

ERROR: Final = "error"
WARNING: Final = "warning"

KINDS: Final[dict[str, tuple[str, str]]] = {
    "bad_crc": (ERROR, "BODYCRC does not match the stored body"),
    "bad_magic": (ERROR, "a record header's MAGICCODE is neither V1 nor V2"),
    "bad_size": (ERROR, "a record's TOTALSIZE cannot be right"),
    "length_mismatch": (ERROR, "a record's lengths do not add up to TOTALSIZE"),
    "truncated": (ERROR, "a record runs past the end of its file"),
    "bad_text": (ERROR, "a topic or properties string is not valid UTF-8"),
    "torn_record": (ERROR, "a record whose properties end in a zero byte (a torn write),"
                           " with valid records after it"),
    "bad_physical_offset": (ERROR, "PHYSICALOFFSET differs from the record's position"),
    "bad_timestamp": (ERROR, "store timestamp <= 0 or more than a day in the future"),
    "store_time_outlier": (ERROR, "store timestamp above (or below) both neighbours'"
                                  " by more than the clock skew"),
    "timestamp_regression": (WARNING, "store timestamp lower than the previous record's"),
    "bad_born_timestamp": (ERROR, "born timestamp <= 0"),
    "born_timestamp_skew": (WARNING, "born after the store time by more than the clock"
                                     " skew, or long before it"),
    "bad_reconsume_times": (ERROR, "RECONSUMETIMES negative"),
    "bad_prepared_offset": (ERROR, "PREPAREDTRANSACTIONOFFSET set on a record that is no"
                                   " transaction's commit or rollback, or not before it"),
    "bad_sysflag": (ERROR, "SYSFLAG bits no RocketMQ version defines, a compression type"
                           " without the COMPRESSED bit, or a COMPRESSED body that is not"
                           " a zlib stream"),
    "bad_host": (ERROR, "a born or store host whose port is outside 0-65535, or an IPv6"
                        " host holding an IPv4 address"),
    "bad_blank": (ERROR, "end-of-file record with a wrong size or data after it"),
    "missing_blank": (ERROR, "a segment before the last ends without a blank record"),
    "zeroed_gap": (ERROR, "zeros inside the data, followed by records"),
    "torn_tail": (WARNING, "damage after which no valid record follows before the log's"
                           " end: the last record cut short (the cursor's torn-tail rule)"),
    "segment_size": (ERROR, "a segment's length or name breaks the fixed-size series"),
    "queue_gap": (ERROR, "queue offsets missing inside a topic/queue"),
    "queue_duplicate": (ERROR, "two records with the same topic/queue/queue offset"),
    "cq_truncated": (ERROR, "ConsumeQueue file length not the queue file size"),
    "cq_bad_unit": (ERROR, "a unit with a negative offset or size"),
    "cq_wrong_offset": (ERROR, "unit for queue offset N points elsewhere than record N"),
    "cq_wrong_size": (ERROR, "unit size differs from the record's TOTALSIZE"),
    "cq_wrong_tags": (ERROR, "unit tag code differs from the record's TAGS hash"),
    "cq_orphan": (ERROR, "unit for a queue offset the CommitLog does not have"),
    "cq_missing": (ERROR, "records without units in a queue that has a CQ dir"),
    "checkpoint_ahead": (ERROR, "a checkpoint timestamp after the newest stored record"),
    "index_header": (ERROR, "index file size or header field inconsistent"),
    "index_bad_chain": (ERROR, "a slot or previous-entry link outside the used entries,"
                               " forward, or into another slot"),
    "index_dangling": (ERROR, "an index entry's offset is not the start of a record"),
    "index_wrong_key": (ERROR, "an entry's key hash is none of its record's index keys"),
    "index_time": (ERROR, "an entry's time diff disagrees with its record's store time"),
    "index_missing": (ERROR, "a record's index key (UNIQ_KEY or a KEYS token) has no"
                             " entry, inside what the index files cover"),
    "fenced_damage": (ERROR, "a range recovery fenced off as damaged (damage.json)"),
    "no_valid_record": (ERROR, "the segments hold bytes but not one valid record"),
}  # fmt: skip
"""Every finding kind: (severity, meaning). docs/audit.md has the same table."""

WARNING_KINDS: Final = frozenset(k for k, (sev, _) in KINDS.items() if sev == WARNING)


@dataclass(frozen=True, slots=True, order=True)
class Finding:
    """One problem: ``offset`` is the byte position inside ``file``."""

    file: str
    offset: int
    kind: str
    detail: str

    @property
    def severity(self) -> str:
        """``warning`` for kinds that do not fail the audit (without ``--strict``),
        else ``error``."""
        return WARNING if self.kind in WARNING_KINDS else ERROR


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


@dataclass(frozen=True, slots=True)
class Cut:
    """What a live (or not cleanly closed) store was judged up to: the CommitLog bytes
    below ``log_end`` (every record there dispatched when the audit began) and the units
    and index entries pointing there. ``tail_*``: the in-flight tail left out (bytes
    written, or being written, past the cut), where it starts and its length."""

    reason: str
    log_end: int
    tail_file: str
    tail_offset: int
    tail_bytes: int


@dataclass(slots=True)
class AuditReport:
    """Everything an audit found; ``exit_code`` is the CLI's (``strict``: warnings fail
    too)."""

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
    cut: Cut | None = None
    strict: bool = False

    @property
    def errors(self) -> list[Finding]:
        """Findings that fail the audit."""
        return [f for f in self.findings if f.severity == ERROR]

    @property
    def warnings(self) -> list[Finding]:
        """Findings that fail the audit only when ``strict``."""
        return [f for f in self.findings if f.severity == WARNING]

    @property
    def clean(self) -> bool:
        """No error-level findings (warnings allowed)."""
        return not self.errors

    @property
    def exit_code(self) -> int:
        """0 clean (and, when ``strict``, no warning), 1 problems found."""
        return 1 if self.errors or (self.strict and self.warnings) else 0

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form (docs/audit.md): every finding with its severity, every queue."""
        return {
            "schema_version": SCHEMA_VERSION,
            "store": self.store,
            "master": self.master,
            "clean": self.clean,
            "strict": self.strict,
            "exit_code": self.exit_code,
            "errors": len(self.errors),
            "warnings": len(self.warnings),
            "segments": self.segments,
            "segment_size": self.segment_size,
            "records": self.records,
            "bytes": self.bytes,
            "elapsed_s": round(self.elapsed_s, 3),
            "checks": self.checks,
            "checkpoint": self.checkpoint,
            "cut": asdict(self.cut) if self.cut is not None else None,
            "findings": [asdict(f) | {"severity": f.severity} for f in self.findings],
            "queues": [asdict(q) for q in self.queues],
        }

    def write_json(self, path: str | Path) -> None:
        """Write :meth:`to_dict` to ``path`` (replaced atomically)."""
        target = Path(path)
        tmp = target.with_name(target.name + ".tmp")
        tmp.write_text(json.dumps(self.to_dict(), indent=2) + "\n")
        tmp.replace(target)

    def verdict(self) -> str:
        """The summary's first line after the store: CLEAN or PROBLEMS FOUND, with the
        error and warning counts (a warning is never hidden behind CLEAN)."""
        e, w = len(self.errors), len(self.warnings)
        counts = f"{e} error{'s' * (e != 1)}, {w} warning{'s' * (w != 1)}"
        if self.exit_code:
            return f"PROBLEMS FOUND ({counts}{', --strict' if self.strict and not e else ''})"
        return f"CLEAN ({counts})"

    def summary(self, max_lines: int = 20) -> str:
        """The human summary printed by the CLI."""
        kinds: dict[str, int] = {}
        for f in self.findings:
            kinds[f.kind] = kinds.get(f.kind, 0) + 1
        lines = [
            f"audit of {self.store}: {self.verdict()}",
            f"  {self.records} records in {self.segments} segments of {self.segment_size} bytes"
            f" ({self.bytes / 2**20:.1f} MiB), {len(self.queues)} topic/queues,"
            f" {self.elapsed_s:.1f} s on {self.master}",
        ]
        lines += [f"  {name}: {state}" for name, state in self.checks.items()]
        if kinds:
            lines.append("  findings: " + ", ".join(f"{k}={n}" for k, n in sorted(kinds.items())))
            shown = sorted(self.findings, key=lambda f: f.severity != ERROR)[:max_lines]
            lines += [f"    [{f.severity}] {f.kind} {f.file}@{f.offset}: {f.detail}" for f in shown]
            if len(self.findings) > max_lines:
                lines.append(f"    ... {len(self.findings) - max_lines} more (see --report)")
        else:
            lines.append("  findings: none")
        return "\n".join(lines)
