"""PySpark jobs over store directories: audit, export, reindex.

Every job reads segment files through :mod:`mqstore.tools.spark.reader`, which parses records
with :mod:`mqstore.commitlog.format` inside Spark tasks; no job restates a byte layout.
Each module has ``main(argv) -> int`` for the ``mqstore`` command line and runs under
``python -m mqstore.tools.spark.<job>`` or ``spark-submit tools/spark/<job>.py``.
"""
