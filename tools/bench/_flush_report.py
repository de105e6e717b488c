"""The output of ``mqstore bench flush``: the text report and the four-panel plot.

ASYNC_FLUSH's loss is explained in both, in the terms that decide it: the store syncs
the CommitLog every ``flush_interval_commitlog_ms`` (500 ms, RocketMQ's
``flushIntervalCommitLog``), so a power cut loses what was acknowledged since the last
sync; a trial that is cut before its first sync loses nearly everything it put. The
page-model trials put for about one flush interval or less, so their loss share says how
short they are, not what a long-running store loses; the FUSE layer's trials record
the time since the last sync at each cut.
"""

from __future__ import annotations

import statistics
import textwrap
from typing import Any

from mqstore import StoreConfig
from mqstore.tools.bench._flush_fuse import FILE_SIZE as FUSE_FILE_SIZE
from mqstore.tools.bench._flush_fuse import THREADS as FUSE_THREADS
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
        *_quick_warning(meta),
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
        *_durability_section(result["durability"], meta),
        "",
        f"verdict: {result['verdict']}",
    ]
    return "\n".join(lines)


def _quick_warning(meta: dict[str, Any]) -> list[str]:
    if not meta.get("quick"):
        return []
    return [
        f"QUICK RUN ({meta['duration_s']:g} s per contender, {meta['repetitions']} "
        "repetition): a smoke test; its figures are noise, not results",
        "",
    ]


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


FLUSH_INTERVAL_MS = StoreConfig().flush_interval_commitlog_ms
"""The ASYNC_FLUSH sync period every trial runs with (the store's default)."""


def async_loss_lines(dur: dict[str, Any]) -> list[str]:
    """Why ASYNC_FLUSH lost what it lost, from its trials: the share of acknowledged
    puts lost, held against the flush interval and how long the trials put before the
    cut (page model) or how long before the cut the last sync was (FUSE layer)."""
    a = dur.get("ASYNC_FLUSH", {})
    trials = a.get("per_trial", [])
    if not a.get("acked_lost") or not trials:
        return []
    iv = FLUSH_INTERVAL_MS
    text = (
        f"Why ASYNC_FLUSH lost {a['acked_lost'] / max(1, a['acked']):.0%} of what it "
        f"acknowledged: it acknowledges a put once in memory and syncs every {iv} ms, so a "
        "cut loses the puts since the last sync."
    )
    since = [
        t["since_last_sync_s"] * 1000 for t in trials if t.get("since_last_sync_s") is not None
    ]
    never = sum(1 for t in trials if "since_last_sync_s" in t and t["since_last_sync_s"] is None)
    put = [t["put_s"] * 1000 for t in trials if "put_s" in t]
    if since:  # the FUSE layer
        text += (
            f" Here the last sync was a median {statistics.median(since):.0f} ms before the "
            f"cut (longest {max(since):.0f} ms)."
        )
    if never:
        text += f" {never} of {len(trials)} trials were cut before any sync."
    if put and not (since or never):  # the page model
        short = sum(1 for ms in put if ms < iv)
        text += (
            f" These trials put for a median {statistics.median(put):.0f} ms (longest "
            f"{max(put):.0f} ms) before the cut, {short} of {len(put)} for less than one "
            "interval: most of what a trial acknowledged came after its last sync. The share "
            "says how short the trials are, not what a long-running store loses: at most the "
            f"puts of the last {iv} ms. The plot's fourth panel shows each trial's loss "
            "against its length; --layer fuse measures it against the time since the last sync."
        )
    return textwrap.wrap(text, 88, initial_indent="  ", subsequent_indent="  ")


def _durability_section(dur: dict[str, Any], meta: dict[str, Any]) -> list[str]:
    """Part 2: its heading, table and notes, for the layer the cuts happened on."""
    if dur.get("layer") == "fuse":
        return [
            f"2. durability: power cuts on the FUSE layer (tools/lazyfs.py: writes no sync "
            f"covered are lost), seed {meta['seed']}, {FUSE_THREADS} producer threads in a "
            f"child process, {FUSE_FILE_SIZE // 1024} KiB segments, index on",
            f"  {'mode':<13}{'trials':>7}{'acked':>8}{'ACKED LOST':>11}{'(trials)':>9}"
            f"{'holes':>7}{'problems':>9}  pending pages kept/torn",
            *_mode_rows(dur, _FUSE_ROW),
            "  acked lost: acknowledged to the producer before the cut, missing or different",
            "  after recovery; holes: trials where a lost message was followed by a kept one",
            "  (a loss that is not a suffix); problems: corrupt or wrong record served,",
            "  inconsistent log, put refused after reopen. The disk's own volatile cache is",
            "  below the layer: a sync the layer acknowledged is durable here.",
            f"  store log messages during the trials (kept in the JSON): "
            f"{dur['store_log_messages']['count']}",
            *async_loss_lines(dur),
        ]
    return [
        f"2. durability: simulated power losses at random moments (page model), seed "
        f"{meta['seed']}, {TRIAL_THREADS} producer threads, {TRIAL_FILE_SIZE // 1024} KiB "
        "segments",
        f"  {'mode':<13}{'trials':>7}{'acked':>8}{'ACKED LOST':>11}{'(trials)':>9}"
        f"{'stored':>8}{'lost':>7}{'problems':>9}  pages kept/dropped/torn, abort lost",
        *_mode_rows(dur, _DURABILITY_ROW),
        "  acked lost: PUT_OK before the power failed, missing or different after recovery;",
        "  lost: every put written to the log and not recovered; problems: corrupt record",
        "  served, wrong record at an offset, inconsistent log, put refused after reopen.",
        f"  store log messages during the trials (simulated EIO, kept in the JSON): "
        f"{dur['store_log_messages']['count']}",
        *async_loss_lines(dur),
    ]


_ROW = "  {mode:<13}{trials:>7}{acked:>8}{acked_lost:>11}{trials_with_acked_lost:>9}"
"""The columns both durability tables start with; each table's own follow."""
_FUSE_ROW = (
    _ROW + "{not_suffix:>7}{recovery_problems:>9}  {pending_pages} {kept_pages}/{torn_pages}"
)
_DURABILITY_ROW = _ROW + (
    "{puts_stored:>8}{records_lost:>7}{recovery_problems:>9}"
    "  {pages_kept}/{pages_dropped}/{pages_torn}, {abort_lost}"
)


def _mode_rows(table: dict[str, Any], row: str) -> list[str]:
    """One ``row`` per flush mode, filled from that mode's entry of ``table``."""
    return [row.format_map({**table[mode], "mode": mode}) for mode in (m.value for m in MODES)]


def write_plot(result: dict[str, Any], path: str) -> None:
    """Throughput vs producers, latency CDF at 16 threads, acked-lost per mode, and the
    ASYNC_FLUSH loss window (acked lost per cut against the time since the last sync on
    the FUSE layer, against the trial's length on the page model)."""
    import matplotlib.pyplot as plt

    fig = figure(result)
    fig.savefig(path, dpi=110)
    plt.close(fig)


def figure(result: dict[str, Any]) -> Any:
    """The plot of :func:`write_plot` as a matplotlib Figure (the caller closes it)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    cs = result["contenders"]
    fig, (a1, a2, a3, a4) = plt.subplots(
        1, 4, figsize=(21, 5.6), gridspec_kw={"width_ratios": [1.25, 1.1, 0.75, 1.0]}
    )
    _plot_throughput(a1, cs)
    _plot_latency(a2, cs)
    _plot_acked_lost(a3, result["durability"])
    _plot_loss_window(a4, result["durability"])
    meta = result["meta"]
    run = (
        f"{meta['duration_s']:g} s per contender, median of {meta['repetitions']} "
        "interleaved repetitions (bars: min-max)"
    )
    if meta.get("quick"):
        run = "QUICK RUN, a smoke test: " + run + ": noise, not results"
    fig.suptitle(
        f"mqstore bench flush: {meta['cpu_count']} CPUs, {meta['fs_type']}; {run}; "
        f"power cuts on the {result['durability'].get('layer', 'model')} layer",
        fontsize=11,
        color="tab:red" if meta.get("quick") else "black",
    )
    fig.tight_layout()
    return fig


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
            (c["threads"], c["messages_per_s"], c.get("reps_messages_per_s") or [0.0])
            for c in cs.values()
            if c["family"] == fam and c["body_size"] == size
        )
        xs = [p[0] for p in pts]
        ys = [p[1] for p in pts]
        lo = [max(0.0, y - min(p[2])) for y, p in zip(ys, pts, strict=True)]
        hi = [max(0.0, max(p[2]) - y) for y, p in zip(ys, pts, strict=True)]
        a1.errorbar(xs, ys, yerr=[lo, hi], fmt=ls, marker="o", color=color, label=label, capsize=3)
    raw_lines = (
        ("raw_fdatasync_1t_100b", "raw write+fdatasync, 1 thr"),
        ("raw_group_commit_16t_100b", "raw write+fdatasync shared by 16 thr"),
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
    a1.set_title(
        "Throughput vs producer threads\n(raw lines: the disk alone, no store; "
        "group commit can beat them by syncing more per call)",
        fontsize=9,
    )
    a1.grid(True, which="both", alpha=0.3)
    a1.legend(fontsize=7, loc="upper left", bbox_to_anchor=(0.0, -0.14), ncol=2, frameon=False)


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
    a2.legend(fontsize=7, loc="upper left", bbox_to_anchor=(0.0, -0.14), ncol=3, frameon=False)


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
    layer = dur.get("layer", "model")
    a3.set_title(f"Acked-but-lost after power cuts\n({layer} layer)", fontsize=10)


def _loss_points(trials: list[dict[str, Any]]) -> tuple[list[tuple[float, int]], list[int], str]:
    """(ms, acked lost) per ASYNC_FLUSH cut, the losses of cuts before any sync, and
    what the ms measure: the time since the last sync (FUSE layer), else the trial's
    length before the cut (page model)."""
    since = [
        (t["since_last_sync_s"] * 1000, t["acked_lost"])
        for t in trials
        if t.get("since_last_sync_s") is not None
    ]
    never = [
        t["acked_lost"]
        for t in trials
        if "since_last_sync_s" in t and t["since_last_sync_s"] is None
    ]
    if since or never:
        return since, never, "ms since the last sync at the cut"
    put = [(t["put_s"] * 1000, t["acked_lost"]) for t in trials if "put_s" in t]
    return put, [], "ms of puts before the cut (trial length)"


def _plot_loss_window(a4: Any, dur: dict[str, Any]) -> None:
    """Right panel: per ASYNC_FLUSH cut, acked messages lost against the time since the
    store's last CommitLog sync (FUSE layer) or the trial's length (page model), with
    the flush interval marked: the loss window."""
    pts, never, xlabel = _loss_points(dur.get("ASYNC_FLUSH", {}).get("per_trial", []))
    a4.set_title(f"ASYNC_FLUSH: acked lost per cut\nvs {xlabel.removeprefix('ms ')}", fontsize=10)
    a4.set_xlabel(xlabel)
    a4.set_ylabel("acknowledged messages lost")
    a4.grid(True, alpha=0.3)
    if pts:
        a4.scatter(*zip(*pts, strict=True), color="tab:blue", s=14)
    iv = FLUSH_INTERVAL_MS
    a4.axvline(iv, color="black", lw=0.8, ls="--")
    a4.set_xlim(0, max([iv * 1.15, *(x * 1.05 for x, _ in pts)]))
    a4.text(iv, a4.get_ylim()[1], f" flush interval {iv} ms", va="top", fontsize=7)
    if never:
        a4.text(
            0.02,
            0.98,
            f"{len(never)} cut(s) before any sync: {sum(never):,} acked lost",
            transform=a4.transAxes,
            va="top",
            fontsize=7,
        )
