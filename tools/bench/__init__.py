"""Benchmarks behind ``mqstore bench``: each module has ``main(argv) -> int``.

* :mod:`mqstore.tools.bench.commitlog`: the issue-2 CommitLog benchmark (async, batch and
  sync puts, abnormal recovery) against SQLite, persist-queue and the raw disk,
  all measured in the same run with interleaved repetitions.
"""
