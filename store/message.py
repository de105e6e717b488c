"""The message model and the small text codecs around it.

What lives here:

* :class:`Message`, what a producer hands to ``put_message``;
* the properties string (``name \\x01 value \\x02`` repeated) and RocketMQ's exact parse
  rules (``MessageDecoder.string2messageProperties``);
* Java ``String.hashCode`` (tag codes, index keys) and Java ``HashMap`` iteration order,
  which decides the byte order of properties a RocketMQ broker writes;
* message ids: the offset id (store host + physical offset) and ``UNIQ_KEY``;
* the topic-name rule (topics become directory names).

The binary record layout is NOT here: it lives only in ``mqstore.commitlog.format``.
"""

from __future__ import annotations

import functools
import itertools
import os
import re
import socket
import struct
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from mqstore.errors import IllegalMessageError, IllegalTopicError

NAME_VALUE_SEPARATOR = "\x01"
PROPERTY_SEPARATOR = "\x02"
KEY_SEPARATOR = " "

# Standard property keys (RocketMQ ``MessageConst``).
PROPERTY_KEYS = "KEYS"
PROPERTY_TAGS = "TAGS"
PROPERTY_WAIT_STORE_MSG_OK = "WAIT"
PROPERTY_DELAY_TIME_LEVEL = "DELAY"
PROPERTY_RETRY_TOPIC = "RETRY_TOPIC"
PROPERTY_REAL_TOPIC = "REAL_TOPIC"
PROPERTY_REAL_QUEUE_ID = "REAL_QID"
PROPERTY_TRANSACTION_PREPARED = "TRAN_MSG"
PROPERTY_PRODUCER_GROUP = "PGROUP"
PROPERTY_MIN_OFFSET = "MIN_OFFSET"
PROPERTY_MAX_OFFSET = "MAX_OFFSET"
PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX = "UNIQ_KEY"
PROPERTY_ORIGIN_MESSAGE_ID = "ORIGIN_MESSAGE_ID"
PROPERTY_RECONSUME_TIME = "RECONSUME_TIME"
PROPERTY_MAX_RECONSUME_TIMES = "MAX_RECONSUME_TIMES"
PROPERTY_CLUSTER = "CLUSTER"
PROPERTY_CRC32 = "__CRC32#"
TRANSIENT_PREFIX = "__RMQ.TRANSIENT."

TOPIC_PATTERN = re.compile(r"^[%|a-zA-Z0-9_-]{1,127}$")
"""RocketMQ's ``TopicValidator`` rule; also keeps topics safe as directory names."""

MAX_TOPIC_LENGTH = 127


def validate_topic(topic: str) -> str:
    """Return ``topic`` if it is a legal topic name, else raise.

    Topics become directory names (``consumequeue/{topic}/``), so anything outside
    ``[%|a-zA-Z0-9_-]{1,127}`` (path separators, ``..``, NUL, spaces) is refused.

    Raises:
        IllegalTopicError: with the offending name.

    >>> validate_topic("orders")
    'orders'
    >>> validate_topic("../x")
    Traceback (most recent call last):
    ...
    mqstore.errors.IllegalTopicError: illegal topic name '../x': must match ^[%|a-zA-Z0-9_-]{1,127}$
    """
    # fullmatch, not match: the pattern's ``$`` also matches before a trailing newline.
    if not isinstance(topic, str) or not TOPIC_PATTERN.fullmatch(topic) or topic in (".", ".."):
        raise IllegalTopicError(f"illegal topic name {topic!r}: must match {TOPIC_PATTERN.pattern}")
    return topic


# --------------------------------------------------------------------------- Java hashing


def java_string_hash(s: str) -> int:
    """Java ``String.hashCode`` as a signed int32 (over UTF-16 code units).

    >>> java_string_hash("TagA")
    2598919
    >>> java_string_hash("TopicTest#KEY1")
    -1656969516
    """
    h = 0
    if s.isascii():
        for c in s.encode("ascii"):
            h = (31 * h + c) & 0xFFFFFFFF
    else:
        units = s.encode("utf-16-be", "surrogatepass")
        for i in range(0, len(units), 2):
            h = (31 * h + ((units[i] << 8) | units[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h & 0x80000000 else h


@functools.lru_cache(maxsize=65536)
def tags_code(tags: str | None) -> int:
    """CQ tag code of a TAGS value: ``String.hashCode`` sign-extended; 0 when absent.

    >>> tags_code("TagA"), tags_code(None), tags_code("")
    (2598919, 0, 0)
    """
    if not tags:
        return 0
    return java_string_hash(tags)


@functools.lru_cache(maxsize=4096)
def _hashmap_spread(key: str) -> int:
    h = java_string_hash(key) & 0xFFFFFFFF
    return h ^ (h >> 16)


@functools.lru_cache(maxsize=4096)
def hashmap_bucket(key: str, capacity: int = 128) -> int:
    """Bucket of ``key`` in a Java ``HashMap`` table of ``capacity`` slots."""
    return _hashmap_spread(key) & (capacity - 1)


def java_hashmap_order(
    items: Iterable[tuple[str, str]], capacity: int = 128
) -> list[tuple[str, str]]:
    """Order entries as a Java ``HashMap(capacity)`` built by inserting them would iterate.

    A RocketMQ broker re-serializes properties from a ``HashMap(128)``; reproducing
    its iteration order makes our records byte-identical to the broker's. Later
    duplicates replace earlier values in place, as ``put`` does. Tree bins (8+
    entries in one bucket) are not modelled.

    >>> [k for k, _ in java_hashmap_order([("TAGS", "a"), ("UNIQ_KEY", "b"), ("CLUSTER", "c")])]
    ['UNIQ_KEY', 'CLUSTER', 'TAGS']
    """
    entries: dict[str, str] = {}
    for k, v in items:
        entries[k] = v
    n = capacity
    while len(entries) > n * 3 // 4:
        n *= 2
    mask = n - 1
    # sorted() is stable: insertion order survives inside a bucket.
    return sorted(entries.items(), key=lambda kv: _hashmap_spread(kv[0]) & mask)


# ----------------------------------------------------------------------- properties codec


def standard_properties_string(
    uniq_key: str, tags: str | None, keys: Sequence[str] | str | None
) -> str:
    """Properties string of a message with only UNIQ_KEY, TAGS and KEYS, in HashMap(128) order.

    The put fast path: the same bytes :func:`java_hashmap_order` gives for these
    three keys, in a fraction of the time (buckets 28, 62 and 87). ``keys`` as a
    :class:`Message` holds them: the KEYS value is :meth:`Message.keys_property`'s
    (a string as given, a sequence's non-empty keys joined by a space).

    >>> standard_properties_string("U", "T", "K")
    'UNIQ_KEY\\x01U\\x02TAGS\\x01T\\x02KEYS\\x01K\\x02'
    >>> standard_properties_string("U", None, ["a", "", "b"])
    'UNIQ_KEY\\x01U\\x02KEYS\\x01a b\\x02'
    """
    if keys is not None and type(keys) is not str:  # a list, or a str subclass
        if len(keys) == 1 and keys[0]:
            keys = keys[0]
        elif not isinstance(keys, str):
            keys = KEY_SEPARATOR.join(k for k in keys if k)
    if tags:
        if keys:
            return f"UNIQ_KEY\x01{uniq_key}\x02TAGS\x01{tags}\x02KEYS\x01{keys}\x02"
        return f"UNIQ_KEY\x01{uniq_key}\x02TAGS\x01{tags}\x02"
    if keys:
        return f"UNIQ_KEY\x01{uniq_key}\x02KEYS\x01{keys}\x02"
    return f"UNIQ_KEY\x01{uniq_key}\x02"


def properties_to_string(props: Mapping[str, str] | Iterable[tuple[str, str]]) -> str:
    """Serialize properties as RocketMQ does: ``k\\x01v\\x02`` per entry, None values skipped.

    >>> properties_to_string({"TAGS": "A", "KEYS": "k"})
    'TAGS\\x01A\\x02KEYS\\x01k\\x02'
    """
    pairs = props.items() if isinstance(props, Mapping) else props
    return "".join(f"{k}\x01{v}\x02" for k, v in pairs if v is not None)


def string_to_properties(s: str | None) -> dict[str, str]:
    """Parse a properties string with RocketMQ's exact rules.

    Segments are split on ``\\x02``; a segment shorter than 3 chars is ignored; the
    first ``\\x01`` must leave a non-empty key and a non-empty value, else the segment
    is ignored. A later duplicate key wins.

    >>> string_to_properties("k1\\x01")
    {}
    >>> string_to_properties("\\x01v1")
    {}
    >>> string_to_properties("1\\x011")
    {'1': '1'}
    """
    out: dict[str, str] = {}
    if not s:
        return out
    for seg in s.split(PROPERTY_SEPARATOR):
        if len(seg) < 3:
            continue
        i = seg.find(NAME_VALUE_SEPARATOR)
        if 0 < i < len(seg) - 1:
            out[seg[:i]] = seg[i + 1 :]
    return out


_PLAIN_NAMES = frozenset((PROPERTY_TAGS, PROPERTY_KEYS, PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX))


def property_of(properties: str, name: str) -> str | None:
    """One property of a properties string, if any, without building the dict.

    Same answer as ``string_to_properties(properties).get(name)`` (the dispatcher
    asks this per record and key, and it is much cheaper): the last ``name\x01`` that starts a
    segment and has a non-empty value is the last valid segment of that name, so
    the answer; any other shape (the mark inside a value, an empty value, a name
    with a separator) takes the full parse.

    >>> property_of("KEYS\x01k\x02TAGS\x01a\x02", "TAGS"), property_of("TAGS\x01\x02", "TAGS")
    ('a', None)
    """
    mark = name + NAME_VALUE_SEPARATOR
    i = properties.rfind(mark)
    if i < 0:
        return None
    if i == 0 or properties[i - 1] == PROPERTY_SEPARATOR:
        start = i + len(mark)
        j = properties.find(PROPERTY_SEPARATOR, start)
        value = properties[start:] if j < 0 else properties[start:j]
        if value and (name in _PLAIN_NAMES or _plain_name(name)):
            return value
    return string_to_properties(properties).get(name)


def _plain_name(name: str) -> bool:
    return bool(name) and NAME_VALUE_SEPARATOR not in name and PROPERTY_SEPARATOR not in name


def tags_of(properties: str) -> str | None:
    """The TAGS property of a properties string, if any."""
    return property_of(properties, PROPERTY_TAGS)


def keys_of(properties: str) -> list[str]:
    """The KEYS property of a properties string, split on spaces."""
    return [k for k in (property_of(properties, PROPERTY_KEYS) or "").split(" ") if k]


def uniq_key_of(properties: str) -> str | None:
    """The UNIQ_KEY property (client message id) of a properties string, if any."""
    return property_of(properties, PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX)


# ------------------------------------------------------------------------------ message ids


def host_bytes(host: tuple[str, int]) -> bytes:
    """4- or 16-byte address + 4-byte big-endian port, as records and msg ids hold them."""
    ip, port = host
    family = socket.AF_INET6 if ":" in ip else socket.AF_INET
    return socket.inet_pton(family, ip) + struct.pack(">i", port)


def bytes_host(raw: bytes) -> tuple[str, int]:
    """Inverse of :func:`host_bytes`."""
    family = socket.AF_INET if len(raw) == 8 else socket.AF_INET6
    (port,) = struct.unpack(">i", raw[-4:])
    return socket.inet_ntop(family, raw[:-4]), port


def offset_msg_id(store_host: tuple[str, int] | bytes, physical_offset: int) -> str:
    """RocketMQ ``offsetMsgId``: hex of store address + port + physical offset (uppercase).

    >>> offset_msg_id(("127.0.0.1", 10911), 0)
    '7F00000100002A9F0000000000000000'
    """
    raw = store_host if isinstance(store_host, bytes) else host_bytes(store_host)
    return raw.hex().upper() + f"{physical_offset & 0xFFFFFFFFFFFFFFFF:016X}"


def decode_offset_msg_id(msg_id: str) -> tuple[tuple[str, int], int]:
    """Split an offset message id into (store host, physical offset).

    Raises:
        ValueError: when the id is not 32 (IPv4) or 56 (IPv6) hex chars.
    """
    if len(msg_id) not in (32, 56):
        raise ValueError(f"offset msg id must be 32 or 56 hex chars, got {len(msg_id)}")
    raw = bytes.fromhex(msg_id)
    return bytes_host(raw[:-8]), struct.unpack(">q", raw[-8:])[0]


class UniqIdGenerator:
    """``UNIQ_KEY`` generator in RocketMQ's layout (``MessageClientIDSetter``).

    Layout (hex, uppercase): client IP (4 or 16 bytes) | pid (2) | class-loader hash (4)
    | ms since the start of the current month, local time (int) | counter (short).
    Thread-safe: the counter is an ``itertools.count`` (atomic under the GIL).
    """

    def __init__(
        self, ip: str = "127.0.0.1", pid: int | None = None, loader_hash: int | None = None
    ):
        pid = os.getpid() if pid is None else pid
        loader = id(self) & 0x7FFFFFFF if loader_hash is None else loader_hash
        family = socket.AF_INET6 if ":" in ip else socket.AF_INET
        self._prefix = (
            (socket.inet_pton(family, ip) + struct.pack(">Hi", pid & 0xFFFF, loader)).hex().upper()
        )
        self._counter = itertools.count(1)
        self._month_start_ms = 0
        self._next_month_ms = 0
        self._last_ms = -1
        self._time_prefix = ""
        self._hex4: list[str] = []  # the shared table, taken at the first id (_roll_month)

    def _roll_month(self, now_ms: int) -> None:
        self._hex4 = hex4_table()
        t = time.localtime(now_ms / 1000)
        start = time.mktime((t.tm_year, t.tm_mon, 1, 0, 0, 0, 0, 0, -1))
        nxt = time.mktime((t.tm_year + (t.tm_mon == 12), t.tm_mon % 12 + 1, 1, 0, 0, 0, 0, 0, -1))
        self._month_start_ms = int(start * 1000)
        self._next_month_ms = int(nxt * 1000)

    def next_id(self) -> str:
        """A new 32-char (IPv4) unique id."""
        now = _time_ns() // 1_000_000
        if now != self._last_ms:
            if now >= self._next_month_ms:
                self._roll_month(now)
            self._last_ms = now
            self._time_prefix = f"{self._prefix}{(now - self._month_start_ms) & 0xFFFFFFFF:08X}"
        return self._time_prefix + self._hex4[next(self._counter) & 0xFFFF]

    def next_ids(self, n: int) -> list[str]:
        """``n`` new ids at once (a batch: one clock read, the same ids as ``n`` calls
        of :meth:`next_id` within one millisecond)."""
        self.next_id()  # brings the time prefix up to date (and uses one counter value)
        prefix = self._time_prefix
        hex4 = self._hex4
        counter = self._counter
        return [prefix + hex4[next(counter) & 0xFFFF] for _ in range(n)]


_time_ns = time.time_ns


@functools.cache
def hex4_table() -> list[str]:
    """The numbers 0-65535 as 4 uppercase hex digits, built on first use (~4 MB) and
    shared (callers only read it).

    Every put makes a UNIQ_KEY (its counter) and an offset message id (its low 16
    bits), and a table lookup is cheaper than ``:04X`` formatting.
    """
    return [f"{i:04X}" for i in range(65536)]


_default_uniq = UniqIdGenerator()


new_uniq_key: Callable[[], str] = _default_uniq.next_id
"""A fresh ``UNIQ_KEY`` from the process-wide generator (its bound ``next_id``: no
wrapper frame per put)."""


def new_uniq_keys(n: int) -> list[str]:
    """``n`` fresh ``UNIQ_KEY`` values from the process-wide generator."""
    return _default_uniq.next_ids(n)


# ---------------------------------------------------------------------------- the message


@dataclass(slots=True)
class Message:
    """A message as a producer builds it.

    ``tags`` and ``keys`` are stored as the ``TAGS`` / ``KEYS`` properties; ``properties``
    holds user properties (names must not contain ``\\x01``/``\\x02``). ``queue_id`` picks
    the queue of ``topic``. ``born_timestamp`` (ms) and ``born_host`` default to now and
    127.0.0.1:0. The body must be non-empty bytes, as RocketMQ requires.

    ``stored_properties``: the exact properties string to store instead of one built
    from the fields (a broker reproducing another version's bytes,
    ``mqstore.broker.as_stored``). Only the store's general path honours it, so a
    message that carries it also carries its ``properties`` (which keep it off the
    fast path); None, the default: built from the fields.

    ``prepared_transaction_offset``: the PREPARED TX OFFSET field, the physical offset
    of the half record a committed transactional message came from (0 otherwise;
    ``mqstore.transaction``). Only the general path writes it: a message with a
    COMMIT sysflag never takes the fast path.
    """

    topic: str
    body: bytes
    tags: str | None = None
    keys: Sequence[str] | str | None = None
    properties: dict[str, str] = field(default_factory=dict)
    queue_id: int = 0
    flag: int = 0
    delay_level: int = 0
    wait_store_msg_ok: bool = True
    born_timestamp: int | None = None
    born_host: tuple[str, int] = ("127.0.0.1", 0)
    reconsume_times: int = 0
    sys_flag: int = 0
    stored_properties: str | None = None
    prepared_transaction_offset: int = 0

    def validate(self) -> None:
        """Check what can be checked without a store.

        Raises:
            IllegalTopicError: topic name not allowed.
            IllegalMessageError: body missing/empty/not bytes, queue id negative, or a
                property name/value containing a separator char.
        """
        validate_topic(self.topic)
        if not isinstance(self.body, bytes | bytearray | memoryview):
            raise IllegalMessageError(f"body must be bytes, got {type(self.body).__name__}")
        if len(self.body) == 0:
            raise IllegalMessageError("body must not be empty")
        if self.queue_id < 0:
            raise IllegalMessageError(f"queue_id must be >= 0, got {self.queue_id}")
        for k, v in self.properties.items():
            if not k or any(c in k for c in "\x01\x02") or any(c in str(v) for c in "\x01\x02"):
                raise IllegalMessageError(f"property {k!r} contains a separator char or is empty")

    def keys_property(self) -> str | None:
        """The KEYS property value as RocketMQ stores it, None for no keys.

        A string is stored as given (``Message.setKeys(String)``), a sequence as its
        non-empty keys joined by a space (as :func:`standard_properties_string` joins them).
        """
        keys = self.keys
        if keys is None or isinstance(keys, str):
            return keys or None
        return (keys[0] if len(keys) == 1 else KEY_SEPARATOR.join(k for k in keys if k)) or None

    def key_list(self) -> list[str]:
        """Keys as a list (a string is split on spaces, as RocketMQ does)."""
        if self.keys is None:
            return []
        if isinstance(self.keys, str):
            return [k for k in self.keys.split(KEY_SEPARATOR) if k]
        return [k for k in self.keys if k]

    def all_properties(self, *, mark_no_wait: bool = True) -> dict[str, str]:
        """User properties plus TAGS, KEYS, DELAY and WAIT, in insertion order: the map a
        broker fills from the message (the store's properties and the wire's).

        ``mark_no_wait``: a message that does not wait gets ``WAIT=false`` (what 5.x
        brokers and producers write); without it, ``WAIT`` is only there when it is one
        of the user properties (a 4.9 broker's single message).
        """
        props = dict(self.properties)
        if self.tags:
            props[PROPERTY_TAGS] = self.tags
        keys = self.keys_property()
        if keys:
            props[PROPERTY_KEYS] = keys
        if self.delay_level > 0:
            props[PROPERTY_DELAY_TIME_LEVEL] = str(self.delay_level)
        if mark_no_wait and not self.wait_store_msg_ok:
            props[PROPERTY_WAIT_STORE_MSG_OK] = "false"
        return props


# The fast path above hard-codes an order; prove it is the HashMap order at import.
assert [k for k, _ in java_hashmap_order([("TAGS", "x"), ("KEYS", "x"), ("UNIQ_KEY", "x")])] == [
    "UNIQ_KEY",
    "TAGS",
    "KEYS",
]
