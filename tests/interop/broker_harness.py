"""Harness for the ali-ons interop tests: a real broker on 127.0.0.1 and node runners.

:class:`LiveBroker` runs our broker (MessageStore + BrokerCore + BrokerServer, name
server on the same port) inside the test process on a free port; ``restart()`` closes
everything and reopens the same store directory, as a broker restart does (offsets
must come back from ``config/consumerOffset.json``). :func:`run_node` runs one of the
ali-ons scripts next to this file with JSON options and returns its JSON output lines.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

from store import MessageStore, StoreConfig
from store.broker.core import BrokerCore

HERE = Path(__file__).resolve().parent


class LiveBroker:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.store: MessageStore | None = None
        self.core: BrokerCore | None = None
        self.server: Any = None
        self.port = 0

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self) -> LiveBroker:
        from store.broker.server import BrokerServer

        self.store = MessageStore.open(StoreConfig(root_dir=str(self.root)))
        self.core = BrokerCore(self.store)
        self.core.start()
        self.server = BrokerServer(self.core, host="127.0.0.1", port=0)
        self.port = self.server.start()
        return self

    def stop(self) -> None:
        if self.server is not None:
            self.server.stop()
        if self.core is not None:
            self.core.shutdown()
        if self.store is not None:
            self.store.close()
        self.server = self.core = self.store = None

    def restart(self) -> None:
        self.stop()
        self.start()


def run_node(node: str, script: str, opts: dict[str, Any], timeout_s: float = 60) -> list[dict]:
    """Run ``node script '<opts json>'``; its stdout JSON lines (asserts exit 0)."""
    proc = subprocess.run(
        [node, str(HERE / script), json.dumps(opts)],
        capture_output=True,
        text=True,
        timeout=timeout_s,
        check=False,
        cwd=HERE,
    )
    assert proc.returncode == 0, f"{script} failed:\n{proc.stderr[-4000:]}"
    return [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
