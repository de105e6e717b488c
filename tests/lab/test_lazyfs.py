"""The power-cut layer itself (not the store): what survives a cut is what a sync covered."""

from __future__ import annotations

import mmap
import os
from pathlib import Path

from mqstore.tools.lazyfs import PAGE, CutPolicy, Mount


def _sync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _new_file(mount: Mount, name: str, data: bytes = b"") -> int:
    """A file whose directory entry is durable (the directory synced after creation)."""
    fd = os.open(mount.path / name, os.O_RDWR | os.O_CREAT, 0o644)
    _sync_dir(mount.path)
    if data:
        os.write(fd, data)
    return fd


def test_a_write_without_fsync_is_gone_after_a_cut(lazy_mount: Mount, tmp_path: Path) -> None:
    fd = _new_file(lazy_mount, "f", b"synced")
    os.fdatasync(fd)
    os.write(fd, b"+unsynced")
    lazy_mount.cut(tmp_path / "img")
    os.close(fd)
    assert (tmp_path / "img" / "f").read_bytes() == b"synced"


def test_a_write_with_fdatasync_survives_a_cut(lazy_mount: Mount, tmp_path: Path) -> None:
    fd = _new_file(lazy_mount, "f", b"a" * 10_000)
    os.pwrite(fd, b"b" * 100, 5000)
    os.fdatasync(fd)
    lazy_mount.cut(tmp_path / "img")
    os.close(fd)
    assert (tmp_path / "img" / "f").read_bytes() == b"a" * 5000 + b"b" * 100 + b"a" * 4900


def test_a_synced_file_whose_directory_was_not_synced_vanishes(
    lazy_mount: Mount, tmp_path: Path
) -> None:
    fd = os.open(lazy_mount.path / "new", os.O_RDWR | os.O_CREAT, 0o644)
    os.write(fd, b"data")
    os.fsync(fd)
    lazy_mount.cut(tmp_path / "img")
    os.close(fd)
    assert not (tmp_path / "img" / "new").exists()


def test_a_rename_is_durable_only_once_its_directory_is_synced(
    lazy_mount: Mount, tmp_path: Path
) -> None:
    fd = _new_file(lazy_mount, "old", b"content")
    os.fsync(fd)
    os.close(fd)
    os.rename(lazy_mount.path / "old", lazy_mount.path / "renamed")
    lazy_mount.cut(tmp_path / "img")
    assert sorted(os.listdir(tmp_path / "img")) == ["old"]
    assert (tmp_path / "img" / "old").read_bytes() == b"content"


def test_an_unlink_without_a_directory_sync_leaves_the_file(
    lazy_mount: Mount, tmp_path: Path
) -> None:
    fd = _new_file(lazy_mount, "doomed", b"still here")
    os.fsync(fd)
    os.close(fd)
    os.unlink(lazy_mount.path / "doomed")
    lazy_mount.cut(tmp_path / "img")
    assert (tmp_path / "img" / "doomed").read_bytes() == b"still here"


def _mmap_write_then_cut(lazy_mount: Mount, image: Path, *, msync: bool) -> bytes:
    """Write ``hello`` at page 1 of a synced 4-page file through a mapping (with or
    without ``msync``), cut the power while it is mapped; the file in the image."""
    fd = _new_file(lazy_mount, "m")
    os.ftruncate(fd, 4 * PAGE)
    os.fsync(fd)
    with mmap.mmap(fd, 4 * PAGE) as mm:
        mm[PAGE : PAGE + 5] = b"hello"
        if msync:
            mm.flush()  # msync(MS_SYNC): the kernel writes the page back, then fsyncs
        lazy_mount.cut(image)
    os.close(fd)
    return (image / "m").read_bytes()


def test_an_mmap_write_followed_by_msync_survives(lazy_mount: Mount, tmp_path: Path) -> None:
    data = _mmap_write_then_cut(lazy_mount, tmp_path / "img", msync=True)
    assert len(data) == 4 * PAGE and data[PAGE : PAGE + 5] == b"hello"


def test_an_mmap_write_without_msync_is_lost(lazy_mount: Mount, tmp_path: Path) -> None:
    data = _mmap_write_then_cut(lazy_mount, tmp_path / "img", msync=False)
    assert data == bytes(4 * PAGE)


def test_a_sync_after_the_cut_fails_so_nothing_is_acknowledged_on_it(
    lazy_mount: Mount, tmp_path: Path
) -> None:
    fd = _new_file(lazy_mount, "f", b"x")
    lazy_mount.cut(tmp_path / "img")
    try:
        os.fdatasync(fd)
    except OSError as e:
        assert e.errno == 5  # EIO
    else:
        raise AssertionError("a sync after the power cut succeeded")
    finally:
        os.close(fd)


def test_pending_pages_kept_by_the_policy_reach_the_image_torn_at_sector_granularity(
    lazy_mount: Mount, tmp_path: Path
) -> None:
    fd = _new_file(lazy_mount, "t", bytes(8 * PAGE))
    os.fsync(fd)
    os.pwrite(fd, b"\xff" * (8 * PAGE), 0)
    report = lazy_mount.cut(tmp_path / "img", CutPolicy(keep=1.0, tear=1.0, seed=3))
    os.close(fd)
    data = (tmp_path / "img" / "t").read_bytes()
    assert report.pending_pages == 8 and report.kept_pages == 8 and report.torn_pages == 8
    sectors = {data[i : i + 512] for i in range(0, len(data), 512)}
    assert sectors == {b"\xff" * 512, bytes(512)}  # whole sectors, some written, some not
