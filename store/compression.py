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

GZIP (RFC 1952) has no sysflag bits: it is the 5.x gRPC protocol's body encoding.

Every inflation in mqstore goes through :func:`inflate`, which takes a hard cap on the
output and refuses as soon as the cap is passed: it never holds more than ``limit`` + 1
inflated bytes (plus one codec chunk), whatever the input claims. A 1 MB body can
inflate to 1000 MiB; checking the size after inflating would have paid for all of it.
"""

from __future__ import annotations

import enum
import zlib

import lz4.frame
import zstandard

COMPRESSED_FLAG = 0x1
COMPRESSION_TYPE_MASK = 0x700
MAX_INFLATED = 64 * 1024 * 1024
"""The cap of :func:`decompress` when the caller names none: far above any body a send
may store (``max_message_size``, 4 MiB by default, is checked inflated at the send)."""
_CHUNK = 64 * 1024
_ZLIB_WBITS = 15
_GZIP_WBITS = 31


class CompressionType(enum.IntEnum):
    """Codec id as stored in sysflag bits 8-10."""

    LZ4 = 1
    ZSTD = 2
    ZLIB = 3

    @property
    def flag(self) -> int:
        """The sysflag bits for this codec (without COMPRESSED_FLAG)."""
        return int(self) << 8


class Stream(enum.Enum):
    """A compressed stream format :func:`inflate` reads."""

    GZIP = "gzip"
    ZLIB = "zlib"
    LZ4 = "lz4"
    ZSTD = "zstd"


_STREAM_OF = {CompressionType.ZLIB: Stream.ZLIB, CompressionType.LZ4: Stream.LZ4,
              CompressionType.ZSTD: Stream.ZSTD}  # fmt: skip


class UnknownCompressionError(ValueError):
    """The sysflag names a compression type that does not exist (4..7)."""


class InflateLimitError(ValueError):
    """A compressed body inflates to more bytes than the caller allows."""


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


def decompress(body: bytes, sys_flag: int, limit: int = MAX_INFLATED) -> bytes:
    """Decompress a stored body if ``sys_flag`` says it is compressed, else return it;
    at most ``limit`` inflated bytes (:func:`inflate`).

    Raises:
        UnknownCompressionError: bad type bits.
        InflateLimitError: the body inflates to more than ``limit`` bytes.
        ValueError: the bytes are not a valid stream for the named codec.
    """
    if not sys_flag & COMPRESSED_FLAG:
        return bytes(body)
    return inflate(body, _STREAM_OF[compression_type_of(sys_flag)], limit)


def inflate(body: bytes, stream: Stream, limit: int) -> bytes:
    """The inflated ``body``, which must be one whole ``stream`` (GZIP: one or more
    members, as Java's ``GZIPInputStream`` reads) of at most ``limit`` bytes.

    The output is produced in bounded steps and the call gives up the moment it passes
    ``limit``: the memory and CPU spent are those of ``limit`` bytes, not of what the
    stream would inflate to.

    Raises:
        InflateLimitError: the stream inflates to more than ``limit`` bytes.
        ValueError: not a valid stream of that format, or cut off (zlib.error,
            RuntimeError from lz4 and zstandard.ZstdError are converted).
    """
    try:
        if stream is Stream.ZLIB:
            return _inflate_zlib(body, limit, _ZLIB_WBITS)
        if stream is Stream.GZIP:
            return _inflate_zlib(body, limit, _GZIP_WBITS)
        if stream is Stream.LZ4:
            return _inflate_lz4(body, limit)
        return _inflate_zstd(body, limit)
    except (zlib.error, RuntimeError, zstandard.ZstdError) as e:
        raise ValueError(f"cannot inflate {stream.name} body: {e}") from e


def _too_big(stream: str, limit: int) -> InflateLimitError:
    return InflateLimitError(f"{stream} body inflates to more than {limit} bytes")


def _inflate_zlib(body: bytes, limit: int, wbits: int) -> bytes:
    out = bytearray()
    rest = bytes(body)
    while True:  # a GZIP body may be several members, each its own stream
        d = zlib.decompressobj(wbits)
        out += d.decompress(rest, limit + 1 - len(out))
        if len(out) > limit:
            raise _too_big("zlib" if wbits == _ZLIB_WBITS else "gzip", limit)
        if not d.eof:
            raise zlib.error("truncated stream")
        rest = d.unused_data
        if wbits == _ZLIB_WBITS or not rest:
            if rest:
                raise zlib.error(f"{len(rest)} bytes after the end of the stream")
            return bytes(out)


def _inflate_lz4(body: bytes, limit: int) -> bytes:
    d = lz4.frame.LZ4FrameDecompressor()
    out = bytes(d.decompress(body, max_length=limit + 1))
    if len(out) > limit:
        raise _too_big("lz4", limit)
    if not d.eof:
        raise RuntimeError("truncated LZ4 frame")
    return out


def _inflate_zstd(body: bytes, limit: int) -> bytes:
    chunks: list[bytes] = []
    size = 0
    for chunk in zstandard.ZstdDecompressor().read_to_iter(body, write_size=_CHUNK):
        size += len(chunk)
        if size > limit:
            raise _too_big("zstd", limit)
        chunks.append(bytes(chunk))
    d = zstandard.ZstdDecompressor().decompressobj()  # at most ``limit`` bytes now
    d.decompress(body)
    if not d.eof:  # a cut-off frame is an error, as in zstd-jni, not a short body
        raise zstandard.ZstdError("truncated zstd frame")
    return b"".join(chunks)


def parse_type(name: str) -> CompressionType:
    """``"lz4"`` / ``"ZLIB"`` / ... to a CompressionType."""
    return CompressionType[name.upper()]
