"""The worked examples in the broker modules' docstrings run as tests."""

from __future__ import annotations

import doctest
import importlib

import pytest

MODULES = [
    "mqstore.broker.wire",
    "mqstore.broker.pulls",
    "mqstore.broker.sendback",
    "mqstore.broker.names",
]


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples_hold(name: str) -> None:
    result = doctest.testmod(importlib.import_module(name))
    assert result.attempted > 0 and result.failed == 0
