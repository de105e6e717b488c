"""What the Spark job commands (``mqstore audit``, ``reindex``, ``export``) share on the
command line: argument errors and user or I/O errors end the command with exit 2 and
one line, never a traceback; a store another process has open, exit 3 (the ``mqstore``
codes); a task that could not read a store file is that one line
(:func:`mqstore.tools.spark.reader.unreadable`). Output files are checked before the
job starts (:func:`check_output_file`), so a run is never lost to its last write."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable
from typing import TypeVar

from mqstore.errors import ConfigError, StoreLockedError
from mqstore.tools.spark.layout import LayoutError
from mqstore.tools.spark.reader import unreadable

T = TypeVar("T")
USAGE_OR_IO: int = 2
"""The exit status of a usage, user or I/O error."""
BUSY: int = 3
"""The exit status when the store is open in another process."""


def check_output_file(path: str | os.PathLike[str], option: str) -> None:
    """Refuse an output file the job could not write at its end: ``path`` is a
    directory, or its directory is missing or not writable (an existing file is
    replaced).

    Raises:
        ConfigError: one line naming ``option`` and the reason.
    """
    text = os.fspath(path)
    parent = os.path.dirname(os.path.abspath(text))
    if os.path.isdir(text):
        raise ConfigError(f"{option} {text} is a directory: give a file name")
    if not os.path.isdir(parent):
        raise ConfigError(f"{option} {text}: directory {parent} does not exist")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise ConfigError(f"{option} {text}: directory {parent} is not writable")


def run(
    parser: argparse.ArgumentParser,
    argv: list[str] | None,
    prog: str,
    job: Callable[[argparse.Namespace], T],
) -> T | int:
    """``job`` of ``parser``'s arguments, or the exit status when the arguments were
    refused (2; 0 for ``--help``) or the job failed on the store's layout, its config or
    an I/O error, the driver's own or a task's (2, after printing ``prog: reason``), or
    the store is open elsewhere (3); any other failure propagates. The job's result is
    never an int."""
    try:
        args = parser.parse_args(argv)
    except SystemExit as e:
        return 0 if e.code == 0 else USAGE_OR_IO
    try:
        return job(args)
    except StoreLockedError as e:
        print(f"{prog}: {e}", file=sys.stderr)
        return BUSY
    except (LayoutError, OSError, ConfigError) as e:  # the driver's own reads included
        print(f"{prog}: {unreadable(e) or e}", file=sys.stderr)
    except Exception as e:  # a Spark job failure: a task's unreadable file is exit 2
        msg = unreadable(e)
        if msg is None:
            raise
        print(f"{prog}: {msg}", file=sys.stderr)
    return USAGE_OR_IO
