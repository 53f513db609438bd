"""The report's PNG plots (matplotlib, no display needed)."""

from __future__ import annotations

import os

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402


def throughput(variants: list[tuple[str, dict[str, float]]], path: str, baseline: str) -> str:
    """Horizontal bars of rows/s per sink, one panel per variant; a line at ``baseline``'s."""
    fig, axes = plt.subplots(len(variants), 1, figsize=(9, 3 + 2.5 * len(variants)), squeeze=False)
    for ax, (title, rates) in zip(axes[:, 0], variants):
        names = list(rates)[::-1]
        values = [rates[n] / 1e6 for n in names]
        colors = ["tab:gray" if not n.startswith("eosink") else "tab:blue" for n in names]
        ax.barh(names, values, color=colors)
        if baseline in rates:
            ax.axvline(rates[baseline] / 1e6, color="tab:red", linestyle="--", linewidth=1)
        ax.set_title(title, fontsize=10)
        ax.set_xlabel("million rows/s (best run)")
        ax.tick_params(axis="y", labelsize=8)
    fig.tight_layout()
    return save(fig, path)


def overhead(rows: list[tuple[str, float, float]], path: str, limit_ms: float) -> str:
    """Median and p95 of the exactly-once overhead per sink, with the target."""
    fig, ax = plt.subplots(figsize=(9, 4))
    names = [r[0] for r in rows]
    x = range(len(rows))
    ax.bar([i - 0.2 for i in x], [r[1] for r in rows], width=0.4, label="median")
    ax.bar([i + 0.2 for i in x], [r[2] for r in rows], width=0.4, label="p95")
    ax.axhline(limit_ms, color="tab:red", linestyle="--", label=f"target {limit_ms:.0f} ms")
    ax.set_xticks(list(x), names, rotation=15, fontsize=8)
    ax.set_yscale("log")
    ax.set_ylabel("is_committed + commit, ms")
    ax.legend()
    fig.tight_layout()
    return save(fig, path)


def curves(
    lines: dict[str, list[tuple[int, float]]], path: str, xlabel: str, ylabel: str, title: str
) -> str:
    """One line per name over a log x axis (history length, table size)."""
    fig, ax = plt.subplots(figsize=(8, 4.5))
    for name, points in lines.items():
        ax.plot([p[0] for p in points], [p[1] for p in points], marker="o", label=name)
    ax.set_xscale("log")
    ax.set_ylim(bottom=0)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(title, fontsize=10)
    ax.legend(fontsize=8)
    fig.tight_layout()
    return save(fig, path)


def bars(values: dict[str, float], path: str, xlabel: str, title: str) -> str:
    fig, ax = plt.subplots(figsize=(8, 1.5 + 0.6 * len(values)))
    ax.barh(list(values), list(values.values()), color="tab:blue")
    ax.set_xlabel(xlabel)
    ax.set_title(title, fontsize=10)
    fig.tight_layout()
    return save(fig, path)


def save(fig: plt.Figure, path: str) -> str:
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return os.path.basename(path)
