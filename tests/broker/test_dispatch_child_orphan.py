"""The dispatcher child of a broker whose parent died before reading its answer ends
quietly: no BrokenPipeError traceback on stderr."""

from __future__ import annotations

import pickle
import subprocess
import sys
from pathlib import Path

from mqstore.consumequeue.shared import FILE_NAME, SharedState
from mqstore.consumequeue.worker import Start
from tests.helpers import make_store


def test_a_child_whose_parent_is_gone_exits_without_a_traceback(tmp_path: Path) -> None:
    store = make_store(tmp_path)
    cfg = store.cfg
    store.close()
    state = SharedState(cfg.root / FILE_NAME, create=True)
    try:
        child = subprocess.Popen(
            [sys.executable, "-m", "mqstore.consumequeue.worker"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        )  # fmt: skip
        assert child.stdin is not None and child.stdout is not None
        child.stdout.close()  # the parent is gone before the child says "ready"
        data = pickle.dumps(Start(cfg, 0, None, restart=False))
        child.stdin.write(len(data).to_bytes(4, "big") + data)
        child.stdin.flush()
        _, err = child.communicate(timeout=30)
    finally:
        state.close()
    assert b"Traceback" not in err, err.decode(errors="replace")
    assert child.returncode == 0
