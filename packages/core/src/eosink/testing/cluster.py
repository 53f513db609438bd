"""A real Spark standalone cluster on loopback, for tests: a master and two workers.

``local[N]`` runs executors inside the driver's JVM, with the driver's environment. On a
cluster each worker is its own JVM, starts executor JVMs of its own, and those start Python
workers of their own: code that only works because everything shares one process (state in
``memory://``, a module only on the driver's path) fails here, as it would in production.

The cluster is started from the pip-installed pyspark (``bin/spark-class`` with the master
and worker classes; pip's pyspark has no ``sbin/start-master.sh``), with every folder Spark
writes (logs, pids, work dirs, ``conf``) private to the cluster. Every process it starts, and
every process those start (executor JVMs, Python daemons and workers, which put themselves in
their own process groups), carries the environment variable ``EOSINK_CLUSTER=<id>``, so
:meth:`StandaloneCluster.stop` finds and kills all of them, and a test can check that nothing
is left.

In a conftest::

    from eosink.testing.cluster import spark_cluster  # noqa: F401  (a session fixture)

    def test_on_cluster(spark_cluster):
        spark = spark_cluster.session()          # or run a driver process with
        ...                                      # spark_cluster.master_url

One cluster serves a whole test process (starting one costs ~15 s); a test that kills a
worker gets it back with :meth:`StandaloneCluster.ensure_workers`.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import attrs
import pytest

MARKER = "EOSINK_CLUSTER"
MASTER_CLASS = "org.apache.spark.deploy.master.Master"
WORKER_CLASS = "org.apache.spark.deploy.worker.Worker"


class ClusterError(RuntimeError):
    """The cluster did not come up (the message holds the tail of the relevant log)."""


def spark_home() -> Path:
    """The folder of the installed pyspark, which holds ``bin/spark-class`` and the jars."""
    import pyspark

    return Path(pyspark.__file__).resolve().parent


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _stat(pid: int) -> list[bytes] | None:
    """The fields of /proc/<pid>/stat after the command name: state, parent, ..."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
    except OSError:
        return None
    return stat[stat.rindex(b")") + 2 :].split()


def _parent(pid: int) -> int | None:
    fields = _stat(pid)
    return int(fields[1]) if fields else None


def is_running(pid: int) -> bool:
    """Whether ``pid`` is a live process (a zombie waiting to be reaped is not)."""
    fields = _stat(pid)
    return fields is not None and fields[0] not in (b"Z", b"X")


def _all_pids() -> list[int]:
    return [int(name) for name in os.listdir("/proc") if name.isdigit()]


def descendants(pid: int) -> list[int]:
    """``pid``'s children, grandchildren... (through /proc: process groups are not enough)."""
    children: dict[int, list[int]] = {}
    for other in _all_pids():
        parent = _parent(other)
        if parent is not None:
            children.setdefault(parent, []).append(other)
    found, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def is_ancestor(ancestor: int, pid: int) -> bool:
    while pid and pid != 1:
        if pid == ancestor:
            return True
        pid = _parent(pid) or 0
    return False


def marked_processes(cluster_id: str) -> list[int]:
    """Every live process whose environment carries this cluster's marker."""
    needle = f"{MARKER}={cluster_id}".encode()
    found = []
    for pid in _all_pids():
        try:
            with open(f"/proc/{pid}/environ", "rb") as f:
                if needle in f.read().split(b"\0"):
                    found.append(pid)
        except OSError:  # gone, or not ours to read
            continue
    return found


def _kill(pids: list[int]) -> None:
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


@attrs.define
class Worker:
    """One worker JVM: its process, its log and its work folder."""

    index: int
    process: subprocess.Popen
    log: Path
    work_dir: Path

    def tree(self) -> list[int]:
        """The worker JVM and everything it started (executors, their Python workers)."""
        return [self.process.pid, *descendants(self.process.pid)]


@attrs.define
class StandaloneCluster:
    """A master and ``workers`` workers on 127.0.0.1; ``start()``/``stop()`` or a ``with``."""

    workers: int = 2
    cores_per_worker: int = 1
    worker_memory: str = "1g"
    #: Memory of each executor (the app's ``spark.executor.memory``); fits ``worker_memory``.
    executor_memory: str = "768m"
    root: Path = attrs.field(factory=lambda: Path(tempfile.mkdtemp(prefix="eosink-cluster-")))
    cluster_id: str = attrs.field(factory=lambda: uuid.uuid4().hex)
    master_port: int = attrs.field(factory=free_port)
    master: subprocess.Popen | None = None
    running: list[Worker] = attrs.field(factory=list)
    _started_workers: int = 0

    @property
    def master_url(self) -> str:
        return f"spark://127.0.0.1:{self.master_port}"

    # -- life cycle ---------------------------------------------------------------------------
    def env(self) -> dict[str, str]:
        """The environment of the cluster's JVMs (and, through them, of its Python workers)."""
        env = dict(os.environ)
        env.update(
            {
                MARKER: self.cluster_id,
                "SPARK_HOME": str(spark_home()),
                "SPARK_LOCAL_IP": "127.0.0.1",
                "SPARK_LOG_DIR": str(self.root / "logs"),
                "SPARK_PID_DIR": str(self.root / "pids"),
                "SPARK_CONF_DIR": str(self.root / "conf"),
                "SPARK_DAEMON_MEMORY": "256m",
                "SPARK_WORKER_OPTS": "-Dspark.worker.cleanup.enabled=false",
                "PYSPARK_PYTHON": env.get("PYSPARK_PYTHON", sys.executable),
            }
        )
        return env

    def _spawn(self, name: str, *args: str) -> tuple[subprocess.Popen, Path]:
        log = self.root / "logs" / f"{name}.log"
        with open(log, "ab") as out:
            process = subprocess.Popen(
                [str(spark_home() / "bin" / "spark-class"), *args],
                env=self.env(),
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                cwd=self.root,
                start_new_session=True,  # a ^C of the test run reaches it through stop() only
            )
        return process, log

    def start(self, timeout_s: float = 120.0) -> StandaloneCluster:
        for folder in ("logs", "pids", "conf", "work"):
            (self.root / folder).mkdir(parents=True, exist_ok=True)
        (self.root / "conf" / "log4j2.properties").write_text(LOG4J)
        try:
            self.master, master_log = self._spawn(
                "master",
                MASTER_CLASS,
                "--host",
                "127.0.0.1",
                "--port",
                str(self.master_port),
                "--webui-port",
                "0",
            )
            self._wait_for(master_log, "I have been elected leader", self.master, timeout_s)
            self.ensure_workers(timeout_s)
        except BaseException:
            self.stop()
            raise
        return self

    def _start_worker(self, index: int) -> Worker:
        self._started_workers += 1
        work_dir = self.root / "work" / f"worker-{self._started_workers}"
        work_dir.mkdir(parents=True)
        process, log = self._spawn(
            f"worker-{self._started_workers}",
            WORKER_CLASS,
            self.master_url,
            "--host",
            "127.0.0.1",
            "--cores",
            str(self.cores_per_worker),
            "--memory",
            self.worker_memory,
            "--webui-port",
            "0",
            "--work-dir",
            str(work_dir),
        )
        return Worker(index, process, log, work_dir)

    def ensure_workers(self, timeout_s: float = 120.0) -> None:
        """Start workers until ``workers`` are alive and registered (after a kill, too)."""
        self.running = [w for w in self.running if w.process.poll() is None]
        used = {w.index for w in self.running}
        new = [self._start_worker(i) for i in range(self.workers) if i not in used]
        for worker in new:
            self._wait_for(
                worker.log, "Successfully registered with master", worker.process, timeout_s
            )
        self.running = sorted([*self.running, *new], key=lambda w: w.index)

    @staticmethod
    def _wait_for(log: Path, text: str, process: subprocess.Popen, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if log.exists() and text in log.read_text(errors="replace"):
                return
            if process.poll() is not None:
                break
            time.sleep(0.2)
        tail = log.read_text(errors="replace")[-3000:] if log.exists() else "(no log)"
        raise ClusterError(f"{log.name}: no {text!r} after {timeout_s:.0f} s:\n{tail}")

    def processes(self) -> list[int]:
        """Every live process of this cluster (JVMs, executors, Python workers)."""
        return marked_processes(self.cluster_id)

    def stop(self) -> None:
        """Kill everything the cluster started, wait until it is gone, remove its folders."""
        roots = [w.process for w in self.running] + ([self.master] if self.master else [])
        for _ in range(50):
            pids = self.processes()
            if not pids:
                break
            _kill(pids)
            time.sleep(0.1)
        for process in roots:
            process.wait()
        self.running, self.master = [], None
        shutil.rmtree(self.root, ignore_errors=True)
        left = self.processes()
        if left:
            raise ClusterError(f"processes of the cluster survived SIGKILL: {left}")

    def __enter__(self) -> StandaloneCluster:
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    # -- faults -------------------------------------------------------------------------------
    def worker_of(self, pid: int) -> Worker:
        """The worker whose executor runs the process ``pid`` (e.g. a Python worker)."""
        for worker in self.running:
            if is_ancestor(worker.process.pid, pid):
                return worker
        raise LookupError(f"process {pid} does not run on any worker of this cluster")

    def kill_worker(self, worker: Worker) -> None:
        """SIGKILL the worker JVM, its executors and their Python workers, all at once."""
        tree = worker.tree()
        _kill(tree)
        worker.process.wait()
        deadline = time.monotonic() + 30
        while any(is_running(p) for p in tree):
            if time.monotonic() > deadline:
                raise ClusterError(f"processes of worker {worker.index} survived SIGKILL")
            time.sleep(0.1)
        self.running = [w for w in self.running if w is not worker]

    # -- drivers ------------------------------------------------------------------------------
    def spark_conf(self, ship_path: bool = True) -> dict[str, str]:
        """What a driver needs to run on this cluster (``spark.master`` and modest executors).

        ``ship_path`` gives the executors this process's ``sys.path`` (as
        ``spark.executorEnv.PYTHONPATH``): test code and sources that are not installed reach
        them, as installed packages would on a real cluster.
        """
        conf = {
            "spark.master": self.master_url,
            "spark.driver.host": "127.0.0.1",
            "spark.driver.bindAddress": "127.0.0.1",
            "spark.executor.memory": self.executor_memory,
            "spark.sql.shuffle.partitions": str(self.workers * self.cores_per_worker),
            "spark.default.parallelism": str(self.workers * self.cores_per_worker),
        }
        if ship_path:
            conf["spark.executorEnv.PYTHONPATH"] = os.pathsep.join(
                os.path.abspath(p) for p in sys.path if p
            )
        return conf

    def session(self, **conf: str) -> Any:
        """A SparkSession of this process on the cluster (stop it before making another)."""
        from eosink.testing.spark import local_spark

        return local_spark(**{**self.spark_conf(), **conf})


#: Spark's own logs, warnings and up, to the process's log file.
LOG4J = """\
rootLogger.level = warn
rootLogger.appenderRef.stdout.ref = console
appender.console.type = Console
appender.console.name = console
appender.console.target = SYSTEM_ERR
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = %d{HH:mm:ss.SSS} %p %c{1}: %m%n%ex
logger.master.name = org.apache.spark.deploy.master.Master
logger.master.level = info
logger.worker.name = org.apache.spark.deploy.worker.Worker
logger.worker.level = info
"""


@pytest.fixture(scope="session")
def spark_cluster() -> Iterator[StandaloneCluster]:
    """One standalone cluster (master + two workers) for the whole test process.

    Three cores per worker: a test may stall one task of each of several queries at once and
    still have a slot free for the jobs that lead to the next stall.
    """
    cluster = StandaloneCluster(cores_per_worker=3).start()

    def stop_on_sigterm(signum: int, frame: Any) -> None:  # e.g. a test runner's timeout
        cluster.stop()
        raise SystemExit(128 + signum)

    previous = signal.signal(signal.SIGTERM, stop_on_sigterm)
    try:
        yield cluster
    finally:
        signal.signal(signal.SIGTERM, previous)
        cluster.stop()
