"""The page a store shares with its dispatcher process (``mqstore.consumequeue.shared``)."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

from mqstore.consumequeue.shared import SharedState, Slot

REPO = Path(__file__).resolve().parents[2]
WRITER = """
import sys, time
from pathlib import Path
from mqstore.consumequeue.shared import SharedState, Slot
st = SharedState(Path(sys.argv[1]), create=False)
end = time.monotonic() + float(sys.argv[2])
v = 1
while time.monotonic() < end:
    for _ in range(1000):
        st.set(Slot.DISPATCHED, v)
        v = v * 3 % 1_000_003 + 1
st.set(Slot.GENERATION, 1)
"""


def test_a_reader_in_another_process_never_sees_a_slot_empty_while_it_is_rewritten(
    tmp_path: Path,
) -> None:
    path = tmp_path / "dispatch.state"
    st = SharedState(path, create=True)
    st.set(Slot.DISPATCHED, 1)
    writer = subprocess.Popen([sys.executable, "-c", WRITER, str(path), "1.5"], cwd=REPO)
    try:
        zeros = reads = 0
        deadline = time.monotonic() + 10
        while st.get(Slot.GENERATION) == 0 and time.monotonic() < deadline:
            for _ in range(1000):
                zeros += st.get(Slot.DISPATCHED) == 0
            reads += 1000
        assert writer.wait(10) == 0
    finally:
        writer.kill()
        st.close()
    assert reads > 10_000
    assert zeros == 0, f"{zeros} of {reads} reads saw 0"
