"""Benchmarks behind ``mqstore bench NAME``, one module each, all on one harness.

Every module has ``main(argv) -> int``, runs as ``python -m mqstore.tools.bench.NAME``,
takes ``--quick``, ``--json FILE`` and ``--dir DIR`` (see :mod:`._harness`), prints a table
and documents what it measures in its docstring:

* ``commitlog``: puts (async, batch, sync) and recovery against SQLite, persist-queue and
  the raw disk, references measured in the same run;
* ``flush``: the SYNC_FLUSH vs ASYNC_FLUSH lab, throughput and simulated power losses;
* ``putpath``: what one put costs, and its pieces;
* ``pull``: sequential pulls and dispatch lag;
* ``broker``: sends and pulls over TCP against in-process puts;
* ``brokers``: sends over a name-server route spanning two brokers against one;
* ``java``: the real 4.9.8 Java client's sends and pulls against ``mqstore broker`` and
  the real 4.9.8 broker, interleaved, and the ratios;
* ``consume``: produce-to-consume through a consumer group;
* ``ha``: replication throughput and SYNC/ASYNC_MASTER put latency;
* ``spark_audit``: the Spark audit, reindex and export against single-process scans;
* ``grpc``: the 5.x client's send and receive+ack over gRPC against the remoting path;
* ``pop``: POP receive+ack (embedded and over TCP) against queue-level pull, and the
  redelivery delay against the invisible time;
* ``embedded``: put, batch, read back and open after a clean close against SQLite,
  LMDB and persist-queue in one run;
* ``queues``: what a queue costs in a store of 10,000 or 100,000 (disk, memory, put
  rate, open and close) against 4 queues;
* ``timers``: puts with a million timer messages pending against a store without any;
* ``sql92``: a queue read through a SQL92 filter (1 % matching) against reading the
  matches alone.
"""

BENCHMARKS = (
    "commitlog",
    "flush",
    "putpath",
    "pull",
    "broker",
    "brokers",
    "java",
    "consume",
    "ha",
    "spark_audit",
    "grpc",
    "queues",
    "pop",
    "embedded",
    "timers",
    "sql92",
)
"""The module names ``mqstore bench`` accepts."""
