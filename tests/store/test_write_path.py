"""The write path's shape: one append verb (and HA's raw append), one framer, one
header pack, and a put that runs through at most four files.

Read from the classes and the source (``ast``), and from a trace of real puts.
"""

from __future__ import annotations

import ast
import functools
import sys
from collections.abc import Callable
from pathlib import Path
from types import FrameType
from typing import Any

import mqstore
from mqstore import Message, MessageStore
from mqstore.commitlog.commitlog import FRAME_KEY, FRAME_TOTAL, FRAME_UNIQ, CommitLog
from mqstore.put_frame import MessageFramer
from tests.helpers import make_store

ROOT = Path(mqstore.__file__).parent


def _public_methods(cls: type) -> set[str]:
    return {n for n, v in vars(cls).items() if callable(v) and not n.startswith("_")}


@functools.cache
def _texts() -> dict[Path, str]:
    return {path: path.read_text() for path in sorted(ROOT.rglob("*.py"))}


def _trees(word: str) -> dict[Path, ast.Module]:
    """The parsed files of the store whose text has ``word``."""
    return {path: ast.parse(text) for path, text in _texts().items() if word in text}


def _calls_of(name: str) -> dict[str, int]:
    """Files of the store (relative to it) whose code calls or builds ``name``, and how
    many times (``name(...)`` or ``x.name(...)``, and ``tuple.__new__(name, ...)``)."""
    found: dict[str, int] = {}
    for path, tree in _trees(name).items():
        n = 0
        for node in ast.walk(tree):
            if not isinstance(node, ast.Call):
                continue
            f = node.func
            called = (
                f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else ""
            )
            first = node.args[0] if node.args else None
            if called == name or (isinstance(first, ast.Name) and first.id == name):
                n += 1
        if n:
            found[str(path.relative_to(ROOT))] = n
    return found


def test_the_commitlog_writes_by_one_append_verb_and_the_ha_raw_append() -> None:
    writes = {n for n in _public_methods(CommitLog) if n.startswith(("append", "write", "put"))}
    assert writes == {"append", "append_raw_at"}


def test_one_framer_makes_the_frames() -> None:
    assert {n for n in _public_methods(MessageFramer) if n.startswith("frame")} == {
        "frame",
        "frame_batch",
    }
    # Frames are built by the framer alone: no other module of the store names the type
    # (the CommitLog, which defines it, takes them), nor builds one by its fields.
    namers = {
        str(path.relative_to(ROOT))
        for path, tree in _trees("Frame").items()
        if any(isinstance(node, ast.alias) and node.name == "Frame" for node in ast.walk(tree))
    }
    assert namers == {"put_frame.py"}
    assert _calls_of("make_frame") == {}


def test_the_frame_fields_a_single_put_reads_by_position_are_the_named_ones() -> None:
    # put_message and CommitLog.append read a frame's key, size and UNIQ_KEY by literal
    # index (no global lookup per put): these names must not move.
    assert (FRAME_KEY, FRAME_TOTAL, FRAME_UNIQ) == (0, 12, 13)


def test_a_record_header_is_packed_in_one_place_on_the_put_path() -> None:
    assert _calls_of("header_struct") == {"commitlog/commitlog.py": 2}  # IPv4 and IPv6 born
    # Besides, only the codec reads the layout's header structs: the decoders and the
    # reference encoder (what the put path is tested against).
    users = {
        str(path.relative_to(ROOT))
        for path, tree in _trees("_HEADERS").items()
        if any(
            isinstance(node, ast.Name | ast.alias)
            and "_HEADERS" in (getattr(node, "id", None), getattr(node, "name", None))
            for node in ast.walk(tree)
        )
    }
    assert users <= {f"commitlog/{m}.py" for m in ("_layout", "_encode", "_decode", "_trusted")}


def _files_run(fn: Callable[[], Any]) -> list[str]:
    """The store's files whose code ``fn`` runs in this thread, in the order first
    entered."""
    seen: list[str] = []

    def trace(frame: FrameType, event: str, arg: object) -> None:
        name = frame.f_code.co_filename
        if event == "call" and name.startswith(str(ROOT)) and name not in seen:
            seen.append(name)

    sys.settrace(trace)  # type: ignore[arg-type]
    try:
        fn()
    finally:
        sys.settrace(None)
    return [str(Path(f).relative_to(ROOT)) for f in seen]


def test_a_put_runs_through_at_most_four_files(tmp_path: Path) -> None:
    s: MessageStore = make_store(tmp_path)
    try:
        m = Message("T", b"x" * 100, tags="a", keys=["k"])
        s.put_messages([m, m])  # first sight of the topic and host: cached from now on
        one = _files_run(lambda: s.put_message(m))
        batch = _files_run(lambda: s.put_messages([m] * 32))
    finally:
        s.close()
    want = ["put.py", "put_frame.py", "message.py", "commitlog/commitlog.py"]
    assert one == want
    assert batch == want
