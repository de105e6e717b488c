"""The generated protobuf and gRPC modules of ``apache.rocketmq.v2``, in one place.

They come from ``rocketmq-python-client`` (``rocketmq.grpc_protocol``, pinned in
pyproject.toml): the same definitions the official Python 5.x client speaks, so the
server and the client it is tested against cannot disagree on a field (docs/grpc.md,
"Generated code"). Nothing here is hand-written protobuf: this module only names the
pieces the server uses. The generated modules are untyped, hence ``Any``.
"""

from __future__ import annotations

from typing import Any

from rocketmq.grpc_protocol import definition_pb2 as _definition
from rocketmq.grpc_protocol import service_pb2 as _service

pb: Any = _definition
"""``definition.proto``: Message, Resource, Settings, Status, Code, ..."""
svc: Any = _service
"""``service.proto``: the request and response messages."""

SERVICE_NAME = "apache.rocketmq.v2.MessagingService"

Code: Any = pb.Code
MessageType: Any = pb.MessageType
ClientType: Any = pb.ClientType
Permission: Any = pb.Permission


_CODE_NAMES: dict[int, str] = {int(v): str(k) for k, v in Code.items()}
"""Each code's name, read once: the enum wrapper looks a name up by a scan per call."""
OK_CODE = int(Code.OK)


def status(code: int, message: str = "") -> Any:
    """A ``Status`` with ``code`` and ``message`` (the code's name when empty).

    Raises:
        ValueError: ``code`` is no ``Code`` and no message is given.
    """
    if not message:
        name = _CODE_NAMES.get(code)
        message = name if name is not None else Code.Name(code)
    return pb.Status(code=code, message=message)


def ok() -> Any:
    """``Status(OK)``."""
    return pb.Status(code=OK_CODE, message="OK")
