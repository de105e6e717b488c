"""How big a compressed body really is, found out without inflating more than a limit.

A body flagged compressed (``COMPRESSED_FLAG``) is stored as sent, but every consumer
inflates it, and so does anything in the broker that reads it decoded. A small body can
inflate to gigabytes, so the broker refuses, at the send, a compressed body that does
not inflate to at most the store's ``max_message_size`` (what an uncompressed body may
be): :func:`inflates_within` inflates at most ``limit + 1`` bytes to decide, whatever
the body claims.
"""

from __future__ import annotations

import zlib

import lz4.frame
import zstandard

from mqstore.compression import COMPRESSED_FLAG, CompressionType, compression_type_of

_CHUNK = 64 * 1024


def inflates_within(body: bytes, sys_flag: int, limit: int) -> bool:
    """True when ``body`` is uncompressed, or a valid stream of the codec ``sys_flag``
    names that inflates to at most ``limit`` bytes; False otherwise (too big, an
    unknown codec, a corrupt or truncated stream). Never holds more than ``limit`` + 1
    inflated bytes."""
    if not sys_flag & COMPRESSED_FLAG:
        return True
    try:
        ctype = compression_type_of(sys_flag)
        if ctype is CompressionType.ZLIB:
            return _zlib_within(body, limit)
        if ctype is CompressionType.LZ4:
            return _lz4_within(body, limit)
        return _zstd_within(body, limit)
    except (ValueError, zlib.error, RuntimeError, zstandard.ZstdError):
        return False


def _zlib_within(body: bytes, limit: int) -> bool:
    d = zlib.decompressobj()
    size = len(d.decompress(body, limit + 1))
    return size <= limit and d.eof


def _lz4_within(body: bytes, limit: int) -> bool:
    d = lz4.frame.LZ4FrameDecompressor()
    size = len(d.decompress(body, max_length=limit + 1))
    return size <= limit and d.eof


def _zstd_within(body: bytes, limit: int) -> bool:
    size = 0
    for chunk in zstandard.ZstdDecompressor().read_to_iter(body, write_size=_CHUNK):
        size += len(chunk)
        if size > limit:
            return False
    d = zstandard.ZstdDecompressor().decompressobj()  # at most ``limit`` bytes now
    d.decompress(body)
    return bool(d.eof)  # a cut-off frame is refused, as zstd-jni refuses it
