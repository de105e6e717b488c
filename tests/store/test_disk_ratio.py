"""The disk guard's used ratio is RocketMQ 4.9.8's (``UtilAll.getDiskPartitionSpaceUsedPercent``).

used / (used + usable), usable = ``f_bavail`` (root's reserved blocks left out), rounded
up to a whole percent. Measured on a real ext4 loop filesystem made with 40 % reserved
blocks, where ``(blocks - free) / blocks`` (the old formula) says about half of what
RocketMQ says; GNU ``df``'s Use% is the same formula as RocketMQ's and is the oracle.
Needs root (mount); skips elsewhere.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from mqstore import Message, PutStatus
from mqstore.cleanup import disk_used_ratio
from tests.helpers import make_store, mounted_tmpfs


@pytest.fixture
def reserved_ext4(tmp_path: Path) -> Iterator[Path]:
    """A 16 MiB ext4 with 40 % of its blocks reserved for root, mounted under tmp_path."""
    if shutil.which("mkfs.ext4") is None:
        pytest.skip("no mkfs.ext4 here")
    image = tmp_path / "disk.img"
    with open(image, "wb") as f:
        f.truncate(16 * 1024 * 1024)
    made = subprocess.run(
        ["mkfs.ext4", "-q", "-F", "-m", "40", str(image)],
        capture_output=True,
        text=True,
        check=False,
    )
    if made.returncode != 0:
        pytest.skip(f"mkfs.ext4 failed: {made.stderr.strip()}")
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    mounted = subprocess.run(
        ["mount", "-o", "loop", str(image), str(mnt)], capture_output=True, text=True, check=False
    )
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a loop filesystem here: {mounted.stderr.strip()}")
    try:
        yield mnt
    finally:
        subprocess.run(["umount", str(mnt)], check=False)


def _fill(path: Path, nbytes: int) -> None:
    with open(path, "wb") as f:
        f.write(bytes(nbytes))
        f.flush()
        os.fsync(f.fileno())


def _df_percent(path: Path) -> float:
    out = subprocess.run(
        ["df", "--output=pcent", str(path)], capture_output=True, text=True, check=True
    ).stdout.split()
    return int(out[-1].rstrip("%")) / 100


def _blocks_formula(path: Path) -> float:
    st = os.statvfs(path)
    return (st.f_blocks - st.f_bfree) / st.f_blocks


def test_ratio_on_a_disk_with_reserved_blocks_counts_them_as_unavailable(reserved_ext4: Path):
    _fill(reserved_ext4 / "filler", 7 * 1024 * 1024)
    ratio = disk_used_ratio(reserved_ext4)
    assert ratio == _df_percent(reserved_ext4)
    assert ratio - _blocks_formula(reserved_ext4) > 0.3  # the formulas really differ here


def test_ratio_is_rounded_up_to_a_whole_percent_on_tmpfs(tmp_path: Path):
    with mounted_tmpfs(tmp_path, "4m") as mnt:
        _fill(mnt / "filler", 1_000_000)  # 245 of 1024 pages: 23.9 %
        assert disk_used_ratio(mnt) == _df_percent(mnt) == 0.24
        assert _blocks_formula(mnt) < 0.24


def test_store_refuses_puts_once_only_reserved_blocks_are_left(reserved_ext4: Path):
    # 16 MiB, 40 % reserved: ~9 MiB usable. 8.6 MiB used is ~55 % of the blocks, but
    # 95 %+ of what a non-root writer may use: RocketMQ says disk full (> 90 %).
    s = make_store(reserved_ext4 / "store", commitlog_file_size=64 * 1024)
    try:
        assert s.put_message(Message(topic="t", body=b"before")).status is PutStatus.PUT_OK
        st = os.statvfs(reserved_ext4)
        usable = st.f_bavail * st.f_frsize
        _fill(reserved_ext4 / "filler", usable - 200 * 1024)
        assert _blocks_formula(reserved_ext4) < 0.9
        assert s.check_disk() > 0.9
        refused = s.put_message(Message(topic="t", body=b"after"))
        assert refused.status is PutStatus.SERVICE_NOT_AVAILABLE
        assert refused.error is not None and "disk full" in refused.error
    finally:
        s.close()
