"""The broker side of RocketMQ's wire world: what real RocketMQ clients speak to us.

Pure, I/O-free modules (this package's foundation):

- :mod:`store.broker.codes`: request/response codes, language and serialize-type
  bytes, command flag bits and pull sysflag bits, with RocketMQ's numeric values.
- :mod:`store.broker.remoting`: the remoting frame codec, sans-IO like h11:
  :class:`~store.broker.remoting.RemotingCommand`, :func:`~store.broker.remoting.encode`
  and the :class:`~store.broker.remoting.FrameDecoder` for JSON and ROCKETMQ headers.
- :mod:`store.broker.fastjson`: fastjson-compatible JSON (unquoted integer map keys)
  and RocketMQ's temp-file + ``.bak`` config file writes.

The asyncio server, the name server and the request processors build on these and own
all sockets, timers and store access.
"""

from __future__ import annotations
