"""The numeric vocabularies match RocketMQ's wire values (docs/protocol.md §1.4, §1.5)."""

from __future__ import annotations

import pytest

from mqstore.remoting.codes import (
    LanguageCode,
    PullSysFlag,
    RemotingFlag,
    RequestCode,
    ResponseCode,
    SerializeType,
)

# Spec section 11.4, every row.
REQUEST_CODES = {
    "SEND_MESSAGE": 10, "PULL_MESSAGE": 11, "QUERY_MESSAGE": 12, "QUERY_CONSUMER_OFFSET": 14,
    "UPDATE_CONSUMER_OFFSET": 15, "UPDATE_AND_CREATE_TOPIC": 17, "SEARCH_OFFSET_BY_TIMESTAMP": 29,
    "GET_MAX_OFFSET": 30, "GET_MIN_OFFSET": 31, "GET_EARLIEST_MSG_STORETIME": 32,
    "VIEW_MESSAGE_BY_ID": 33, "HEART_BEAT": 34, "UNREGISTER_CLIENT": 35,
    "CONSUMER_SEND_MSG_BACK": 36, "END_TRANSACTION": 37, "GET_CONSUMER_LIST_BY_GROUP": 38,
    "CHECK_TRANSACTION_STATE": 39, "NOTIFY_CONSUMER_IDS_CHANGED": 40, "LOCK_BATCH_MQ": 41,
    "UNLOCK_BATCH_MQ": 42, "REGISTER_BROKER": 103, "UNREGISTER_BROKER": 104,
    "GET_ROUTEINFO_BY_TOPIC": 105, "GET_BROKER_CLUSTER_INFO": 106, "SEND_MESSAGE_V2": 310,
    "SEND_BATCH_MESSAGE": 320, "QUERY_ASSIGNMENT": 400, "POP_MESSAGE": 200050,
    "ACK_MESSAGE": 200051,
}  # fmt: skip

# Spec section 11.5, every code.
RESPONSE_CODES = {
    "SUCCESS": 0, "SYSTEM_ERROR": 1, "SYSTEM_BUSY": 2, "REQUEST_CODE_NOT_SUPPORTED": 3,
    "FLUSH_DISK_TIMEOUT": 10, "SLAVE_NOT_AVAILABLE": 11, "FLUSH_SLAVE_TIMEOUT": 12,
    "MESSAGE_ILLEGAL": 13, "SERVICE_NOT_AVAILABLE": 14, "TOPIC_NOT_EXIST": 17,
    "PULL_NOT_FOUND": 19, "PULL_RETRY_IMMEDIATELY": 20, "PULL_OFFSET_MOVED": 21,
    "QUERY_NOT_FOUND": 22, "SUBSCRIPTION_NOT_EXIST": 24, "SUBSCRIPTION_NOT_LATEST": 25,
    "SUBSCRIPTION_GROUP_NOT_EXIST": 26, "FLOW_CONTROL": 215,
}  # fmt: skip


@pytest.mark.parametrize(("name", "value"), sorted(REQUEST_CODES.items()))
def test_request_code_matches_spec(name: str, value: int) -> None:
    assert RequestCode[name] == value


@pytest.mark.parametrize(("name", "value"), sorted(RESPONSE_CODES.items()))
def test_response_code_matches_spec(name: str, value: int) -> None:
    assert ResponseCode[name] == value


def test_language_codes_match_spec() -> None:
    names = [
        "JAVA",
        "CPP",
        "DOTNET",
        "PYTHON",
        "DELPHI",
        "ERLANG",
        "RUBY",
        "OTHER",
        "HTTP",
        "GO",
        "PHP",
        "OMS",
        "RUST",
    ]
    assert [LanguageCode[n].value for n in names] == list(range(13))


def test_serialize_types_and_flag_bits() -> None:
    assert (SerializeType.JSON, SerializeType.ROCKETMQ) == (0, 1)
    assert (RemotingFlag.RESPONSE, RemotingFlag.ONEWAY) == (1, 2)


def test_pull_sysflag_bits() -> None:
    assert [int(f) for f in PullSysFlag] == [0x1, 0x2, 0x4, 0x8, 0x10]
    flags = PullSysFlag(0x7)
    assert PullSysFlag.SUSPEND in flags and PullSysFlag.CLASS_FILTER not in flags
