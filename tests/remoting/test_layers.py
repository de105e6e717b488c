"""The package layering of the wire world: remoting below, broker and client beside.

``mqstore.remoting`` imports neither side; the broker never imports the client and the
client never imports the broker, at module level or inside functions, so neither package
can form an import cycle with the other.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import mqstore

ROOT = Path(mqstore.__file__).parent
FORBIDDEN = {
    "remoting": ("mqstore.broker", "mqstore.client"),
    "broker": ("mqstore.client",),
    "client": ("mqstore.broker",),
}


def imported_modules(path: Path) -> set[str]:
    """Every module an ``import`` or ``from ... import`` in ``path`` names, at any depth."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
            names.update(f"{node.module}.{alias.name}" for alias in node.names)
    return names


def offending(package: str) -> list[str]:
    banned = FORBIDDEN[package]
    return sorted(
        f"{path.relative_to(ROOT)} imports {name}"
        for path in (ROOT / package).rglob("*.py")
        for name in imported_modules(path)
        if any(name == b or name.startswith(b + ".") for b in banned)
    )


@pytest.mark.parametrize("package", sorted(FORBIDDEN))
def test_package_imports_only_its_lower_layers(package: str) -> None:
    assert offending(package) == []


def test_the_check_sees_a_forbidden_import(tmp_path: Path) -> None:
    module = tmp_path / "m.py"
    module.write_text("def f():\n    from mqstore.client.transport import Transport\n")
    assert "mqstore.client.transport" in imported_modules(module)
