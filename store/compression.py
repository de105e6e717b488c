"""Body compression codecs and their sysflag bits (RocketMQ ``common/compression``).

A compressed record has ``COMPRESSED_FLAG`` (0x1) set; bits 8-10 name the codec:
1 = LZ4, 2 = ZSTD, 3 = ZLIB and 0 = ZLIB (4.9.3 and earlier wrote no type bits).

* ZLIB: an RFC 1950 zlib stream (``Deflater`` + ``DeflaterOutputStream``), level 5 by
  default, header ``78 5E``. What 4.x clients inflate.
* LZ4: the LZ4 *frame* format as lz4-java's ``LZ4FrameOutputStream`` writes it: 4 MB
  max block, independent blocks, no checksums, no content size. Header
  ``04 22 4D 18 60 70 73``. lz4-java refuses dependent (linked) blocks, so we never
  write them.
* ZSTD: a standard zstd frame (magic ``28 B5 2F FD``).
"""

from __future__ import annotations

import enum
import zlib

import lz4.frame
import zstandard

COMPRESSED_FLAG = 0x1
COMPRESSION_TYPE_MASK = 0x700


class CompressionType(enum.IntEnum):
    """Codec id as stored in sysflag bits 8-10."""

    LZ4 = 1
    ZSTD = 2
    ZLIB = 3

    @property
    def flag(self) -> int:
        """The sysflag bits for this codec (without COMPRESSED_FLAG)."""
        return int(self) << 8


class UnknownCompressionError(ValueError):
    """The sysflag names a compression type that does not exist (4..7)."""


def compression_type_of(sys_flag: int) -> CompressionType:
    """Codec of a compressed record; type 0 means ZLIB.

    Raises:
        UnknownCompressionError: type bits 4..7.
    """
    t = (sys_flag & COMPRESSION_TYPE_MASK) >> 8
    if t == 0:
        return CompressionType.ZLIB
    try:
        return CompressionType(t)
    except ValueError:
        raise UnknownCompressionError(
            f"unknown compression type {t} in sysflag {sys_flag:#x}"
        ) from None


def compress(body: bytes, ctype: CompressionType, level: int = 5) -> bytes:
    """Compress ``body`` exactly as a RocketMQ producer would with that codec."""
    if ctype is CompressionType.ZLIB:
        return zlib.compress(body, level)
    if ctype is CompressionType.LZ4:
        # The streaming compressor, not lz4.frame.compress: the one-shot call shrinks
        # the block size to fit small inputs (BD 0x40, 64 KB), lz4-java always says 4 MB.
        c = lz4.frame.LZ4FrameCompressor(
            block_size=lz4.frame.BLOCKSIZE_MAX4MB, block_linked=False, content_checksum=False
        )
        return bytes(c.begin() + c.compress(body) + c.flush())
    return bytes(zstandard.ZstdCompressor(level=level).compress(body))


def decompress(body: bytes, sys_flag: int) -> bytes:
    """Decompress a stored body if ``sys_flag`` says it is compressed, else return it.

    Raises:
        UnknownCompressionError: bad type bits.
        ValueError: the bytes are not a valid stream for the named codec (zlib.error,
            RuntimeError from lz4 and zstandard.ZstdError are converted).
    """
    if not sys_flag & COMPRESSED_FLAG:
        return bytes(body)
    ctype = compression_type_of(sys_flag)
    try:
        if ctype is CompressionType.ZLIB:
            return zlib.decompress(body)
        if ctype is CompressionType.LZ4:
            return bytes(lz4.frame.decompress(body))
        dobj = zstandard.ZstdDecompressor().decompressobj()
        out = bytes(dobj.decompress(body))
        if not dobj.eof:  # a cut-off frame is an error, as in zstd-jni, not a short body
            raise zstandard.ZstdError("truncated zstd frame")
        return out
    except (zlib.error, RuntimeError, zstandard.ZstdError) as e:
        raise ValueError(f"cannot decompress {ctype.name} body: {e}") from e


def parse_type(name: str) -> CompressionType:
    """``"lz4"`` / ``"ZLIB"`` / ... to a CompressionType."""
    return CompressionType[name.upper()]
