"""The slot and chain checks of one index file, for :mod:`mqstore.tools.spark.indexcheck`.

Vectorised with numpy over the file's slot table and entries (see indexcheck's doc).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final

from mqstore.index import format as ifmt
from mqstore.tools.spark.report import Finding


@dataclass(frozen=True, slots=True)
class Geometry:
    """Slots and entries per index file (``max_hash_slot_num``, ``max_index_num``)."""

    slots: int
    num: int

    @property
    def file_size(self) -> int:
        """Bytes of one file."""
        return ifmt.file_size(self.slots, self.num)


MAX_PER_KIND: Final = 10_000
"""Chain findings kept per file; beyond it one summary finding says how many more."""


def _chain_findings(
    rel: str, g: Geometry, count: int, slots: Any, used: Any, ents: Any, *, live: bool = False
) -> list[Finding]:
    """Chain checks of one file (slots -> entries -> previous entries), sorted and capped
    at MAX_PER_KIND; ``used`` are the indices of the non-zero ``slots``.

    Besides each link's range and slot, every entry must be linked exactly once: the
    writer points a slot at its newest entry and each entry at the slot's previous head,
    so an entry nothing links to (a cut chain) or one linked twice (a link that skips
    entries) is lost to lookups. Not judged on a ``live`` file (the entry being added
    links the previous head before the header counts it)."""
    import numpy as np

    home = ents["key_hash"].astype(np.int64) % g.slots  # the slot of each entry
    chain: list[Finding] = []
    v = slots[used]
    out_of_range = (v <= 0) | (v >= count)
    for slot, val in zip(used[out_of_range].tolist(), v[out_of_range].tolist(), strict=True):
        detail = f"slot {slot} -> entry {val} of {count}"
        chain.append(Finding(rel, ifmt.slot_position(slot), "index_bad_chain", detail))
    ok = ~out_of_range
    wrong = ok.copy()
    wrong[ok] = home[v[ok] - 1] != used[ok]
    for slot, val in zip(used[wrong].tolist(), v[wrong].tolist(), strict=True):
        detail = f"slot {slot} -> entry {val} of slot {home[val - 1]}"
        chain.append(Finding(rel, ifmt.slot_position(slot), "index_bad_chain", detail))
    n = np.arange(1, count, dtype=np.int64)
    p = ents["prev_index"].astype(np.int64)
    linked = p != 0
    bad = linked & ~((p > 0) & (p < n))
    for i, pi in zip(n[bad].tolist(), p[bad].tolist(), strict=True):
        detail = f"entry {i} -> previous entry {pi} (must be 1..{i - 1})"
        chain.append(Finding(rel, ifmt.entry_position(g.slots, i), "index_bad_chain", detail))
    good = linked & ~bad
    other = good.copy()
    other[good] = home[p[good] - 1] != home[good]
    for i, pi in zip(n[other].tolist(), p[other].tolist(), strict=True):
        detail = f"entry {i} (slot {home[i - 1]}) -> entry {pi} of another slot"
        chain.append(Finding(rel, ifmt.entry_position(g.slots, i), "index_bad_chain", detail))
    if not live and count > 1:
        refs = np.bincount(np.r_[v[ok], p[good]], minlength=count)[1:count]
        for i in np.flatnonzero(refs != 1).tolist():
            detail = f"entry {i + 1} is linked {refs[i]} times, not once (slot or newer entry)"
            at = ifmt.entry_position(g.slots, i + 1)
            chain.append(Finding(rel, at, "index_bad_chain", detail))
    chain.sort()
    if len(chain) > MAX_PER_KIND:
        more = len(chain) - MAX_PER_KIND
        chain = [*chain[:MAX_PER_KIND], Finding(rel, 0, "index_bad_chain", f"{more} more")]
    return chain
