"""The output of ``mqstore bench flush``: the text report and the three-panel plot."""

from __future__ import annotations

from typing import Any

from mqstore.tools.bench._flush_plan import (
    CDF_THREADS,
    MODES,
    THREADS,
    TRIAL_FILE_SIZE,
    TRIAL_THREADS,
    _key,
)


def _f(x: float | None, fmt: str) -> str:
    return "-" if x is None else format(x, fmt)


def format_report(result: dict[str, Any]) -> str:
    """The human-readable report: one section per part."""
    meta = result["meta"]
    lb, la = meta["loadavg_before"], meta["loadavg_after"]
    lines = [
        f"mqstore bench flush: {meta['cpu_count']} CPUs, {meta['fs_type']} at {meta['dir']}; "
        f"load average {lb[0]:.2f} {lb[1]:.2f} {lb[2]:.2f} -> {la[0]:.2f} {la[1]:.2f} "
        f"{la[2]:.2f}; {meta['wall_seconds']:g} s wall",
        "",
        f"1. put throughput and latency: median of {meta['repetitions']} interleaved "
        f"repetitions, {meta['duration_s']:g} s per contender (MB = 10^6 body bytes)",
        f"  {'contender':<42}{'msgs/s':>9}{'MB/s':>7}{'p50 ms':>8}{'p99 ms':>8}"
        f"{'p99.9ms':>8}{'fsync/s':>9}{'msg/sync':>9}",
    ]
    lines += _contender_lines(result["contenders"])
    lines += [
        "  fsync/s and msg/sync: the store's own flusher count (ASYNC: its periodic syncs);",
        "  not observable for SQLite and persist-queue ('-').",
        "",
        f"2. durability: simulated power losses at random moments, seed {meta['seed']}, "
        f"{TRIAL_THREADS} producer threads, {TRIAL_FILE_SIZE // 1024} KiB segments",
        f"  {'mode':<13}{'trials':>7}{'acked':>8}{'ACKED LOST':>11}{'(trials)':>9}"
        f"{'stored':>8}{'lost':>7}{'problems':>9}  pages kept/dropped/torn, abort lost",
    ]
    lines += _durability_lines(result["durability"])
    lines += [
        "  acked lost: PUT_OK before the power failed, missing or different after recovery;",
        "  lost: every put written to the log and not recovered; problems: corrupt record",
        "  served, wrong record at an offset, inconsistent log, put refused after reopen.",
        f"  store log messages during the trials (simulated EIO, kept in the JSON): "
        f"{result['durability']['store_log_messages']['count']}",
        "",
        f"verdict: {result['verdict']}",
    ]
    return "\n".join(lines)


def _contender_lines(contenders: dict[str, Any]) -> list[str]:
    """Part 1's table rows, one per contender, under a heading per body size."""
    lines: list[str] = []
    size = None
    for c in contenders.values():
        if c["body_size"] != size and c["section"] != "raw":
            size = c["body_size"]
            lines.append(f"  -- {size} B bodies")
        elif c["section"] == "raw" and size != "raw":
            size = "raw"
            lines.append("  -- raw disk (100-byte records, no encoding)")
        lines.append(
            f"  {c['label']:<42}{c['messages_per_s']:>9,.0f}{c['mb_per_s']:>7.1f}"
            f"{_f(c['p50_ms'], '.2f'):>8}{_f(c['p99_ms'], '.2f'):>8}{_f(c['p999_ms'], '.2f'):>8}"
            f"{_f(c['fdatasyncs_per_s'], ',.0f'):>9}{_f(c['messages_per_fdatasync'], '.1f'):>9}"
        )
    return lines


def _durability_lines(durability: dict[str, Any]) -> list[str]:
    """Part 2's table rows, one per flush mode."""
    lines: list[str] = []
    for mode in (m.value for m in MODES):
        d = durability[mode]
        lines.append(
            f"  {mode:<13}{d['trials']:>7}{d['acked']:>8}{d['acked_lost']:>11}"
            f"{d['trials_with_acked_lost']:>9}{d['puts_stored']:>8}{d['records_lost']:>7}"
            f"{d['recovery_problems']:>9}  {d['pages_kept']}/{d['pages_dropped']}/"
            f"{d['pages_torn']}, {d['abort_lost']}"
        )
    return lines


def write_plot(result: dict[str, Any], path: str) -> None:
    """Throughput vs producers, latency CDF at 16 threads, acked-lost per mode."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    cs = result["contenders"]
    fig, (a1, a2, a3) = plt.subplots(
        1, 3, figsize=(16, 5.2), gridspec_kw={"width_ratios": [1.25, 1.25, 0.8]}
    )
    _plot_throughput(a1, cs)
    _plot_latency(a2, cs)
    _plot_acked_lost(a3, result["durability"])
    meta = result["meta"]
    fig.suptitle(
        f"mqstore bench flush ({meta['cpu_count']} CPUs, {meta['fs_type']}, "
        f"median of {meta['repetitions']}, same run)",
        fontsize=11,
    )
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _plot_throughput(a1: Any, cs: dict[str, Any]) -> None:
    """Left panel: messages/s vs producer threads per family, raw ceilings as lines."""
    series = [
        ("async", 100, "ASYNC_FLUSH 100 B", "tab:blue", "-"),
        ("async", 1024, "ASYNC_FLUSH 1 KiB", "tab:blue", "--"),
        ("sync", 100, "SYNC_FLUSH 100 B", "tab:red", "-"),
        ("sync", 1024, "SYNC_FLUSH 1 KiB", "tab:red", "--"),
        ("sqlite_normal", 100, "SQLite WAL NORMAL 100 B", "tab:green", ":"),
        ("sqlite_full", 100, "SQLite WAL FULL 100 B", "tab:gray", ":"),
    ]
    for fam, size, label, color, ls in series:
        pts = sorted(
            (c["threads"], c["messages_per_s"])
            for c in cs.values()
            if c["family"] == fam and c["body_size"] == size
        )
        a1.plot(*zip(*pts, strict=True), ls, marker="o", color=color, label=label)
    raw_lines = (
        ("raw_fdatasync_1t_100b", "raw write+fdatasync, 1 thr"),
        ("raw_group_commit_16t_100b", "raw group-commit ceiling, 16 thr"),
    )
    for key, label in raw_lines:
        if key in cs:
            v = cs[key]["messages_per_s"]
            a1.axhline(v, color="black", lw=0.8, ls="-." if "1t" in key else "--")
            va = "top" if "1t" in key else "bottom"  # the two are often close
            a1.text(1, v, f" {label}: {v:,.0f}/s", va=va, ha="left", fontsize=7)
    a1.set_xscale("log", base=2)
    a1.set_yscale("log")
    a1.set_xticks(THREADS, [str(t) for t in THREADS])
    a1.set_xlabel("producer threads")
    a1.set_ylabel("messages per second (log)")
    a1.set_title("Throughput vs producer threads", fontsize=10)
    a1.grid(True, which="both", alpha=0.3)
    a1.legend(fontsize=7, loc="lower right")


def _plot_latency(a2: Any, cs: dict[str, Any]) -> None:
    """Middle panel: the put latency CDF at CDF_THREADS threads, 100 B."""
    for key, label, color in (
        (_key("async", CDF_THREADS, 100), "ASYNC_FLUSH", "tab:blue"),
        (_key("sync", CDF_THREADS, 100), "SYNC_FLUSH", "tab:red"),
        (_key("sqlite_full", CDF_THREADS, 100), "SQLite WAL FULL", "tab:gray"),
        (_key("sqlite_normal", CDF_THREADS, 100), "SQLite WAL NORMAL", "tab:green"),
        (_key("raw_group_commit", CDF_THREADS, 100), "raw group commit", "black"),
    ):
        cdf = cs.get(key, {}).get("latency_cdf_ms") or []
        if cdf:
            qs = [q for q, _ms in cdf]
            ms = [max(v, 1e-4) for _q, v in cdf]
            a2.plot(ms, qs, color=color, label=label, lw=1.5)
    a2.set_xscale("log")
    a2.set_xlabel("put latency, ms (log)")
    a2.set_ylabel("percentile")
    a2.set_ylim(0, 100.5)
    a2.set_title(f"Put latency CDF, {CDF_THREADS} threads, 100 B", fontsize=10)
    a2.grid(True, which="both", alpha=0.3)
    a2.legend(fontsize=7, loc="lower right")


def _plot_acked_lost(a3: Any, dur: dict[str, Any]) -> None:
    """Right panel: acknowledged messages lost per flush mode."""
    modes = [m.value for m in MODES]
    lost = [dur[m]["acked_lost"] for m in modes]
    acked = [dur[m]["acked"] for m in modes]
    colors = ["tab:blue" if m.startswith("ASYNC") else "tab:red" for m in modes]
    bars = a3.bar(modes, lost, color=colors)
    for b, n_lost, n_acked, m in zip(bars, lost, acked, modes, strict=True):
        a3.text(
            b.get_x() + b.get_width() / 2,
            b.get_height(),
            f"{n_lost:,} of {n_acked:,} acked\n({dur[m]['trials']} power losses)",
            ha="center",
            va="bottom",
            fontsize=8,
        )
    a3.set_ylim(0, max([1, *lost]) * 1.3)
    a3.set_ylabel("acknowledged messages lost")
    a3.set_title("Acked-but-lost after simulated power loss", fontsize=10)
