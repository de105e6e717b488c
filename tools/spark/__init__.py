"""PySpark jobs over store directories: audit, export, reindex.

Every job reads segment files through :mod:`tools.spark.reader`, which parses records
with :mod:`store.commitlog.format` inside Spark tasks; no job restates a byte layout.
Each module has ``main(argv) -> int`` for the ``mqstore`` command line and runs under
``python -m tools.spark.<job>`` or ``spark-submit tools/spark/<job>.py``.
"""
