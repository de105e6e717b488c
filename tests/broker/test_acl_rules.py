"""The ACL's pure rules: white-list patterns, permission bits, signing, the YAML file."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mqstore.broker.acl import (
    AccessControl,
    AclConfigError,
    AclDenied,
    AddressPattern,
    Perm,
    parse_perm,
    perm_allows,
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


ext_fields = st.dictionaries(st.text(min_size=1, max_size=8), st.text(max_size=8), max_size=6)


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
