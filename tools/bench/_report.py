"""Render a benchmark result (the JSON dict) as a text table and an optional bar chart."""

from __future__ import annotations

from typing import Any

_W = 46  # label column


def _num(x: float | None, fmt: str = ",.0f") -> str:
    return "" if x is None else format(x, fmt)


def _rate_row(c: dict[str, Any]) -> str:
    cols = [f"{_num(c['messages_per_s']):>10}"]
    if "p50_ms" in c:
        cols += [f"{c[k]:>8.2f}" for k in ("p50_ms", "p99_ms", "p999_ms")]
        cols += [
            f"{_num(c['fdatasyncs_per_s']):>9}",
            f"{_num(c['messages_per_fdatasync'], '.1f'):>8}",
        ]
    row = f"  {c['label']:<{_W}}" + " ".join(cols)
    if c.get("end_to_end_per_s") is not None:
        drain = max(c.get("reps_drain_seconds") or [0.0])
        row += f"  (until dispatched: {c['end_to_end_per_s']:,.0f}/s; lag <= {drain:.2f} s)"
    return row


def _recovery_row(c: dict[str, Any]) -> str:
    opened = c["label"].startswith("mqstore open")
    whole = (
        f"whole open(): {c['open_mb_per_s']:,.0f} MB/s; "
        f"until indexed too: {c['ready_mb_per_s']:,.0f} MB/s; "
        if opened
        else ""
    )
    return (
        f"  {c['label']:<{_W}}{c['mb_per_s']:>8,.0f} MB/s  {c['records_per_s']:>10,.0f} rec/s"
        f"  ({whole}{c['scanned_bytes'] / 2**20:,.0f} MiB, {c['records']:,} records)"
    )


def _ratio_row(r: dict[str, Any]) -> str:
    if r["denominator"] is None:
        value = f"{r['value']:,.0f}"
        target = f">= {r['target']:g} MB/s"
        of_medians = ""
    else:
        value = f"{r['value']:.2f}x"
        target = "" if r["target"] is None else f">= {r['target']:g}x"
        of_medians = f"(of medians {r['ratio_of_medians']:.2f}x)"
    verdict = "" if r["met"] is None else ("MET" if r["met"] else "MISSED")
    reps = " ".join(f"{x:.2f}" for x in r["reps"])
    return (
        f"  = {r['title']:<{_W - 2}}{value:>9} {target:<12}{verdict:<7}"
        f"{of_medians:<21} reps: {reps}"
    )


def format_table(result: dict[str, Any], sections: dict[str, str]) -> str:
    """The human-readable report: one block per section, its ratios underneath."""
    meta = result["meta"]
    cs = result["contenders"]
    lines = [
        f"mqstore bench commitlog: median of {meta['repetitions']} interleaved repetitions, "
        f"{meta['duration_s']:g} s per contender; {meta['cpu_count']} CPUs, "
        f"{meta['fs_type']} at {meta['dir']}; load {meta['loadavg_before'][0]:.2f} -> "
        f"{meta['loadavg_after'][0]:.2f}; {meta['wall_seconds']:g} s wall",
        "",
    ]
    if max(meta["loadavg_before"][0], meta["loadavg_after"][0]) > (meta["cpu_count"] or 2) / 2:
        lines[-1:] = [
            "WARNING: other processes were busy (1-min load above half the CPUs): absolute",
            "rates are depressed; the paired ratios are the figures to compare.",
            "",
        ]
    head = (
        f"  {'contender':<{_W}}{'msgs/s':>10} {'p50 ms':>8} {'p99 ms':>8} {'p99.9ms':>8}"
        f" {'fsync/s':>9} {'msg/sync':>8}"
    )
    for sec, title in sections.items():
        lines.append(title)
        if sec != "recovery":
            lines.append(head)
        for c in cs.values():
            if c["section"] == sec:
                lines.append(_recovery_row(c) if sec == "recovery" else _rate_row(c))
        for r in result["ratios"].values():
            if cs[r["numerator"]]["section"] == sec:
                lines.append(_ratio_row(r))
        lines.append("")
    lines.append(
        "ratios: median of the per-repetition ratios (each pair ran back to back); "
        "targets judge that value"
    )
    lines.append("durability of each contender:")
    lines += [f"  {c['label']:<{_W}}{c['durability']}" for c in cs.values()]
    return "\n".join(lines)


def write_plot(result: dict[str, Any], sections: dict[str, str], path: str) -> None:
    """One horizontal bar chart per rate section (linear, from zero), saved as PNG."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rate_secs = [s for s in sections if s != "recovery"]
    fig, axes = plt.subplots(len(rate_secs), 1, figsize=(9, 2.2 * len(rate_secs) + 1))
    cs = result["contenders"]
    for ax, sec in zip(axes, rate_secs, strict=True):
        rows = [c for c in cs.values() if c["section"] == sec]
        labels = [c["label"] for c in rows]
        values = [c["messages_per_s"] for c in rows]
        colors = ["tab:blue" if c["label"].startswith("mqstore") else "tab:gray" for c in rows]
        ax.barh(labels[::-1], values[::-1], color=colors[::-1])
        ax.set_xlim(0, max(values) * 1.18)
        ax.set_title(sections[sec], fontsize=9)
        ax.tick_params(labelsize=8)
        for y, v in enumerate(values[::-1]):
            ax.text(v, y, f" {v:,.0f}", va="center", fontsize=7)
    axes[-1].set_xlabel("messages per second")
    meta = result["meta"]
    fig.suptitle(
        f"mqstore bench commitlog (median of {meta['repetitions']}, same run)", fontsize=10
    )
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
