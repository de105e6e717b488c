"""RocketMQ's remoting protocol and the values both of its ends share.

The broker (``mqstore.broker``) and the clients (``mqstore.client``) both import from
here and never from each other, so neither package depends on the other. Pure: no
sockets, no threads, no clocks.

Each name lives in one module and is imported from there (``from
mqstore.remoting.codec import RemotingCommand``): the package itself re-exports
nothing, so a module that needs only ``fastjson`` (the store's schedule service) or the
value types does not load the codec. Module map:

- :mod:`~mqstore.remoting.codec`: the frame codec, sans-IO (``RemotingCommand``,
  ``encode``, ``FrameDecoder``; JSON and ROCKETMQ headers), and its spec; the private
  ``_command``, ``_header`` and ``_frame`` modules implement it.
- :mod:`~mqstore.remoting.codes`: request/response codes, language and serialize-type
  bytes, flag and pull sysflag bits, with RocketMQ's numeric values.
- :mod:`~mqstore.remoting.batch`: the SEND_BATCH_MESSAGE body.
- :mod:`~mqstore.remoting.values`: ``MessageQueue``, heartbeat data, send and pull
  statuses and results, the code-to-status maps.
- :mod:`~mqstore.remoting.errors`: ``BrokerError``, ``TransportError``,
  ``BadRequestError``.
- :mod:`~mqstore.remoting.fastjson`: fastjson-compatible JSON (unquoted integer map keys)
  and RocketMQ's temp-file + ``.bak`` config file writes.
- :mod:`~mqstore.remoting.headers`: reading custom header fields (``ext_int``, ``ext_str``).
- :mod:`~mqstore.remoting.topic_config`: ``TopicConfig``, which a broker persists and
  registers and a name server serves.
- :mod:`~mqstore.remoting.java_properties`: Java ``Properties`` text in admin bodies.
"""
