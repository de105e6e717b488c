"""The broker side of RocketMQ's wire world: what real RocketMQ clients speak to us.

Module map, from the wire inwards:

Front end (owns the sockets and the event loop)

- :mod:`~mqstore.broker.server`: :class:`~mqstore.broker.server.BrokerServer`, remoting
  over an asyncio Protocol on one port, with the built-in name server; runs
  non-blocking requests on the loop thread, blocking ones on a thread pool.
- :mod:`~mqstore.broker.processors`: one function per request code, a request command
  in, a response command out (PULL_MESSAGE answers through a callback).
- :mod:`~mqstore.broker.namesrv`: route and cluster-info bodies for this one broker.

Pure codec (I/O-free)

- :mod:`~mqstore.remoting.codec`: the frame codec, sans-IO: ``RemotingCommand``,
  ``encode`` and the ``FrameDecoder`` for JSON and ROCKETMQ headers.
- :mod:`~mqstore.broker.wire`: request headers and bodies as Python values (send
  headers, batches, heartbeats, lock bodies), ``BadRequestError`` for malformed ones.
- :mod:`~mqstore.remoting.codes`: request/response codes, language and serialize-type
  bytes, flag and pull sysflag bits, with RocketMQ's numeric values.
- :mod:`~mqstore.remoting.fastjson`: fastjson-compatible JSON (unquoted integer map keys)
  and RocketMQ's temp-file + ``.bak`` config file writes.

Broker state and logic (transport-free, thread-safe)

- :mod:`~mqstore.broker.core`: :class:`~mqstore.broker.core.BrokerCore`, what both front
  ends (TCP and ``mqstore.broker.inprocess``) call; owns the managers below.
- :mod:`~mqstore.broker.sending`: sends into the store with topic/queue checks and
  auto-creation; :mod:`~mqstore.broker.sendback`: retry / DLQ topics of send-backs.
- :mod:`~mqstore.broker.pulls`: pull requests, outcomes and the status-to-code table.
- :mod:`~mqstore.broker.hold`: long polling, pulls held until a message arrives.
- :mod:`~mqstore.broker.topics`: topic configs, ``config/topics.json``.
- :mod:`~mqstore.broker.subscriptions`: subscription groups, ``subscriptionGroup.json``.
- :mod:`~mqstore.broker.configtable`: the versioned-table file both of those use.
- :mod:`~mqstore.broker.offsets`: consumer offsets, ``config/consumerOffset.json``.
- :mod:`~mqstore.broker.consumers`: heartbeats, live clients, change notifications.
- :mod:`~mqstore.broker.locks`: orderly-consumer queue leases.
"""

from __future__ import annotations
