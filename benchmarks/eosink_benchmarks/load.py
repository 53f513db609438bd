"""The machine's load while a section runs, and how much of it was not the report's own.

A section's ratios are side by side, so a burst of load damps both sides alike; its absolute
figures are not. Each section is watched by a thread that samples, every few seconds, the
1-minute load average and the runnable threads of every process outside the report's own
process tree (Spark's JVM, its Python workers, the emulator, PostgreSQL and the recovery
section's queries are children of the report, so they count as its own). A section is flagged
when the load average went above the core count; the other programs' share says whether the
report itself or something else put it there.
"""

from __future__ import annotations

import os
import statistics
import threading

import attrs


def _stat(pid: str) -> tuple[int, str] | None:
    """(parent pid, state) of a process, None when it is gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            text = f.read()
    except OSError:
        return None
    fields = text[text.rindex(")") + 2 :].split()
    return int(fields[1]), fields[0]


def _running_threads(pid: str) -> int:
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return 0
    running = 0
    for task in tasks:
        try:
            with open(f"/proc/{pid}/task/{task}/stat") as f:
                text = f.read()
        except OSError:
            continue
        running += text[text.rindex(")") + 2] == "R"
    return running


def others_running(root: int) -> int:
    """Runnable threads of the processes that are not ``root`` or its descendants."""
    parents = {}
    for pid in os.listdir("/proc"):
        if pid.isdigit() and (stat := _stat(pid)) is not None:
            parents[int(pid)] = stat[0]

    def ours(pid: int) -> bool:
        seen = 0
        while pid > 1 and seen < 64:
            if pid == root:
                return True
            pid, seen = parents.get(pid, 0), seen + 1
        return False

    return sum(_running_threads(str(pid)) for pid in parents if not ours(pid))


@attrs.frozen
class Load:
    """What one section's watch saw."""

    cores: int
    start: float
    peak: float
    end: float
    others_mean: float
    others_peak: int

    @property
    def flagged(self) -> bool:
        return self.peak > self.cores

    @property
    def others_ran(self) -> bool:
        """Other programs kept half a core or more busy on average."""
        return self.others_mean >= 0.5

    def flag(self) -> str:
        if not self.flagged:
            return ""
        if self.others_ran:
            return f"**load above {self.cores} cores, other programs running**"
        return f"load above {self.cores} cores: the report's own"

    def cells(self) -> tuple[str, ...]:
        return (
            f"{self.start:.1f} / {self.peak:.1f} / {self.end:.1f}",
            f"{self.others_mean:.1f} / {self.others_peak}",
            self.flag(),
        )


class LoadWatch:
    """Samples the load from ``start()`` to ``stop()`` in a daemon thread."""

    def __init__(self, interval: float = 5.0) -> None:
        self.interval = interval
        self.root = os.getpid()
        self.loads: list[float] = []
        self.others: list[int] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="load-watch", daemon=True)

    def _sample(self) -> None:
        self.loads.append(os.getloadavg()[0])
        self.others.append(others_running(self.root))

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            self._sample()

    def start(self) -> LoadWatch:
        self._sample()
        self._thread.start()
        return self

    def stop(self) -> Load:
        self._stop.set()
        self._thread.join()
        self._sample()
        return Load(
            cores=os.cpu_count() or 1,
            start=self.loads[0],
            peak=max(self.loads),
            end=self.loads[-1],
            others_mean=statistics.fmean(self.others),
            others_peak=max(self.others),
        )
