"""Every Python code block of README.md runs verbatim, so the first thing a new user copies
works. Each block runs as a script in its own process and empty directory (a block may pin
its process to a CPU); a block that talks to a broker gets one from ``mqstore broker``,
found through ``MQSTORE_NAMESRV`` as the README's code reads it."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[2] / "README.md"
SMALL = [
    "--file-size",
    "1M",
    "--cq-file-size",
    "6000",
    "--index-slots",
    "100",
    "--index-num",
    "400",
]


def python_blocks() -> list[tuple[int, str]]:
    """(line number, code) of every ```python block."""
    text = README.read_text()
    return [
        (text.count("\n", 0, m.start()) + 1, m.group(1))
        for m in re.finditer(r"^```python\n(.*?)^```", text, re.DOTALL | re.MULTILINE)
    ]


BLOCKS = python_blocks()


def test_the_readme_has_python_blocks():
    assert len(BLOCKS) >= 3


def _broker(root: Path) -> tuple[subprocess.Popen[str], str]:
    p = subprocess.Popen(
        [sys.executable, "-m", "mqstore.tools.cli", "broker", "--store", str(root), *SMALL,
         "--port", "0"],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
    )  # fmt: skip
    assert p.stdout is not None
    for line in p.stdout:
        if "remoting on " in line:
            return p, line.rsplit("remoting on ", 1)[1].strip()
    raise AssertionError("the broker did not start")


@pytest.mark.parametrize(("line", "code"), BLOCKS, ids=[f"README.md:{n}" for n, _ in BLOCKS])
def test_readme_python_block_runs_verbatim(tmp_path: Path, line: int, code: str):
    script = tmp_path / "snippet.py"
    script.write_text(code)
    env = dict(os.environ)
    broker = None
    if "RemoteTransport" in code:
        broker, env["MQSTORE_NAMESRV"] = _broker(tmp_path / "broker-store")
    try:
        r = subprocess.run(
            [sys.executable, str(script)],
            cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120, check=False,
        )  # fmt: skip
    finally:
        if broker is not None:
            broker.send_signal(signal.SIGTERM)
            broker.communicate(timeout=60)
    assert r.returncode == 0, f"README.md:{line} failed:\n{r.stderr}"
