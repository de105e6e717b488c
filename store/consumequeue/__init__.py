"""ConsumeQueue: per topic/queue index of fixed 20-byte units into the CommitLog.

* ``format``: the unit layout (the one place that knows it);
* ``queue``: one queue's files (write rules, offsets, recovery, truncation, expiry);
* ``store``: every queue of a store; ``flush``: their flush service;
* ``dispatch``: the reput thread building units and index entries from the CommitLog;
* ``filter``: subscriptions and tag filtering; ``get``: the pull algorithm;
  ``search``: offsets by store time; ``results``: what reads return.
"""
