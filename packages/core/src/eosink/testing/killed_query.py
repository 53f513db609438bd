"""A streaming query in its own process, killed (SIGKILL) in the middle of a batch and started
again from its checkpoint: the killed-process half of a sink's end-to-end tests.

The test describes the query as a :class:`QueryJob`; :class:`QueryProcesses` writes it to a file
(readable by its owner only: a job may carry a database URL with its password, which never goes
on a command line) and runs ``python -m eosink.testing.killable_query <job file>``. While
``<work>/armed`` exists, the task holding the job's ``stall`` row touches ``<work>/reached`` and
waits, so the batch's other task has written by the time the test kills the process group.

    with QueryProcesses(tmp_path) as queries:
        queries.kill_mid_batch(job)   # armed, started, reached, SIGKILL
        ...                           # what the killed attempt left behind
        queries.restart(job)          # disarmed, started again, exits 0
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from types import TracebackType

from eosink.testing import killable_query
from eosink.testing.killable_query import QueryJob, totals_job  # noqa: F401 - re-exported


class QueryProcesses:
    """The query processes of one test in ``work``: started, killed, and at the end (a failing
    or cancelled test included) every process group still running is killed."""

    def __init__(self, work: str | os.PathLike[str], *, settle_s: float = 2.0) -> None:
        self.work = Path(work)
        self.settle_s = settle_s  # after the stall is reached: the batch's other tasks write
        self.processes: list[subprocess.Popen[bytes]] = []

    def __enter__(self) -> QueryProcesses:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def close(self) -> None:
        for proc in self.processes:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()

    def start(self, job: QueryJob) -> subprocess.Popen[bytes]:
        """Start the query in a new process group, this process's import path on its path."""
        stamp = time.monotonic_ns()
        config = self.work / f"job-{stamp}.json"
        fd = os.open(config, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(job.to_json())
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
        with open(self.work / f"query-{stamp}.log", "w") as log:
            proc = subprocess.Popen(
                [sys.executable, "-m", killable_query.__name__, str(config)],
                env=env,
                stdout=subprocess.DEVNULL,
                stderr=log,
                start_new_session=True,
            )
        self.processes.append(proc)
        return proc

    def kill_mid_batch(self, job: QueryJob, timeout_s: float = 240) -> None:
        """Arm the stall, start the query, wait until its stalled task is reached, let the
        batch's other tasks write, then SIGKILL the query's process group."""
        (self.work / "armed").touch()
        (self.work / "reached").unlink(missing_ok=True)
        query = self.start(job)
        deadline = time.monotonic() + timeout_s
        while not (self.work / "reached").exists():
            assert (
                query.poll() is None
            ), f"the query ended before reaching the stalled batch: {self.last_log()}"
            assert (
                time.monotonic() < deadline
            ), f"the query never reached the stalled batch: {self.last_log()}"
            time.sleep(0.2)
        time.sleep(self.settle_s)
        os.killpg(query.pid, signal.SIGKILL)
        query.wait()

    def restart(self, job: QueryJob, timeout_s: float = 300) -> None:
        """Disarm the stall and run the query again from its checkpoint to its end."""
        (self.work / "armed").unlink(missing_ok=True)
        code = self.start(job).wait(timeout=timeout_s)
        assert code == 0, f"the restarted query exited with {code}: {self.last_log()}"

    def last_log(self) -> str:
        logs = sorted(self.work.glob("query-*.log"))
        return logs[-1].read_text()[-4000:] if logs else "(no query log)"
