"""Fixtures of the broker tests (defined in tests.broker.fixtures, shared with the
client tests): ``store``, ``core``, ``server``, ``address``."""

from __future__ import annotations

from tests.broker import fixtures

store = fixtures.store
core = fixtures.core
server = fixtures.server
address = fixtures.address
