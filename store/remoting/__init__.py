"""RocketMQ's remoting protocol and the values both of its ends share.

The broker (``mqstore.broker``) and the clients (``mqstore.client``) both import from
here and never from each other, so neither package depends on the other. Pure: no
sockets, no threads, no clocks.

Module map:

- :mod:`~mqstore.remoting.codec`: the frame codec, sans-IO (``RemotingCommand``,
  ``encode``, ``FrameDecoder``; JSON and ROCKETMQ headers), and its spec; the private
  ``_command``, ``_header`` and ``_frame`` modules implement it.
- :mod:`~mqstore.remoting.codes`: request/response codes, language and serialize-type
  bytes, flag and pull sysflag bits, with RocketMQ's numeric values.
- :mod:`~mqstore.remoting.batch`: the SEND_BATCH_MESSAGE body.
- :mod:`~mqstore.remoting.values`: ``MessageQueue``, heartbeat data, send and pull
  statuses and results, the code-to-status maps.
- :mod:`~mqstore.remoting.errors`: ``BrokerError``, ``TransportError``,
  ``BadRequestError``.
- :mod:`~mqstore.remoting.fastjson`: fastjson-compatible JSON (unquoted integer map keys)
  and RocketMQ's temp-file + ``.bak`` config file writes.
"""

from __future__ import annotations

from mqstore.remoting.batch import BatchEntry, decode_batch, encode_batch
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
    encode,
    encode_head,
)
from mqstore.remoting.codes import (
    LanguageCode,
    PullSysFlag,
    RemotingFlag,
    RequestCode,
    ResponseCode,
    SerializeType,
)
from mqstore.remoting.errors import BadRequestError, BrokerError, TransportError
from mqstore.remoting.values import (
    PULL_STATUS,
    SEND_STATUS,
    ConsumeFromWhere,
    ConsumerData,
    ConsumeType,
    Heartbeat,
    MessageModel,
    MessageQueue,
    PullQuery,
    PullReply,
    PullStatus,
    SendResult,
    SendStatus,
    SubscriptionData,
)

__all__ = [
    "CLOSED",
    "FRAME_MAX_LENGTH",
    "NEED_DATA",
    "PULL_STATUS",
    "SEND_STATUS",
    "BadRequestError",
    "BatchEntry",
    "BrokerError",
    "ConsumeFromWhere",
    "ConsumeType",
    "ConsumerData",
    "FrameDecoder",
    "Heartbeat",
    "LanguageCode",
    "LocalProtocolError",
    "MessageModel",
    "MessageQueue",
    "ProtocolError",
    "PullQuery",
    "PullReply",
    "PullStatus",
    "PullSysFlag",
    "RemoteProtocolError",
    "RemotingCommand",
    "RemotingFlag",
    "RequestCode",
    "ResponseCode",
    "SendResult",
    "SendStatus",
    "SerializeType",
    "SubscriptionData",
    "TransportError",
    "coerce_ext_fields",
    "decode_batch",
    "encode",
    "encode_batch",
    "encode_head",
]
