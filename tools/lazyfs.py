"""A FUSE filesystem that forgets what no fsync covered: a power cut on a real lower layer.

The flush lab's model (:mod:`mqstore.tools.powerloss`) decides which pages of the store's
files survive from our own idea of the kernel. This layer takes the kernel's word instead:
the store runs on a FUSE mount, so its ``write()`` calls, its memory-mapped pages (through
the kernel's writeback and ``msync``), its ``fallocate``, ``rename``, ``unlink`` and
``fsync``/``fdatasync`` reach this process exactly as they would reach a disk's filesystem.
In the style of LazyFS, every operation passes through to a *live* backing directory, so
processes see a normal filesystem, while a second, *durable* image holds only what a sync
has covered:

* ``fsync``/``fdatasync`` of a file copies the pages written to it since its last sync (and
  its size) into the durable image of that file;
* ``fsync`` of a directory makes its current entries durable: files created, renamed or
  unlinked in it since then exist, move or vanish in the durable image only from then on
  (strict POSIX: a file whose directory was never synced may be gone after the cut even if
  its own data was synced);
* a *cut* freezes the durable image at that instant: later syncs never return (the machine
  is off, so nothing acknowledged after the cut can rest on them), and the image is written
  out as a directory tree: the disk after the outage. Optionally a random subset of the
  pages still pending is kept, some torn at 512-byte sector granularity, as a disk that
  wrote some of its queue before the power went does.

What it does not model: the disk's own volatile write cache (below this layer, a flush
that the device acknowledged is durable here), reordering inside one sync, and metadata
other than names and sizes (modes, times). Files are identified by an id of the layer's
own, so renames carry durable data with them and a reused inode number cannot mix files.

Run as a child process (:class:`Mount`); the parent talks to it over a Unix socket.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import random
import shutil
import socket
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

PAGE = 4096
SECTOR = 512
ROOT_ID = 1


class LayerUnavailable(Exception):
    """FUSE cannot be used on this machine (no /dev/fuse, fusermount or libfuse)."""


@dataclass(frozen=True, slots=True)
class CutPolicy:
    """What happens to writes still pending at the cut.

    ``keep`` is the probability that a pending page reached the disk anyway; a kept page
    is torn (only a random subset of its sectors written) with probability ``tear``.
    """

    keep: float = 0.0
    tear: float = 0.0
    seed: int = 0


@dataclass(frozen=True, slots=True)
class CutReport:
    """What a cut did: pages that were pending and their fate, files in the image."""

    pending_pages: int
    kept_pages: int
    torn_pages: int
    files: int
    syncs: int
    since_last_sync_s: float | None = None  # since the last sync of a commitlog/ file


@dataclass
class _Node:
    kind: str  # "file" or "dir"
    dirty: set[int] = field(default_factory=set)  # pages written since the last sync
    durable_size: int = 0
    entries: dict[str, int] = field(default_factory=dict)  # durable entries (dirs)


class DurableImage:
    """Bookkeeping of what survives a cut; no FUSE in here, so it is tested directly.

    ``live`` is the backing directory every operation is applied to; ``data`` holds one
    file per synced file id (its durable content). Not thread-safe: the caller serialises.
    """

    def __init__(self, live: Path, data: Path) -> None:
        self.live = live
        self.data = data
        self._next = ROOT_ID + 1
        self.nodes: dict[int, _Node] = {ROOT_ID: _Node("dir")}
        self.ids: dict[str, int] = {"/": ROOT_ID}  # live path -> id
        self.syncs = 0
        self.last_log_sync: float | None = None
        self._adopt("/")

    def _new(self, path: str, kind: str) -> int:
        ident = self._next
        self._next += 1
        self.nodes[ident] = _Node(kind)
        self.ids[path] = ident
        return ident

    def _adopt(self, path: str) -> None:
        """Everything already in the live directory at mount time is durable."""
        node = self.nodes[self.ids[path]]
        for entry in sorted(os.scandir(self.live_path(path)), key=lambda e: e.name):
            child = _join(path, entry.name)
            if entry.is_dir(follow_symlinks=False):
                ident = self._new(child, "dir")
                self._adopt(child)
            else:
                ident = self._new(child, "file")
                shutil.copyfile(entry.path, self.data / str(ident))
                self.nodes[ident].durable_size = entry.stat().st_size
            node.entries[entry.name] = ident

    def live_path(self, path: str) -> str:
        return os.path.join(self.live, path.lstrip("/"))

    # -- namespace changes: applied live; durable only through fsync of the directory
    def created(self, path: str, kind: str) -> int:
        return self._new(path, kind)

    def renamed(self, old: str, new: str) -> None:
        self.ids.pop(new, None)
        moved = {p: i for p, i in self.ids.items() if p == old or p.startswith(old + "/")}
        for p, i in moved.items():
            del self.ids[p]
            self.ids[new + p[len(old) :]] = i

    def removed(self, path: str) -> None:
        self.ids.pop(path, None)

    def id_of(self, path: str) -> int:
        ident = self.ids.get(path)
        if ident is None:  # a path we did not see created (should not happen)
            kind = "dir" if os.path.isdir(self.live_path(path)) else "file"
            ident = self._new(path, kind)
        return ident

    # -- data changes
    def wrote(self, ident: int, offset: int, length: int) -> None:
        if length > 0:
            self.nodes[ident].dirty.update(range(offset // PAGE, (offset + length - 1) // PAGE + 1))

    def resized(self, ident: int, old: int, new: int) -> None:
        """A truncate or fallocate: pages between the sizes change (zeroes or freed)."""
        lo, hi = min(old, new), max(old, new)
        if hi > lo:
            self.nodes[ident].dirty.update(range(lo // PAGE, (hi - 1) // PAGE + 1))

    # -- durability points
    def sync_file(self, ident: int, fd: int) -> None:
        """Copy the file's pending pages and size into its durable content."""
        node = self.nodes[ident]
        size = os.fstat(fd).st_size
        target = self.data / str(ident)
        with open(target, "r+b" if target.exists() else "w+b") as out:
            out.truncate(size)
            for page in sorted(node.dirty):
                start = page * PAGE
                if start >= size:
                    continue
                out.seek(start)
                out.write(os.pread(fd, min(PAGE, size - start), start))
            out.flush()
        node.dirty.clear()
        node.durable_size = size
        self.syncs += 1
        if any(i == ident and "/commitlog/" in p for p, i in self.ids.items()):
            self.last_log_sync = time.time()

    def sync_dir(self, path: str) -> None:
        """Make the directory's current entries durable."""
        node = self.nodes[self.id_of(path)]
        node.entries = {}
        for name in sorted(os.listdir(self.live_path(path))):
            node.entries[name] = self.id_of(_join(path, name))
        self.syncs += 1

    # -- the outage
    def write_image(self, out: Path, policy: CutPolicy) -> CutReport:
        """The disk after the cut, as a directory tree at ``out``."""
        since = None if self.last_log_sync is None else time.time() - self.last_log_sync
        rng = random.Random(policy.seed)
        counts = {"pending": 0, "kept": 0, "torn": 0, "files": 0}
        self._write_dir(ROOT_ID, out, "/", policy, rng, counts)
        return CutReport(
            counts["pending"], counts["kept"], counts["torn"], counts["files"], self.syncs, since
        )

    def _write_dir(
        self,
        ident: int,
        out: Path,
        path: str,
        policy: CutPolicy,
        rng: random.Random,
        counts: dict[str, int],
    ) -> None:
        out.mkdir(parents=True, exist_ok=True)
        live_by_id = {i: p for p, i in self.ids.items()}
        for name, child in sorted(self.nodes[ident].entries.items()):
            node = self.nodes[child]
            if node.kind == "dir":
                self._write_dir(child, out / name, _join(path, name), policy, rng, counts)
                continue
            counts["files"] += 1
            target = out / name
            source = self.data / str(child)
            if source.exists():
                shutil.copyfile(source, target)
            else:
                target.touch()
            live = live_by_id.get(child)
            if node.dirty and live is not None:
                self._pending_pages(node, self.live_path(live), target, policy, rng, counts)

    @staticmethod
    def _pending_pages(
        node: _Node,
        live: str,
        target: Path,
        policy: CutPolicy,
        rng: random.Random,
        counts: dict[str, int],
    ) -> None:
        """Pages written but not synced: each reached the disk, or not, or in part.

        Only within the file's durable size: a size change is metadata, durable only
        through a sync, and a page past the durable end would be unreachable anyway.
        """
        counts["pending"] += len(node.dirty)
        try:
            fd = os.open(live, os.O_RDONLY)
        except OSError:
            return
        try:
            with open(target, "r+b") as out:
                for page in sorted(node.dirty):
                    if rng.random() >= policy.keep or page * PAGE >= node.durable_size:
                        continue
                    data = os.pread(fd, min(PAGE, node.durable_size - page * PAGE), page * PAGE)
                    torn = rng.random() < policy.tear
                    counts["kept"] += 1
                    counts["torn"] += torn
                    for s in range(0, len(data), SECTOR):
                        if not torn or rng.random() < 0.5:
                            out.seek(page * PAGE + s)
                            out.write(data[s : s + SECTOR])
        finally:
            os.close(fd)


def _join(parent: str, name: str) -> str:
    return "/" + name if parent == "/" else f"{parent}/{name}"


def _attrs(st: os.stat_result) -> dict[str, Any]:
    keys = (
        "st_mode",
        "st_nlink",
        "st_uid",
        "st_gid",
        "st_size",
        "st_blocks",
        "st_blksize",
        "st_atime",
        "st_mtime",
        "st_ctime",
    )
    return {k: getattr(st, k) for k in keys}


def _operations(image: DurableImage) -> Any:
    """The FUSE operations over ``image`` (built lazily: mfusepy loads libfuse on import)."""
    import mfusepy

    class LazyOps(mfusepy.Operations):  # type: ignore[misc]
        use_ns = True

        def __init__(self) -> None:
            self.lock = threading.Lock()
            self.fh_ids: dict[int, int] = {}
            self.off = threading.Event()  # set at the cut; never cleared

        def _live(self, path: str) -> str:
            return image.live_path(path)

        def getattr(self, path: str, fh: int | None = None) -> dict[str, Any]:
            return _attrs(os.lstat(self._live(path)))

        def readdir(self, path: str, fh: int) -> list[str]:
            return [".", "..", *os.listdir(self._live(path))]

        def statfs(self, path: str) -> dict[str, int]:
            sv = os.statvfs(self._live(path))
            keys = (
                "f_bavail",
                "f_bfree",
                "f_blocks",
                "f_bsize",
                "f_favail",
                "f_ffree",
                "f_files",
                "f_flag",
                "f_frsize",
                "f_namemax",
            )
            return {k: getattr(sv, k) for k in keys}

        def access(self, path: str, amode: int) -> int:
            return 0

        def chmod(self, path: str, mode: int) -> int:
            os.chmod(self._live(path), mode)
            return 0

        def chown(self, path: str, uid: int, gid: int) -> int:
            os.chown(self._live(path), uid, gid)
            return 0

        def utimens(self, path: str, times: tuple[int, int] | None = None) -> int:
            if times is None:
                os.utime(self._live(path))
            else:
                os.utime(self._live(path), ns=times)
            return 0

        def mkdir(self, path: str, mode: int) -> int:
            with self.lock:
                os.mkdir(self._live(path), mode)
                image.created(path, "dir")
            return 0

        def rmdir(self, path: str) -> int:
            with self.lock:
                os.rmdir(self._live(path))
                image.removed(path)
            return 0

        def unlink(self, path: str) -> int:
            with self.lock:
                os.unlink(self._live(path))
                image.removed(path)
            return 0

        def rename(self, old: str, new: str) -> int:
            with self.lock:
                os.rename(self._live(old), self._live(new))
                image.renamed(old, new)
            return 0

        def create(self, path: str, mode: int, fi: Any = None) -> int:
            with self.lock:
                fd = os.open(self._live(path), os.O_RDWR | os.O_CREAT, mode)
                self.fh_ids[fd] = image.created(path, "file")
            return fd

        def open(self, path: str, flags: int) -> int:
            with self.lock:
                ident = image.id_of(path)
                old = os.stat(self._live(path)).st_size
                fd = os.open(self._live(path), flags & ~(os.O_CREAT | os.O_EXCL))
                if flags & os.O_TRUNC:
                    image.resized(ident, old, 0)
                self.fh_ids[fd] = ident
            return fd

        def release(self, path: str, fh: int) -> int:
            with self.lock:
                self.fh_ids.pop(fh, None)
                os.close(fh)
            return 0

        def flush(self, path: str, fh: int) -> int:
            return 0

        def read(self, path: str, size: int, offset: int, fh: int) -> bytes:
            return os.pread(fh, size, offset)

        def write(self, path: str, data: bytes, offset: int, fh: int) -> int:
            with self.lock:
                n = os.pwrite(fh, data, offset)
                image.wrote(self.fh_ids[fh], offset, n)
            return n

        def truncate(self, path: str, length: int, fh: int | None = None) -> int:
            with self.lock:
                old = os.stat(self._live(path)).st_size
                os.truncate(self._live(path) if fh is None else fh, length)
                image.resized(image.id_of(path), old, length)
            return 0

        def fallocate(self, path: str, mode: int, offset: int, size: int, fh: int) -> int:
            if mode != 0:
                return -errno.EOPNOTSUPP
            with self.lock:
                old = os.fstat(fh).st_size
                os.posix_fallocate(fh, offset, size)
                image.resized(self.fh_ids[fh], old, max(old, offset + size))
            return 0

        # After the cut a sync fails: nothing can be acknowledged on it. (Blocking it
        # instead would pin libfuse's worker threads and leave the killed producer in
        # uninterruptible sleep on its final close.)
        def fsync(self, path: str, datasync: int, fh: int) -> int:
            with self.lock:
                if self.off.is_set():
                    return -errno.EIO
                image.sync_file(self.fh_ids[fh], fh)
            return 0

        def fsyncdir(self, path: str, datasync: int, fh: int) -> int:
            with self.lock:
                if self.off.is_set():
                    return -errno.EIO
                image.sync_dir(path)
            return 0

    return LazyOps()


def _control(ops: Any, image: DurableImage, sock_path: str) -> None:
    """Answer the parent's commands, one JSON line each: ``cut`` and ``stats``."""
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(sock_path)
    server.listen(1)
    while True:
        conn, _ = server.accept()
        with conn, conn.makefile("rwb") as f:
            for line in f:
                req = json.loads(line)
                if req["cmd"] == "cut":
                    with ops.lock:
                        ops.off.set()
                        policy = CutPolicy(req["keep"], req["tear"], req["seed"])
                        report = image.write_image(Path(req["out"]), policy)
                    reply: dict[str, Any] = {
                        "pending_pages": report.pending_pages,
                        "kept_pages": report.kept_pages,
                        "torn_pages": report.torn_pages,
                        "files": report.files,
                        "syncs": report.syncs,
                        "since_last_sync_s": report.since_last_sync_s,
                    }
                else:
                    with ops.lock:
                        reply = {"syncs": image.syncs}
                f.write(json.dumps(reply).encode() + b"\n")
                f.flush()


def serve(live: Path, data: Path, mount: Path, control: str) -> None:
    """Mount the layer at ``mount`` over ``live`` and serve until unmounted (foreground)."""
    import mfusepy

    image = DurableImage(live, data)
    ops = _operations(image)
    threading.Thread(target=_control, args=(ops, image, control), daemon=True).start()
    mfusepy.FUSE(ops, str(mount), foreground=True, nothreads=False, fsname="lazyfs")


def unavailable_reason() -> str | None:
    """Why the layer cannot run here, or None when it can."""
    if not os.path.exists("/dev/fuse"):
        return "no /dev/fuse on this machine"
    if not (shutil.which("fusermount3") or shutil.which("fusermount")):
        return "fusermount not found (install the fuse3 package)"
    try:
        import mfusepy  # noqa: F401
    except (ImportError, OSError) as e:
        return f"libfuse or mfusepy not usable: {e}"
    return None


class Mount:
    """The layer in a child process, mounted at ``self.path`` for the life of the context.

    ``cut(out)`` is the power cut: it returns once the disk after the outage is a directory
    tree at ``out``. Kill the processes that use the mount before leaving the context.
    """

    def __init__(self, work: Path) -> None:
        self.work = Path(work)
        self.path = self.work / "mnt"
        self._live = self.work / "live"
        self._data = self.work / "data"
        self._control = str(self.work / "control.sock")
        self._proc: subprocess.Popen[bytes] | None = None

    def __enter__(self) -> Mount:
        reason = unavailable_reason()
        if reason is not None:
            raise LayerUnavailable(reason)
        for d in (self.path, self._live, self._data):
            d.mkdir(parents=True, exist_ok=True)
        self._proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "mqstore.tools.lazyfs",
                str(self._live),
                str(self._data),
                str(self.path),
                self._control,
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        deadline = time.monotonic() + 15
        while not (os.path.ismount(self.path) and os.path.exists(self._control)):
            if self._proc.poll() is not None or time.monotonic() > deadline:
                err = self._proc.stderr.read().decode(errors="replace") if self._proc.stderr else ""
                self._stop()
                raise LayerUnavailable(f"the FUSE layer did not mount: {err.strip()[-300:]}")
            time.sleep(0.01)
        return self

    def _request(self, req: dict[str, Any]) -> dict[str, Any]:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
            s.connect(self._control)
            s.sendall(json.dumps(req).encode() + b"\n")
            with s.makefile("rb") as f:
                reply: dict[str, Any] = json.loads(f.readline())
        return reply

    def cut(self, out: Path, policy: CutPolicy = CutPolicy()) -> CutReport:
        """Power off: freeze the durable image and write it to ``out``."""
        r = self._request(
            {
                "cmd": "cut",
                "out": str(out),
                "keep": policy.keep,
                "tear": policy.tear,
                "seed": policy.seed,
            }
        )
        return CutReport(
            r["pending_pages"],
            r["kept_pages"],
            r["torn_pages"],
            r["files"],
            r["syncs"],
            r["since_last_sync_s"],
        )

    def syncs(self) -> int:
        """How many fsync/fdatasync/directory syncs the layer has served."""
        return int(self._request({"cmd": "stats"})["syncs"])

    def _stop(self) -> None:
        tool = shutil.which("fusermount3") or shutil.which("fusermount") or "fusermount"
        if os.path.ismount(self.path):
            subprocess.run(
                [tool, "-u", "-z", str(self.path)],
                check=False,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
        if self._proc is not None:
            self._proc.kill()
            self._proc.wait()
            if self._proc.stderr is not None:
                self._proc.stderr.close()
            self._proc = None

    def __exit__(self, *exc: object) -> None:
        self._stop()
        with contextlib.suppress(OSError):
            shutil.rmtree(self._live)
            shutil.rmtree(self._data)


def main(argv: list[str]) -> int:
    live, data, mount, control = argv
    serve(Path(live), Path(data), Path(mount), control)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
