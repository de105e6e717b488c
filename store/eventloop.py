"""The event loop the broker's server runs on: uvloop when installed, else asyncio's
(the name server keeps the standard loop: ``mqstore.namesrv.server``).

A broker request that does little work (an ASYNC_FLUSH put, a pull, an offset lookup)
spends most of its CPU in the event loop: reading the socket, polling, and writing the
answer. uvloop does those in C on libuv, the same ``asyncio.Protocol`` API on top, so the
servers' protocols run unchanged on either loop. uvloop is a declared dependency on the
platforms it supports; where it is missing (or ``MQSTORE_EVENT_LOOP=asyncio`` asks for the
standard loop, e.g. to compare them) the standard selector loop serves, with the same
behaviour.
"""

from __future__ import annotations

import asyncio
import importlib
import os
from collections.abc import Callable
from typing import cast

ENV = "MQSTORE_EVENT_LOOP"
"""``asyncio``: the standard loop even when uvloop is installed; unset or ``uvloop``: uvloop
when it can be imported."""


def loop_kind() -> str:
    """``uvloop`` or ``asyncio``: the loop :func:`new_event_loop` gives here."""
    return "uvloop" if _uvloop_factory() is not None else "asyncio"


def _uvloop_factory() -> Callable[[], asyncio.AbstractEventLoop] | None:
    """``uvloop.new_event_loop`` when it is installed and not refused by :data:`ENV`."""
    if os.environ.get(ENV, "uvloop").strip().lower() == "asyncio":
        return None
    try:
        module = importlib.import_module("uvloop")  # optional where it has no wheel
    except ImportError:
        return None
    return cast(Callable[[], asyncio.AbstractEventLoop], module.new_event_loop)


def new_event_loop() -> asyncio.AbstractEventLoop:
    """A new event loop of :func:`loop_kind`'s kind (not set as any thread's current loop)."""
    factory = _uvloop_factory()
    return factory() if factory is not None else asyncio.new_event_loop()
