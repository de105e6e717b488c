"""The ACL's pure rules: white-list patterns, permission bits, signing, the YAML file."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mqstore.broker.acl import (
    SIGNED_TIMESTAMP_FIELDS,
    AccessControl,
    AclConfigError,
    AclDenied,
    AddressPattern,
    Perm,
    Refusal,
    parse_perm,
    perm_allows,
    resources_of,
)
from mqstore.client.acl_hook import AclSigner
from mqstore.remoting.codec import RemotingCommand
from mqstore.remoting.signing import content_of, sign

DOC = {"accounts": [{"accessKey": "ak-12345", "secretKey": "sk-123456", "defaultTopicPerm": "PUB"}]}


@pytest.mark.parametrize(
    ("pattern", "host", "ok"),
    [
        ("*", "8.8.8.8", True),
        ("192.168.1.*", "192.168.1.77", True),
        ("192.168.1.*", "192.168.2.77", False),
        ("192.168.1.1-10", "192.168.1.10", True),
        ("192.168.1.1-10", "192.168.1.11", False),
        ("192.168.1.{3,5}", "192.168.1.5", True),
        ("192.168.1.{3,5}", "192.168.1.4", False),
        ("10.0.0.0/8", "10.2.3.4", True),
        ("::1", "::1", True),
        ("10.1.1.1", "10.1.1.1", True),
        ("", "10.1.1.1", False),
    ],
)
def test_white_address_patterns(pattern: str, host: str, ok: bool) -> None:
    assert AddressPattern(pattern).matches(host) is ok


@pytest.mark.parametrize("bad", ["1.2.3", "1.2.3.300", "a.b.c.d", "1.2.3.9-2"])
def test_bad_white_address_is_a_config_error(bad: str) -> None:
    with pytest.raises(AclConfigError):
        AddressPattern(bad)


def test_perm_strings_and_rules() -> None:
    assert parse_perm("PUB|SUB") == parse_perm("SUB|PUB") == Perm.PUB | Perm.SUB
    assert parse_perm(None) is Perm.DENY and parse_perm("bogus") is Perm.DENY
    assert perm_allows(Perm.SUB, Perm.PUB | Perm.SUB)
    assert not perm_allows(Perm.SUB, Perm.PUB)
    assert perm_allows(Perm.ANY, Perm.SUB)
    assert not perm_allows(Perm.PUB, Perm.DENY | Perm.PUB)


ext_fields = st.dictionaries(
    st.text(min_size=1, max_size=8).filter(lambda k: k not in SIGNED_TIMESTAMP_FIELDS),
    st.text(max_size=8),
    max_size=6,
)


@given(ext_fields, st.binary(max_size=64))
def test_a_signed_request_verifies(ext: dict[str, str], body: bytes) -> None:
    acl = AccessControl.from_dict(DOC)
    cmd = AclSigner("ak-12345", "sk-123456").before_request(
        RemotingCommand(105, ext_fields=ext, body=body)
    )
    acl.check(cmd.code, cmd.ext_fields, cmd.body, "1.2.3.4")


@given(ext_fields, st.binary(min_size=1, max_size=64))
def test_a_changed_body_fails(ext: dict[str, str], body: bytes) -> None:
    acl = AccessControl.from_dict(DOC)
    cmd = AclSigner("ak-12345", "sk-123456").before_request(
        RemotingCommand(105, ext_fields=ext, body=body)
    )
    with pytest.raises(AclDenied, match="Check signature failed"):
        acl.check(cmd.code, cmd.ext_fields, body + b"!", "1.2.3.4")


def test_signed_content_is_sorted_values_then_body() -> None:
    ext = {"topic": "T", "AccessKey": "ak", "Signature": "ignored", "a": "1"}
    assert content_of(ext, b"B") == b"ak1TB"  # AccessKey < a < topic (code points)
    assert sign(b"ak1TB", "sk-123456") == sign(content_of(ext, b"B"), "sk-123456")


def test_upstream_example_file_loads(tmp_path: Path) -> None:
    f = tmp_path / "plain_acl.yml"
    f.write_text(
        "globalWhiteRemoteAddresses:\n  - 10.10.103.*\n  - 192.168.0.*\n"
        "accounts:\n"
        "  - accessKey: RocketMQ\n    secretKey: 12345678\n    whiteRemoteAddress:\n"
        "    admin: false\n    defaultTopicPerm: DENY\n    defaultGroupPerm: SUB\n"
        "    topicPerms:\n      - topicA=DENY\n      - topicB=PUB|SUB\n      - topicC=SUB\n"
        "    groupPerms:\n      - groupA=DENY\n      - groupB=PUB|SUB\n      - groupC=SUB\n"
        "  - accessKey: rocketmq2\n    secretKey: 12345678\n"
        "    whiteRemoteAddress: 192.168.1.*\n    admin: true\n"
    )
    acl = AccessControl.load(f)
    assert set(acl.accounts) == {"RocketMQ", "rocketmq2"}
    assert acl.accounts["RocketMQ"].secret_key == "12345678"
    assert acl.accounts["RocketMQ"].resource_perms["%RETRY%groupB"] == Perm.PUB | Perm.SUB
    assert acl.admin() is acl.accounts["rocketmq2"]


def test_not_yaml_is_a_config_error(tmp_path: Path) -> None:
    f = tmp_path / "plain_acl.yml"
    f.write_text("accounts: [unclosed\n")
    with pytest.raises(AclConfigError, match="not valid YAML"):
        AccessControl.load(f)


# ------------------------------------------------- resources per remoting request code
# Upstream PlainAccessResource.parse(RemotingCommand, ...): which resource each request
# code touches and the permission it needs (docs/acl.md §3), then our additions (§5).

_HB = (
    b'{"clientID":"c","producerDataSet":[{"groupName":"pg"}],"consumerDataSet":[{"groupName":'
    b'"cg","subscriptionDataSet":[{"topic":"t1"},{"topic":"%RETRY%cg"}]}]}'
)
_UPSTREAM_TABLE = [
    (10, {"topic": "t", "producerGroup": "pg"}, b"", {"t": Perm.PUB}),
    (10, {"topic": "%RETRY%g", "producerGroup": "pg"}, b"", {"%RETRY%g": Perm.SUB}),
    (310, {"a": "pg", "b": "t"}, b"", {"t": Perm.PUB}),
    (310, {"a": "pg", "b": "%RETRY%g"}, b"", {"%RETRY%g": Perm.SUB}),
    (320, {"a": "pg", "b": "t"}, b"", {"t": Perm.PUB}),
    (36, {"group": "g", "originTopic": "t", "offset": "0"}, b"", {"%RETRY%g": Perm.SUB}),
    (11, {"topic": "t", "consumerGroup": "g"}, b"", {"t": Perm.SUB, "%RETRY%g": Perm.SUB}),
    (12, {"topic": "t", "key": "k"}, b"", {"t": Perm.SUB}),
    (34, {}, _HB, {"%RETRY%cg": Perm.SUB, "t1": Perm.SUB}),
    (35, {"clientID": "c", "consumerGroup": "g"}, b"", {"%RETRY%g": Perm.SUB}),
    (35, {"clientID": "c", "producerGroup": "pg"}, b"", {}),
    (38, {"consumerGroup": "g"}, b"", {"%RETRY%g": Perm.SUB}),
    (15, {"topic": "t", "consumerGroup": "g", "queueId": "0"}, b"", {"t": Perm.SUB,
                                                                      "%RETRY%g": Perm.SUB}),
    # GET_MAX_OFFSET, SEARCH_OFFSET_BY_TIMESTAMP: signature only in 4.x; 5.x's GET, ANY here
    (30, {"topic": "t", "queueId": "0"}, b"", {"t": Perm.ANY}),
    (29, {"topic": "t", "queueId": "0", "timestamp": "0"}, b"", {"t": Perm.ANY}),
    (33, {"offset": "0"}, b"", {}),  # VIEW_MESSAGE_BY_ID
    (105, {"topic": "t"}, b"", {}),  # GET_ROUTEINFO_BY_TOPIC
]  # fmt: skip


@pytest.mark.parametrize(("code", "ext", "body", "need"), _UPSTREAM_TABLE)
def test_resources_of_each_request_code_follow_upstream(
    code: int, ext: dict[str, str], body: bytes, need: dict[str, Perm]
) -> None:
    assert resources_of(code, ext, body) == need


def test_query_consumer_offset_needs_topic_and_group_as_our_addition() -> None:
    need = resources_of(14, {"topic": "t", "consumerGroup": "g", "queueId": "0"}, b"")
    assert need == {"t": Perm.SUB, "%RETRY%g": Perm.SUB}


def _signed(secret: str, code: int, ext: dict[str, str]) -> RemotingCommand:
    return AclSigner("ak-12345", secret).before_request(RemotingCommand(code, ext_fields=ext))


def test_a_refused_topic_is_named_topic_colon_as_upstream_print_str() -> None:
    acl = AccessControl.from_dict(
        {"accounts": [{"accessKey": "ak-12345", "secretKey": "sk-123456"}]}
    )
    cmd = _signed("sk-123456", 11, {"topic": "t", "consumerGroup": "g"})
    with pytest.raises(AclDenied) as e:
        acl.check(cmd.code, cmd.ext_fields, cmd.body, "127.0.0.1")
    assert str(e.value) == "No default permission for topic:t"
    assert e.value.refusal is Refusal.FORBIDDEN


def test_a_wrong_signature_is_an_authentication_refusal() -> None:
    acl = AccessControl.from_dict(DOC)
    cmd = _signed("not-the-secret", 10, {"topic": "t"})
    with pytest.raises(AclDenied) as e:
        acl.check(cmd.code, cmd.ext_fields, cmd.body, "127.0.0.1")
    assert e.value.refusal is Refusal.UNAUTHENTICATED
