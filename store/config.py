"""Store configuration. Every default is RocketMQ's default (``MessageStoreConfig``).

Configuration is a frozen dataclass: a running store never changes under its components.
Sizes are bytes, intervals milliseconds, as in RocketMQ's config files.
"""

from __future__ import annotations

import enum
import os
from dataclasses import dataclass, field, replace
from pathlib import Path

from mqstore import affinity
from mqstore.errors import ConfigError
from mqstore.property_format import PropertyFormat

OS_PAGE_SIZE = 4096
"""RocketMQ's hard-coded page size; flush thresholds count pages of this size."""


class FlushDiskType(enum.Enum):
    """When a put is acknowledged relative to the disk (``flushDiskType``)."""

    SYNC_FLUSH = "SYNC_FLUSH"
    ASYNC_FLUSH = "ASYNC_FLUSH"


class RecoveryPolicy(enum.Enum):
    """What CommitLog recovery does at a record that fails its checks (``recovery_policy``).

    ``TRUNCATE`` is RocketMQ's: the log ends there. ``KEEP`` fences off damage that valid
    records follow and keeps them (``mqstore.commitlog.recovery``). A ``SLAVE`` store
    always truncates: its master re-sends what is cut.
    """

    KEEP = "keep"
    TRUNCATE = "truncate"


class BrokerRole(enum.Enum):
    """Replication role of the store (``brokerRole``)."""

    ASYNC_MASTER = "ASYNC_MASTER"
    SYNC_MASTER = "SYNC_MASTER"
    SLAVE = "SLAVE"


class Unset(int):
    """A size left at its default: the store's own files may set it (``mqstore.geometry``).

    An int in every other respect, so code that reads the config sees the default.
    """

    __slots__ = ()

    def __repr__(self) -> str:
        return int.__repr__(self)


def size_given(value: int) -> bool:
    """False for a geometry size left at its default (:class:`Unset`)."""
    return type(value) is not Unset


@dataclass(frozen=True, slots=True)
class StoreConfig:
    """Everything a store needs to open a directory.

    ``root_dir`` holds ``commitlog/``, ``checkpoint``, ``abort``, ``lock`` and
    ``config/`` in RocketMQ's layout, so a RocketMQ store directory can be opened
    (on a copy: recovery writes).
    """

    root_dir: str | os.PathLike[str] = "store"
    flush_disk_type: FlushDiskType = FlushDiskType.ASYNC_FLUSH
    broker_role: BrokerRole = BrokerRole.ASYNC_MASTER
    commitlog_file_size: int = Unset(1 << 30)  # sizes left Unset: the files' (mqstore.geometry)
    commitlog_dir: str | None = None
    # CommitLog segments are sparse: space is reserved ahead of the write position (a
    # full disk refuses the put instead of SIGBUS), as much again as the segment holds,
    # 1 MiB to this much (mqstore._platform.reserve_ahead); 0 allocates a
    # segment in full when it is created.
    commitlog_reserve_chunk: int = 64 << 20
    max_message_size: int = 4 * 1024 * 1024
    # group commit (SYNC_FLUSH)
    sync_flush_timeout_ms: int = 5000
    # async flush (ASYNC_FLUSH)
    flush_interval_commitlog_ms: int = 500
    flush_commitlog_least_pages: int = 4
    flush_commitlog_thorough_interval_ms: int = 10_000
    # recovery
    check_crc_on_recover: bool = True
    # After a clean close, open trusts what the close recorded (the log's end, its files'
    # sizes, inodes and times, the CRC of its last MiB, the checkpoint: the
    # ``clean_close`` file, mqstore.commitlog.clean_close) instead of scanning the last
    # segments, so open takes the same time whatever the store holds. Off: scan, as
    # RocketMQ's normal recovery.
    trust_clean_close: bool = True
    # After such a trusted open, a background thread reads what the scan would have read
    # (the last 3 segments) with CRC checks (MessageStore.verify); damage it finds is
    # logged and poisons the store (puts refused, ``abort`` kept), so the next open
    # recovers as after a crash.
    verify_clean_open: bool = True
    # Pulls and key lookups check BODYCRC too: a record that fails is logged and not
    # served. Off by default, as in RocketMQ (whose reads never check it): on, every
    # read hashes its body.
    check_crc_on_read: bool = False
    # Not RocketMQ's default (TRUNCATE): damage in the middle of the log does not
    # delete the valid records after it. "keep" or "truncate" are accepted too.
    recovery_policy: RecoveryPolicy = RecoveryPolicy.KEEP
    # producer-side body compression applied by put_message (brief: LZ4 frame)
    compress_msg_body_over: int = 4096
    compress_type: str = "LZ4"
    compress_level: int = 5
    # identity written into records
    store_host: tuple[str, int] = ("127.0.0.1", 10911)
    broker_cluster: str = "DefaultCluster"
    # The broker version whose properties string is written: "5" (HashMap(128) order,
    # trailing separator) or "4.9" (HashMap(16) order, none): mqstore.property_format.
    property_format: str = "5"
    # misc
    os_page_cache_busy_timeout_ms: int = 1000
    file_reserved_time_hours: int = 72
    extra: dict[str, str] = field(default_factory=dict, compare=False)
    # HA replication (store.ha; docs/protocol.md §2). A SYNC_MASTER serves slaves on
    # ha_bind_host:ha_listen_port (0 picks a free port); a SLAVE with ha_master_address
    # ("HOST:PORT") replicates from it. See store.ha.service for who starts what.
    ha_listen_port: int = 10912
    ha_master_address: str | None = None
    ha_housekeeping_interval_ms: int = 20_000
    ha_send_heartbeat_interval_ms: int = 5_000
    ha_slave_fallbehind_max: int = 256 * 1024 * 1024
    slave_timeout_ms: int = 3000
    ha_bind_host: str = "127.0.0.1"
    # The HA handshake's shared secret (mqstore.ha.handshake; None: RocketMQ's
    # unauthenticated protocol), the slave IPs a master accepts (empty: any), and the
    # slave's reconnect delay (RocketMQ's fixed 5 s; tests shorten it).
    ha_secret: str | None = field(default=None, repr=False)
    ha_allowed_slaves: tuple[str, ...] = ()
    ha_reconnect_interval_ms: int = 5_000
    # ConsumeQueue (docs/format.md §3, docs/store.md §2.3): 300,000 units of 20 bytes per file
    mapped_file_size_consume_queue: int = Unset(300_000 * 20)
    flush_interval_consume_queue_ms: int = 1000
    flush_consume_queue_least_pages: int = 2
    flush_consume_queue_thorough_interval_ms: int = 60_000
    # Queue files are sparse; at most this many are mapped at once (least recently used
    # unmapped first): an idle queue holds no mapping and no descriptor.
    max_mapped_consume_queue_files: int = 1024
    # IndexFile (docs/format.md §4)
    message_index_enable: bool = True
    max_hash_slot_num: int = Unset(5_000_000)
    max_index_num: int = Unset(20_000_000)
    max_msgs_num_batch: int = 64
    # Build consume queues and the index in a child process (store.consumequeue.process):
    # puts and dispatching then run on two cores instead of sharing one interpreter.
    # Not a RocketMQ setting (its reput thread already runs in parallel); Linux x86-64
    # only (elsewhere the in-process thread is used, with a warning).
    dispatch_process: bool = False
    # CPUs the dispatcher process runs on (() = the CPUs of the thread that opened the
    # store). With the producers pinned to another CPU (store.affinity.pin_process,
    # taskset), thread hand-offs stay on one CPU: see store.affinity for why and figures.
    dispatch_cpus: tuple[int, ...] = ()
    # pull (docs/store.md §3.1)
    max_transfer_bytes_on_message_in_memory: int = 256 * 1024
    max_transfer_count_on_message_in_memory: int = 32
    max_transfer_bytes_on_message_in_disk: int = 64 * 1024
    max_transfer_count_on_message_in_disk: int = 8
    access_message_in_memory_max_ratio: int = 40
    max_filter_message_size: int = 16_000
    offset_check_in_slave: bool = False
    # delay levels (docs/store.md §5.1)
    message_delay_level: str = "1s 5s 10s 30s 1m 2m 3m 4m 5m 6m 7m 8m 9m 10m 20m 30m 1h 2h"
    flush_delay_offset_interval_ms: int = 10_000
    # timer messages, RocketMQ 5's timer wheel (docs/timer.md)
    timer_wheel_enable: bool = True
    timer_precision_ms: int = 1000
    timer_max_delay_sec: int = 3 * 24 * 3600
    timer_roll_window_slot: int = 2 * 24 * 3600
    timer_flush_interval_ms: int = 1000
    mapped_file_size_timer_log: int = 100 * 1024 * 1024
    # cleanup of expired files (file_reserved_time_hours above)
    delete_when: str = "04"
    clean_resource_interval_ms: int = 10_000
    disk_max_used_space_ratio: int = 75
    disk_space_clean_forcibly_ratio: float = 0.85
    disk_space_warning_level_ratio: float = 0.90
    clean_file_forcibly_enable: bool = True
    delete_files_batch_max: int = 10

    def __post_init__(self) -> None:
        if self.commitlog_file_size < 4096:
            raise ConfigError(
                f"commitlog_file_size must be >= 4096, got {self.commitlog_file_size}"
            )
        if self.max_message_size <= 0:
            raise ConfigError(f"max_message_size must be positive, got {self.max_message_size}")
        try:
            PropertyFormat.parse(self.property_format)
        except ValueError as e:
            raise ConfigError(str(e)) from None
        if self.compress_type.upper() not in ("LZ4", "ZLIB", "ZSTD"):
            raise ConfigError(
                f"compress_type must be LZ4, ZLIB or ZSTD, got {self.compress_type!r}"
            )
        if self.sync_flush_timeout_ms <= 0:
            raise ConfigError("sync_flush_timeout_ms must be positive")
        if isinstance(self.ha_allowed_slaves, str):  # "a,b": one string, not its characters
            hosts = tuple(h.strip() for h in self.ha_allowed_slaves.split(",") if h.strip())
            object.__setattr__(self, "ha_allowed_slaves", hosts)
        if self.ha_reconnect_interval_ms <= 0:
            raise ConfigError(
                f"ha_reconnect_interval_ms must be positive, got {self.ha_reconnect_interval_ms}"
            )
        if not isinstance(self.recovery_policy, RecoveryPolicy):
            try:
                policy = RecoveryPolicy(str(self.recovery_policy).lower())
            except ValueError:
                raise ConfigError(
                    f"recovery_policy must be keep or truncate, got {self.recovery_policy!r}"
                ) from None
            object.__setattr__(self, "recovery_policy", policy)
        if self.commitlog_reserve_chunk < 0 or self.max_mapped_consume_queue_files < 1:
            raise ConfigError(
                "commitlog_reserve_chunk must be >= 0 and max_mapped_consume_queue_files "
                f">= 1, got {self.commitlog_reserve_chunk}, {self.max_mapped_consume_queue_files}"
            )
        if self.mapped_file_size_consume_queue < 20:
            raise ConfigError(
                "mapped_file_size_consume_queue must hold at least one 20-byte unit, "
                f"got {self.mapped_file_size_consume_queue}"
            )
        if self.dispatch_cpus:
            object.__setattr__(
                self, "dispatch_cpus", affinity.check_cpus(self.dispatch_cpus, "dispatch_cpus")
            )
        if self.timer_precision_ms <= 0 or self.mapped_file_size_timer_log < 256:
            raise ConfigError(
                f"timer sizes must be positive (timer_precision_ms={self.timer_precision_ms}, "
                f"mapped_file_size_timer_log={self.mapped_file_size_timer_log})"
            )
        if self.max_hash_slot_num <= 0 or self.max_index_num <= 1:
            raise ConfigError(
                f"index sizes must be positive (max_hash_slot_num={self.max_hash_slot_num}, "
                f"max_index_num={self.max_index_num})"
            )

    @property
    def root(self) -> Path:
        """The store directory as a Path."""
        return Path(self.root_dir)

    @property
    def commitlog_path(self) -> Path:
        """Directory of the CommitLog segments (``storePathCommitLog``)."""
        return Path(self.commitlog_dir) if self.commitlog_dir else self.root / "commitlog"

    @property
    def consume_queue_file_size(self) -> int:
        """CQ file size rounded up to whole 20-byte units (RocketMQ's getter does so)."""
        return -(-self.mapped_file_size_consume_queue // 20) * 20

    @property
    def consume_queue_path(self) -> Path:
        """Directory of the consume queues: ``consumequeue/{topic}/{queueId}/``."""
        return self.root / "consumequeue"

    @property
    def index_path(self) -> Path:
        """Directory of the index files."""
        return self.root / "index"

    def with_(self, **changes: object) -> StoreConfig:
        """A copy with some fields changed."""
        return replace(self, **changes)  # type: ignore[arg-type]
