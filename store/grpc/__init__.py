"""RocketMQ 5.x's client protocol: the gRPC ``apache.rocketmq.v2.MessagingService``
over a broker core, so the official 5.x clients work against mqstore (docs/grpc.md).

- :class:`GrpcEndpoint` / :class:`GrpcConfig`: the server, in-process next to a store
  or beside the remoting server (``mqstore broker --grpc-port``).
- ``service``: the handlers; ``convert``: messages both ways; ``settings``: the
  Telemetry settings exchange; ``clients``: consumer ids per group.
"""

from mqstore.grpc.server import DEFAULT_PORT, GrpcConfig, GrpcEndpoint
from mqstore.grpc.service import ServiceConfig

__all__ = ["DEFAULT_PORT", "GrpcConfig", "GrpcEndpoint", "ServiceConfig"]
