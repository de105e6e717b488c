"""RocketMQ's request signature (plain ACL), shared by the broker's check and the client's
signer: which bytes are signed and how (docs/acl.md §2).

The signed content is the UTF-8 concatenation of every extFields *value*, in ascending
key order, leaving out ``Signature`` and ``_UNIQUE_KEY_QUERY``, followed by the body.
The signature is base64(HMAC-SHA1(secretKey, content)) (upstream ``AclUtils`` and
``AclSigner``). Keys sort by code point; Java's ``TreeMap`` sorts by UTF-16 unit, which
differs only for keys outside the Basic Multilingual Plane (header field names are ASCII).

Pure: no I/O.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
from collections.abc import Mapping
from typing import Final

ACCESS_KEY: Final = "AccessKey"
SIGNATURE: Final = "Signature"
SECURITY_TOKEN: Final = "SecurityToken"
UNIQUE_MSG_QUERY_FLAG: Final = "_UNIQUE_KEY_QUERY"
_UNSIGNED: Final = frozenset({SIGNATURE, UNIQUE_MSG_QUERY_FLAG})


def content_of(ext_fields: Mapping[str, str], body: bytes) -> bytes:
    """The signed bytes of a request.

    >>> content_of({"b": "2", "a": "1", "Signature": "x"}, b"!")
    b'12!'
    """
    text = "".join(v for k, v in sorted(ext_fields.items()) if k not in _UNSIGNED)
    return text.encode("utf-8") + bytes(body or b"")


def sign(content: bytes, secret_key: str) -> str:
    """base64(HMAC-SHA1(secret_key, content)).

    >>> sign(b"12!", "12345678")
    'N0dud3BTv6B1D6ZfcnBr1Wvnv2k='
    """
    digest = hmac.new(secret_key.encode("utf-8"), content, hashlib.sha1).digest()
    return base64.b64encode(digest).decode("ascii")
