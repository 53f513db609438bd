"""The one measuring rule of the report: every path warmed once, then best of N and median.

Runs are interleaved (round 1 of every path, then round 2, ...) so that a burst of load on a
shared machine spreads over all paths instead of hitting one of them.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Iterable

import attrs

from eosink_benchmarks.progress import Progress


@attrs.frozen
class Timings:
    """The measured runs of one path; no runs: the path could not run here (``note`` says why)."""

    name: str
    seconds: tuple[float, ...] = ()
    note: str = ""

    @property
    def ran(self) -> bool:
        return bool(self.seconds)

    @property
    def best(self) -> float:
        return min(self.seconds)

    @property
    def median(self) -> float:
        return statistics.median(self.seconds)

    @property
    def spread(self) -> float:
        """The slowest run over the fastest: how much the machine moved under the runs."""
        return max(self.seconds) / min(self.seconds)


def percentile(values: Iterable[float], q: float) -> float:
    """The ``q``-th percentile (nearest rank) of ``values``."""
    ordered = sorted(values)
    rank = max(1, round(q / 100 * len(ordered) + 0.5))
    return ordered[min(rank, len(ordered)) - 1]


def measure(
    paths: dict[str, Callable[[str], None] | str],
    repeat: int,
    progress: Progress,
    warm: bool = True,
) -> dict[str, Timings]:
    """Warm every path once, then time ``repeat`` interleaved rounds of all of them.

    ``paths`` maps a name to ``run(label)`` (``label`` names the run's output folder) or to a
    string saying why the path cannot run here. ``warm`` False (the smoke size only, whose
    figures mean nothing) leaves the warm-up out.
    """
    runnable = {name: run for name, run in paths.items() if callable(run)}
    for name, run in runnable.items() if warm else ():
        progress.step(f"warm-up: {name}")
        run("warm")
    seconds: dict[str, list[float]] = {name: [] for name in runnable}
    for round_ in range(repeat):
        for name, run in runnable.items():
            progress.step(f"run {round_ + 1}/{repeat}: {name}")
            began = time.perf_counter()
            run(f"r{round_}")
            seconds[name].append(time.perf_counter() - began)
    return {
        name: Timings(name, tuple(seconds[name])) if callable(run) else Timings(name, note=run)
        for name, run in paths.items()
    }
