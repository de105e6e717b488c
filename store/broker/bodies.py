"""How big a compressed body really is, found out without inflating more than a limit.

A body flagged compressed (``COMPRESSED_FLAG``) is stored as sent, but every consumer
inflates it, and so does anything in the broker that reads it decoded. A small body can
inflate to gigabytes, so the broker refuses, at the send, a compressed body that does
not inflate to at most the store's ``max_message_size`` (what an uncompressed body may
be): :func:`inflates_within` inflates at most ``limit + 1`` bytes to decide, whatever
the body claims.
"""

from __future__ import annotations

from mqstore.compression import COMPRESSED_FLAG, decompress


def inflates_within(body: bytes, sys_flag: int, limit: int) -> bool:
    """True when ``body`` is uncompressed, or a valid stream of the codec ``sys_flag``
    names that inflates to at most ``limit`` bytes; False otherwise (too big, an
    unknown codec, a corrupt or truncated stream). Never holds more than ``limit`` + 1
    inflated bytes (:func:`mqstore.compression.inflate`)."""
    if not sys_flag & COMPRESSED_FLAG:
        return True
    try:
        decompress(body, sys_flag, limit)
    except ValueError:
        return False
    return True
