"""``mqstore bench flush --quick``: the lab runs end to end and reports every figure.

One quick run (~20-40 s): the JSON holds part 1's figures for both flush modes at every
thread count and body size and for every reference, part 2's durability counts for both
modes with zero acknowledged-but-lost messages under SYNC_FLUSH; the plot is a PNG.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mqstore.tools.bench import flush

pytestmark = pytest.mark.slow
pytest.importorskip("persistqueue", reason="the flush lab's references need persist-queue")
pytest.importorskip("matplotlib", reason="the flush lab's plot needs matplotlib")

RATE_FIELDS = ("label", "durability", "threads", "body_size", "messages_per_s", "mb_per_s")
LATENCY_FIELDS = ("p50_ms", "p99_ms", "p999_ms")
SYNC_FIELDS = ("fdatasyncs_per_s", "messages_per_fdatasync")
DURABILITY_FIELDS = (
    "trials", "acked", "acked_lost", "records_lost", "recovery_problems", "puts_stored",
)  # fmt: skip


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> tuple[int, dict, Path]:
    tmp = tmp_path_factory.mktemp("flushlab")
    rc = flush.main(["--quick", "--json", str(tmp / "r.json"), "--plot", str(tmp / "r.png")])
    return rc, json.loads((tmp / "r.json").read_text()), tmp / "r.png"


def test_exit_status_and_verdict(lab: tuple[int, dict, Path]) -> None:
    rc, result, _png = lab
    assert rc == 0, result["verdict"]
    assert result["alarm"] is False
    assert result["meta"]["fs_type"] and len(result["meta"]["loadavg_before"]) == 3


def test_both_modes_every_thread_count_and_size(lab: tuple[int, dict, Path]) -> None:
    cs = lab[1]["contenders"]
    for family in ("async", "sync"):
        for n in flush.THREADS:
            for size in flush.SIZES:
                c = cs[f"{family}_{n}t_{size}b"]
                for f in RATE_FIELDS + LATENCY_FIELDS + SYNC_FIELDS:
                    assert f in c, (family, n, size, f)
                assert c["messages_per_s"] > 0
                assert c["p50_ms"] > 0 and c["p50_ms"] <= c["p99_ms"] <= c["p999_ms"]
                assert c["fdatasyncs_per_s"] is not None
                assert c["mode"] == ("ASYNC_FLUSH" if family == "async" else "SYNC_FLUSH")
                if family == "sync":  # every acked put waited for a sync
                    assert c["fdatasyncs_per_s"] > 0 and c["messages_per_fdatasync"] >= 1
    assert cs["sync_16t_100b"]["latency_cdf_ms"] and cs["async_16t_100b"]["latency_cdf_ms"]


def test_every_reference(lab: tuple[int, dict, Path]) -> None:
    cs = lab[1]["contenders"]
    refs = [
        f"sqlite_{s}_{n}t_{b}b" for s in ("full", "normal") for n in (1, 16) for b in (100, 1024)
    ]
    refs += [f"pq_{k}_1t_{b}b" for k in ("sqlite_queue", "file_queue") for b in (100, 1024)]
    refs += ["raw_fdatasync_1t_100b", "raw_group_commit_16t_100b"]
    for key in refs:
        assert key in cs, key
        for f in RATE_FIELDS:
            assert f in cs[key], (key, f)
        assert cs[key]["messages_per_s"] > 0, key
    for key in refs[:8] + refs[-2:]:  # timed per operation
        assert cs[key]["p99_ms"] > 0, key
    for key in refs[-2:]:  # the raw disk counts its syncs
        assert cs[key]["fdatasyncs_per_s"] > 0


def test_durability_counts(lab: tuple[int, dict, Path]) -> None:
    dur = lab[1]["durability"]
    for mode in ("ASYNC_FLUSH", "SYNC_FLUSH"):
        for f in DURABILITY_FIELDS:
            assert f in dur[mode], (mode, f)
        assert dur[mode]["trials"] == flush.QUICK["trials"]
        assert dur[mode]["acked"] > 0
        assert dur[mode]["recovery_problems"] == 0, dur[mode]["per_trial"]
    assert dur["SYNC_FLUSH"]["acked_lost"] == 0


def test_plot_is_a_png(lab: tuple[int, dict, Path]) -> None:
    png = lab[2]
    assert png.stat().st_size > 10_000
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_every_plot_panel_shows_data_on_the_default_layer(lab: tuple[int, dict, Path]) -> None:
    import matplotlib.pyplot as plt

    from mqstore.tools.bench._flush_report import figure

    assert lab[1]["durability"]["layer"] == "model"
    fig = figure(lab[1])
    try:
        assert [ax.has_data() for ax in fig.axes] == [True] * 4
    finally:
        plt.close(fig)


def test_each_page_model_trial_records_how_long_it_put(lab: tuple[int, dict, Path]) -> None:
    for mode in ("ASYNC_FLUSH", "SYNC_FLUSH"):
        assert all(t["put_s"] >= 0 for t in lab[1]["durability"][mode]["per_trial"])


def _async_trials(*put_ms_lost: tuple[int, int]) -> dict:
    per_trial = [{"put_s": ms / 1000, "acked_lost": lost} for ms, lost in put_ms_lost]
    acked = 100 * len(per_trial)
    lost = sum(t["acked_lost"] for t in per_trial)
    return {"ASYNC_FLUSH": {"acked": acked, "acked_lost": lost, "per_trial": per_trial}}


def test_the_report_explains_async_loss_by_flush_interval_and_trial_length() -> None:
    from mqstore.tools.bench._flush_report import async_loss_lines

    lines = async_loss_lines(_async_trials((120, 100), (300, 96), (900, 2)))
    text = " ".join(" ".join(lines).split())
    assert "Why ASYNC_FLUSH lost 66% of what it acknowledged" in text
    assert "syncs every 500 ms" in text
    assert "put for a median 300 ms (longest 900 ms) before the cut, 2 of 3 for less" in text


def test_the_report_says_nothing_of_async_loss_when_there_was_none() -> None:
    from mqstore.tools.bench._flush_report import async_loss_lines

    assert async_loss_lines(_async_trials((120, 0))) == []


def test_help_speaks_to_users_not_to_the_tracker(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        flush.parse_args(["--help"])
    out = capsys.readouterr().out
    assert "issue" not in out.lower()
    assert "what SYNC_FLUSH and ASYNC_FLUSH cost and what they lose" in out
