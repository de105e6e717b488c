"""The examples in the docstrings of the consume-queue, index and schedule modules run."""

from __future__ import annotations

import doctest
import importlib

import pytest

MODULES = [
    "mqstore.consumequeue.format",
    "mqstore.consumequeue.filter",
    "mqstore.index.format",
    "mqstore.schedule",
]


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name: str):
    result = doctest.testmod(importlib.import_module(name))
    assert result.failed == 0 and result.attempted > 0
