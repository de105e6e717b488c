"""The remoting codec against RocketMQ's byte vectors (docs/protocol.md §1) and by hand."""

from __future__ import annotations

import doctest
import json
import struct
from dataclasses import replace
from typing import Any

import pytest

from mqstore.errors import StoreError
from mqstore.remoting import codec as remoting
from mqstore.remoting.codec import (
    CLOSED,
    FRAME_MAX_LENGTH,
    NEED_DATA,
    FrameDecoder,
    LocalProtocolError,
    ProtocolError,
    RemoteProtocolError,
    RemotingCommand,
    coerce_ext_fields,
    decode_header,
    encode,
    encode_head,
    encode_header,
    header_meta,
)
from mqstore.remoting.codes import (
    LanguageCode,
    RemotingFlag,
    RequestCode,
    ResponseCode,
    SerializeType,
)

JSON, BINARY = SerializeType.JSON, SerializeType.ROCKETMQ


def frame_with_header(header: bytes, body: bytes = b"", serialize_type: int = 0) -> bytes:
    """A frame around arbitrary header bytes (the decoder's view of a peer)."""
    return struct.pack(">iI", 4 + len(header) + len(body), serialize_type << 24 | len(header)) + (
        header + body
    )


def decode_one(data: bytes) -> RemotingCommand:
    decoder = FrameDecoder()
    decoder.receive_data(data)
    cmd = decoder.next_command()
    assert isinstance(cmd, RemotingCommand)
    assert decoder.next_command() is NEED_DATA
    return cmd


def decode_error(data: bytes, *, eof: bool = False) -> RemoteProtocolError:
    decoder = FrameDecoder()
    decoder.receive_data(data)
    if eof:
        decoder.receive_data(b"")
    with pytest.raises(RemoteProtocolError) as info:
        decoder.next_command()
    return info.value


def test_docstring_examples() -> None:
    assert doctest.testmod(remoting, raise_on_error=True).failed == 0


def test_errors_are_store_errors() -> None:
    assert issubclass(ProtocolError, StoreError)
    assert issubclass(LocalProtocolError, ProtocolError)
    assert issubclass(RemoteProtocolError, ProtocolError)


# --- spec byte vectors ---------------------------------------------------------------


def test_mark_protocol_type_json_vector() -> None:
    assert header_meta(261, JSON) == bytes([0x00, 0x00, 0x01, 0x05])


def test_mark_protocol_type_rocketmq_vector() -> None:
    assert header_meta(16777215, BINARY) == bytes([0x01, 0xFF, 0xFF, 0xFF])


def test_header_meta_refuses_a_length_over_24_bits() -> None:
    with pytest.raises(LocalProtocolError):
        header_meta(1 << 24, JSON)


def test_frame_carries_length_and_header_meta() -> None:
    cmd = RemotingCommand(code=10, remark="r", ext_fields={"a": "b"}, body=b"xyz")
    for serialize_type in SerializeType:
        frame = encode(replace(cmd, serialize_type=serialize_type))
        header = encode_header(replace(cmd, serialize_type=serialize_type))
        assert struct.unpack_from(">i", frame)[0] == len(frame) - 4 == 4 + len(header) + 3
        assert frame[4:8] == header_meta(len(header), serialize_type)
        assert frame[8:] == header + b"xyz"


def test_binary_header_without_remark_or_ext_fields_is_21_bytes() -> None:
    assert len(encode_header(RemotingCommand(code=10, serialize_type=BINARY))) == 21


def test_binary_header_with_sample_remark_is_34_bytes() -> None:
    cmd = RemotingCommand(code=10, remark="Sample Remark", serialize_type=BINARY)
    assert len(encode_header(cmd)) == 34


def test_binary_header_field_offsets() -> None:
    cmd = RemotingCommand(
        code=310,
        language=LanguageCode.PYTHON,
        version=413,
        opaque=0x01020304,
        flag=3,
        remark="Sample Remark",
        serialize_type=BINARY,
    )
    header = encode_header(cmd)
    assert struct.unpack_from(">h", header, 0)[0] == 310
    assert header[2] == LanguageCode.PYTHON
    assert struct.unpack_from(">h", header, 3)[0] == 413
    assert struct.unpack_from(">i", header, 5)[0] == 0x01020304
    assert struct.unpack_from(">i", header, 9)[0] == 3
    assert struct.unpack_from(">i", header, 13)[0] == len("Sample Remark")
    assert header[17:30] == b"Sample Remark"
    assert struct.unpack_from(">i", header, 30)[0] == 0


def test_binary_ext_fields_table_layout() -> None:
    cmd = RemotingCommand(code=10, ext_fields={"k": "vé"}, serialize_type=BINARY)
    header = encode_header(cmd)
    table = b"\x00\x01k" + b"\x00\x00\x00\x03" + "vé".encode()
    assert header[17:] == struct.pack(">i", len(table)) + table


# --- JSON header as fastjson writes it -----------------------------------------------


def test_json_header_is_fastjson_form() -> None:
    cmd = RemotingCommand(
        code=RequestCode.PULL_MESSAGE,
        language=LanguageCode.PYTHON,
        version=7,
        opaque=-5,
        flag=2,
        remark="hé",
        ext_fields={"topic": "T", "queueId": "3"},
    )
    assert (
        encode_header(cmd)
        == (
            '{"code":11,"extFields":{"topic":"T","queueId":"3"},"flag":2,"language":"PYTHON",'
            '"opaque":-5,"remark":"hé","serializeTypeCurrentRPC":"JSON","version":7}'
        ).encode()
    )


def test_json_header_leaves_out_null_remark_and_empty_ext_fields() -> None:
    header = json.loads(encode_header(RemotingCommand(code=0, flag=1)))
    assert list(header) == [
        "code",
        "flag",
        "language",
        "opaque",
        "serializeTypeCurrentRPC",
        "version",
    ]


def test_encode_head_plus_body_is_the_frame() -> None:
    cmd = RemotingCommand(code=11, ext_fields={"x": "y"}, body=b"payload" * 100)
    assert encode_head(cmd) + cmd.body == encode(cmd)


# --- decoding what real clients send -------------------------------------------------


def test_ali_ons_style_header_is_coerced_to_strings() -> None:
    # ali-ons: JSON.stringify with numbers and booleans in extFields, no
    # serializeTypeCurrentRPC, and its own key order.
    header = json.dumps(
        {
            "code": 11,
            "language": "JAVA",
            "opaque": 42,
            "flag": 0,
            "version": 121,
            "extFields": {
                "consumerGroup": "g",
                "queueId": 3,
                "queueOffset": 12345678901234,
                "suspend": True,
                "commitable": False,
                "ratio": 0.5,
                "absent": None,
            },
        }
    ).encode()
    cmd = decode_one(frame_with_header(header, b"body"))
    assert cmd == RemotingCommand(
        code=11,
        version=121,
        opaque=42,
        ext_fields={
            "consumerGroup": "g",
            "queueId": "3",
            "queueOffset": "12345678901234",
            "suspend": "true",
            "commitable": "false",
            "ratio": "0.5",
        },
        body=b"body",
    )


def test_nested_ext_field_values_become_compact_json() -> None:
    header = b'{"code":1,"extFields":{"a":{"b":[1, "x"]},"c":[]}}'
    assert decode_one(frame_with_header(header)).ext_fields == {"a": '{"b":[1,"x"]}', "c": "[]"}


def test_missing_json_fields_take_java_defaults() -> None:
    cmd = decode_one(frame_with_header(b"{}"))
    assert cmd == RemotingCommand(code=0, language=LanguageCode.JAVA, opaque=0, flag=0)
    assert cmd.remark is None and cmd.ext_fields == {} and cmd.body == b""


def test_json_int_fields_accept_numeric_strings() -> None:
    cmd = decode_one(frame_with_header(b'{"code":"105","opaque":"-3","flag":1.0}'))
    assert (cmd.code, cmd.opaque, cmd.flag) == (105, -3, 1)


def test_serialize_type_field_in_json_is_ignored() -> None:
    header = b'{"code":1,"serializeTypeCurrentRPC":"ROCKETMQ"}'
    assert decode_one(frame_with_header(header)).serialize_type is JSON


@pytest.mark.parametrize(
    ("language", "expected"),
    [
        ('"GO"', LanguageCode.GO),
        ("3", LanguageCode.PYTHON),
        ('"NODE"', LanguageCode.OTHER),
        ("99", LanguageCode.OTHER),
        ("null", LanguageCode.JAVA),
        ("[1]", LanguageCode.OTHER),
    ],
)
def test_json_language_names_and_unknowns(language: str, expected: LanguageCode) -> None:
    header = b'{"code":1,"language":' + language.encode() + b"}"
    assert decode_one(frame_with_header(header)).language is expected


def test_unknown_binary_language_byte_becomes_other() -> None:
    header = bytearray(encode_header(RemotingCommand(code=1, serialize_type=BINARY)))
    header[2] = 200
    assert decode_one(frame_with_header(bytes(header), serialize_type=1)).language is (
        LanguageCode.OTHER
    )


def test_binary_bytes_after_the_ext_table_are_ignored() -> None:
    cmd = RemotingCommand(code=7, ext_fields={"a": "b"}, serialize_type=BINARY)
    header = encode_header(cmd) + b"future fields"
    assert decode_one(frame_with_header(header, b"B", 1)) == replace(cmd, body=b"B")


def test_coerce_ext_fields_drops_none() -> None:
    assert coerce_ext_fields({"a": 1, "b": None, "c": "x", "d": True}) == {
        "a": "1",
        "c": "x",
        "d": "true",
    }


# --- framing -------------------------------------------------------------------------

COMMANDS = [
    RemotingCommand(code=34, opaque=1),
    RemotingCommand(code=10, opaque=2, ext_fields={"b": "T", "e": "0"}, body=b"hello"),
    RemotingCommand(code=11, opaque=3, remark="r", serialize_type=BINARY, ext_fields={"q": "1"}),
    RemotingCommand(code=0, opaque=3, flag=1, body=bytes(range(256))),
]
STREAM = b"".join(encode(c) for c in COMMANDS)


def drain(decoder: FrameDecoder) -> list[RemotingCommand]:
    out = []
    while isinstance(cmd := decoder.next_command(), RemotingCommand):
        out.append(cmd)
    return out


def test_several_frames_in_one_chunk() -> None:
    decoder = FrameDecoder()
    decoder.receive_data(STREAM)
    assert drain(decoder) == COMMANDS
    assert decoder.buffered == 0


@pytest.mark.parametrize("cut", range(len(STREAM) + 1))
def test_stream_split_at_every_byte_boundary(cut: int) -> None:
    decoder = FrameDecoder()
    got = []
    for piece in (STREAM[:cut], STREAM[cut:]):
        if piece:  # b"" would mean EOF
            decoder.receive_data(piece)
        got += drain(decoder)
    assert got == COMMANDS


def test_stream_fed_one_byte_at_a_time() -> None:
    decoder = FrameDecoder()
    got = []
    for i in range(len(STREAM)):
        decoder.receive_data(STREAM[i : i + 1])
        got += drain(decoder)
    assert got == COMMANDS


def test_eof_between_frames_is_closed() -> None:
    decoder = FrameDecoder()
    decoder.receive_data(encode(COMMANDS[0]))
    decoder.receive_data(b"")
    assert decoder.next_command() == COMMANDS[0]
    assert decoder.next_command() is CLOSED
    assert decoder.next_command() is CLOSED


def test_eof_inside_a_frame_is_an_error() -> None:
    decode_error(encode(COMMANDS[1])[:-1], eof=True)


def test_data_after_eof_is_a_local_error() -> None:
    decoder = FrameDecoder()
    decoder.receive_data(b"")
    with pytest.raises(LocalProtocolError):
        decoder.receive_data(b"x")


# --- the frame limit and malformed frames --------------------------------------------


def test_frame_of_exactly_the_limit_is_accepted() -> None:
    decoder = FrameDecoder()
    decoder.receive_data(struct.pack(">iI", FRAME_MAX_LENGTH - 4, 2))
    assert decoder.next_command() is NEED_DATA


def test_oversize_frame_is_refused_from_its_length_alone() -> None:
    err = decode_error(struct.pack(">i", FRAME_MAX_LENGTH - 3))
    assert str(FRAME_MAX_LENGTH) in str(err)


def test_custom_frame_limit() -> None:
    frame = encode(COMMANDS[1])
    decoder = FrameDecoder(max_frame_length=len(frame) - 1)
    decoder.receive_data(frame)
    with pytest.raises(RemoteProtocolError):
        decoder.next_command()
    assert decode_one(frame) == COMMANDS[1]


@pytest.mark.parametrize("length", [-1, -(2**31), 0, 3])
def test_negative_or_tiny_frame_length_is_refused(length: int) -> None:
    decode_error(struct.pack(">i", length))


def test_header_longer_than_the_frame_is_refused() -> None:
    decode_error(struct.pack(">iI", 10, 7))


def test_max_header_length_in_a_small_frame_is_refused() -> None:
    decode_error(struct.pack(">iI", 100, 0xFFFFFF))


def test_unknown_serialize_type_is_refused() -> None:
    decode_error(struct.pack(">iI", 6, 2 << 24 | 2) + b"{}")


@pytest.mark.parametrize(
    "header",
    [
        b"",
        b"{",
        b"[]",
        b'"code"',
        b"null",
        b'{"code":NaN}',
        b'{"code":Infinity}',
        b'{"code":1e400}',
        b'{"code":2147483648}',
        b'{"opaque":-2147483649}',
        b'{"code":true}',
        b'{"code":"ten"}',
        b'{"code":1.5}',
        b'{"extFields":[]}',
        b'{"extFields":"a=b"}',
        b"\xff\xfe{}",
        b"[" * 100_000,
        b'{"code":' + b"9" * 5000 + b"}",
    ],
)
def test_bad_json_header_is_refused(header: bytes) -> None:
    decode_error(frame_with_header(header))


def _binary(*parts: bytes) -> bytes:
    return struct.pack(">hBhii", 10, 0, 0, 1, 0) + b"".join(parts)


@pytest.mark.parametrize(
    "header",
    [
        b"\x00" * 20,
        _binary(struct.pack(">i", -1), struct.pack(">i", 0)),
        _binary(struct.pack(">i", 5), b"abc", struct.pack(">i", 0)),
        _binary(struct.pack(">i", 0)),
        _binary(struct.pack(">i", 0), struct.pack(">i", -4)),
        _binary(struct.pack(">i", 0), struct.pack(">i", 9), b"\x00\x01k\x00"),
        _binary(struct.pack(">i", 0), struct.pack(">i", 3), b"\xff\xffk"),
        _binary(struct.pack(">i", 0), struct.pack(">i", 7), b"\x00\x01k\xff\xff\xff\xff"),
        _binary(struct.pack(">i", 0), struct.pack(">i", 3), b"\x00\x05k"),
        _binary(struct.pack(">i", 2), b"\xc3\x28", struct.pack(">i", 0)),
        _binary(struct.pack(">i", 0), struct.pack(">i", 8), b"\x00\x01\xff\x00\x00\x00\x01v"),
    ],
)
def test_bad_binary_header_is_refused(header: bytes) -> None:
    decode_error(frame_with_header(header, serialize_type=1))


def test_error_is_sticky() -> None:
    decoder = FrameDecoder()
    decoder.receive_data(struct.pack(">i", -1))
    with pytest.raises(RemoteProtocolError) as first:
        decoder.next_command()
    decoder.receive_data(encode(COMMANDS[0]))
    with pytest.raises(RemoteProtocolError) as second:
        decoder.next_command()
    assert second.value is first.value


def test_decode_header_is_the_inverse_of_encode_header() -> None:
    for cmd in COMMANDS:
        assert decode_header(encode_header(cmd), cmd.serialize_type, cmd.body) == cmd


# --- encoding refusals ---------------------------------------------------------------


def test_binary_header_cannot_carry_a_code_over_a_short() -> None:
    cmd = RemotingCommand(code=RequestCode.POP_MESSAGE, serialize_type=BINARY)
    with pytest.raises(LocalProtocolError, match="code"):
        encode(cmd)
    assert decode_one(encode(replace(cmd, serialize_type=JSON))).code == 200050


@pytest.mark.parametrize("field", ["code", "version", "opaque", "flag"])
def test_json_int_fields_must_fit_an_int(field: str) -> None:
    with pytest.raises(LocalProtocolError, match=field):
        changes: dict[str, Any] = {field: 2**31}
        encode(replace(RemotingCommand(code=1), **changes))


def test_encode_refuses_an_oversize_frame() -> None:
    with pytest.raises(LocalProtocolError, match="exceeds"):
        encode(RemotingCommand(code=10, body=bytes(FRAME_MAX_LENGTH)))
    with pytest.raises(LocalProtocolError):
        encode(RemotingCommand(code=10, body=b"x" * 200), max_frame_length=100)


def test_encode_refuses_a_lone_surrogate() -> None:
    for serialize_type in SerializeType:
        with pytest.raises(LocalProtocolError):
            encode(RemotingCommand(code=1, remark="\ud800", serialize_type=serialize_type))


def test_encode_refuses_non_string_ext_values() -> None:
    cmd = RemotingCommand(code=1, ext_fields={"queueId": 3})  # type: ignore[dict-item]
    for serialize_type in SerializeType:
        with pytest.raises(LocalProtocolError, match="coerce_ext_fields"):
            encode(replace(cmd, serialize_type=serialize_type))


def test_binary_ext_key_longer_than_a_short_is_refused() -> None:
    cmd = RemotingCommand(code=1, ext_fields={"k" * 40_000: "v"}, serialize_type=BINARY)
    with pytest.raises(LocalProtocolError):
        encode(cmd)


# --- commands ------------------------------------------------------------------------


def test_flag_bits() -> None:
    assert not RemotingCommand(code=1).is_response
    assert RemotingCommand(code=1, flag=RemotingFlag.RESPONSE).is_response
    assert RemotingCommand(code=1, flag=RemotingFlag.ONEWAY).is_oneway
    assert not RemotingCommand(code=1, flag=RemotingFlag.RESPONSE).is_oneway


def test_make_response_echoes_opaque_and_serialize_type() -> None:
    request = RemotingCommand(
        code=RequestCode.QUERY_CONSUMER_OFFSET,
        language=LanguageCode.PYTHON,
        opaque=99,
        serialize_type=BINARY,
    )
    response = request.make_response(ResponseCode.SUCCESS, None, {"offset": 250}, b"b")
    assert response == RemotingCommand(
        code=0,
        language=LanguageCode.JAVA,
        opaque=99,
        flag=1,
        ext_fields={"offset": "250"},
        body=b"b",
        serialize_type=BINARY,
    )
    assert response.is_response and decode_one(encode(response)) == response


def test_cannot_respond_to_a_response_or_a_oneway_request() -> None:
    with pytest.raises(LocalProtocolError, match="response"):
        RemotingCommand(code=0, flag=1).make_response(0)
    with pytest.raises(LocalProtocolError, match="oneway"):
        RemotingCommand(code=10, flag=2).make_response(0)


def test_with_opaque_and_hash() -> None:
    cmd = RemotingCommand(code=1, ext_fields={"a": "b"}).with_opaque(5)
    assert cmd.opaque == 5 and cmd.ext_fields == {"a": "b"}
    assert hash(cmd) == hash(RemotingCommand(code=1, opaque=5, ext_fields={"c": "d"}))
