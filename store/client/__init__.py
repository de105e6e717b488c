"""Consumer client: rebalance, process queues, consume services, offset stores.

The pure part lives in :mod:`store.client.allocate`: ``MessageQueue`` (ordered and
printed exactly as RocketMQ's) and the queue-allocation strategies, one pure function
per RocketMQ strategy, so Python, Java and JS consumers in one group agree on who owns
which queue. Everything else in this package is I/O around those functions.
"""
