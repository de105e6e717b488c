"""The distribution installs one import package, ``mqstore``, with every subpackage."""

from __future__ import annotations

import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
FOLDERS = {"mqstore": REPO / "store", "mqstore.tools": REPO / "tools"}


def _setuptools() -> dict[str, object]:
    data = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))
    return data["tool"]["setuptools"]


def test_the_package_dir_maps_only_mqstore_to_the_brief_folders() -> None:
    assert _setuptools()["package-dir"] == {"mqstore": "store", "mqstore.tools": "tools"}


def test_every_folder_with_an_init_is_listed_as_a_package() -> None:
    on_disk = set()
    for name, folder in FOLDERS.items():
        for init in folder.rglob("__init__.py"):
            rel = init.parent.relative_to(folder)
            if name == "mqstore" and rel.parts[:1] == ("tools",):
                continue
            on_disk.add(".".join((name, *rel.parts)))
    assert set(_setuptools()["packages"]) == on_disk  # type: ignore[arg-type]


def test_the_license_file_holds_the_license_pyproject_declares() -> None:
    data = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))
    assert data["project"]["license"] == "Apache-2.0"
    text = (REPO / "LICENSE").read_text(encoding="utf-8")
    assert "Apache License" in text and "Version 2.0, January 2004" in text
    assert "TERMS AND CONDITIONS FOR USE, REPRODUCTION, AND DISTRIBUTION" in text
