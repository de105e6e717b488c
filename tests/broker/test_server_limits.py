"""Rule 6 of the server: back-pressure, a cap on buffered partial frames, idle timeout
and fair turns, against real sockets that misbehave."""

from __future__ import annotations

import asyncio
import itertools
import socket
import struct
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from mqstore.broker.core import BrokerCore
from mqstore.broker.server import BrokerServer
from mqstore.limits import ServerLimits
from mqstore.remoting.codec import RemotingCommand, encode
from mqstore.remoting.codes import RequestCode as Rq
from mqstore.remoting.codes import ResponseCode as Rs
from tests.broker.test_server import pull_ext, send_v2
from tests.broker.test_server_robustness import start_broker, stop_broker
from tests.broker.wire_client import WireClient
from tests.helpers import until

pytestmark = pytest.mark.integration


def serve(core: BrokerCore, **limits: object) -> BrokerServer:
    srv = BrokerServer(core, host="127.0.0.1", port=0, limits=ServerLimits(**limits))  # type: ignore[arg-type]
    srv.start()
    return srv


def on_loop(server: BrokerServer, fn: object) -> object:
    async def run() -> object:
        return fn()  # type: ignore[operator]

    return asyncio.run_coroutine_threadsafe(run(), server.loop).result(60)


def unsent_output(server: BrokerServer) -> int:
    """Bytes the server holds for its connections' peers, read on the loop thread."""
    return on_loop(  # type: ignore[return-value]
        server,
        lambda: sum(c.transport.get_write_buffer_size() for c in server.connections if c.transport),
    )


def frames(code: int, ext: dict[str, object], n: int, first_opaque: int = 1) -> bytes:
    return b"".join(
        encode(RemotingCommand(code=code, opaque=first_opaque + i,
                               ext_fields={k: str(v) for k, v in ext.items()}))
        for i in range(n)
    )  # fmt: skip


def non_reading_socket(address: str) -> socket.socket:
    host, port = address.rsplit(":", 1)
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)  # before connect: small window
    s.connect((host, int(port)))
    s.settimeout(0.2)
    return s


def flood(sock: socket.socket, data: bytes, stop: threading.Event) -> None:
    """Send ``data`` again and again, never reading, until ``stop`` (or a close)."""
    view = memoryview(data)
    while not stop.is_set():
        pos = 0
        while pos < len(view) and not stop.is_set():
            try:
                pos += sock.send(view[pos:])
            except TimeoutError:
                continue
            except OSError:
                return


def latency(c: WireClient) -> float:
    t0 = time.monotonic()
    assert c.call(Rq.GET_MAX_OFFSET, {"topic": "T", "queueId": 0}).code == Rs.SUCCESS
    return time.monotonic() - t0


@pytest.fixture
def filled(core: BrokerCore) -> Iterator[BrokerCore]:
    """``core`` with 64 messages of 1 KiB in T-0, so each pull answers 32 KiB."""
    srv = serve(core)
    with WireClient(srv.address) as c:
        for _ in range(64):
            assert send_v2(c, b"x" * 1024).code == Rs.SUCCESS
    srv.stop()
    until(lambda: core.store.max_offset_in_queue("T", 0) == 64, what="64 messages in T-0")
    yield core


def test_a_client_that_never_reads_its_pulls_is_no_longer_read(filled: BrokerCore) -> None:
    high = 64 * 1024
    srv = serve(filled, write_high_water=high, write_low_water=high // 4)
    stop = threading.Event()
    try:
        sock = non_reading_socket(srv.address)
        pulls = frames(Rq.PULL_MESSAGE, pull_ext(0), 200)
        t = threading.Thread(target=flood, args=(sock, pulls, stop), daemon=True)
        t.start()
        time.sleep(1.5)
        held = unsent_output(srv)
        with WireClient(srv.address) as other:
            # served while the flood is held back (a slack of seconds for a loaded machine)
            assert max(latency(other) for _ in range(5)) < 10
        assert held <= high + 256 * 1024, held  # one turn's last answer may pass the mark
    finally:
        stop.set()
        srv.stop()


def test_a_paused_connection_is_served_again_once_it_reads(filled: BrokerCore) -> None:
    high = 64 * 1024
    srv = serve(filled, write_high_water=high, write_low_water=high // 4)
    try:
        sock = non_reading_socket(srv.address)
        n = 40  # 40 answers of 32 KiB: far past the high-water mark
        sock.sendall(frames(Rq.PULL_MESSAGE, pull_ext(0), n))
        time.sleep(0.5)
        sock.settimeout(60)
        client = WireClient.__new__(WireClient)
        client.sock, client.responses, client.pushed = sock, {}, []
        from mqstore.remoting.codec import FrameDecoder

        client.decoder = FrameDecoder()
        client.opaques = itertools.count(n + 1)
        for opaque in range(1, n + 1):
            assert client.wait_response(opaque).code == Rs.SUCCESS
        sock.close()
    finally:
        srv.stop()


def partial_frame(size: int, sent: int) -> bytes:
    """The first ``sent`` bytes of a ``size``-byte JSON frame."""
    header = b'{"code":34,"flag":0,"language":"JAVA","opaque":1,"version":0}'
    head = struct.pack(">ii", size - 4, len(header)) + header
    return (head + b"\0" * (size - len(head)))[:sent]


def is_closed(sock: socket.socket, timeout: float = 3.0) -> bool:
    sock.settimeout(timeout)
    try:
        return sock.recv(1) == b""
    except ConnectionResetError:
        return True
    except TimeoutError:
        return False


def test_partial_frames_over_the_total_cap_close_the_connection_holding_the_most(
    core: BrokerCore,
) -> None:
    cap = 1 << 20
    srv = serve(core, max_buffered_total=cap)
    try:
        host, port = srv.address.rsplit(":", 1)
        hog = socket.create_connection((host, int(port)))
        hog.sendall(partial_frame(900 * 1024, 800 * 1024))
        time.sleep(0.3)
        small = socket.create_connection((host, int(port)))
        small.sendall(partial_frame(900 * 1024, 300 * 1024))  # passes the cap
        assert is_closed(hog, timeout=60)
        assert not is_closed(small, timeout=0.3)
        until(lambda: on_loop(srv, lambda: srv.buffered_total) == 300 * 1024, what="small's bytes")
        with WireClient(srv.address) as good:
            latency(good)  # still served
        small.close()
        until(lambda: on_loop(srv, lambda: srv.buffered_total) == 0, what="small's bytes freed")
    finally:
        srv.stop()


def test_an_idle_connection_is_closed_and_an_active_one_is_not(core: BrokerCore) -> None:
    # the active connection calls every ~0.1 s until the idle one is closed: a 3 s idle
    # timeout leaves it a wide margin on a loaded machine
    srv = serve(core, idle_timeout_s=3.0)
    try:
        host, port = srv.address.rsplit(":", 1)
        idle = socket.create_connection((host, int(port)))
        with WireClient(srv.address) as active:
            deadline = time.monotonic() + 60
            while not is_closed(idle, timeout=0.1):
                assert time.monotonic() < deadline, "the idle connection was never closed"
                latency(active)
            latency(active)  # still served
    finally:
        srv.stop()


def test_the_default_idle_timeout_is_rocketmqs() -> None:
    assert ServerLimits().idle_timeout_s == 120.0


def test_a_flood_of_pipelined_requests_does_not_starve_a_new_client(core: BrokerCore) -> None:
    srv = serve(core)
    stop = threading.Event()
    blob = frames(Rq.GET_MAX_OFFSET, {"topic": "T", "queueId": 0}, 3000)
    socks = [non_reading_socket(srv.address) for _ in range(40)]
    threads = [threading.Thread(target=flood, args=(s, blob, stop), daemon=True) for s in socks]
    try:
        for t in threads:
            t.start()
        time.sleep(1.0)
        with WireClient(srv.address) as new:
            worst = max(latency(new) for _ in range(3))
        assert worst < 1.0, worst
    finally:
        stop.set()
        srv.stop()
        for s in socks:
            s.close()


def rss_bytes(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS")


@pytest.mark.slow
def test_a_broker_process_keeps_its_memory_under_a_client_that_never_reads(
    tmp_path: Path,
) -> None:
    """12 s of PULLs from a client that never reads: the broker process grows by at
    most 64 MiB, and another client's requests keep being answered promptly."""
    proc, address = start_broker(tmp_path / "store")
    stop = threading.Event()
    try:
        with WireClient(address) as c:
            for _ in range(64):
                assert send_v2(c, b"x" * 4096).code == Rs.SUCCESS
        time.sleep(0.5)
        base = rss_bytes(proc.pid)
        sock = non_reading_socket(address)
        pulls = frames(Rq.PULL_MESSAGE, pull_ext(0), 500)
        t = threading.Thread(target=flood, args=(sock, pulls, stop), daemon=True)
        t.start()
        peak, worst = base, 0.0
        with WireClient(address) as other:
            deadline = time.monotonic() + 12
            while time.monotonic() < deadline:
                worst = max(worst, latency(other))
                peak = max(peak, rss_bytes(proc.pid))
                time.sleep(0.25)
        assert peak - base <= 64 << 20, (base, peak)
        assert worst < 1.0, worst
        stop.set()
        sock.close()
    finally:
        stop.set()
        stop_broker(proc)


def test_connections_past_the_cap_are_closed_at_accept_and_the_others_answered(
    core: BrokerCore,
) -> None:
    srv = serve(core, max_connections=2)
    try:
        with WireClient(srv.address) as a, WireClient(srv.address) as b:
            assert a.call(Rq.GET_BROKER_RUNTIME_INFO, {}).code == Rs.SUCCESS
            host, port = srv.address.rsplit(":", 1)
            third = socket.create_connection((host, int(port)))
            with third:
                assert is_closed(third, 5.0)
            assert b.call(Rq.GET_BROKER_RUNTIME_INFO, {}).code == Rs.SUCCESS
        with WireClient(srv.address) as again:  # a closed one's place is free again
            assert again.call(Rq.GET_BROKER_RUNTIME_INFO, {}).code == Rs.SUCCESS
    finally:
        srv.stop()
