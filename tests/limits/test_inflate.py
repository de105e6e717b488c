"""``mqstore.compression.inflate``: every codec round-trips, and a bomb is refused as soon
as its output passes the cap, never after inflating it all."""

from __future__ import annotations

import gzip
import tracemalloc
import zlib

import lz4.frame
import pytest
import zstandard
from hypothesis import given
from hypothesis import strategies as st

from mqstore.broker.bodies import inflates_within
from mqstore.compression import (
    COMPRESSED_FLAG,
    CompressionType,
    InflateLimitError,
    Stream,
    compress,
    inflate,
)

MIB = 1 << 20
BOMB = 64 * MIB


def _zeros_zlib(n: int, wbits: int) -> bytes:
    c = zlib.compressobj(9, zlib.DEFLATED, wbits)
    chunk = bytes(MIB)
    out = [c.compress(chunk) for _ in range(n // MIB)]
    return b"".join(out) + c.flush()


def _bomb(stream: Stream) -> bytes:
    """``BOMB`` zero bytes compressed in ``stream``, built without holding them."""
    if stream is Stream.GZIP:
        return _zeros_zlib(BOMB, 31)
    if stream is Stream.ZLIB:
        return _zeros_zlib(BOMB, 15)
    if stream is Stream.LZ4:
        c = lz4.frame.LZ4FrameCompressor(block_size=lz4.frame.BLOCKSIZE_MAX4MB)
        parts = [c.begin()] + [c.compress(bytes(4 * MIB)) for _ in range(BOMB // (4 * MIB))]
        return b"".join(parts) + c.flush()
    z = zstandard.ZstdCompressor().compressobj()
    return b"".join(z.compress(bytes(4 * MIB)) for _ in range(BOMB // (4 * MIB))) + z.flush()


def _encode(stream: Stream, data: bytes) -> bytes:
    if stream is Stream.GZIP:
        return gzip.compress(data)
    return compress(data, CompressionType[stream.name])


@given(st.binary(max_size=4096), st.sampled_from(list(Stream)))
def test_every_stream_inflates_back_to_its_bytes(data: bytes, stream: Stream) -> None:
    assert inflate(_encode(stream, data), stream, len(data)) == data


@given(st.binary(min_size=1, max_size=4096), st.sampled_from(list(Stream)))
def test_one_byte_over_the_cap_is_refused(data: bytes, stream: Stream) -> None:
    with pytest.raises(InflateLimitError):
        inflate(_encode(stream, data), stream, len(data) - 1)


def test_two_gzip_members_inflate_to_both_as_java_reads_them() -> None:
    body = gzip.compress(b"ab") + gzip.compress(b"cd")
    assert inflate(body, Stream.GZIP, 4) == b"abcd"
    with pytest.raises(InflateLimitError):
        inflate(body, Stream.GZIP, 3)


@pytest.mark.parametrize("stream", list(Stream))
def test_a_cut_off_stream_is_refused(stream: Stream) -> None:
    body = _encode(stream, bytes(range(256)) * 64)
    with pytest.raises(ValueError, match="inflate") as e:
        inflate(body[: len(body) // 2], stream, 1 << 20)
    assert not isinstance(e.value, InflateLimitError)


@pytest.mark.parametrize("stream", list(Stream))
def test_a_bomb_is_refused_having_held_no_more_than_the_cap(stream: Stream) -> None:
    body = _bomb(stream)
    assert len(body) < 2 * MIB
    tracemalloc.start()
    try:
        with pytest.raises(InflateLimitError):
            inflate(body, stream, MIB)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 2 * MIB + 8 * MIB, peak  # the cap, the input, one 4 MiB codec block


def test_the_send_check_refuses_a_zlib_bomb_of_the_remoting_codes() -> None:
    flag = COMPRESSED_FLAG | CompressionType.ZLIB.flag
    assert not inflates_within(_bomb(Stream.ZLIB), flag, 4 * MIB)
    assert inflates_within(zlib.compress(bytes(4 * MIB)), flag, 4 * MIB)
