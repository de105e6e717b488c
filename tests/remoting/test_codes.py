"""The numeric vocabularies match RocketMQ's wire values (docs/protocol.md §1.4, §1.5)."""

from __future__ import annotations

import re
from pathlib import Path

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

PROTOCOL_MD = Path(__file__).resolve().parents[2] / "docs" / "protocol.md"


def documented_response_codes() -> dict[str, int]:
    """The ``NAME value`` list of docs/protocol.md §1.5: every response code the broker
    sends (the codes of spec section 11.5)."""
    text = PROTOCOL_MD.read_text(encoding="utf-8")
    section = text.split("### 1.5 Response codes", 1)[1].split("\n\n", 2)[1]
    return {name: int(value) for name, value in re.findall(r"\b([A-Z_]+) (\d+)\b", section)}


@pytest.mark.parametrize(("name", "value"), sorted(REQUEST_CODES.items()))
def test_request_code_matches_spec(name: str, value: int) -> None:
    assert RequestCode[name] == value


def test_response_codes_match_the_documented_list() -> None:
    documented = documented_response_codes()
    assert {"SUCCESS", "PULL_NOT_FOUND", "FLOW_CONTROL"} <= documented.keys()
    assert {name: ResponseCode[name].value for name in documented} == documented


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
