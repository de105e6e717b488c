"""Reads by log offset for :class:`~mqstore.commitlog.commitlog.CommitLog` (a mixin).

Readers do not take the put lock: they see bytes up to a segment's wrote position.
"""

from __future__ import annotations

from mqstore.commitlog import format as fmt
from mqstore.commitlog.segments import Segments


class ReadMixin:
    """``read`` and ``decode_at`` over ``self.segments``; CommitLog inherits them."""

    segments: Segments

    def read(self, offset: int, size: int) -> bytes | None:
        """Copy ``size`` bytes at ``offset``; None if not (or no longer) held.

        The copy makes the result safe after the segment is deleted.
        """
        mf = self.segments.find(offset)
        if mf is None:
            return None
        rel = offset - mf.file_from_offset
        if rel + size > mf.wrote_position:
            return None
        return bytes(mf.view[rel : rel + size])

    def decode_at(self, offset: int, *, check_crc: bool = False) -> fmt.DecodeResult | None:
        """Decode the record starting at ``offset``; None if the offset is not held."""
        mf = self.segments.find(offset)
        if mf is None:
            return None
        rel = offset - mf.file_from_offset
        return fmt.decode(mf.view, rel, mf.wrote_position, check_crc=check_crc)
