"""Reading a request's custom header fields (``extFields``) the way RocketMQ's
``decodeCommandCustomHeader`` does: a missing required field or a number that is not
one is a bad request, with RocketMQ's remark. Pure."""

from __future__ import annotations

from collections.abc import Mapping

from mqstore.remoting.errors import BadRequestError


def ext_int(ext: Mapping[str, str], name: str, default: int | None = None) -> int:
    """An integer header field.

    Raises:
        BadRequestError: missing (without default) or not an integer.
    """
    value = ext.get(name)
    if value is None or value == "":
        if default is None:
            raise BadRequestError(f"the custom field <{name}> is null")
        return default
    try:
        return int(value)
    except ValueError:
        raise BadRequestError(f"the custom field <{name}> is not a number: {value!r}") from None


def ext_str(ext: Mapping[str, str], name: str, default: str | None = None) -> str:
    """A string header field.

    Raises:
        BadRequestError: missing and no default.
    """
    value = ext.get(name)
    if value is None:
        if default is None:
            raise BadRequestError(f"the custom field <{name}> is null")
        return default
    return value
