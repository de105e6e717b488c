"""CPU affinity (store.affinity): CPU lists, pinning this process's threads, the
dispatcher child on its own CPUs, and the broker's --cpus / --dispatch-cpus."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from mqstore import ConfigError, Message, MessageStore, StoreConfig, affinity
from mqstore.consumequeue.shared import supported as dispatch_process_supported
from tests.broker.test_server_robustness import start_broker, stop_broker

REPO = Path(__file__).resolve().parents[2]
TWO_CPUS = pytest.mark.skipif(
    not affinity.supported()
    or len(os.sched_getaffinity(0)) < 2
    or 1 not in os.sched_getaffinity(0),
    reason="needs CPU affinity and CPUs 0 and 1",
)


def thread_masks(pid: int) -> dict[int, frozenset[int]]:
    """Every thread of ``pid`` and its CPU mask."""
    return {
        int(t): frozenset(os.sched_getaffinity(int(t))) for t in os.listdir(f"/proc/{pid}/task")
    }


@pytest.mark.parametrize(
    ("text", "cpus"),
    [("0", (0,)), ("0,2-3", (0, 2, 3)), ("3-3, 1", (1, 3)), ("1,1,0-1", (0, 1))],
)
def test_cpu_list_in_taskset_syntax_parses(text: str, cpus: tuple[int, ...]) -> None:
    assert affinity.parse_cpu_list(text) == cpus


@pytest.mark.parametrize("text", ["", "a", "1-", "3-1", "-1", "0,,1", "1.5"])
def test_malformed_cpu_list_is_a_config_error(text: str) -> None:
    with pytest.raises(ConfigError, match="CPU list"):
        affinity.parse_cpu_list(text)


@pytest.mark.parametrize("cpus", [(-1,), (10_000,), (True,), ("0",)])
def test_dispatch_cpus_outside_this_machine_is_refused_at_config_time(
    tmp_path: Path, cpus: tuple[object, ...]
) -> None:
    with pytest.raises(ConfigError, match="dispatch_cpus"):
        StoreConfig(root_dir=tmp_path, dispatch_cpus=cpus)  # type: ignore[arg-type]


def test_dispatch_cpus_are_kept_sorted_without_duplicates(tmp_path: Path) -> None:
    cfg = StoreConfig(root_dir=tmp_path, dispatch_cpus=(0, 0))
    assert cfg.dispatch_cpus == (0,)


@TWO_CPUS
def test_pin_process_moves_threads_already_running_and_restore_gives_masks_back() -> None:
    before = affinity.current()
    started = threading.Event()
    stop = threading.Event()

    def idle() -> None:
        started.set()
        stop.wait(30)

    t = threading.Thread(target=idle)
    t.start()
    started.wait(5)
    try:
        old = affinity.pin_process((1,))
        try:
            assert thread_masks(os.getpid())[t.native_id] == {1}
            assert affinity.current() == {1}
        finally:
            affinity.restore(old)
        assert thread_masks(os.getpid())[t.native_id] == before
        assert affinity.current() == before
    finally:
        stop.set()
        t.join()


@TWO_CPUS
def test_threads_started_inside_pinned_inherit_the_pin() -> None:
    seen: list[frozenset[int]] = []
    with affinity.pinned((0,)):
        t = threading.Thread(target=lambda: seen.append(affinity.current()))
        t.start()
        t.join()
    assert seen == [frozenset({0})]


@TWO_CPUS
@pytest.mark.skipif(not dispatch_process_supported(), reason="dispatch_process: Linux x86-64")
def test_dispatcher_process_runs_on_dispatch_cpus_while_the_store_stays_put(
    tmp_path: Path,
) -> None:
    before = affinity.current()
    cfg = StoreConfig(
        root_dir=tmp_path / "s",
        commitlog_file_size=1 << 20,
        dispatch_process=True,
        dispatch_cpus=(1,),
    )
    with MessageStore.open(cfg) as s:
        assert s.put_message(Message("T", b"x", tags="a")).status.name == "PUT_OK"
        assert s.wait_dispatched(60)
        proc = s.logics.process
        assert proc is not None and proc.pid is not None
        assert set(thread_masks(proc.pid).values()) == {frozenset({1})}
        assert affinity.current() == before
        assert s.get_message("g", "T", 0, 0, 1).messages[0].body == b"x"


@TWO_CPUS
@pytest.mark.skipif(not dispatch_process_supported(), reason="dispatch_process: Linux x86-64")
def test_broker_cpus_pin_the_broker_and_dispatch_cpus_its_child(tmp_path: Path) -> None:
    proc, _address = start_broker(
        tmp_path / "store", "--dispatch-process", "--cpus", "0", "--dispatch-cpus", "1"
    )
    try:
        assert set(thread_masks(proc.pid).values()) == {frozenset({0})}
        children = [
            int(p) for p in os.listdir("/proc") if p.isdigit() and _parent_of(int(p)) == proc.pid
        ]
        assert len(children) == 1
        assert set(thread_masks(children[0]).values()) == {frozenset({1})}
    finally:
        stop_broker(proc)


def test_broker_with_a_malformed_cpu_list_exits_2_naming_it(tmp_path: Path) -> None:
    r = subprocess.run(
        [sys.executable, "-m", "mqstore.tools.cli", "broker", "--store", str(tmp_path / "s"),
         "--port", "0", "--ha-port", "0", "--cpus", "0-x"],
        check=False, cwd=REPO, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert r.returncode == 2
    assert "CPU list" in r.stderr
    assert not (tmp_path / "s" / "commitlog").exists()


def _parent_of(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return int(f.read().rsplit(")", 1)[1].split()[1])
    except (OSError, IndexError, ValueError):
        return None
