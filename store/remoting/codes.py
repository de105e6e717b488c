"""Numeric vocabularies of RocketMQ's remoting protocol: request and response codes, the
client language byte, the header serialize type, command flag bits and pull sysflag bits.

Every value here is a wire value: it must match RocketMQ's ``RequestCode``,
``ResponseCode`` (with ``RemotingSysResponseCode``), ``LanguageCode``, ``SerializeType``
and ``PullSysFlag`` exactly. Codes that a peer sends and we do not list still decode
(:class:`mqstore.remoting.codec.RemotingCommand` keeps ``code`` a plain ``int``); the
enums name what this project speaks, plus the neighbours a real client may send.

Note that a ROCKETMQ binary header carries the code as a signed short, so codes above
32767 (``POP_MESSAGE`` and friends) can only travel with JSON headers.
"""

from __future__ import annotations

import enum


class RequestCode(enum.IntEnum):
    """What a request asks for (``RemotingCommand.code`` on a request)."""

    SEND_MESSAGE = 10
    PULL_MESSAGE = 11
    QUERY_MESSAGE = 12
    QUERY_BROKER_OFFSET = 13
    QUERY_CONSUMER_OFFSET = 14
    UPDATE_CONSUMER_OFFSET = 15
    UPDATE_AND_CREATE_TOPIC = 17
    GET_ALL_TOPIC_CONFIG = 21
    UPDATE_BROKER_CONFIG = 25
    GET_BROKER_CONFIG = 26
    GET_BROKER_RUNTIME_INFO = 28
    SEARCH_OFFSET_BY_TIMESTAMP = 29
    GET_MAX_OFFSET = 30
    GET_MIN_OFFSET = 31
    GET_EARLIEST_MSG_STORETIME = 32
    VIEW_MESSAGE_BY_ID = 33
    HEART_BEAT = 34
    UNREGISTER_CLIENT = 35
    CONSUMER_SEND_MSG_BACK = 36
    END_TRANSACTION = 37
    GET_CONSUMER_LIST_BY_GROUP = 38
    CHECK_TRANSACTION_STATE = 39
    NOTIFY_CONSUMER_IDS_CHANGED = 40
    LOCK_BATCH_MQ = 41
    UNLOCK_BATCH_MQ = 42
    GET_ALL_CONSUMER_OFFSET = 43
    GET_ALL_DELAY_OFFSET = 45
    CHECK_CLIENT_CONFIG = 46
    PUT_KV_CONFIG = 100
    GET_KV_CONFIG = 101
    DELETE_KV_CONFIG = 102
    REGISTER_BROKER = 103
    UNREGISTER_BROKER = 104
    GET_ROUTEINFO_BY_TOPIC = 105
    GET_BROKER_CLUSTER_INFO = 106
    UPDATE_AND_CREATE_SUBSCRIPTIONGROUP = 200
    GET_ALL_SUBSCRIPTIONGROUP_CONFIG = 201
    GET_TOPIC_STATS_INFO = 202
    GET_CONSUMER_CONNECTION_LIST = 203
    GET_PRODUCER_CONNECTION_LIST = 204
    WIPE_WRITE_PERM_OF_BROKER = 205
    GET_ALL_TOPIC_LIST_FROM_NAMESERVER = 206
    DELETE_SUBSCRIPTIONGROUP = 207
    GET_CONSUME_STATS = 208
    DELETE_TOPIC_IN_BROKER = 215
    DELETE_TOPIC_IN_NAMESRV = 216
    GET_KVLIST_BY_NAMESPACE = 219
    RESET_CONSUMER_CLIENT_OFFSET = 220
    GET_CONSUMER_STATUS_FROM_CLIENT = 221
    INVOKE_BROKER_TO_RESET_OFFSET = 222
    GET_TOPICS_BY_CLUSTER = 224
    QUERY_TOPIC_CONSUME_BY_WHO = 300
    CLEAN_EXPIRED_CONSUMEQUEUE = 306
    GET_CONSUMER_RUNNING_INFO = 307
    CONSUME_MESSAGE_DIRECTLY = 309
    SEND_MESSAGE_V2 = 310
    VIEW_BROKER_STATS_DATA = 315
    CLEAN_UNUSED_TOPIC = 316
    GET_BROKER_CONSUME_STATS = 317
    UPDATE_NAMESRV_CONFIG = 318
    GET_NAMESRV_CONFIG = 319
    SEND_BATCH_MESSAGE = 320
    QUERY_CONSUME_QUEUE = 321
    SEND_REPLY_MESSAGE = 324
    SEND_REPLY_MESSAGE_V2 = 325
    PUSH_REPLY_MESSAGE_TO_CLIENT = 326
    ADD_WRITE_PERM_OF_BROKER = 327
    GET_ALL_PRODUCER_INFO = 328
    DELETE_EXPIRED_COMMITLOG = 329
    LITE_PULL_MESSAGE = 361
    QUERY_ASSIGNMENT = 400
    SET_MESSAGE_REQUEST_MODE = 401
    POP_MESSAGE = 200050
    ACK_MESSAGE = 200051
    PEEK_MESSAGE = 200052
    CHANGE_MESSAGE_INVISIBLETIME = 200053
    NOTIFICATION = 200054
    BATCH_ACK_MESSAGE = 200151


class ResponseCode(enum.IntEnum):
    """How a request went (``RemotingCommand.code`` on a response).

    Client mapping of the pull codes: ``SUCCESS`` -> FOUND, ``PULL_NOT_FOUND`` ->
    NO_NEW_MSG, ``PULL_RETRY_IMMEDIATELY`` -> NO_MATCHED_MSG, ``PULL_OFFSET_MOVED`` ->
    OFFSET_ILLEGAL.
    """

    SUCCESS = 0
    SYSTEM_ERROR = 1
    SYSTEM_BUSY = 2
    REQUEST_CODE_NOT_SUPPORTED = 3
    TRANSACTION_FAILED = 4
    FLUSH_DISK_TIMEOUT = 10
    SLAVE_NOT_AVAILABLE = 11
    FLUSH_SLAVE_TIMEOUT = 12
    MESSAGE_ILLEGAL = 13
    SERVICE_NOT_AVAILABLE = 14
    VERSION_NOT_SUPPORTED = 15
    NO_PERMISSION = 16
    TOPIC_NOT_EXIST = 17
    TOPIC_EXIST_ALREADY = 18
    PULL_NOT_FOUND = 19
    PULL_RETRY_IMMEDIATELY = 20
    PULL_OFFSET_MOVED = 21
    QUERY_NOT_FOUND = 22
    SUBSCRIPTION_PARSE_FAILED = 23
    SUBSCRIPTION_NOT_EXIST = 24
    SUBSCRIPTION_NOT_LATEST = 25
    SUBSCRIPTION_GROUP_NOT_EXIST = 26
    FILTER_DATA_NOT_EXIST = 27
    FILTER_DATA_NOT_LATEST = 28
    INVALID_PARAMETER = 29
    CONSUMER_NOT_ONLINE = 206
    CONSUME_MSG_TIMEOUT = 207
    NO_MESSAGE = 208
    POLLING_FULL = 209
    """POP: too many requests held; retry later."""
    POLLING_TIMEOUT = 210
    """POP: nothing to pop (at once, or by the end of the long poll); the Java 5.x
    client reads it as POLLING_NOT_FOUND."""
    FLOW_CONTROL = 215


class LanguageCode(enum.IntEnum):
    """The sender's client language: a byte in binary headers, the *name* in JSON ones."""

    JAVA = 0
    CPP = 1
    DOTNET = 2
    PYTHON = 3
    DELPHI = 4
    ERLANG = 5
    RUBY = 6
    OTHER = 7
    HTTP = 8
    GO = 9
    PHP = 10
    OMS = 11
    RUST = 12
    NODE_JS = 13


class SerializeType(enum.IntEnum):
    """How a frame's header is encoded: the top byte of the header-meta int."""

    JSON = 0
    ROCKETMQ = 1


V4_9_8 = 409
"""The remoting ``version`` a RocketMQ 4.9.8 process puts on every command it sends
(``MQVersion.Version.V4_9_8.ordinal()``). A 4.9.8 name server reads a REGISTER_BROKER
body as ``RegisterBrokerBody`` only from brokers of version >= V3_0_11; below that it
takes the body as a bare ``TopicConfigSerializeWrapper`` and registers no topics."""


class RemotingFlag(enum.IntFlag):
    """Bits of ``RemotingCommand.flag`` (RocketMQ ``RPC_TYPE`` and ``RPC_ONEWAY``)."""

    RESPONSE = 1 << 0
    """Set on responses; clear on requests."""
    ONEWAY = 1 << 1
    """Set on requests that expect no response."""


class PullSysFlag(enum.IntFlag):
    """Bits of the PULL_MESSAGE ``sysFlag`` header field (RocketMQ ``PullSysFlag``)."""

    COMMIT_OFFSET = 0x1
    """The request carries ``commitOffset`` for the broker to store."""
    SUSPEND = 0x2
    """The broker may hold the request (long polling) when nothing is there yet."""
    SUBSCRIPTION = 0x4
    """The request carries its subscription expression (else the broker's is used)."""
    CLASS_FILTER = 0x8
    """Class filter mode (obsolete filter servers)."""
    LITE_PULL = 0x10
    """The pull comes from a lite pull consumer."""
