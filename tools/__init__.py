"""Operator tools around the store: the ``mqstore`` command line, Spark jobs, benchmarks."""
