"""The audit report's contract (docs/audit.md): warnings counted in the summary line,
``--strict``, the JSON schema version, and the kinds table the docs and the code share."""

from __future__ import annotations

import json
import re
from pathlib import Path

from mqstore.tools.spark.report import KINDS, SCHEMA_VERSION, AuditReport, Finding

DOC = Path(__file__).resolve().parents[2] / "docs" / "audit.md"


def _report(*kinds: str, strict: bool = False) -> AuditReport:
    found = [Finding("commitlog/00000000000000000000", 8 * i, k, "d") for i, k in enumerate(kinds)]
    return AuditReport("s", 1, 1024, 10, 1024, findings=found, strict=strict)


def test_a_warning_is_counted_on_the_clean_summary_line():
    line = _report("torn_tail").summary().splitlines()[0]
    assert line.endswith("CLEAN (0 errors, 1 warning)")


def test_strict_makes_a_warning_fail_the_exit_code():
    assert _report("torn_tail").exit_code == 0
    strict = _report("torn_tail", strict=True)
    assert strict.exit_code == 1
    assert "PROBLEMS FOUND (0 errors, 1 warning, --strict)" in strict.summary()


def test_errors_fail_without_strict():
    r = _report("bad_crc", "torn_tail")
    assert r.exit_code == 1 and "PROBLEMS FOUND (1 error, 1 warning)" in r.summary()


def test_the_json_report_carries_its_schema_version_and_counts(tmp_path: Path):
    _report("bad_sysflag", "born_timestamp_skew").write_json(tmp_path / "r.json")
    data = json.loads((tmp_path / "r.json").read_text())
    assert data["schema_version"] == SCHEMA_VERSION
    assert (data["errors"], data["warnings"], data["exit_code"]) == (1, 1, 1)
    assert [f["severity"] for f in data["findings"]] == ["error", "warning"]


def test_docs_list_every_kind_with_its_severity():
    rows = re.findall(r"^\| `(\w+)` \| (error|warning) \|", DOC.read_text(), re.MULTILINE)
    assert dict(rows) == {k: sev for k, (sev, _) in KINDS.items()}
    assert f"schema version {SCHEMA_VERSION}" in DOC.read_text()


def test_strict_is_an_audit_option():
    from mqstore.tools.spark.audit import build_parser

    assert build_parser().parse_args(["d", "--strict"]).strict is True
