"""A stand-alone name server, as RocketMQ's ``namesrv``: brokers register, clients ask routes.

- :mod:`~mqstore.namesrv.routes`: :class:`~mqstore.namesrv.routes.RouteInfoManager`, the
  route tables (clusters, brokers and their slaves, topic queue data, broker liveness);
  transport-free and thread-safe.
- :mod:`~mqstore.namesrv.bodies`: the wire bodies (RegisterBrokerBody in, TopicRouteData,
  ClusterInfo, TopicList out).
- :mod:`~mqstore.namesrv.server`: :class:`~mqstore.namesrv.server.NameServer`, remoting
  over TCP plus the liveness scan.

Neither the broker nor the client is imported here: a broker registers through
:mod:`mqstore.client.registration`, and the ACL is handed to the server as a
:class:`~mqstore.namesrv.server.RequestGate`.
"""

from __future__ import annotations
