"""Issue-2 CommitLog benchmark: a thin wrapper over ``mqstore.tools.bench.commitlog``.

Same as ``mqstore bench commitlog``::

    python benchmarks/bench_commitlog.py [--quick] [--json FILE] [--plot FILE.png]

Never collected by pytest (``testpaths = ["tests"]``); the smoke test is
``MQSTORE_BENCH_SMOKE=1 pytest tests/test_bench_smoke.py``.
"""

from __future__ import annotations

import sys

from mqstore.tools.bench.commitlog import main

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
