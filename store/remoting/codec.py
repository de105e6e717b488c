"""RocketMQ's remoting protocol (the broker/name-server RPC), as a pure, sans-IO codec.

This module knows the bytes of one frame and nothing else: no sockets, no clocks, no
request routing. :func:`encode` turns a :class:`RemotingCommand` into bytes; a
:class:`FrameDecoder` is fed whatever arrived (``receive_data``) and hands back whole
commands (``next_command``), like h11.

This module is the facade and the spec: the format and the Rules below are documented
here once, and every public name is re-exported from the modules that implement them,
each with one job: ``mqstore.remoting._command`` (:class:`RemotingCommand`, the
errors, the sentinels, Rule 1's coercion), ``mqstore.remoting._header`` (the JSON
and ROCKETMQ binary headers, both ways) and ``mqstore.remoting._frame`` (length
prefix and header meta: :func:`encode`, :class:`FrameDecoder`).

Frame
-----
Big-endian throughout::

    off        size      field
    0          4         length      signed int: 4 + header_len + body_len (excludes itself)
    4          4         header_meta serialize_type << 24 | header_len (24 bits)
    8          hlen      header      JSON (type 0) or ROCKETMQ binary (type 1)
    8 + hlen   the rest  body        opaque bytes; empty and absent are the same

A whole frame (length prefix included) is at most :data:`FRAME_MAX_LENGTH` = 16 MiB,
Netty's ``LengthFieldBasedFrameDecoder`` limit in RocketMQ's ``NettyDecoder``.
The header-meta vectors of RocketMQ's ``RemotingCommandTest``:

>>> header_meta(261, SerializeType.JSON).hex(" ")
'00 00 01 05'
>>> header_meta(16777215, SerializeType.ROCKETMQ).hex(" ")
'01 ff ff ff'

JSON header
-----------
As fastjson writes it: bean fields in alphabetical order, ``null`` fields left out, no
whitespace, ``language`` as the enum *name*::

    {"code":10,"extFields":{"topic":"T"},"flag":0,"language":"JAVA","opaque":7,
     "remark":"...","serializeTypeCurrentRPC":"JSON","version":0}

Worked example, a HEART_BEAT request without body: a 94-byte header behind
length 98 (``00 00 00 62``) and header meta ``00 00 00 5e``:

>>> frame = encode(RemotingCommand(code=34, opaque=1))
>>> frame[:8].hex(" ")
'00 00 00 62 00 00 00 5e'
>>> print(frame[8:].decode())
{"code":34,"flag":0,"language":"JAVA","opaque":1,"serializeTypeCurrentRPC":"JSON","version":0}
>>> decoder = FrameDecoder()
>>> decoder.receive_data(frame)
>>> decoder.next_command() == RemotingCommand(code=34, opaque=1)
True
>>> decoder.next_command() is NEED_DATA
True

ROCKETMQ binary header
----------------------
::

    off  size  field
    0    2     code          signed short
    2    1     language      LanguageCode byte
    3    2     version       signed short
    5    4     opaque        signed int
    9    4     flag          signed int
    13   4     remark_len    0 means no remark
    17   rlen  remark        UTF-8
    ..   4     ext_len       byte length of the table that follows; 0 means none
    ..   elen  ext table     repeated: short key_len, key UTF-8, int val_len, val UTF-8

So a header without remark or extFields is 21 bytes, and with remark "Sample Remark"
34 (RocketMQ's ``RocketMQSerializableTest``):

>>> binary = RemotingCommand(code=10, serialize_type=SerializeType.ROCKETMQ)
>>> len(encode_header(binary)), len(encode_header(replace(binary, remark="Sample Remark")))
(21, 34)

Rules
-----
Rule 1. Custom headers travel as string values in ``extFields``. Clients written in
other languages send numbers, booleans and even nested JSON there (ali-ons does); the
decoder turns them into the strings Java would see (``7``, ``true``, compact JSON) and
drops ``null`` values, so ``ext_fields`` is always ``dict[str, str]``.

Rule 2. Decoding is tolerant where fastjson is: missing fields take Java's defaults
(code 0, language JAVA, version/opaque/flag 0), numeric strings are accepted for the
int fields, an unknown language becomes ``OTHER``, the JSON ``serializeTypeCurrentRPC``
field is ignored (the header-meta byte decides), and bytes after the binary ext table
are ignored. Everything else malformed is an error: a frame length below 4 or above the
limit, a header longer than the frame, an unknown serialize type, invalid UTF-8, bad
JSON, a header that is not an object, int fields out of range, binary lengths that are
negative or run past the header.

Rule 3. Breaking a rule raises: :class:`RemoteProtocolError` for bytes the peer sent,
:class:`LocalProtocolError` for a command we cannot encode (a binary code that does not
fit a short, a frame over the limit, a response to a response). Arbitrary input bytes
produce commands, ``NEED_DATA`` or a ``ProtocolError``, never anything else. A decoder
that raised stays broken; the caller closes that connection.

Rule 4. ``receive_data(b"")`` means EOF. ``next_command()`` then returns
:data:`CLOSED` between frames and raises ``RemoteProtocolError`` inside one.
"""

from __future__ import annotations

from dataclasses import replace  # noqa: F401  (the docstring examples use it)

from mqstore.remoting._command import (
    CLOSED,
    NEED_DATA,
    Closed,
    LocalProtocolError,
    NeedData,
    ProtocolError,
    RemoteProtocolError,
    RemotingCommand,
    as_ext_value,
    coerce_ext_fields,
)
from mqstore.remoting._frame import (
    FRAME_MAX_LENGTH,
    HEADER_LENGTH_MASK,
    FrameDecoder,
    encode,
    encode_head,
    header_meta,
)
from mqstore.remoting._header import BINARY_HEADER_MIN, decode_header, encode_header
from mqstore.remoting.codes import SerializeType  # noqa: F401  (the docstring examples use it)

__all__ = [
    "BINARY_HEADER_MIN",
    "CLOSED",
    "FRAME_MAX_LENGTH",
    "HEADER_LENGTH_MASK",
    "NEED_DATA",
    "Closed",
    "FrameDecoder",
    "LocalProtocolError",
    "NeedData",
    "ProtocolError",
    "RemoteProtocolError",
    "RemotingCommand",
    "as_ext_value",
    "coerce_ext_fields",
    "decode_header",
    "encode",
    "encode_head",
    "encode_header",
    "header_meta",
]
