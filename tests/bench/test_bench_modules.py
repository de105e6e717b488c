"""Every benchmark ``mqstore bench`` names is a module on the shared harness, and runs.

The quick runs check that a benchmark reports every figure it documents, not the
figures' values: those depend on the machine and are read by a person.
"""

from __future__ import annotations

import argparse
import importlib
import json
from pathlib import Path

import pytest

from mqstore.tools.bench import BENCHMARKS
from mqstore.tools.cli import build_parser


@pytest.mark.parametrize("name", BENCHMARKS)
def test_each_cli_benchmark_is_a_module_with_a_documented_main(name: str) -> None:
    mod = importlib.import_module(f"mqstore.tools.bench.{name}")
    assert callable(mod.main)
    assert mod.__doc__ and f"mqstore bench {name}" in mod.__doc__


@pytest.mark.parametrize("name", BENCHMARKS)
def test_the_cli_passes_each_benchmark_the_options_after_its_name(name: str) -> None:
    args = build_parser().parse_args(["bench", name, "--quick", "--json", "out.json"])
    assert (args.what, args.options) == (name, ["--quick", "--json", "out.json"])


@pytest.mark.slow
def test_putpath_quick_reports_the_put_its_fast_path_steps_and_the_cpu_split(
    tmp_path: Path,
) -> None:
    from mqstore.tools.bench import putpath

    out = tmp_path / "putpath.json"
    assert putpath.main(["--quick", "--dir", str(tmp_path), "--json", str(out)]) == 0
    report = json.loads(out.read_text(encoding="utf-8"))
    assert set(report["put_ns"]) == {"put_message", "put_messages(32), per message"}
    assert all(v > 0 for v in report["put_ns"].values())
    steps = report["pieces_ns"]
    assert {putpath.FRAMING, putpath.APPEND, putpath.BATCH_FRAMING, putpath.BATCH_APPEND} <= set(
        steps
    )
    assert not any("flusher" in k or "encode" in k for k in steps)  # no general-path pieces
    split = report["cpu_us_per_message"]
    assert split["whole process"] >= split["producer thread"] > 0
    assert split["whole process, index off"] > 0
    assert split["whole process, put_messages(32)"] >= split["producer thread, put_messages(32)"]
    assert [p.name for p in tmp_path.iterdir()] == ["putpath.json"]  # work dir removed


@pytest.mark.slow
def test_pull_quick_reports_every_walk_and_the_dispatch_lag(tmp_path: Path) -> None:
    from mqstore.tools.bench import pull

    out = tmp_path / "pull.json"
    assert pull.main(["--quick", "--dir", str(tmp_path), "--json", str(out)]) == 0
    report = json.loads(out.read_text(encoding="utf-8"))
    for walk in ("decoded_1q", "decoded_8q", "raw_1q", "raw_8q"):
        assert report[f"pull_{walk}"]["messages"] == 5_000, walk
    lag = report["dispatch_lag"]
    assert lag["messages"] > 0 and 0 < lag["p50_ms"] <= lag["p99_ms"] <= lag["max_ms"]


@pytest.mark.slow
def test_pop_quick_reports_every_receive_rate_and_each_redelivery(tmp_path: Path) -> None:
    from mqstore.tools.bench import pop

    out = tmp_path / "pop.json"
    assert pop.main(["--quick", "--dir", str(tmp_path), "--json", str(out)]) == 0
    report = json.loads(out.read_text(encoding="utf-8"))
    for flush in ("ASYNC_FLUSH", "SYNC_FLUSH"):
        rates = report[flush]
        assert set(rates) == {"embedded_pop", "embedded_pop_batch_ack", "embedded_pull",
                              "tcp_pop", "tcp_pop_batch_ack", "tcp_pull"}, flush  # fmt: skip
        assert all(v > 0 for v in rates.values())
    assert {int(k) for k in report["redelivery_ms"]} == set(pop.INVISIBLE_MS)
    assert all(len(v) == 3 for v in report["redelivery_ms"].values())
    assert [p.name for p in tmp_path.iterdir()] == ["pop.json"]  # work dir removed


def _over_tcp_here(tmp_path: Path, threads: int) -> list[dict[str, object]]:
    """The rows of ``bench broker``'s over_tcp (8 messages per thread) against a
    ``BrokerServer`` in this process."""
    from mqstore.broker.core import BrokerConfig, BrokerCore
    from mqstore.broker.server import BrokerServer
    from mqstore.tools.bench import broker
    from tests.helpers import make_store

    store = make_store(tmp_path)
    core = BrokerCore(store, BrokerConfig())
    core.start()
    server = BrokerServer(core, host="127.0.0.1", port=0)
    port = server.start()
    try:
        rows = broker.Rows()
        broker.over_tcp(rows, f"127.0.0.1:{port}", "here", 16, 8, threads, None)
    finally:
        server.stop()
        core.shutdown()
        store.close()
    return rows.rows


def test_broker_over_tcp_with_fewer_threads_than_queues_pulls_every_queue(
    tmp_path: Path,
) -> None:
    """``--threads 2``: the pull row with one connection per queue (4) still runs."""
    from mqstore.tools.bench import broker

    rows = _over_tcp_here(tmp_path, 2)
    pulled = {r["label"]: r["messages"] for r in rows if str(r["label"]).startswith("pull")}
    sent = 2 * 8 * 2 + broker.QUEUES  # send + send_batch per thread, one per queue first
    assert pulled == {"pull, 1 connection, here": sent, "pull, 4 connections, here": sent}


def test_broker_pull_rows_time_only_pulls_that_return_messages(tmp_path: Path) -> None:
    """Each queue holds fewer than 32 messages (one pull's worth): a pull row takes one
    pull per queue, none for a drained queue's end."""
    from mqstore.tools.bench import broker

    rows = _over_tcp_here(tmp_path, 2)
    requests = {r["label"]: r["requests"] for r in rows if str(r["label"]).startswith("pull")}
    assert requests == {"pull, 1 connection, here": broker.QUEUES,
                        "pull, 4 connections, here": broker.QUEUES}  # fmt: skip


def test_quick_sets_each_options_quick_value_and_leaves_the_rest_at_default(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from mqstore.tools.bench._harness import Benchmark, Option

    seen: dict[str, object] = {}

    def measure(work: Path, args: argparse.Namespace) -> dict[str, object]:
        seen.update(vars(args), work_empty=not any(work.iterdir()))
        return {"figure": 1}

    bench = Benchmark("example", "doc", (
        Option("--lag-seconds", float, 3.0, "seconds", quick=0.5),
        Option("--threads", int, 8, "threads"),
    ), measure, lambda out, _args: f"figure {out['figure']}")  # fmt: skip
    assert bench.main(["--quick", "--dir", str(tmp_path)]) == 0
    assert (seen["lag_seconds"], seen["threads"], seen["work_empty"]) == (0.5, 8, True)
    assert capsys.readouterr().out == "figure 1\n"


def test_an_option_given_on_the_command_line_is_kept_without_quick(tmp_path: Path) -> None:
    from mqstore.tools.bench._harness import Benchmark, Option

    seen: dict[str, object] = {}

    def measure(_work: Path, args: argparse.Namespace) -> dict[str, object]:
        seen.update(vars(args))
        return {}

    bench = Benchmark("example", None, (Option("--rounds", int, 40, "", quick=3),), measure)
    assert bench.main(["--rounds", "7", "--dir", str(tmp_path)]) == 0
    assert seen["rounds"] == 7


@pytest.mark.slow
def test_embedded_quick_reports_every_contender_and_ratio_of_each_section(tmp_path: Path) -> None:
    from mqstore.tools.bench import embedded

    out = tmp_path / "embedded.json"
    argv = ["--quick", "--reps", "1", "--duration", "0.05", "--dir", str(tmp_path)]
    argv += ["--read-messages", "500", "--open-messages", "1000", "--json", str(out)]
    assert embedded.main(argv) == 0
    report = json.loads(out.read_text(encoding="utf-8"))
    sections = {c["section"] for c in report["contenders"].values()}
    assert sections == set(embedded.SECTIONS)
    assert all(c["per_s"] > 0 for c in report["contenders"].values())
    assert set(report["ratios"]) == {r[0] for r in embedded.RATIOS} | {"open_ms"}
    assert report["contenders"]["mqstore_open"]["ms"] > 0
    assert [p.name for p in tmp_path.iterdir()] == ["embedded.json"]  # work dir removed
