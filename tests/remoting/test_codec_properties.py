"""Properties of the remoting codec: round trips, arbitrary splits, garbage in."""

from __future__ import annotations

import contextlib
import itertools
import json
import struct
from dataclasses import replace

from hypothesis import given
from hypothesis import strategies as st

from mqstore.remoting.codec import (
    CLOSED,
    NEED_DATA,
    FrameDecoder,
    ProtocolError,
    RemoteProtocolError,
    RemotingCommand,
    encode,
)
from mqstore.remoting.codes import LanguageCode, SerializeType
from tests.strategies import INT16, INT32

TEXT = st.text(max_size=30)  # hypothesis text never holds lone surrogates


@st.composite
def commands(draw: st.DrawFn, serialize_type: SerializeType | None = None) -> RemotingCommand:
    kind = serialize_type if serialize_type is not None else draw(st.sampled_from(SerializeType))
    binary = kind is SerializeType.ROCKETMQ
    small = INT16 if binary else INT32
    # A binary header has no way to say "empty remark": length 0 is null.
    remark = st.none() | (TEXT.filter(bool) if binary else TEXT)
    return RemotingCommand(
        code=draw(small),
        language=draw(st.sampled_from(LanguageCode)),
        version=draw(small),
        opaque=draw(INT32),
        flag=draw(INT32),
        remark=draw(remark),
        ext_fields=draw(st.dictionaries(TEXT, TEXT, max_size=6)),
        body=draw(st.binary(max_size=200)),
        serialize_type=kind,
    )


def decode_all(pieces: list[bytes], eof: bool = False) -> list[RemotingCommand]:
    decoder = FrameDecoder()
    out: list[RemotingCommand] = []
    for piece in [*pieces, b""] if eof else pieces:
        decoder.receive_data(piece)
        while True:
            cmd = decoder.next_command()
            if cmd is NEED_DATA or cmd is CLOSED:
                break
            assert isinstance(cmd, RemotingCommand)
            out.append(cmd)
    return out


def split(data: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({c % (len(data) + 1) for c in cuts} | {0, len(data)})
    return [data[a:b] for a, b in itertools.pairwise(points) if b > a]


@given(commands(SerializeType.JSON))
def test_json_round_trip(cmd: RemotingCommand) -> None:
    assert decode_all([encode(cmd)]) == [cmd]


@given(commands(SerializeType.ROCKETMQ))
def test_binary_round_trip(cmd: RemotingCommand) -> None:
    assert decode_all([encode(cmd)]) == [cmd]


@given(st.lists(commands(), max_size=6), st.lists(st.integers(0, 10_000), max_size=12))
def test_any_split_of_a_stream_yields_the_same_commands(
    cmds: list[RemotingCommand], cuts: list[int]
) -> None:
    stream = b"".join(encode(c) for c in cmds)
    assert decode_all(split(stream, cuts), eof=True) == cmds


@given(commands(SerializeType.JSON))
def test_json_header_is_standard_json_in_fastjson_order(cmd: RemotingCommand) -> None:
    frame = encode(cmd)
    header = json.loads(frame[8 : 8 + (struct.unpack_from(">I", frame, 4)[0] & 0xFFFFFF)])
    assert list(header) == sorted(header)
    assert header["serializeTypeCurrentRPC"] == "JSON"
    assert header["language"] == cmd.language.name


def _only_commands_or_protocol_errors(pieces: list[bytes], eof: bool) -> None:
    with contextlib.suppress(ProtocolError):
        decode_all(pieces, eof)


@given(st.lists(st.binary(max_size=64), max_size=8), st.booleans())
def test_garbage_bytes_give_commands_or_protocol_errors(pieces: list[bytes], eof: bool) -> None:
    _only_commands_or_protocol_errors([p for p in pieces if p], eof)


JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | TEXT,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(TEXT, inner, max_size=4),
    max_leaves=12,
)
HEADER_KEYS = st.sampled_from(
    ["code", "language", "version", "opaque", "flag", "remark", "extFields", "x"]
)


@given(st.dictionaries(HEADER_KEYS, JSON_VALUES, max_size=8), st.binary(max_size=20))
def test_any_json_object_header_gives_a_command_or_remote_error(
    header: dict[str, object], body: bytes
) -> None:
    raw = json.dumps(header).encode()
    frame = struct.pack(">iI", 4 + len(raw) + len(body), len(raw)) + raw + body
    try:
        [cmd] = decode_all([frame])
    except RemoteProtocolError:
        return
    assert all(isinstance(v, str) for v in cmd.ext_fields.values())
    assert cmd.remark is None or isinstance(cmd.remark, str)
    assert cmd.body == body


@given(st.binary(max_size=80), st.sampled_from([0, 1, 2, 255]), st.binary(max_size=10))
def test_any_header_bytes_give_a_command_or_remote_error(
    header: bytes, kind: int, body: bytes
) -> None:
    frame = struct.pack(">iI", 4 + len(header) + len(body), kind << 24 | len(header))
    with contextlib.suppress(RemoteProtocolError):
        decode_all([frame + header + body])


@given(commands(), st.data())
def test_corrupted_frames_give_commands_or_protocol_errors(
    cmd: RemotingCommand, data: st.DataObject
) -> None:
    frame = bytearray(encode(cmd))
    for _ in range(data.draw(st.integers(1, 4))):
        frame[data.draw(st.integers(0, len(frame) - 1))] = data.draw(st.integers(0, 255))
    _only_commands_or_protocol_errors([bytes(frame)], data.draw(st.booleans()))


@given(commands(), st.integers(1, 50))
def test_truncated_frame_needs_data_then_fails_at_eof(cmd: RemotingCommand, cut: int) -> None:
    frame = encode(cmd)
    head = frame[: max(1, len(frame) - cut)]
    assert decode_all([head]) == []
    try:
        decode_all([head], eof=True)
    except RemoteProtocolError:
        return
    raise AssertionError("EOF inside a frame must raise")


@given(commands())
def test_response_round_trip(cmd: RemotingCommand) -> None:
    request = replace(cmd, flag=0)
    response = request.make_response(0, "ok", {"n": 1})
    [decoded] = decode_all([encode(response)])
    assert decoded.opaque == cmd.opaque and decoded.is_response
    assert decoded.serialize_type is cmd.serialize_type
