"""ConsumeQueue: per topic/queue index of fixed 20-byte units into the CommitLog."""
