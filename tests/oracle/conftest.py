"""Fixtures of the differential tests (see :mod:`tests.oracle.harness`).

The processes are shared: one :class:`~tests.oracle.harness.Fleet` per session starts
them, and the named set-ups below are session-scoped (a JVM takes seconds to start), so
tests that share one must use topics and groups of their own (``unique``). A test that
kills or restarts a process starts its own from ``fleet``.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from typing import NamedTuple

import pytest

from tests.oracle.harness import Fleet, Proc, require_oracle

_seq = itertools.count()


@pytest.fixture(scope="session")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Fleet]:
    """Starts processes for the session; all stopped at its end (skips without the oracle)."""
    require_oracle()
    f = Fleet(tmp_path_factory.mktemp("oracle"))
    yield f
    f.close()


@pytest.fixture
def unique(request: pytest.FixtureRequest) -> str:
    """A name no other test of the session uses (topics, groups)."""
    return f"T{next(_seq)}_{request.node.name.split('[')[0][-20:]}".replace("-", "_")


class Side(NamedTuple):
    """One name server and the brokers registered with it."""

    label: str
    namesrv: Proc
    brokers: tuple[Proc, ...]

    @property
    def ns(self) -> str:
        return self.namesrv.address


@pytest.fixture(scope="session")
def real_ns(fleet: Fleet) -> Proc:
    """A real 4.9.8 name server, shared by the session."""
    return fleet.real_namesrv()


@pytest.fixture(scope="session")
def mq_ns(fleet: Fleet) -> Proc:
    """A ``mqstore namesrv``, shared by the session."""
    return fleet.mq_namesrv()


@pytest.fixture(scope="session")
def real_side(fleet: Fleet, real_ns: Proc) -> Side:
    """The reference: a real broker ``real-a`` on the real name server."""
    return Side("real", real_ns, (fleet.real_broker("real-a", real_ns.address),))


@pytest.fixture(scope="session")
def mq_side(fleet: Fleet, mq_ns: Proc) -> Side:
    """mqstore throughout: ``mqstore broker`` ``mq-a`` on ``mqstore namesrv``."""
    return Side("mqstore", mq_ns, (fleet.mq_broker("mq-a", mq_ns.address),))


@pytest.fixture(scope="session")
def real_ns_mixed(fleet: Fleet) -> Side:
    """A real name server with one real broker ``real-x`` and one mqstore broker ``mq-x``."""
    ns = fleet.real_namesrv()
    brokers = (fleet.real_broker("real-x", ns.address), fleet.mq_broker("mq-x", ns.address))
    return Side("real namesrv", ns, brokers)


@pytest.fixture(scope="session")
def mq_ns_mixed(fleet: Fleet) -> Side:
    """A ``mqstore namesrv`` with one real broker ``real-y`` and one mqstore broker ``mq-y``."""
    ns = fleet.mq_namesrv()
    brokers = (fleet.real_broker("real-y", ns.address), fleet.mq_broker("mq-y", ns.address))
    return Side("mqstore namesrv", ns, brokers)
