"""Queue-allocation strategies: RocketMQ's rebalance arithmetic as pure functions.

Every consumer of a group runs the same strategy over the same inputs and keeps only
its own share, so the shares must agree bit for bit across languages: the functions
here reproduce ``org.apache.rocketmq.client.consumer.rebalance.*`` exactly, including
its quirks (the order of results, Java string ordering, the ``split("@")`` rule).

Contract of a strategy call ``strategy(group, current_cid, mq_all, cid_all)``:

- **Inputs are pre-sorted by the caller**, as ``RebalanceImpl`` does before calling:
  ``mq_all`` by :func:`sort_queues` and ``cid_all`` by :func:`sort_cids`. Strategies do
  not sort (the order *is* the input: a caller that sorts differently gets a different,
  still disjoint, split that no Java consumer agrees with). ``cid_all`` holds each id once.
- **Preconditions** (all strategies but CONFIG), checked first, as RocketMQ's
  ``AbstractAllocateMessageQueueStrategy.check``: an empty ``current_cid``, ``mq_all``
  or ``cid_all`` raises ``ValueError`` (Java's ``IllegalArgumentException``); a
  ``current_cid`` absent from ``cid_all`` returns ``[]``. The difference matters to
  the caller: ``RebalanceImpl`` treats a raise as "skip this topic, keep the current
  assignment" but an empty list as "own nothing, drop every queue".
- **Pure**: no I/O, no logging, no state between calls; the result is a new list.

Strategies (Q = ``len(mq_all)``, C = ``len(cid_all)``, i = index of ``current_cid``):

=========================  ==========================================================
``AVG`` (default)          contiguous blocks; the first ``Q % C`` consumers get one
                           more; consumers past Q get nothing
``AVG_BY_CIRCLE``          queue j goes to consumer ``j % C``
``CONFIG``                 a fixed configured list, inputs ignored (no checks)
``MACHINE_ROOM``           queues on brokers named ``room@name`` with room in the
                           consumer IDCs; ``P // C`` each, then one of the last
                           ``P % C`` to each of the first consumers
``MACHINE_ROOM_NEARBY-X``  strategy X over my room's queues and consumers, then X over
                           every room without consumers and all consumers
``CONSISTENT_HASH``        MD5 ring, 10 virtual nodes ``cid-k`` per consumer; a queue
                           (key ``str(mq)``) goes to the first node at or after its hash
=========================  ==========================================================

Worked example, 8 queues over 3 consumers (``Q % C = 2``): AVG gives
``[0, 1, 2] [3, 4, 5] [6, 7]``, AVG_BY_CIRCLE ``[0, 3, 6] [1, 4, 7] [2, 5]``.

>>> mqs = [MessageQueue("T", "broker-a", q) for q in range(8)]
>>> cids = sort_cids(["c2", "c0", "c1"])
>>> [[mq.queue_id for mq in allocate_averagely("g", c, mqs, cids)] for c in cids]
[[0, 1, 2], [3, 4, 5], [6, 7]]
>>> [[mq.queue_id for mq in allocate_averagely_by_circle("g", c, mqs, cids)] for c in cids]
[[0, 3, 6], [1, 4, 7], [2, 5]]
>>> md5_first4("cid-0")
2711717015
"""

from __future__ import annotations

import hashlib
from bisect import bisect_left
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Final, Protocol

from mqstore.remoting.values import MessageQueue, java_string_key, sort_queues

__all__ = [
    "DEFAULT_VIRTUAL_NODES",
    "NEARBY_PREFIX",
    "STRATEGY_NAMES",
    "HashFunction",
    "MachineRoomResolver",
    "MessageQueue",
    "NameRoomResolver",
    "Strategy",
    "allocate_averagely",
    "allocate_averagely_by_circle",
    "allocate_by_config",
    "allocate_by_machine_room",
    "allocate_consistent_hash",
    "allocate_machine_room_nearby",
    "assignment",
    "java_string_key",
    "md5_first4",
    "sort_cids",
    "sort_queues",
    "strategy_by_name",
]

DEFAULT_VIRTUAL_NODES: Final = 10
NEARBY_PREFIX: Final = "MACHINE_ROOM_NEARBY-"
STRATEGY_NAMES: Final = ("AVG", "AVG_BY_CIRCLE", "CONFIG", "MACHINE_ROOM", "CONSISTENT_HASH")


def sort_cids(cids: Iterable[str]) -> list[str]:
    """``Collections.sort(cidAll)``: a new list in Java ``String`` order."""
    return sorted(cids, key=java_string_key)


class Strategy(Protocol):
    """``AllocateMessageQueueStrategy.allocate``: my share of ``mq_all``.

    Arguments are positional; the contract is the module docstring's.
    """

    def __call__(
        self,
        group: str,
        current_cid: str,
        mq_all: Sequence[MessageQueue],
        cid_all: Sequence[str],
        /,
    ) -> list[MessageQueue]: ...


HashFunction = Callable[[str], int]


def _check(current_cid: str, mq_all: Sequence[MessageQueue], cid_all: Sequence[str]) -> bool:
    """RocketMQ's precondition: raise on empty inputs, False when I am not in the group."""
    if not current_cid:
        raise ValueError("currentCID is empty")
    if not mq_all:
        raise ValueError("mqAll is null or mqAll empty")
    if not cid_all:
        raise ValueError("cidAll is null or cidAll empty")
    return current_cid in cid_all


def allocate_averagely(
    group: str, current_cid: str, mq_all: Sequence[MessageQueue], cid_all: Sequence[str]
) -> list[MessageQueue]:
    """AVG (``AllocateMessageQueueAveragely``): contiguous blocks, the default.

    With ``mod = Q % C``, consumer i < mod takes ``Q // C + 1`` queues from
    ``i * (Q // C + 1)``; the others take ``Q // C`` from ``i * (Q // C) + mod``. When
    Q <= C each of the first Q consumers takes one queue.

    Raises:
        ValueError: empty ``current_cid``, ``mq_all`` or ``cid_all``.
    """
    if not _check(current_cid, mq_all, cid_all):
        return []
    index = cid_all.index(current_cid)
    q, c = len(mq_all), len(cid_all)
    mod = q % c
    bigger = mod > 0 and index < mod
    size = 1 if q <= c else q // c + int(bigger)
    start = index * size if bigger else index * size + mod
    return [mq_all[(start + k) % q] for k in range(min(size, q - start))]


def allocate_averagely_by_circle(
    group: str, current_cid: str, mq_all: Sequence[MessageQueue], cid_all: Sequence[str]
) -> list[MessageQueue]:
    """AVG_BY_CIRCLE (``AllocateMessageQueueAveragelyByCircle``): queue j to consumer j % C.

    Raises:
        ValueError: empty ``current_cid``, ``mq_all`` or ``cid_all``.
    """
    if not _check(current_cid, mq_all, cid_all):
        return []
    return list(mq_all[cid_all.index(current_cid) :: len(cid_all)])


def allocate_by_config(queues: Iterable[MessageQueue]) -> Strategy:
    """CONFIG (``AllocateMessageQueueByConfig``): always the configured queues.

    Like Java it checks nothing and ignores its arguments; each call returns a new list.
    """
    configured = tuple(queues)

    def allocate(
        group: str, current_cid: str, mq_all: Sequence[MessageQueue], cid_all: Sequence[str]
    ) -> list[MessageQueue]:
        return list(configured)

    return allocate


def _machine_room(broker_name: str) -> str | None:
    """The room of a ``room@name`` broker per Java ``split("@")`` (trailing empties dropped)."""
    parts = broker_name.split("@")
    while parts and not parts[-1]:
        parts.pop()
    return parts[0] if len(parts) == 2 else None


def allocate_by_machine_room(consumer_idcs: Iterable[str]) -> Strategy:
    """MACHINE_ROOM (``AllocateMessageQueueByMachineRoom``) for the given consumer IDCs.

    Keeps the P queues whose broker name splits on ``@`` into exactly two parts
    ``room@name`` (Java ``split`` drops trailing empty parts, so ``"a@b@"`` counts and
    ``"a@"`` does not) with ``room`` in ``consumer_idcs``. Consumer i takes the block
    ``[i * (P // C), (i + 1) * (P // C))`` and, if ``i < P % C``, the element
    ``i + (P // C) * C``: the remainder is dealt round-robin, not in blocks.

    The returned strategy raises ``ValueError`` on empty inputs.
    """
    idcs = frozenset(consumer_idcs)

    def allocate(
        group: str, current_cid: str, mq_all: Sequence[MessageQueue], cid_all: Sequence[str]
    ) -> list[MessageQueue]:
        if not _check(current_cid, mq_all, cid_all):
            return []
        index = cid_all.index(current_cid)
        kept = [mq for mq in mq_all if _machine_room(mq.broker_name) in idcs]
        share, rem = divmod(len(kept), len(cid_all))
        result = kept[index * share : index * share + share]
        if rem > index:
            result.append(kept[index + share * len(cid_all)])
        return result

    return allocate


class MachineRoomResolver(Protocol):
    """``AllocateMachineRoomNearby.MachineRoomResolver``: where queues and clients run.

    Both methods must return a non-empty room name for every input (the strategy raises
    ``ValueError`` otherwise); they must be pure, as the strategy calls them every time.
    """

    def broker_deploy_in(self, mq: MessageQueue) -> str | None:
        """Room of the broker holding ``mq``."""
        ...

    def consumer_deploy_in(self, client_id: str) -> str | None:
        """Room of the consumer ``client_id``."""
        ...


@dataclass(frozen=True, slots=True)
class NameRoomResolver:
    """A resolver from two name functions: broker name -> room, client id -> room."""

    broker_room: Callable[[str], str | None]
    consumer_room: Callable[[str], str | None]

    def broker_deploy_in(self, mq: MessageQueue) -> str | None:
        """Room of ``mq.broker_name``."""
        return self.broker_room(mq.broker_name)

    def consumer_deploy_in(self, client_id: str) -> str | None:
        """Room of ``client_id``."""
        return self.consumer_room(client_id)


def _room(room: str | None, what: str) -> str:
    if not room:
        raise ValueError(f"Machine room is null for {what}")
    return room


def allocate_machine_room_nearby(inner: Strategy, resolver: MachineRoomResolver) -> Strategy:
    """MACHINE_ROOM_NEARBY-<inner> (``AllocateMachineRoomNearby``).

    First ``inner`` over the queues of my room among the consumers of my room; then, for
    each room that has queues but no consumer (in Java ``String`` order of room names),
    ``inner`` over that room's queues among all consumers. Results are concatenated in
    that order. A room with consumers but no queues contributes nothing.

    The returned strategy raises ``ValueError`` on empty inputs and when the resolver
    gives an empty room for any queue or consumer.
    """

    def allocate(
        group: str, current_cid: str, mq_all: Sequence[MessageQueue], cid_all: Sequence[str]
    ) -> list[MessageQueue]:
        if not _check(current_cid, mq_all, cid_all):
            return []
        queues_by_room: dict[str, list[MessageQueue]] = {}
        for mq in mq_all:
            room = _room(resolver.broker_deploy_in(mq), f"mq {mq}")
            queues_by_room.setdefault(room, []).append(mq)
        cids_by_room: dict[str, list[str]] = {}
        for cid in cid_all:
            room = _room(resolver.consumer_deploy_in(cid), f"consumer id {cid}")
            cids_by_room.setdefault(room, []).append(cid)

        result: list[MessageQueue] = []
        my_room = _room(resolver.consumer_deploy_in(current_cid), f"consumer id {current_cid}")
        mine = queues_by_room.pop(my_room, [])
        if mine:
            result += inner(group, current_cid, mine, cids_by_room.get(my_room, []))
        for room in sorted(queues_by_room, key=java_string_key):
            if room not in cids_by_room:
                result += inner(group, current_cid, queues_by_room[room], cid_all)
        return result

    return allocate


def md5_first4(key: str) -> int:
    """RocketMQ ``ConsistentHashRouter.MD5Hash``: first 4 MD5 bytes, unsigned big-endian.

    Java hashes ``key.getBytes()`` in the platform charset; we assume UTF-8 (the JVM
    default since JDK 18 and on usual Linux locales before). Lone surrogates become
    ``?`` as Java's encoder makes them.

    >>> md5_first4("cid-0")
    2711717015
    """
    digest = hashlib.md5(key.encode("utf-8", "replace"), usedforsecurity=False).digest()
    return int.from_bytes(digest[:4], "big")


def _ring(
    cid_all: Sequence[str], virtual_nodes: int, hash_fn: HashFunction
) -> tuple[list[int], list[str]]:
    """``ConsistentHashRouter``: sorted node hashes and their owners.

    A later node with an equal hash overwrites the earlier one (``TreeMap.put``). A
    repeated cid continues its replica numbering from the nodes it still owns
    (``getExistingReplicas``).
    """
    ring: dict[int, str] = {}
    owned: Counter[str] = Counter()
    for cid in cid_all:
        first = owned[cid]
        for k in range(first, first + virtual_nodes):
            node_hash = hash_fn(f"{cid}-{k}")
            previous = ring.get(node_hash)
            if previous is not None:
                owned[previous] -= 1
            ring[node_hash] = cid
            owned[cid] += 1
    hashes = sorted(ring)
    return hashes, [ring[h] for h in hashes]


def allocate_consistent_hash(
    virtual_nodes: int = DEFAULT_VIRTUAL_NODES, hash_fn: HashFunction = md5_first4
) -> Strategy:
    """CONSISTENT_HASH (``AllocateMessageQueueConsistentHash``).

    Each consumer puts ``virtual_nodes`` nodes ``f"{cid}-{k}"`` on a ring at
    ``hash_fn(key)``; a queue goes to the first node whose hash is >= ``hash_fn(str(mq))``,
    wrapping to the lowest. When a consumer joins or leaves, only the queues it takes or
    held change owner. ``virtual_nodes=0`` gives an empty ring: nobody owns anything.

    Raises:
        ValueError: ``virtual_nodes < 0`` (here), or empty inputs (from the strategy).
    """
    if virtual_nodes < 0:
        raise ValueError(f"illegal virtualNodeCnt :{virtual_nodes}")

    def allocate(
        group: str, current_cid: str, mq_all: Sequence[MessageQueue], cid_all: Sequence[str]
    ) -> list[MessageQueue]:
        if not _check(current_cid, mq_all, cid_all):
            return []
        hashes, owners = _ring(cid_all, virtual_nodes, hash_fn)
        if not hashes:
            return []
        result: list[MessageQueue] = []
        for mq in mq_all:
            at = bisect_left(hashes, hash_fn(str(mq)))
            if owners[at if at < len(hashes) else 0] == current_cid:
                result.append(mq)
        return result

    return allocate


def strategy_by_name(
    name: str,
    *,
    queues: Iterable[MessageQueue] | None = None,
    consumer_idcs: Iterable[str] | None = None,
    resolver: MachineRoomResolver | None = None,
    virtual_nodes: int = DEFAULT_VIRTUAL_NODES,
) -> Strategy:
    """The strategy RocketMQ's ``getName()`` calls ``name``, built from the given settings.

    ``CONFIG`` needs ``queues``, ``MACHINE_ROOM`` needs ``consumer_idcs`` and
    ``MACHINE_ROOM_NEARBY-<inner>`` needs ``resolver`` (the inner name is resolved the
    same way, with the same settings).

    >>> strategy_by_name("AVG") is allocate_averagely
    True

    Raises:
        ValueError: unknown name, or a setting the strategy needs is missing.
    """
    if name.startswith(NEARBY_PREFIX):
        if resolver is None:
            raise ValueError(f"{name} needs a machine-room resolver")
        inner = strategy_by_name(
            name.removeprefix(NEARBY_PREFIX),
            queues=queues,
            consumer_idcs=consumer_idcs,
            resolver=resolver,
            virtual_nodes=virtual_nodes,
        )
        return allocate_machine_room_nearby(inner, resolver)
    if name == "AVG":
        return allocate_averagely
    if name == "AVG_BY_CIRCLE":
        return allocate_averagely_by_circle
    if name == "CONSISTENT_HASH":
        return allocate_consistent_hash(virtual_nodes)
    if name == "CONFIG":
        if queues is None:
            raise ValueError("CONFIG needs the configured queues")
        return allocate_by_config(queues)
    if name == "MACHINE_ROOM":
        if consumer_idcs is None:
            raise ValueError("MACHINE_ROOM needs the consumer IDCs")
        return allocate_by_machine_room(consumer_idcs)
    raise ValueError(f"unknown allocate strategy {name!r}; known: {', '.join(STRATEGY_NAMES)}")


def assignment(
    strategy: Strategy, group: str, mq_all: Sequence[MessageQueue], cid_all: Sequence[str]
) -> dict[str, list[MessageQueue]]:
    """Every consumer's share, as each would compute it: ``{cid: strategy(..., cid, ...)}``.

    For checks and diagnostics (who owns what); a consumer only needs its own share.
    """
    return {cid: strategy(group, cid, mq_all, cid_all) for cid in cid_all}
