"""Part 2 of ``mqstore bench flush`` on a real lower layer: power cuts on a FUSE mount.

Each trial mounts :mod:`mqstore.tools.lazyfs`, runs producers in a child process against a
store on the mount, cuts the power at a random moment (the layer freezes what syncs had
made durable and writes it out), SIGKILLs the child, opens the store from what survived on
the real disk, and checks every message the child had acknowledged:

* SYNC_FLUSH must lose none;
* ASYNC_FLUSH may lose only a suffix: every acknowledged message before the first lost one
  must be there (a hole would mean a later sync made durable what an earlier one had not);
* no recovered record may differ from the message put at its offset, and the consistency
  checker must pass.

The child reports each acknowledgement on stdout as ``A <offset> <size> <crc32>`` right
after ``put_message`` returns, so the parent knows every ack the child received before the
cut. Segments, consume-queue and index files are small so that every trial rolls files and
creates new ones: a cut can land between a file's creation and the sync of its directory.
"""

from __future__ import annotations

import os
import random
import shutil
import signal
import subprocess
import sys
import threading
import time
import zlib
from dataclasses import asdict
from pathlib import Path
from typing import Any

from mqstore import FlushDiskType, Message, MessageStore, PutStatus, StoreConfig
from mqstore.tools.bench._harness import progress
from mqstore.tools.lazyfs import CutPolicy, Mount
from mqstore.tools.logcheck import check_consistency, scan_log

FILE_SIZE = 64 * 1024
THREADS = 4
MAX_RUN_S = 1.6  # cuts fall 0.05 s to this after the first ack, around the 500 ms flush interval


def trial_config(root: Path, mode: FlushDiskType) -> StoreConfig:
    """The store both the child and the verifier open (index on, tiny files)."""
    return StoreConfig(
        root_dir=root,
        flush_disk_type=mode,
        commitlog_file_size=FILE_SIZE,
        mapped_file_size_consume_queue=20 * 200,
        max_hash_slot_num=64,
        max_index_num=256,
        sync_flush_timeout_ms=60_000,
    )


def _produce(root: Path, mode: FlushDiskType, seed: int) -> None:
    """The child: producers until killed, one ack line per PUT_OK."""
    store = MessageStore.open(trial_config(root, mode))
    out_lock = threading.Lock()

    def worker(tid: int) -> None:
        rng = random.Random(f"{seed}:{tid}")
        seq = 0
        while True:
            body = f"t{tid}-s{seq}-".encode() + rng.randbytes(rng.randrange(60, 600))
            r = store.put_message(Message("FlushLab", body, tags=f"T{tid}", keys=[f"k{tid}-{seq}"]))
            if r.status is not PutStatus.PUT_OK:
                return
            with out_lock:
                sys.stdout.write(f"A {r.physical_offset} {len(body)} {zlib.crc32(body)}\n")
                sys.stdout.flush()
            seq += 1

    threads = [threading.Thread(target=worker, args=(t,), daemon=True) for t in range(THREADS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()


def _read_acks(
    proc: subprocess.Popen[str], acks: list[tuple[int, int, int]], first_ack: threading.Event
) -> None:
    assert proc.stdout is not None
    for line in proc.stdout:
        if line.startswith("A "):
            _, off, size, crc = line.split()
            acks.append((int(off), int(size), int(crc)))
            first_ack.set()
    first_ack.set()


def trial(
    work: Path, mode: FlushDiskType, seed: int, policy_keep: float = 0.3, run_s: float | None = None
) -> dict[str, Any]:
    """One cut on the FUSE layer, ``run_s`` after the producers start (random by default):
    what the reopened store lost, and every figure of the cut's :class:`CutReport`."""
    if run_s is None:
        run_s = random.Random(seed).uniform(0.05, MAX_RUN_S)
    acks: list[tuple[int, int, int]] = []
    image = work / "image"
    err_path = work / "producer.err"
    with Mount(work / "fs") as mount, open(err_path, "w") as err_file:
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "mqstore.tools.bench._flush_fuse",
                str(mount.path / "store"),
                mode.value,
                str(seed),
            ],
            stdout=subprocess.PIPE,
            stderr=err_file,
            text=True,
        )
        first_ack = threading.Event()
        reader = threading.Thread(target=_read_acks, args=(proc, acks, first_ack), daemon=True)
        reader.start()
        try:
            first_ack.wait(60)  # the run starts with the first acknowledgement
            time.sleep(run_s)
            report = mount.cut(image, CutPolicy(keep=policy_keep, tear=0.3, seed=seed))
            acked_at_cut = len(acks)
            early = proc.poll()  # the producer ended before the cut: a broken trial
        finally:
            proc.send_signal(signal.SIGKILL)
    # The layer is gone: a request the child had in flight fails and it can exit.
    proc.wait()
    reader.join(5)
    err = err_path.read_text(errors="replace")
    result = verify(image / "store", mode, acks)
    if early is not None:
        last = err.strip().splitlines()[-1:] or ["no output"]
        result["problems"].insert(0, f"the producer exited ({early}) before the cut: {last[0]}")
    shutil.rmtree(image, ignore_errors=True)
    result.update(seed=seed, run_s=round(run_s, 3), acked_at_cut=acked_at_cut, **asdict(report))
    return result


def verify(root: Path, mode: FlushDiskType, acks: list[tuple[int, int, int]]) -> dict[str, Any]:
    """Open the store the cut left and judge it against the acknowledgements."""
    problems: list[str] = []
    if not root.exists():
        return {
            "acked": len(acks),
            "acked_lost": len(acks),
            "problems": ["no store directory"],
            "suffix_only": not acks,
            "recovered": 0,
        }
    store = MessageStore.open(trial_config(root, mode))
    try:
        problems += check_consistency(root, FILE_SIZE, end=store.max_physical_offset)
        log = scan_log(root, FILE_SIZE)
        by_offset = {off: (len(b), zlib.crc32(b)) for off, b in log.bodies.items()}
        lost = sorted(off for off, size, crc in acks if by_offset.get(off) != (size, crc))
        acked = {off: (size, crc) for off, size, crc in acks}
        for off, got in by_offset.items():
            want = acked.get(off)
            if want is not None and want != got:
                problems.append(f"record at {off} is not the message acknowledged there")
        first_lost = lost[0] if lost else None
        suffix_only = first_lost is None or (
            all(off >= first_lost for off in lost)
            and all(by_offset.get(off) == acked[off] for off in acked if off < first_lost)
        )
        after = store.put_message(Message("FlushLab", b"after the cut"))
        if after.status is not PutStatus.PUT_OK:
            problems.append(f"put after recovery returned {after.status}")
    finally:
        store.close()
    return {
        "acked": len(acks),
        "acked_lost": len(lost),
        "problems": problems[:5],
        "suffix_only": suffix_only,
        "recovered": len(log.records),
    }


def durability(
    work: Path,
    n_trials: int,
    seed: int,
    modes: tuple[FlushDiskType, ...] = (FlushDiskType.ASYNC_FLUSH, FlushDiskType.SYNC_FLUSH),
) -> dict[str, Any]:
    """``n_trials`` cuts per mode on the layer (modes interleaved), summed per mode."""
    trials: dict[str, list[dict[str, Any]]] = {m.value: [] for m in modes}
    with progress(n_trials * len(modes), "flush lab: power cuts on the FUSE layer") as bar:
        for i in range(n_trials):
            for mode in modes:
                d = work / f"fuse-{mode.value}-{i}"
                d.mkdir(parents=True)
                try:
                    trials[mode.value].append(trial(d, mode, seed * 1000 + i))
                finally:
                    shutil.rmtree(d, ignore_errors=True)
                bar.update(1)
    out: dict[str, Any] = {"layer": "fuse"}
    for mode in modes:
        ts = trials[mode.value]
        out[mode.value] = {
            "layer": "fuse",
            "trials": len(ts),
            "acked": sum(t["acked"] for t in ts),
            "acked_lost": sum(t["acked_lost"] for t in ts),
            "trials_with_acked_lost": sum(1 for t in ts if t["acked_lost"]),
            "not_suffix": sum(1 for t in ts if not t["suffix_only"]),
            "recovery_problems": sum(len(t["problems"]) for t in ts),
            "pending_pages": sum(t["pending_pages"] for t in ts),
            "kept_pages": sum(t["kept_pages"] for t in ts),
            "torn_pages": sum(t["torn_pages"] for t in ts),
            "per_trial": ts,
        }
    return out


def main(argv: list[str]) -> int:
    root, mode, seed = argv
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    _produce(Path(root), FlushDiskType(mode), int(seed))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
