"""The remoting permission table (``mqstore.broker.acl.PERMISSIONS``): every request code
the broker serves has a row, and the rows the issue-39 bypasses went through say what
RocketMQ's plain ACL says (docs/acl.md §3, §5, §7)."""

from __future__ import annotations

import json
import time

import pytest

from mqstore.broker.acl import (
    PERMISSIONS,
    AccessControl,
    AclDenied,
    AddressPattern,
    Perm,
    Refusal,
    record_need,
    resources_of,
    rule_of,
)
from mqstore.broker.pop_processors import PopCode
from mqstore.broker.processors import NAME_SERVER_PROCESSORS, PROCESSORS
from mqstore.client.acl_hook import AclSigner
from mqstore.remoting.codec import RemotingCommand
from mqstore.remoting.codes import RequestCode

SERVED = sorted({*PROCESSORS, *NAME_SERVER_PROCESSORS, RequestCode.PULL_MESSAGE})

DOC = {
    "accounts": [
        {"accessKey": "admin-key", "secretKey": "admin-secret", "admin": True},
        {"accessKey": "app-key", "secretKey": "app-secret", "defaultTopicPerm": "PUB|SUB",
         "defaultGroupPerm": "SUB", "topicPerms": ["secret=DENY"]},
    ]
}  # fmt: skip


@pytest.mark.parametrize("code", SERVED)
def test_every_served_request_code_has_a_row(code: int) -> None:
    assert code in PERMISSIONS, f"request code {code} is served but has no ACL row"


def test_a_code_without_a_row_is_admin_only() -> None:
    acl = AccessControl.from_dict(DOC)
    cmd = AclSigner("app-key", "app-secret").before_request(RemotingCommand(99999))
    with pytest.raises(AclDenied, match="Need admin permission for request code=99999"):
        acl.check(cmd.code, cmd.ext_fields, cmd.body, "127.0.0.1")
    assert rule_of(99999).admin


_TG = {"topic": "t", "consumerGroup": "g"}
_BODY = json.dumps({"topic": "t", "consumerGroup": "g", "extraInfoList": []}).encode()


@pytest.mark.parametrize(
    ("code", "ext", "body"),
    [
        (PopCode.POP_MESSAGE, _TG, b""),
        (PopCode.ACK_MESSAGE, _TG, b""),
        (PopCode.PEEK_MESSAGE, _TG, b""),
        (PopCode.CHANGE_MESSAGE_INVISIBLETIME, _TG, b""),
        (PopCode.NOTIFICATION, _TG, b""),
        (PopCode.BATCH_ACK_MESSAGE, {}, _BODY),
        (PopCode.QUERY_ASSIGNMENT, {}, _BODY),
        (PopCode.SET_MESSAGE_REQUEST_MODE, {}, _BODY),
    ],
)
def test_pop_family_needs_sub_on_the_group_and_the_topic(
    code: int, ext: dict[str, str], body: bytes
) -> None:
    assert resources_of(code, ext, body) == {"t": Perm.SUB, "%RETRY%g": Perm.SUB}


@pytest.mark.parametrize(
    "code",
    [PopCode.ACK_MESSAGE, PopCode.CHANGE_MESSAGE_INVISIBLETIME, PopCode.PEEK_MESSAGE,
     PopCode.NOTIFICATION, RequestCode.PULL_MESSAGE],
)  # fmt: skip
@pytest.mark.parametrize("missing", ["topic", "consumerGroup"])
def test_a_request_missing_the_field_naming_its_resource_is_refused(
    code: int, missing: str
) -> None:
    ext = {k: v for k, v in _TG.items() if k != missing}
    with pytest.raises(AclDenied, match=f"the field <{missing}> naming the resource is missing"):
        resources_of(code, ext, b"")


@pytest.mark.parametrize("code", [PopCode.BATCH_ACK_MESSAGE, PopCode.QUERY_ASSIGNMENT])
def test_a_body_without_its_group_is_refused(code: int) -> None:
    with pytest.raises(AclDenied, match="consumerGroup"):
        resources_of(code, {}, b'{"topic":"t"}')


@pytest.mark.parametrize("code", [RequestCode.LOCK_BATCH_MQ, RequestCode.UNLOCK_BATCH_MQ])
def test_a_lock_body_without_consumer_group_is_refused(code: int) -> None:
    with pytest.raises(AclDenied, match="the lock request names no consumerGroup"):
        resources_of(code, {}, b'{"clientId":"c","mqSet":[]}')


@pytest.mark.parametrize(
    "code", [RequestCode.VIEW_MESSAGE_BY_ID, RequestCode.CONSUMER_SEND_MSG_BACK]
)
def test_reads_by_offset_are_marked_for_the_record_topic_check(code: int) -> None:
    assert rule_of(code).reads_records


# ------------------------------------------------------- white list: IPv4 entries


@pytest.mark.parametrize("peer", ["::1", "::ffff:127.0.0.1", "localhost", "127.0.0.1.5", ""])
@pytest.mark.parametrize("entry", ["127.0.0.*", "127.0.0.1", "127.0.0.{1,2}", "127.0.0.0-9"])
def test_an_ipv4_entry_does_not_match_a_peer_that_is_not_dotted_ipv4(entry: str, peer: str) -> None:
    assert not AddressPattern(entry).matches(peer)


def test_an_ipv6_peer_still_needs_a_signature_under_an_ipv4_account_white_list() -> None:
    acl = AccessControl.from_dict(
        {"accounts": [{"accessKey": "app-key", "secretKey": "app-secret",
                       "whiteRemoteAddress": "127.0.0.*", "defaultTopicPerm": "PUB"}]}
    )  # fmt: skip
    with pytest.raises(AclDenied, match="Check signature failed"):
        acl.check(10, {"AccessKey": "app-key", "topic": "t"}, b"", "::1")


# ------------------------------------------------- signature bytes, admin fields, time


def test_a_non_ascii_signature_is_an_authentication_refusal_not_a_type_error() -> None:
    acl = AccessControl.from_dict(DOC)
    ext = {"AccessKey": "app-key", "Signature": "sïgnätüre\udcff", "topic": "t"}
    with pytest.raises(AclDenied) as e:
        acl.check(105, ext, b"", "127.0.0.1")
    assert e.value.refusal is Refusal.UNAUTHENTICATED


def test_an_admin_code_with_a_field_it_does_not_take_is_refused() -> None:
    acl = AccessControl.from_dict(DOC)
    # a recorded signed send (producerGroup, ...) re-sent as DELETE_TOPIC_IN_BROKER
    cmd = AclSigner("admin-key", "admin-secret").before_request(
        RemotingCommand(215, ext_fields={"topic": "t", "producerGroup": "pg"})
    )
    with pytest.raises(AclDenied, match=r"does not take the fields \['producerGroup'\]"):
        acl.check(cmd.code, cmd.ext_fields, cmd.body, "127.0.0.1")


def test_an_admin_code_with_its_own_and_rpc_header_fields_passes() -> None:
    acl = AccessControl.from_dict(DOC)
    cmd = AclSigner("admin-key", "admin-secret").before_request(
        RemotingCommand(215, ext_fields={"topic": "t", "bname": "b", "lo": "true"})
    )
    acl.check(cmd.code, cmd.ext_fields, cmd.body, "127.0.0.1")


@pytest.mark.parametrize(
    ("code", "name"), [(10, "bornTimestamp"), (310, "g"), (200050, "bornTime")]
)
def test_a_signed_timestamp_outside_the_window_is_refused(code: int, name: str) -> None:
    acl = AccessControl.from_dict(DOC)
    now = int(time.time() * 1000)
    ext = {"topic": "t", "b": "t", "consumerGroup": "g"}
    fresh = AclSigner("app-key", "app-secret").before_request(
        RemotingCommand(code, ext_fields={**ext, name: str(now - 1000)})
    )
    acl.check(fresh.code, fresh.ext_fields, fresh.body, "127.0.0.1", now_ms=now)
    stale = AclSigner("app-key", "app-secret").before_request(
        RemotingCommand(code, ext_fields={**ext, name: str(now - 3600_000)})
    )
    with pytest.raises(AclDenied, match=f"signed timestamp <{name}>"):
        acl.check(stale.code, stale.ext_fields, stale.body, "127.0.0.1", now_ms=now)


# ------------------------------------------ retry and dead-letter topics: copies of others


@pytest.mark.parametrize(
    "code",
    [RequestCode.PULL_MESSAGE, RequestCode.POP_MESSAGE, RequestCode.PEEK_MESSAGE,
     RequestCode.NOTIFICATION, RequestCode.QUERY_CONSUMER_OFFSET],
)  # fmt: skip
@pytest.mark.parametrize("topic", ["%RETRY%victim", "%RETRY%victim_SecretT", "%RETRY%mallory_T"])
def test_a_read_of_another_groups_retry_topic_is_refused(code: int, topic: str) -> None:
    with pytest.raises(AclDenied, match="retry topic does not match consumer group"):
        resources_of(code, {"topic": topic, "consumerGroup": "mallory"}, b"")


def test_a_group_reads_its_own_retry_topic() -> None:
    need = resources_of(RequestCode.PULL_MESSAGE, {"topic": "%RETRY%g", "consumerGroup": "g"}, b"")
    assert need == {"%RETRY%g": Perm.SUB}


@pytest.mark.parametrize(
    "code", [RequestCode.ACK_MESSAGE, RequestCode.CHANGE_MESSAGE_INVISIBLETIME]
)
def test_an_ack_may_name_the_groups_own_pop_retry_topic(code: int) -> None:
    need = resources_of(code, {"topic": "%RETRY%g_T", "consumerGroup": "g"}, b"")
    assert need == {"%RETRY%g_T": Perm.SUB, "%RETRY%g": Perm.SUB}
    with pytest.raises(AclDenied, match="retry topic does not match consumer group"):
        resources_of(code, {"topic": "%RETRY%victim_T", "consumerGroup": "g"}, b"")


def test_a_dead_letter_topic_also_needs_sub_on_its_group() -> None:
    need = resources_of(
        RequestCode.PULL_MESSAGE, {"topic": "%DLQ%victim", "consumerGroup": "g"}, b""
    )
    assert need == {"%DLQ%victim": Perm.SUB, "%RETRY%g": Perm.SUB, "%RETRY%victim": Perm.SUB}


# ------------------------------------------- metadata reads: GET in 5.x, ANY here

_GET_ROWS = [
    (RequestCode.GET_MAX_OFFSET, {"topic": "t", "queueId": "0"}, {"t": Perm.ANY}),
    (RequestCode.GET_MIN_OFFSET, {"topic": "t", "queueId": "0"}, {"t": Perm.ANY}),
    (RequestCode.SEARCH_OFFSET_BY_TIMESTAMP, {"topic": "t", "timestamp": "0"}, {"t": Perm.ANY}),
    (RequestCode.GET_EARLIEST_MSG_STORETIME, {"topic": "t", "queueId": "0"}, {"t": Perm.ANY}),
    (RequestCode.GET_TOPIC_STATS_INFO, {"topic": "t"}, {"t": Perm.ANY}),
    (RequestCode.QUERY_TOPIC_CONSUME_BY_WHO, {"topic": "t"}, {"t": Perm.ANY}),
    (RequestCode.GET_CONSUMER_CONNECTION_LIST, {"consumerGroup": "g"}, {"%RETRY%g": Perm.ANY}),
    (RequestCode.GET_PRODUCER_CONNECTION_LIST, {"producerGroup": "g"}, {"%RETRY%g": Perm.ANY}),
    (RequestCode.GET_CONSUMER_RUNNING_INFO, {"consumerGroup": "g", "clientId": "c"},
     {"%RETRY%g": Perm.ANY}),
    (RequestCode.GET_CONSUME_STATS, {"consumerGroup": "g"}, {"%RETRY%g": Perm.ANY}),
    (RequestCode.GET_CONSUME_STATS, {"consumerGroup": "g", "topic": "t"},
     {"%RETRY%g": Perm.ANY, "t": Perm.ANY}),
    (RequestCode.QUERY_CONSUME_QUEUE, {"topic": "t", "queueId": "0"}, {"t": Perm.ANY}),
    (RequestCode.QUERY_CONSUME_QUEUE, {"topic": "t", "consumerGroup": "g"},
     {"%RETRY%g": Perm.ANY, "t": Perm.ANY}),
]  # fmt: skip


@pytest.mark.parametrize(("code", "ext", "need"), _GET_ROWS)
def test_a_metadata_read_needs_pub_or_sub_on_what_it_names(
    code: int, ext: dict[str, str], need: dict[str, Perm]
) -> None:
    assert resources_of(code, ext, b"") == need


@pytest.mark.parametrize(
    ("code", "missing"),
    [(RequestCode.GET_MAX_OFFSET, "topic"), (RequestCode.GET_CONSUME_STATS, "consumerGroup"),
     (RequestCode.GET_CONSUMER_RUNNING_INFO, "consumerGroup"),
     (RequestCode.QUERY_CONSUME_QUEUE, "topic")],
)  # fmt: skip
def test_a_metadata_read_without_the_field_naming_its_resource_is_refused(
    code: int, missing: str
) -> None:
    with pytest.raises(AclDenied, match=f"the field <{missing}> naming the resource is missing"):
        resources_of(code, {}, b"")


@pytest.mark.parametrize("perm", ["PUB", "SUB"])
def test_a_producer_or_a_consumer_of_a_topic_reads_its_offsets(perm: str) -> None:
    acl = AccessControl.from_dict(
        {"accounts": [{"accessKey": "app-key", "secretKey": "app-secret",
                       "topicPerms": [f"t={perm}", "secret=DENY"]}]}
    )  # fmt: skip
    signer = AclSigner("app-key", "app-secret")
    ok = signer.before_request(RemotingCommand(30, ext_fields={"topic": "t", "queueId": "0"}))
    acl.check(ok.code, ok.ext_fields, ok.body, "127.0.0.1")
    denied = signer.before_request(
        RemotingCommand(30, ext_fields={"topic": "secret", "queueId": "0"})
    )
    with pytest.raises(AclDenied, match="No default permission for topic:secret"):
        acl.check(denied.code, denied.ext_fields, denied.body, "127.0.0.1")


@pytest.mark.parametrize(
    "code", [RequestCode.VIEW_BROKER_STATS_DATA, RequestCode.GET_BROKER_CONSUME_STATS]
)
def test_broker_wide_statistics_need_admin(code: int) -> None:
    assert rule_of(code).admin


# ------------------------------------ records read without a group: copies of others


def test_a_copy_in_a_pop_retry_topic_needs_its_group_and_its_origin_topic() -> None:
    assert record_need("%RETRY%victim_SecretT", "SecretT") == {
        "%RETRY%victim_SecretT": Perm.SUB,
        "SecretT": Perm.SUB,
        "%RETRY%victim": Perm.SUB,
    }


def test_a_dead_letter_needs_its_group_and_its_origin_topic() -> None:
    assert record_need("%DLQ%g", "T") == {
        "%DLQ%g": Perm.SUB,
        "%RETRY%g": Perm.SUB,
        "T": Perm.SUB,
    }


def test_a_record_of_a_plain_topic_needs_only_its_topic() -> None:
    assert record_need("T", "Other") == {"T": Perm.SUB}
    assert record_need("%RETRY%g", None) == {"%RETRY%g": Perm.SUB}


def test_a_query_by_key_is_marked_for_the_record_check() -> None:
    assert rule_of(RequestCode.QUERY_MESSAGE).reads_records
    need = resources_of(RequestCode.QUERY_MESSAGE, {"topic": "%DLQ%g", "key": "k"}, b"")
    assert need == {"%DLQ%g": Perm.SUB, "%RETRY%g": Perm.SUB}
