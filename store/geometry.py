"""A store's geometry: CommitLog segment size, consume-queue file size, index slots and entries.

RocketMQ does not record these sizes anywhere in the store: a broker runs with
``mappedFileSizeCommitLog``, ``mappedFileSizeConsumeQueue``, ``maxHashSlotNum`` and
``maxIndexNum`` from its config, and every file it writes has that shape. Opening a
store with other sizes fails (or, for a rebuild, writes files the broker cannot use),
so each size is taken, in this order, from:

1. **the files** (:func:`detect`): files are pre-allocated at full size and named by
   their start offset, so a segment or consume-queue file's length is the size, and
   names (multiples of it, consecutive ones one size apart) confirm it; an index
   file's length is ``40 + 4 * slots + 20 * entries`` and its header and last entry
   pin the split (:func:`index_geometry_of`);
2. **the broker's config** (``broker.conf``, Java properties; :func:`read_broker_config`);
3. **flags** (what the caller set);
4. RocketMQ's defaults.

Two sources that both say something and disagree are an error
(:class:`~mqstore.errors.GeometryError`), as are files that contradict each other or
do not show a size that only they could (index files without entries whose size is
not the configured one): the answer is never a guess. :class:`StoreGeometry` says
which source each size came from.
"""

from __future__ import annotations

import enum
import itertools
import logging
import mmap
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Final

from mqstore.commitlog import format as fmt
from mqstore.config import StoreConfig, size_given
from mqstore.consumequeue import format as cqfmt
from mqstore.errors import GeometryError
from mqstore.index import format as ifmt

FIELDS: Final = (
    "commitlog_file_size",
    "mapped_file_size_consume_queue",
    "max_hash_slot_num",
    "max_index_num",
)
"""The StoreConfig fields that make up a store's geometry."""

BROKER_CONFIG_KEYS: Final = {
    "mappedFileSizeCommitLog": "commitlog_file_size",
    "mappedFileSizeConsumeQueue": "mapped_file_size_consume_queue",
    "maxHashSlotNum": "max_hash_slot_num",
    "maxIndexNum": "max_index_num",
}
"""``MessageStoreConfig`` property names in a broker.conf -> StoreConfig fields."""

_DIGITS20: Final = 20

log = logging.getLogger(__name__)

_DEFAULT_SEGMENT: Final = int(StoreConfig().commitlog_file_size)
_DEFAULT_SLOTS: Final = int(StoreConfig().max_hash_slot_num)
_DEFAULT_ENTRIES: Final = int(StoreConfig().max_index_num)


@dataclass(frozen=True, slots=True)
class StoreGeometry:
    """The four sizes of a store, each with its source."""

    commitlog_file_size: Setting
    mapped_file_size_consume_queue: Setting
    max_hash_slot_num: Setting
    max_index_num: Setting

    def settings(self) -> dict[str, Setting]:
        """Field name -> setting, in :data:`FIELDS` order."""
        return {name: getattr(self, name) for name in FIELDS}

    def apply(self, cfg: StoreConfig) -> StoreConfig:
        """``cfg`` with these sizes."""
        return replace(
            cfg,
            commitlog_file_size=self.commitlog_file_size.value,
            mapped_file_size_consume_queue=self.mapped_file_size_consume_queue.value,
            max_hash_slot_num=self.max_hash_slot_num.value,
            max_index_num=self.max_index_num.value,
        )

    def describe(self) -> str:
        """One line: every size and its source."""
        s = self.settings()
        cl, cq = s["commitlog_file_size"], s["mapped_file_size_consume_queue"]
        slots, num = s["max_hash_slot_num"], s["max_index_num"]
        index_src = _joined_sources(slots, num)
        return (
            f"CommitLog segments {cl.value} bytes ({cl.source.value}), consume-queue files "
            f"{cq.value} bytes ({cq.source.value}), index files {slots.value} slots x "
            f"{num.value} entries ({index_src})"
        )

    def report(self) -> dict[str, dict[str, object]]:
        """JSON-ready: field -> {value, source, evidence}."""
        return {
            name: {"value": s.value, "source": s.source.value, "evidence": s.evidence}
            for name, s in self.settings().items()
        }


@dataclass(frozen=True, slots=True)
class Setting:
    """One size, where it came from, and the evidence (a file count, a config key)."""

    value: int
    source: Source
    evidence: str = ""


class Source(enum.Enum):
    """Where a size came from."""

    FILES = "files"
    """Read from the store's own files (a segment's length, an index file's header)."""
    BROKER_CONFIG = "broker config"
    """A ``broker.conf`` property (``mapedFileSizeCommitLog`` and the like)."""
    FLAGS = "flags"
    """Given by the caller (command-line options or a ``StoreConfig``)."""
    DEFAULT = "default"
    """RocketMQ's default, when nothing else says."""


def _joined_sources(a: Setting, b: Setting) -> str:
    return a.source.value if a.source is b.source else f"{a.source.value}/{b.source.value}"


# --------------------------------------------------------------------------- files


def _offset_files(directory: Path) -> list[Path]:
    """Files named by a 20-digit offset, sorted; a zero-length last one (a crash while
    creating it, which loading deletes) left out."""
    if not directory.is_dir():
        return []
    files = sorted(p for p in directory.iterdir() if len(p.name) == _DIGITS20 and p.name.isdigit())
    files = [p for p in files if p.is_file()]
    if files and files[-1].stat().st_size == 0:
        files.pop()
    return files


def _size_of_run(files: list[Path], what: str) -> tuple[int, str] | None:
    """The file size of one run of offset-named files (one CommitLog, or one queue).

    Every file has the size; names are multiples of it and consecutive names one size
    apart. A lone file that is not full yet is its own evidence only once its records
    confirm it (:func:`_segment_ends_cleanly`, CommitLog only; queues pass None).

    Raises:
        GeometryError: the files disagree with each other.
    """
    if not files:
        return None
    sizes = {p.stat().st_size for p in files}
    if len(sizes) != 1:
        detail = ", ".join(f"{p.name}: {p.stat().st_size}" for p in files[:6])
        raise GeometryError(f"{what}: files of different sizes ({detail}); give the size")
    size = sizes.pop()
    for p in files:
        if int(p.name) % size:
            raise GeometryError(f"{what}: {p.name} is not a multiple of the file size {size}")
    for a, b in itertools.pairwise(files):
        if int(b.name) - int(a.name) != size:
            raise GeometryError(
                f"{what}: {a.name} and {b.name} are not one file size ({size}) apart"
            )
    return size, f"{len(files)} file(s) of {size} bytes"


def commitlog_size(commitlog_dir: Path) -> tuple[int, str] | None:
    """(segment size, evidence) the CommitLog's files show, or None without files.

    Raises:
        GeometryError: files of different sizes or misplaced names, or a lone segment
            whose records run past its end (a truncated file: its length is not the size).
    """
    files = _offset_files(commitlog_dir)
    found = _size_of_run(files, str(commitlog_dir))
    if found is None or len(files) > 1 or found[0] == _DEFAULT_SEGMENT:
        return found  # a lone file of RocketMQ's default size needs no walk to agree
    if not _segment_ends_cleanly(files[0]):
        raise GeometryError(
            f"{files[0]}: the only CommitLog file's records do not end inside it as a "
            f"segment's do; its length {found[0]} cannot be taken as the segment size"
        )
    return found


def _segment_ends_cleanly(path: Path) -> bool:
    """False when ``path`` looks cut short: a record that runs past its end, or records
    that reach its end without the end-of-file blank (a writer always leaves >= 8
    bytes, and a blank names the rest of the file). A walk that ends at zeros, at a
    blank that reaches the last byte, or at bytes that are no record (a torn or damaged
    tail, which recovery cuts; not a sign of a shorter file) finds nothing against it.
    """
    size = path.stat().st_size
    if size < fmt.END_FILE_MIN_BLANK_LENGTH:
        return False
    with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as mm:
        pos = 0
        while pos + fmt.END_FILE_MIN_BLANK_LENGTH <= size:
            total = int.from_bytes(mm[pos : pos + 4], "big", signed=True)
            magic = int.from_bytes(mm[pos + 4 : pos + 8], "big", signed=True)
            if magic == fmt.BLANK_MAGIC:
                return pos + total == size
            if magic not in (fmt.MAGIC_V1, fmt.MAGIC_V2) or total <= 0:
                return True  # zeros, or no record here: the length is not in question
            if pos + total + fmt.END_FILE_MIN_BLANK_LENGTH > size:
                return False
            pos += total
        return False


def consume_queue_size(cq_root: Path) -> tuple[int, str] | None:
    """(consume-queue file size, evidence) the queues' files show, or None without files.

    Raises:
        GeometryError: files of different sizes, misplaced names, or a size that is
            not whole 20-byte units.
    """
    sizes: dict[int, int] = {}
    if not cq_root.is_dir():
        return None
    for topic_dir in sorted(p for p in cq_root.iterdir() if p.is_dir()):
        for qdir in sorted(p for p in topic_dir.iterdir() if p.is_dir() and p.name.isdigit()):
            found = _size_of_run(_offset_files(qdir), str(qdir))
            if found is not None:
                sizes[found[0]] = sizes.get(found[0], 0) + len(_offset_files(qdir))
    if not sizes:
        return None
    if len(sizes) != 1:
        raise GeometryError(f"{cq_root}: queues with different file sizes {sorted(sizes)}")
    size, count = sizes.popitem()
    if size % cqfmt.UNIT_SIZE:
        raise GeometryError(f"{cq_root}: file size {size} is not whole 20-byte units")
    return size, f"{count} file(s) of {size} bytes"


# --------------------------------------------------------------------------- index


def _index_files(index_dir: Path) -> list[Path]:
    if not index_dir.is_dir():
        return []
    files = sorted(
        p
        for p in index_dir.iterdir()
        if len(p.name) == ifmt.NAME_LENGTH and p.name.isdigit() and p.is_file()
    )
    if files and files[-1].stat().st_size == 0:
        files.pop()
    return files


def index_geometry_of(path: Path, hints: Iterable[tuple[int, int]] = ()) -> set[tuple[int, int]]:
    """Every (slots, entries) that fits index file ``path``; empty when it has no entries.

    The file is ``40 + 4 * slots + 20 * entries`` bytes, and the last entry (number
    ``indexCount - 1``) holds the header's end offset, its key hash lands in a slot
    that points back at it. A split that passes that check is the answer when it is
    the full-file split (a full file's header count is ``entries``: RocketMQ writes
    while ``indexCount < indexNum``) or one of ``hints`` of the file's size (the
    defaults, another file's answer). Otherwise every place the end offset's 8 bytes
    occur gives a candidate, kept when it passes the check and the used slots number
    the header's hashSlotCount (a scan of the file: slow for large files, rare).
    """
    size = path.stat().st_size
    rest = size - ifmt.HEADER_SIZE
    if rest <= 0 or rest % ifmt.SLOT_SIZE:
        return set()
    with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as mm:
        h = ifmt.read_header(mm)
        if h.index_count < 2:
            return set()
        full = rest - h.index_count * ifmt.ENTRY_SIZE
        quick = [full // ifmt.SLOT_SIZE] if full > 0 and full % ifmt.SLOT_SIZE == 0 else []
        quick += [s for s, n in hints if ifmt.file_size(s, n) == size]
        for slots in quick:
            if _entries(rest, slots) >= h.index_count and _points_back(mm, h, slots):
                return {(slots, _entries(rest, slots))}
        return {
            (slots, _entries(rest, slots))
            for slots in _slot_candidates(mm, h)
            if _entries(rest, slots) >= h.index_count
            and _points_back(mm, h, slots)
            and _used_slots(mm, slots) == h.hash_slot_count
        }


def _entries(rest: int, slots: int) -> int:
    return (rest - slots * ifmt.SLOT_SIZE) // ifmt.ENTRY_SIZE


def _slot_candidates(mm: mmap.mmap, h: ifmt.Header) -> Iterable[int]:
    """Slot counts that put the last entry's offset field on the header's end offset."""
    needle = h.end_phy_offset.to_bytes(8, "big", signed=True)
    base = ifmt.HEADER_SIZE + (h.index_count - 1) * ifmt.ENTRY_SIZE + 4  # after keyHash
    at = mm.find(needle, base)
    while at >= 0:
        room = at - base
        if room > 0 and room % ifmt.SLOT_SIZE == 0:
            yield room // ifmt.SLOT_SIZE
        at = mm.find(needle, at + 1)


def _points_back(mm: mmap.mmap, h: ifmt.Header, slots: int) -> bool:
    """The last entry under this split holds the end offset, links backwards, and its
    key hash's slot points at it."""
    last = h.index_count - 1
    at = ifmt.entry_position(slots, last)
    if at + ifmt.ENTRY_SIZE > len(mm):
        return False
    e = ifmt.Entry(*ifmt.ENTRY.unpack_from(mm, at))
    if e.phy_offset != h.end_phy_offset or not 0 <= e.prev_index < last or e.key_hash < 0:
        return False
    (pointer,) = ifmt.SLOT.unpack_from(mm, ifmt.slot_position(e.key_hash % slots))
    return bool(pointer == last)


def _used_slots(mm: mmap.mmap, slots: int) -> int:
    table = mm[ifmt.HEADER_SIZE : ifmt.HEADER_SIZE + slots * ifmt.SLOT_SIZE]
    return slots - memoryview(table).cast("i").tolist().count(0)


def index_geometry(index_dir: Path) -> tuple[tuple[int, int], str] | tuple[None, str] | None:
    """((slots, entries), evidence) the index files show; (None, why) when files exist
    but do not show it; None without files.

    Raises:
        GeometryError: files of different sizes, or files whose entries fit
            different geometries.
    """
    files = _index_files(index_dir)
    if not files:
        return None
    sizes = {p.stat().st_size for p in files}
    if len(sizes) != 1:
        raise GeometryError(f"{index_dir}: index files of different sizes {sorted(sizes)}")
    common: set[tuple[int, int]] | None = None
    hints = [(_DEFAULT_SLOTS, _DEFAULT_ENTRIES)]
    for p in files:
        fits = index_geometry_of(p, hints)
        if fits:
            common = fits if common is None else common & fits
            if not common:
                raise GeometryError(f"{index_dir}: the index files fit no common geometry")
            hints = sorted(common)
    size = sizes.pop()
    if common is None:
        return None, f"{len(files)} index file(s) of {size} bytes without entries"
    if len(common) > 1:
        return None, f"{len(files)} index file(s) of {size} bytes fit {sorted(common)}"
    return common.pop(), f"{len(files)} file(s) of {size} bytes, header and entries"


# --------------------------------------------------------------------------- sources


def read_broker_config(path: str | os.PathLike[str]) -> dict[str, int]:
    """The geometry a broker.conf sets (Java properties; other keys ignored).

    Raises:
        GeometryError: the file cannot be read, or a size is not a positive integer.
    """
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as e:
        raise GeometryError(f"cannot read broker config {path}: {e.strerror or e}") from None
    out: dict[str, int] = {}
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line[0] in "#!":
            continue
        key, sep, value = _split_property(line)
        field = BROKER_CONFIG_KEYS.get(key)
        if field is None or not sep:
            continue
        try:
            out[field] = int(value.strip())
        except ValueError:
            raise GeometryError(f"{path}: {key}={value.strip()!r} is not an integer") from None
        if out[field] <= 0:
            raise GeometryError(f"{path}: {key} must be positive, got {out[field]}")
    return out


def _split_property(line: str) -> tuple[str, str, str]:
    for i, c in enumerate(line):
        if c in "=:":
            return line[:i].strip(), c, line[i + 1 :]
        if c.isspace():
            rest = line[i:].lstrip()
            if rest[:1] in ("=", ":"):
                rest = rest[1:]
            return line[:i], " ", rest
    return line, "", ""


def detect(
    root: str | os.PathLike[str],
    commitlog_dir: str | os.PathLike[str] | None = None,
    fields: Iterable[str] = FIELDS,
) -> dict[str, tuple[int, str]]:
    """What the store's own files show for ``fields``: field -> (value, evidence).

    A field is missing when no file shows it (no files of that kind, or index files
    without entries). Only the kinds of file ``fields`` need are read.

    Raises:
        GeometryError: files that contradict each other.
    """
    root, wanted = Path(root), set(fields)
    out: dict[str, tuple[int, str]] = {}
    if "commitlog_file_size" in wanted:
        cl = commitlog_size(Path(commitlog_dir) if commitlog_dir else root / "commitlog")
        if cl is not None:
            out["commitlog_file_size"] = cl
    if "mapped_file_size_consume_queue" in wanted:
        cq = consume_queue_size(root / "consumequeue")
        if cq is not None:
            out["mapped_file_size_consume_queue"] = cq
    if wanted & {"max_hash_slot_num", "max_index_num"}:
        idx = index_geometry(root / "index")
        if idx is not None and idx[0] is not None:
            (slots, num), why = idx
            out["max_hash_slot_num"] = (slots, why)
            out["max_index_num"] = (num, why)
    return out


def resolve(
    root: str | os.PathLike[str],
    *,
    flags: Mapping[str, int | None] | None = None,
    broker_config: str | os.PathLike[str] | None = None,
    commitlog_dir: str | os.PathLike[str] | None = None,
    from_files: bool = True,
) -> StoreGeometry:
    """The store's geometry from its files, else ``broker_config``, else ``flags``,
    else RocketMQ's defaults (keys of ``flags``: :data:`FIELDS`; None = not given).

    ``from_files=False`` leaves the files out (a checker's fallback when they
    contradict each other: it reports the odd files instead).

    Raises:
        GeometryError: two sources disagree, the files contradict each other, or index
            files exist that do not show their geometry and nothing else gives it.
    """
    files = detect(root, commitlog_dir) if from_files else {}
    conf = read_broker_config(broker_config) if broker_config is not None else {}
    given = {k: v for k, v in (flags or {}).items() if v is not None}
    settings = {name: _pick(name, files, conf, given, broker_config) for name in FIELDS}
    if from_files:
        _check_index_shown(Path(root) / "index", settings)
    return StoreGeometry(**settings)


def _pick(
    name: str,
    files: Mapping[str, tuple[int, str]],
    conf: Mapping[str, int],
    given: Mapping[str, int],
    conf_path: object,
) -> Setting:
    """One field's setting; disagreeing sources raise GeometryError."""
    candidates: list[Setting] = []
    if name in files:
        candidates.append(Setting(files[name][0], Source.FILES, files[name][1]))
    if name in conf:
        candidates.append(Setting(conf[name], Source.BROKER_CONFIG, str(conf_path)))
    if name in given:
        candidates.append(Setting(given[name], Source.FLAGS, name))
    for other in candidates[1:]:
        if _normal(name, other.value) != _normal(name, candidates[0].value):
            first = candidates[0]
            raise GeometryError(
                f"{name}: {first.value} from the {first.source.value} ({first.evidence}), "
                f"but {other.value} from the {other.source.value}"
            )
    if candidates:
        return candidates[0]
    return Setting(int(getattr(StoreConfig(), name)), Source.DEFAULT, "RocketMQ's default")


def _normal(name: str, value: int) -> int:
    """Consume-queue sizes compare as the getter rounds them (whole 20-byte units)."""
    if name == "mapped_file_size_consume_queue":
        return -(-value // cqfmt.UNIT_SIZE) * cqfmt.UNIT_SIZE
    return value


def _check_index_shown(index_dir: Path, settings: Mapping[str, Setting]) -> None:
    """Index files that do not show their geometry must at least have the size of
    the one chosen; otherwise that choice would be a guess.

    Raises:
        GeometryError: their size is not the chosen geometry's.
    """
    slots, num = settings["max_hash_slot_num"], settings["max_index_num"]
    if slots.source is Source.FILES:
        return
    files = _index_files(index_dir)
    if not files:
        return
    want = ifmt.file_size(slots.value, num.value)
    size = files[0].stat().st_size
    if size != want:
        shown = index_geometry(index_dir)
        why = shown[1] if shown is not None else ""
        raise GeometryError(
            f"{index_dir}: {why}, not the {want} bytes of {slots.value} slots x "
            f"{num.value} entries; give max_hash_slot_num and max_index_num "
            "(--index-slots/--index-num or --broker-config)"
        )


def for_open(cfg: StoreConfig) -> tuple[StoreConfig, StoreGeometry]:
    """``cfg`` with every size it does not give (:func:`mqstore.config.size_given`)
    taken from the store's files, and the geometry that results.

    Sizes ``cfg`` gives are left as they are (a wrong one fails loading, as before).

    Raises:
        GeometryError: as :func:`resolve`, for the sizes taken from the files.
    """
    given = {name: int(getattr(cfg, name)) for name in FIELDS if size_given(getattr(cfg, name))}
    missing = [name for name in FIELDS if name not in given]
    files = detect(cfg.root, cfg.commitlog_dir, missing) if missing else {}
    settings = {
        name: Setting(given[name], Source.FLAGS, "StoreConfig")
        if name in given
        else _pick(name, files, {}, {}, None)
        for name in FIELDS
    }
    if "max_hash_slot_num" in missing or "max_index_num" in missing:
        _check_index_shown(cfg.root / "index", settings)
    geo = StoreGeometry(**settings)
    if files:
        log.info("store %s geometry: %s", cfg.root, geo.describe())
    return geo.apply(cfg), geo
