"""The CommitLog: one append-only log of every message, in mmap'd segments."""
