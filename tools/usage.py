"""The CLI's user errors: exit codes, the one-line error, and the store-directory rule.

Kept apart from :mod:`mqstore.tools.cli` so the subcommand modules (quickstart) raise the
same errors without importing the command line that dispatches to them.
"""

from __future__ import annotations

import enum
import os


class Exit(enum.IntEnum):
    """The exit codes of every subcommand (documented in ``mqstore --help``)."""

    OK = 0
    PROBLEMS = 1
    USAGE = 2
    BUSY = 3
    INTERRUPTED = 130
    OUTPUT_CLOSED = 141


class CliError(Exception):
    """A user error: printed as one line, the command exits with ``code``."""

    def __init__(self, message: str, code: Exit = Exit.USAGE) -> None:
        super().__init__(message)
        self.code = code


_STORE_ENTRIES = frozenset({"commitlog", "consumequeue", "index", "checkpoint", "lock", "config"})
"""What a store directory holds (ours or a RocketMQ broker's): one of these is enough."""


def require_store_directory(path: str) -> None:
    """Refuse a store path that exists and is not a directory, or a directory that
    holds files but no store: a command that creates a store would fill someone's
    folder with one."""
    if os.path.exists(path) and not os.path.isdir(path):
        raise CliError(f"{path} is a file, not a store directory")
    try:
        entries = set(os.listdir(path))
    except FileNotFoundError:
        return
    if entries and not entries & _STORE_ENTRIES:
        raise CliError(
            f"{path} holds files but no store (no commitlog/): give a new or empty directory"
        )
